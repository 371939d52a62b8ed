"""Fine-tuning that does not forget (crnn/engine/replay.py), end to end with the bundled
Chinese model: a few hundred lines of one narrow domain (till receipts from a thermal
dot-matrix printer: one face, one background, one vocabulary) teach the model the domain,
while its general reading, measured on lines in faces it never trained on and on
photograph-like lines (benchmarks/zh_vs_peers.py's rows), stays within 10 % of where it was.

The recipe, both halves on by default for a fine-tune of your own data: half of every
batch from the generator the model learnt from (train.replay), and the saved weights half
the starting ones (train.init_share). Measured (docs/benchmarks.md, "Fine-tuning without
forgetting"): general CER 6.11 % -> 6.27 % (+2.6 %) with both, 6.80 % (+11 %) with the
generator alone, 8.38 % (+25 %) with neither (an older model): breaking the recipe fails
the general bound."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from rapidfuzz.distance import Levenshtein

from benchmarks import zh_vs_peers as zh
from benchmarks.finetune_forgetting import write_set
from crnn.data.synth.labelfonts import label_font_dir
from crnn.inference import Recognizer

ROOT = Path(__file__).resolve().parents[1]
STEPS = 40


def general_set(count: int) -> tuple[list, list[str]]:
    """``count`` lines in each held-out face and ``2 * count`` photograph-like ones."""
    faces = {f.row: zh.locate(f.face) for f in zh.PHOTO_FACES}
    if any(p is None for p in faces.values()):
        pytest.skip("the held-out CJK faces are not installed (crnn-fonts --install zh)")
    covered = set.intersection(*(zh.cmap(p) for p in faces.values()))  # type: ignore[arg-type]
    labels = zh.make_lines(count, 31, covered)
    photo = zh.make_lines(2 * count, 32, covered)
    r = random.Random(33)
    imgs = [zh.render_print(t, faces[row], r) for row in ("kai", "song", "hei", "mincho") for t in labels]  # type: ignore[arg-type]
    imgs += [zh.render_photo(t, faces[zh.PHOTO_FACES[i % len(zh.PHOTO_FACES)].row], r)  # type: ignore[arg-type]
             for i, t in enumerate(photo)]  # fmt: skip
    return imgs, labels * 4 + photo


def cer(rec: Recognizer, imgs: list, labels: list[str]) -> float:
    reads = [p.text for p in rec.predict(imgs)]
    edits = sum(Levenshtein.distance(zh.norm(a), zh.norm(t)) for a, t in zip(reads, labels))
    return edits / sum(len(zh.norm(t)) for t in labels)


@pytest.mark.slow
def test_fine_tuning_on_a_narrow_domain_learns_it_and_keeps_general_reading(tmp_path) -> None:
    font = str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf")
    write_set(tmp_path / "train", 500, 1, font)
    write_set(tmp_path / "test", 100, 2, font)
    rows = [ln.split("\t", 1) for ln in (tmp_path / "test" / "gt.txt").read_text(encoding="utf-8").splitlines()]
    domain = ([tmp_path / "test" / n for n, _ in rows], [t for _, t in rows])
    general = general_set(40)

    bundled = Recognizer.bundled("zh")
    before = cer(bundled, *domain), cer(bundled, *general)

    run = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "tools" / "train.py"), "--config", "crnn_zh_cpu",
           "--train", str(tmp_path / "train"), "--val", str(tmp_path / "test"), "--output-dir", str(run),
           "--set", "train.init_from=zh", f"train.max_steps={STEPS}", "train.lr=3e-4", "train.warmup_steps=20",
           f"train.val_every={STEPS}", "train.save_every=0", "data.augment.enabled=false",
           "data.num_workers=0", "data.synth.val_size=64"]  # fmt: skip
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
