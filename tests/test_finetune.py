"""Fine-tuning that does not forget (crnn/engine/replay.py), end to end with the bundled
Chinese model: a few hundred lines of one narrow domain (till receipts from a thermal
dot-matrix printer: one face, one background, one vocabulary) teach the model the domain,
while its general reading, measured on lines in faces it never trained on and on
photograph-like lines (benchmarks/zh_vs_peers.py's rows), stays within 10 % of where it was.

The recipe, both halves on by default for a fine-tune of your own data: half of every
batch from the generator the model learnt from (train.replay), and the saved weights half
the starting ones (train.init_share). Measured with crnn_zh-32d62350 (docs/benchmarks.md,
"Fine-tuning without forgetting", the same sets and command): general CER 3.90 % ->
4.22 % (+8.1 %; +6.7 % on the PyTorch floor) with both, +15 % with the generator alone,
+27 % with the half-way weights alone, +114 % with neither: losing either half fails the
issue's 10 % bound."""

from __future__ import annotations

import os
import subprocess

import pytest

from benchmarks.finetune_forgetting import cer, domain_set, finetune_args, general_set, write_set
from crnn.data.synth.labelfonts import label_font_dir
from crnn.inference import Recognizer

STEPS = 40


@pytest.mark.slow
def test_fine_tuning_on_a_narrow_domain_learns_it_and_keeps_general_reading(tmp_path) -> None:
    font = str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf")
    write_set(tmp_path / "train", 500, 1, font)
    write_set(tmp_path / "test", 100, 2, font)
    domain = domain_set(tmp_path / "test")
    try:
        general = general_set(40)
    except FileNotFoundError as e:
        pytest.skip(str(e))

    bundled = Recognizer.bundled("zh")
    before = cer(bundled, *domain), cer(bundled, *general)

    run = tmp_path / "run"
    cmd = finetune_args("zh", tmp_path / "train", tmp_path / "test", run, STEPS, "crnn_zh_cpu")
    # One torch thread, as every test here: two threads beside the other pytest worker's
    # tests slowed both (the stage-2 dry run went from minutes to 12 minutes).
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train.replay" in done.stderr, "the fine-tune did not say it mixes the generator in"
    assert "train.init_share" in done.stderr, "the fine-tune did not say it keeps its starting weights"

    tuned = Recognizer.from_checkpoint(run / "best.pt")
    after = cer(tuned, *domain), cer(tuned, *general)
    print(f"domain CER {before[0]:.4f} -> {after[0]:.4f}, general CER {before[1]:.4f} -> {after[1]:.4f}")
    assert after[0] < 0.7 * before[0], (before, after)
    assert after[1] <= 1.10 * before[1], (before, after)
