"""Fine-tuning that keeps general reading (train.replay): the generator the model learnt
from fills a share of every batch, and validation adds its lines as 'general'."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from crnn.checkpoint import load_checkpoint as replay_load
from crnn.checkpoint.release import release_checkpoint
from crnn.config import ConfigError, config_from_dict, load_config
from crnn.engine import replay
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.io import atomic_save
from crnn.text.alphabet import Charset
from tests.ckpt_helpers import native_checkpoint, tiny_model


def _cfg(overrides: list[str]):
    return load_config(None, overrides)


def test_auto_replays_half_of_each_batch_only_when_fine_tuning_on_own_data(tmp_path) -> None:
    own = [f'data.train=["{tmp_path}"]']
    assert replay.share(_cfg([*own, "train.init_from=x.pt"])) == 0.5
    assert replay.share(_cfg(own)) == 0.0  # a run from scratch
    assert replay.share(_cfg(["train.init_from=x.pt"])) == 0.0  # already on the generator
    assert replay.share(_cfg([*own, "train.init_from=x.pt", "train.replay=0"])) == 0.0
    assert replay.share(_cfg([*own, "train.init_from=x.pt", "train.replay=0.25"])) == 0.25
    with pytest.raises(ConfigError, match="already holds it"):
        replay.share(_cfg(["train.init_from=x.pt", "train.replay=0.3"]))
    with pytest.raises(ConfigError, match="train.replay"):
        _cfg(["train.replay=1.5"])


def test_replay_draws_with_the_generator_the_model_learnt_from() -> None:
    run = _cfg([])
    trained = _cfg(["data.synth.p_number=0.77", "data.synth.max_length=9"]).to_dict()
    assert replay.synth_config(run, {"config": trained}).p_number == 0.77
    # A release file carries the same settings as release.synth.
    model, cs = tiny_model(), Charset.from_spec("alnum36")
    rel = release_checkpoint({**native_checkpoint(model, cs), "config": trained})
    assert rel["release"]["synth"]["max_length"] == 9
    assert replay.synth_config(run, rel).max_length == 9
    # Re-releasing a release keeps them; a file without them falls back to the run's own.
    assert release_checkpoint(rel)["release"]["synth"]["max_length"] == 9
    assert replay.synth_config(run, native_checkpoint(model, cs)) is run.data.synth
    # "auto" replays only what the model records: a model that says nothing is not mixed
    # with this run's generator (it may not draw the model's script at all).
    own = _cfg(['data.train=["x"]', "train.init_from=x.pt"])
    assert replay.share(own, rel) == 0.5
    assert replay.share(own, native_checkpoint(model, cs)) == 0.0


def test_a_fine_tune_mixes_the_generator_into_every_batch_and_validates_on_it(
    tiny_overrides, tmp_path, caplog
) -> None:
    cs = Charset.from_spec("alnum36")
    trained = config_from_dict(
        {
            "data": {
                "synth": {
                    "p_number": 1.0,
                    "p_word": 0.0,
                    "p_code": 0.0,
                    "p_date": 0.0,
                    "p_price": 0.0,
                    "p_random": 0.0,
                    "p_line": 0.0,
                }
            }
        }
    ).to_dict()
    src = atomic_save(
        {**native_checkpoint(tiny_model(), cs), "config": trained}, tmp_path / "base.pt"
    )
    cfg = load_config(None, [*tiny_overrides, f"train.init_from={src}", "data.synth.val_size=24"])
    with caplog.at_level(logging.INFO, logger="crnn"):
        t = Trainer(cfg, DistInfo())
    assert "50 % of every batch comes from the synthetic generator" in caplog.text
    assert t.data.sampler.counts == [4, 4]
    assert [name for name, _ in t.val_sets][-1] == "general"
    # As many general lines as this run asks for (the recorded generator has 512).
    assert len(t.val_sets[-1][1].dataset) == 24
    # The generator half is drawn with the checkpoint's settings: numbers only.
    batch = next(iter(t.data.loader))
    labels = [s["label"] for s in batch] if isinstance(batch, list) else batch["labels"]
    digits = [lab for lab in labels if lab.isdigit()]
    assert len(digits) >= 3, labels
    with caplog.at_level(logging.INFO, logger="crnn"):
        t.fit()
    assert t.state.step == 6 and "general" in caplog.text
    # The run records the generator it replayed, not its own default data.synth, so that
    # its release (and a fine-tune of that) replays numbers again.
    saved = replay_load(Path(cfg.train.output_dir) / "last.pt")
    assert saved["config"]["data"]["synth"]["p_number"] == 1.0
    assert release_checkpoint(saved)["release"]["synth"]["p_line"] == 0.0


def test_the_bundled_chinese_model_records_the_chinese_generator_it_learnt_from() -> None:
    """A fine-tune from ``zh`` replays ``release.synth``: it must draw Chinese lines."""
    from crnn.bundled import default_checkpoint

    rel = replay_load(default_checkpoint(prefer_onnx=False, model="zh"))
    synth = replay.recorded_synth(rel)
    assert synth is not None and "zh" in synth.font_sets, rel["release"].get("synth")


def test_replay_off_trains_on_the_own_data_alone(tiny_overrides, tmp_path) -> None:
    cs = Charset.from_spec("alnum36")
    src = atomic_save(native_checkpoint(tiny_model(), cs), tmp_path / "base.pt")
    cfg = load_config(None, [*tiny_overrides, f"train.init_from={src}", "train.replay=0"])
    t = Trainer(cfg, DistInfo())
    assert [name for name, _ in t.val_sets] == [n for n, _ in t.val_sets if n != "general"]
    assert not hasattr(t.data.sampler, "counts") or t.data.sampler.counts != [4, 4]


def test_init_from_a_bundled_model_name_is_its_release_file() -> None:
    from crnn.cli.train import build_parser, resolve_config

    args = build_parser().parse_args(["--config", "crnn_zh_cpu", "--set", "train.init_from=zh"])
    path = Path(resolve_config(args)[0].train.init_from)
    assert path.name.startswith("crnn_zh-") and path.suffix == ".pt" and path.is_file()


def test_init_from_a_checkpoint_not_yet_written_says_which_run_writes_it(
    tmp_path, monkeypatch
) -> None:
    from crnn.cli.train import build_parser, resolve_config

    monkeypatch.chdir(tmp_path)  # no runs/ here: stage 1 never ran
    args = build_parser().parse_args(["--config", "crnn_zh_cpu_stage2"])
    with pytest.raises(ConfigError) as e:
        resolve_config(args)
    msg = str(e.value)
    assert "runs/crnn_zh_cpu/best.pt" in msg and "train.output_dir is 'runs/crnn_zh_cpu'" in msg
    assert "--set train.init_from=" in msg and "zh" in msg


def test_a_trainer_built_in_python_names_a_missing_init_from_and_reads_it_once(
    tiny_overrides, tmp_path, monkeypatch
) -> None:
    """Not only tools/train.py: a Trainer built directly says the same; and the starting
    checkpoint is read from disk once, not by each of the weights, replay and mix."""
    from crnn.engine import state

    cfg = load_config(None, [*tiny_overrides, f"train.init_from={tmp_path}/stage1/best.pt"])
    with pytest.raises(ConfigError, match="no such checkpoint.*train.output_dir is '.*stage1'"):
        Trainer(cfg, DistInfo())
    cs = Charset.from_spec("alnum36")
    src = atomic_save(native_checkpoint(tiny_model(), cs), tmp_path / "base.pt")
    reads = []
    monkeypatch.setattr(state, "load_checkpoint", lambda p: reads.append(p) or replay_load(p))
    Trainer(
        load_config(None, [*tiny_overrides, f"train.init_from={src}", "train.init_share=0.5"]),
        DistInfo(),
    )
    assert reads == [str(src)]


def test_a_fine_tune_saves_half_the_starting_weights_and_resumes_from_the_trained_ones(
    tiny_overrides, tmp_path, caplog
) -> None:
    import torch

    cs = Charset.from_spec("alnum36")
    base = native_checkpoint(tiny_model(), cs)
    src = atomic_save(base, tmp_path / "base.pt")
    over = [*tiny_overrides, f"train.init_from={src}", "train.replay=0", "train.ema_decay=0.9"]
    with caplog.at_level(logging.INFO, logger="crnn"):
        t = Trainer(load_config(None, over), DistInfo())
    assert "50 % the ones it started from" in caplog.text
    t.fit()
    last = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert last["init_share"] == 0.5
    init = base["model"]
    for name, w in last["model"].items():  # saved: half the start, half the EMA's
        if w.is_floating_point():
            want = (init[name].float() + last["model_ema"][name].float()) / 2
            assert torch.allclose(w.float(), want, atol=1e-6), name
    moved = [
        n
        for n, w in last["model_raw"].items()
        if w.is_floating_point() and not torch.equal(w, init[n])
    ]
    assert moved, "training moved the trained weights"
    # Resuming trains on from the trained weights and the EMA's own, not from the mix.
    over[over.index("train.max_steps=6")] = "train.max_steps=7"
    r = Trainer(load_config(None, over), DistInfo(), resume=tmp_path / "run" / "last.pt")
    for name, w in r.model.state_dict().items():
        assert torch.equal(w, last["model_raw"][name]), name
    for name, w in r.ema.model.state_dict().items():
        assert torch.equal(w, last["model_ema"][name]), name
    # Off: the saved weights are the trained ones (the EMA's).
    over = [
        *tiny_overrides,
        f"train.init_from={src}",
        "train.replay=0",
        "train.init_share=0",
        f"train.output_dir={tmp_path / 'off'}",
    ]
    off = Trainer(load_config(None, over), DistInfo())
    assert off.mix is None
    # A model with another charset is not mixed ("auto"), and refused when asked for.
    digits = Charset.from_spec("chars:0123456789")
    other = atomic_save(native_checkpoint(tiny_model(num_classes=11), digits), tmp_path / "o.pt")
    cfg = load_config(None, [*tiny_overrides, f"train.init_from={other}"])
    assert replay.weight_mix(cfg, t.model, cs) is None
    cfg.train.init_share = 0.5
    with pytest.raises(ConfigError, match="another charset"):
        replay.weight_mix(cfg, t.model, cs)
    with pytest.raises(ConfigError, match="train.init_share"):
        load_config(None, ["train.init_share=1.0"])
