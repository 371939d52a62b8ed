"""The real Chinese web-image lines the recognizer trains and is measured on, cut from
``../shared/data/zh_web_train`` (MTWI 2018) with the reader's own cut (perspective-corrected
from each line's quadrilateral; ``###`` and vertical lines left out), split **by image** so
that no image gives lines to two sides:

* ``train``: the detector's training images (90 % by image name, ``split_by_image`` seed 42,
  as ``configs/det_zh_cpu.yaml`` trains);
* ``dev``: half of the detector's 82 validation images (seed 70): the recognizer's
  development set, where its checkpoints, mix and schedule are chosen;
* ``test``: the other half: a **frozen test** for the recognizer, nothing chosen on it, read
  once per release candidate. (The detector's post-processing was tuned on all 82 images,
  so for the detector these images are development, not test.)

    python benchmarks/zh_web_lines.py --out /work/data/zh_web

``--upright`` then turns the training lines that are cut upside down (a product photo's
labels printed upside down: their quadrilaterals' corners say nothing of which way the
text runs) so that a model never learns an upside-down line as its label: each training
line is read both ways by the bundled Chinese model (greedy, one view, no turn of its
own), and turned where the turned read is closer to the label and within half the
label's length of it. The lines turned are listed in ``train/turned.txt``. The
development and test sides stay as cut: an upside-down line there is what a reader meets.

Each side is a folder of ``images/*.png`` and ``gt.txt`` that ``crnn-train``'s
``data.train``/``data.val``, ``crnn-eval`` and ``crnn-create-lmdb`` read. Never commit
them: the images are research data.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.data.cut_lines import cut_labelled  # noqa: E402
from crnn.data.quads import find_labelled, split_by_image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "zh_web_train"
DET_SEED = 42  # configs/det_zh_cpu.yaml's train.seed: the detector's validation images
TEST_SEED = 70


def sides(data: Path = DATA) -> dict[str, list]:
    """The three sides' labelled images."""
    items = find_labelled(data)
    train, val = split_by_image(items, 0.1, DET_SEED)
    test, dev = split_by_image(val, 0.5, TEST_SEED)
    return {"train": train, "dev": dev, "test": test}


def upright(folder: Path, batch: int = 64) -> list[str]:
    """Turn ``folder``'s lines that read closer to their labels turned 180 degrees (in
    place); returns their paths as ``gt.txt`` names them, also appended to ``turned.txt``."""
    from PIL import Image
    from rapidfuzz.distance import Levenshtein

    from benchmarks.zh_sets import folder_pairs
    from benchmarks.zh_vs_peers import norm
    from crnn.reading.recognizer import Recognizer

    rows = folder_pairs(folder)
    if not rows:
        raise SystemExit(f"no lines to turn: {folder / 'gt.txt'} is missing or empty")
    reader = Recognizer.bundled(
        "zh", rotate="none", beam_width=0, lm="none", stretch=[1.0], zoom=[1.0]
    )
    turned = []
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        images = [Image.open(folder / name).convert("RGB") for name, _ in chunk]
        overs = [im.rotate(180) for im in images]
        as_cut, as_over = reader.predict(images), reader.predict(overs)
        for (name, label), over, a, b in zip(chunk, overs, as_cut, as_over):
            truth = norm(label)
            e_cut = Levenshtein.distance(norm(a.text), truth)
            e_over = Levenshtein.distance(norm(b.text), truth)
            if e_over < e_cut and e_over <= 0.5 * len(truth):
                over.save(folder / name)
                turned.append(name)
    with open(folder / "turned.txt", "a", encoding="utf-8") as f:
        f.writelines(f"{name}\n" for name in turned)
    return turned


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DATA, help="the labelled web images")
    p.add_argument("--out", type=Path, required=True, help="folder for train/, dev/ and test/")
    p.add_argument(
        "--upright", action="store_true", help="then turn the training lines cut upside down"
    )
    p.add_argument(
        "--upright-only",
        action="store_true",
        help="only turn the training lines cut upside down, in lines already cut in --out",
    )
    args = p.parse_args()
    if args.upright_only:
        turned = upright(args.out / "train")
        print(f"train: {len(turned)} lines turned upright ({args.out / 'train' / 'turned.txt'})")
        return 0
    if not args.data.is_dir():
        print(f"no labelled images at {args.data}", file=sys.stderr)
        return 2
    summary = {}
    for name, items in sides(args.data).items():
        report = cut_labelled(items, args.out / name)
        summary[name] = {
            "images": len(items),
            "lines": report.written,
            "left_out": dict(report.skipped),
        }
        print(
            f"{name}: {len(items)} images, {report.written} lines, left out {dict(report.skipped)}"
        )
    if args.upright:
        summary["train"]["turned upright"] = len(upright(args.out / "train"))
        print(f"train: {summary['train']['turned upright']} lines turned upright")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
