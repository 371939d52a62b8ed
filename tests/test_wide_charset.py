"""The Chinese CRNN ecosystem's most reported training problems, with the 5,530-class
charset: a non-finite loss, a label character missing from the alphabet (a KeyError
there), a label too long for the frames (T < 2L+1 with repeats), and the all-blank
plateau; each is named with the sample and the fix. And the few-hundred-character
model that leaves the plateau within a bounded number of steps."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from crnn.config import load_config
from crnn.config.image_spec import ImageSpec
from crnn.data.datasets import RecognitionDataset, open_sources
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.model import CRNN
from crnn.text.alphabet import Charset, UnknownCharacterError

FIXTURES = Path(__file__).parent / "fixtures"
CJK_FONT = FIXTURES / "fonts" / "cjk" / "droid_sans_fallback_cjk200.ttf"
CJK_CHARS = (FIXTURES / "cjk200_chars.txt").read_text(encoding="utf-8").split()
ZH = Charset.from_spec("zh5529")
SMALL = ["model.arch=crnn_s8", "model.channels=[8,16,16,32,32,32,32]", "model.hidden=16"]


def _zh_folder(root: Path, labels: list[str], width: int | None = None) -> Path:
    """Chinese lines drawn with the CJK fixture font, as an image folder with gt.txt."""
    font = ImageFont.truetype(str(CJK_FONT), 26)
    (root / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, label in enumerate(labels):
        w = width or max(16, 30 * len(label))
        img = Image.new("L", (w, 32), 255)
        ImageDraw.Draw(img).text((2, 2), label, font=font, fill=0)
        img.save(root / "images" / f"{i}.png")
        lines.append(f"images/{i}.png\t{label}")
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _frames(width: int) -> int:
    return CRNN(
        ZH.num_classes, channels=[8, 16, 16, 32, 32, 32, 32], hidden=16, arch="crnn_s8"
    ).output_length(width)


def test_a_character_missing_from_the_alphabet_is_named_not_a_keyerror(tmp_path):
    """chineseocr-style training code raises KeyError on a label character its alphabet
    lacks; here the sample is skipped and counted with its label and file, or, with
    unknown_chars=error, the message names the character and the fix."""
    root = _zh_folder(tmp_path / "d", ["我们的", "龘龘", "中国人"])
    assert "龘" not in ZH
    ds = RecognitionDataset(open_sources([root]), ZH, ImageSpec(max_width=256), _frames)
    assert len(ds) == 2 and ds.skipped == {"unknown_chars": 1}
    assert (
        "'龘龘'" in ds.skip_examples["unknown_chars"][0]
        and "1.png" in ds.skip_examples["unknown_chars"][0]
    )
    with pytest.raises(UnknownCharacterError, match=r"'龘'.*data.charset.*unknown_chars=skip"):
        RecognitionDataset(
            open_sources([root]), ZH, ImageSpec(max_width=256), _frames, unknown_chars="error"
        )


def test_a_label_too_long_for_the_frames_is_named_not_an_inf_loss(tmp_path):
    """Six repeated characters need 11 frames (one between repeats); 64 px give 8 with a
    time step of 8 px. CTC would return inf (zero_infinity hides it as 0): the sample is
    skipped with its label; a shorter one is widened to fit instead."""
    root = _zh_folder(tmp_path / "d", ["哈哈哈哈哈哈", "我们"], width=40)
    ds = RecognitionDataset(open_sources([root]), ZH, ImageSpec(max_width=64), _frames)
    assert ds.skipped == {"too_long": 1} and "'哈哈哈哈哈哈'" in ds.skip_examples["too_long"][0]
    assert [ds.label(i) for i in range(len(ds))] == ["我们"]


def test_a_non_finite_loss_with_5530_classes_is_skipped_and_named(tmp_path, monkeypatch, caplog):
    from crnn.engine import parallel

    root = _zh_folder(tmp_path / "d", ["我们的", "中国人", "他们", "大家好"] * 2)
    cfg = load_config(
        None,
        [
            *SMALL,
            "data.charset=zh5529",
            f'data.train=["{root}"]',
            f'data.val=["{root}"]',
            "data.num_workers=0",
            "train.batch_size=4",
            "data.max_width=128",
            f"train.output_dir={tmp_path / 'run'}",
        ],
    )
    t = Trainer(cfg, DistInfo())
    assert t.model.num_classes == 5530
    real = parallel.ctc_loss_per_sample
    monkeypatch.setattr(parallel, "ctc_loss_per_sample", lambda *a: real(*a) * float("inf"))
    caplog.set_level(logging.WARNING)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}
    t.train_module.train()
    t.train_step(t.batches())
    assert all(torch.equal(p, before[n]) for n, p in t.model.named_parameters())
    assert "not finite" in caplog.text and any(
        w in caplog.text for w in ("'我们的'", "'中国人'", "'他们'", "'大家好'")
    )


def test_the_all_blank_hint_for_thousands_of_classes_names_the_shortcut_layout(caplog):
    from crnn.engine.guards import BlankWatch

    caplog.set_level(logging.WARNING)
    for arch, says in (("crnn", True), ("crnn_s8", False), ("crnn_s4", False)):
        caplog.clear()
        w = BlankWatch(patience=1)
        w.after_validation(
            {"empty_rate": 1.0},
            2000,
            load_config(None, ["data.charset=zh5529", f"model.arch={arch}"]),
            64,
        )
        assert "all-blank plateau" in caplog.text
        assert ("With 5,530 classes behind the LSTMs" in caplog.text) is says
        assert ("model.arch=crnn_s8" in caplog.text) is says


@pytest.mark.slow
def test_a_few_hundred_character_model_leaves_the_plateau_in_bounded_steps(tmp_path):
    """The 200 Chinese characters of the font fixture (a CJK font subset: no system fonts
    needed), lines of 1-6 of them, a small crnn_s8 from scratch on the CPU: after 800
    steps of 32 it reads every line (no empty reads) at a CER of about 0.7. Measured
    (docs/training/crnn_zh.md): the same model with BatchNorm at convs 2, 4 and 6 only
    was at 0.96, and arch crnn at 0.98 (its all-blank plateau had just ended)."""
    from conftest import train_on_corpus_words

    metrics = train_on_corpus_words(
        tmp_path / "s8",
        "".join(CJK_CHARS),
        "chars:" + "".join(CJK_CHARS),
        CJK_FONT.parent,
        6,
        "model.arch=crnn_s8",
        "model.channels=[16,32,48,48,96,96,96]",
        "model.hidden=48",
        "train.max_steps=800",
        "train.val_every=800",
        "train.lr=2e-3",
    )
    assert metrics["empty_rate"] < 0.1 and metrics["cer"] < 0.85, metrics


def test_a_wide_classifier_starts_at_the_data_s_class_frequencies(tmp_path, caplog):
    """train.prior_init ("auto": more than 1,000 classes): the classifier's bias starts at
    the log-frequency of each class in the training labels, blank included as the share
    of frames no character needs, so a fresh model's reads are blank and its
    per-character loss is that of the frequencies, not of 5,530 equal guesses."""
    labels = ["我们的", "我们", "的的的的", "中国人", "我"] * 8
    root = _zh_folder(tmp_path / "d", labels, width=160)
    common = [
        *SMALL,
        "data.charset=zh5529",
        f'data.train=["{root}"]',
        f'data.val=["{root}"]',
        "data.num_workers=0",
        "train.batch_size=8",
        "dist.strategy=none",
    ]
    caplog.set_level(logging.INFO)
    t = Trainer(load_config(None, [*common, f"train.output_dir={tmp_path / 'a'}"]), DistInfo())
    bias = t.model.rnn[1].proj.bias.detach()
    assert t.model.skip.bias.abs().max() == 0
    probs = bias.exp()
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-4)
    frames, chars = _frames(int(t.data.dataset.widths[0])), sum(map(len, labels)) / len(labels)
    assert probs[0].item() == pytest.approx(1 - chars / frames, abs=0.01)  # the blank
    de, wo, men = (ZH.encode(c)[0] for c in "的我们")
    assert probs[de] > probs[wo] > probs[men] > 100 * probs[ZH.encode("龟")[0]]
    assert probs[de].item() / probs[men].item() == pytest.approx(5 / 2, rel=0.05)  # 5 的, 2 们
    assert "class frequencies" in caplog.text
    # Off: the default initialisation (every class about equally likely).
    off = Trainer(
        load_config(
            None, [*common, "train.prior_init=false", f"train.output_dir={tmp_path / 'b'}"]
        ),
        DistInfo(),
    )
    assert off.model.rnn[1].proj.bias.abs().max() < 0.2
    # "auto" leaves a 37-class English model as it was.
    from crnn.engine import prior

    assert prior.wanted("auto", 5530) and not prior.wanted("auto", 37) and prior.wanted(True, 37)
