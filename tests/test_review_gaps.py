"""Behaviours a hand mutation check found no test guarding: each test here fails when
its bug is put back (the bug is named in each docstring) and passes today."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ckpt_helpers import tiny_model

from crnn.backends.torch import TorchBackend
from crnn.config import load_config
from crnn.data.image import ImageSpec, load_image
from crnn.engine.distributed import DistInfo
from crnn.engine.optim import make_optimizer
from crnn.engine.state import TrainState
from crnn.engine.trainer import Trainer
from crnn.evaluation import evaluate, make_eval_loader
from crnn.reading.recognizer import Recognizer
from crnn.text.alphabet import Charset


def test_best_follows_the_metrics_direction_cer_lower_is_better() -> None:
    """Bug: the best checkpoint kept the highest CER (the line and Chinese configs
    choose by cer)."""
    state = TrainState("cer")
    assert state.update_best({"cer": 0.5, "accuracy": 0.1})
    assert not state.update_best({"cer": 0.6, "accuracy": 0.9})
    assert state.update_best({"cer": 0.4, "accuracy": 0.0})
    acc = TrainState("accuracy")
    assert acc.update_best({"accuracy": 0.5}) and not acc.update_best({"accuracy": 0.4})


def _prior_run(tiny_overrides: list[str], out, *extra: str) -> Trainer:
    return Trainer(
        load_config(
            None, [*tiny_overrides, "train.prior_init=true", f"train.output_dir={out}", *extra]
        ),
        DistInfo(),
    )


def test_the_class_prior_is_not_applied_again_on_resume_or_init_from(
    tiny_overrides, tmp_path
) -> None:
    """Bug: --resume and train.init_from re-applied the class-frequency prior to the
    classifier's bias, resetting a trained 5,530-class bias."""
    t = _prior_run(tiny_overrides, tmp_path / "a", "train.max_steps=2", "train.val_every=2")
    bias = "rnn.1.proj.bias"
    with torch.no_grad():
        t.model.state_dict()[bias].fill_(0.123)
    t.save()
    resumed = Trainer(
        load_config(None, [*tiny_overrides, f"train.output_dir={tmp_path / 'a'}"]),
        DistInfo(),
        resume=tmp_path / "a" / "last.pt",
    )
    assert torch.allclose(resumed.model.state_dict()[bias], torch.tensor(0.123))
    tuned = _prior_run(
        tiny_overrides,
        tmp_path / "b",
        f"train.init_from={tmp_path / 'a' / 'last.pt'}",
        "train.replay=0",
    )
    assert torch.allclose(tuned.model.state_dict()[bias], torch.tensor(0.123))
    fresh = _prior_run(tiny_overrides, tmp_path / "c")
    assert not torch.allclose(fresh.model.state_dict()[bias], torch.tensor(0.123))


def _backend(temperature: float) -> TorchBackend:
    cs = Charset.from_spec("alnum36")
    return TorchBackend(
        tiny_model(num_classes=cs.num_classes, seed=5),
        cs,
        ImageSpec(),
        device="cpu",
        temperature=temperature,
    )


def test_the_calibration_temperature_divides_the_logits_once() -> None:
    """Bug: inference divided by the temperature twice."""
    img = (np.random.default_rng(0).random((32, 96)) * 255).astype(np.uint8)
    hot = Recognizer(_backend(2.0)).predict([img])[0]

    class Halved:  # the logits divided by 2 by hand, no temperature of its own
        def __init__(self, inner: TorchBackend) -> None:
            self.inner, self.charset, self.spec = inner, inner.charset, inner.spec
            self.temperature = 1.0

        def __call__(self, images):
            return self.inner(images) / 2.0

        def output_length(self, widths):
            return self.inner.output_length(widths)

    by_hand = Recognizer(Halved(_backend(1.0))).predict([img])[0]  # type: ignore[arg-type]
    cold = Recognizer(_backend(1.0)).predict([img])[0]
    assert hot.text == by_hand.text
    assert hot.confidence == pytest.approx(by_hand.confidence, rel=1e-6)
    assert hot.confidence != pytest.approx(cold.confidence, rel=1e-3)


def test_validation_scores_the_averaged_weights_that_best_pt_keeps(
    tiny_overrides, tmp_path
) -> None:
    """Bug: validation scored the raw weights while best.pt kept the EMA."""
    t = Trainer(load_config(None, [*tiny_overrides, "train.ema_decay=0.9"]), DistInfo())
    batches = t.batches()
    for _ in range(3):
        t.train_step(batches)
    with torch.no_grad():  # make the raw weights read something else entirely
        for p in t.model.rnn.parameters():
            p.mul_(-3.0)
    metrics, _ = t.validate()
    loader = t.val_sets[0][1]
    ema = evaluate(TorchBackend(t.ema.model, t.charset, t.spec, device="cpu"), loader).metrics
    raw = evaluate(TorchBackend(t.model, t.charset, t.spec, device="cpu"), loader).metrics
    assert metrics["cer"] == pytest.approx(ema["cer"]) and ema["cer"] != pytest.approx(raw["cer"])


def test_a_colour_array_is_read_as_rgb_not_bgr() -> None:
    """Bug: an H x W x 3 array was read as BGR (the only array test was grey)."""
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 255
    assert load_image(red, rgb=True).getpixel((0, 0)) == (255, 0, 0)
    assert load_image(red).getpixel((0, 0)) == 76  # luma of pure red: 0.299 * 255


class _Frames:
    """A backend whose logits say 'a' on the first frame and 'z' on the last frame of
    the (padded) batch, blank elsewhere: a narrow image must never read the 'z' of the
    padding."""

    def __init__(self) -> None:
        self.charset = Charset.from_spec("alnum36")
        self.spec = ImageSpec(max_width=256)
        self.temperature = 1.0

    def output_length(self, widths):
        return torch.as_tensor(widths) // 4

    def __call__(self, images):
        b, t = images.shape[0], images.shape[-1] // 4
        logits = torch.full((b, t, self.charset.num_classes), -10.0)
        logits[:, :, 0] = 10.0
        logits[:, 0, 0], logits[:, 0, self.charset.index("a")] = -10.0, 10.0
        logits[:, -1, 0], logits[:, -1, self.charset.index("z")] = -10.0, 10.0
        return logits


def test_evaluation_never_decodes_a_batchs_padding_frames(tmp_path) -> None:
    """Bug: evaluation decoded the padding frames of a batch (SVT-647 0.6708 -> 0.6677)."""
    from conftest import write_folder

    from crnn.data.datasets import RecognitionDataset, open_sources

    folder = write_folder(tmp_path / "d", ["cat", "catastrophe"])
    be = _Frames()
    ds = RecognitionDataset(
        open_sources([str(folder)]), be.charset, be.spec, lambda w: int(w) // 4, evaluation=True
    )
    seen = []
    res = evaluate(
        be,
        make_eval_loader(ds, 8, widths=None),
        observe=lambda batch, preds: seen.extend(
            zip(batch["widths"].tolist(), [p.text for p in preds])
        ),
    )
    assert len(seen) == 2 and seen[0][0] != seen[1][0]
    narrow, wide = sorted(seen)
    assert narrow[1] == "a" and wide[1] == "az", seen
    assert res.metrics["count"] == 2


def test_weight_decay_shrinks_weights_only_not_biases_or_norm_scales() -> None:
    """Bug: weight decay reached biases and BatchNorm scales."""
    from crnn.config import TrainConfig

    model = tiny_model()
    opt = make_optimizer(model, TrainConfig(lr=0.1, weight_decay=0.5), torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        moved = not torch.equal(p.detach(), before[n])
        assert moved == (p.ndim > 1), n


def test_the_error_reports_confusions_come_from_a_minimal_edit_script() -> None:
    """Bug (of difflib's alignment): 'cbbbae' read as 'abbae' is two edits, c->a and a
    dropped b, but difflib matched the b's first and counted a deleted c and a deleted b
    and an inserted a, losing the c->a confusion."""
    from crnn.reports.errors import ErrorCollector

    errors = ErrorCollector()
    errors._count_confusions("cbbbae", "abbae")
    assert errors.confusions[("c", "a")] == 1
    assert sum(errors.confusions.values()) == 2
