"""Confidence calibration: a temperature fitted on validation reads, carried by every
file a model travels in, applied by every backend."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import run_main

from crnn.checkpoint import load_checkpoint
from crnn.reading.calibration import GRID, TemperatureFit


def test_an_overconfident_model_gets_a_temperature_above_one():
    """One-character reads that claim ~99 % but are right 70 % of the time."""
    rng = np.random.default_rng(0)
    fit = TemperatureFit()
    logits = np.zeros((200, 3, 4), np.float32)
    logits[:, :, 0] = 0.0  # blank
    logits[:, 1, 2] = 6.0 + rng.normal(0, 0.5, 200)  # the char, at frame 1
    logits[:, 0, 0] = logits[:, 2, 0] = 6.0  # blanks around it
    fit.add(logits, np.full(200, 3), (rng.random(200) < 0.7).tolist())
    t = fit.fit()
    assert t > 1.5 and t in GRID
    assert fit.ece(t) < 0.5 * fit.ece(1.0)
    assert TemperatureFit().fit() == 1.0  # no data: no change


def test_training_fits_a_temperature_that_release_export_and_backends_carry(
    word_lmdb, tmp_path, capsys
):
    pytest.importorskip("onnx")
    from conftest import TINY_MODEL

    from crnn.backends import load_backend
    from crnn.cli import convert_checkpoint
    from crnn.cli import export as export_cli
    from crnn.cli import train as train_cli
    from crnn.reading.recognizer import Recognizer

    run = tmp_path / "run"
    rc, _, err = run_main(
        train_cli.main,
        "--train",
        word_lmdb,
        "--val",
        word_lmdb,
        "--output-dir",
        run,
        "--set",
        *TINY_MODEL,
        "data.num_workers=0",
        "train.batch_size=8",
        "train.max_steps=12",
        "train.val_every=6",
        "train.lr=3e-3",
        capsys=capsys,
    )
    assert rc == 0 and "confidence calibration of best.pt" in err
    cal = load_checkpoint(run / "best.pt")["calibration"]
    assert cal["temperature"] in GRID and cal["samples"] == 64
    assert cal["ece_after"] <= cal["ece_before"] + 1e-12
    rc, out, _ = run_main(
        convert_checkpoint.main, "release", run / "best.pt", "-o", tmp_path / "m.pt", capsys=capsys
    )
    release = out.strip()
    assert load_checkpoint(release)["calibration"] == cal
    rc, _, _ = run_main(export_cli.main, release, "-o", tmp_path / "m.onnx", capsys=capsys)
    assert rc == 0
    for path in (release, tmp_path / "m.onnx"):
        assert load_backend(path).temperature == pytest.approx(cal["temperature"])
    # The temperature changes confidences, never greedy texts.
    images = [np.full((1, 32, 64), 200, np.uint8), np.full((1, 32, 96), 30, np.uint8)]
    rec = Recognizer.from_checkpoint(release, device="cpu")
    calibrated = rec.predict_preprocessed(images)
    rec.backend.temperature = 1.0
    raw = rec.predict_preprocessed(images)
    assert [p.text for p in calibrated] == [p.text for p in raw]
    if cal["temperature"] != 1.0:
        assert [p.confidence for p in calibrated] != [p.confidence for p in raw]
