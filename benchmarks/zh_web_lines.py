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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DATA, help="the labelled web images")
    p.add_argument("--out", type=Path, required=True, help="folder for train/, dev/ and test/")
    args = p.parse_args()
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
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
