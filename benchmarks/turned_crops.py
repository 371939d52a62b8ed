"""Crops turned upside down, read by default: what the orientation classifier buys on
turned crops and what it costs on upright ones; with ``--turn 90``, crops on their side.

    python benchmarks/turned_crops.py --json docs/bench/turned_crops.json
    python benchmarks/turned_crops.py --classifier /tmp/orient/orient-XXXX.onnx --sets zh_real_dev
    python benchmarks/turned_crops.py --turn 90 --json docs/bench/sideways_crops.json

With ``--turn 90`` (or 270) each crop is read as given and turned a quarter clockwise
(counted when wider than tall: a crop taller than wide turned stands upright), by the
default reader only (the classifier looks at upside-down crops, not sideways ones).

Each set is read by the bundled model a user would read it with (``word`` for the English
word crops, ``zh`` for ``zh_real_dev``) through ``Recognizer.predict`` with the default
``rotate="pages"``, as given and turned 180 degrees, with the classifier and without it
(``orientation=None``: the reader before it). Scores: exact reads and edits (English:
case-folded letters and digits, as the word model reads; Chinese: NFKC, whitespace
removed). Sets under ``../shared/data`` are skipped where it is absent.

Which figure is which: the classifier trains on 90 % of IIIT5K train and IC15 train (its
``--holdout`` keeps the rest), so those rows measure crops it has seen; IC13-857 and SVT-647
are the English test sets (nothing is chosen on them), ``zh_real_dev`` is a development
set (the threshold is chosen on it and on the classifier's held-out report).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
import unicodedata
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from crnn.data.gt import read_gt  # noqa: E402
from crnn.reading.recognizer import Recognizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SETS = {
    "ic13_857": (SHARED / "real" / "ic13_857", "word"),
    "svt_647": (SHARED / "real" / "svt_647", "word"),
    "iiit5k_train": (SHARED / "real" / "iiit5k_train", "word"),
    "ic15_train": (SHARED / "real" / "ic15_train", "word"),
    "zh_real_dev": (SHARED / "zh_real_dev", "zh"),
}


def norm(text: str, model: str) -> str:
    if model == "zh":
        return "".join(unicodedata.normalize("NFKC", text).split())
    return re.sub(r"[^0-9a-z]", "", text.lower())


def score(
    rec: Recognizer, images: list[Image.Image], labels: list[str], model: str
) -> dict[str, object]:
    t = time.perf_counter()
    preds = rec.predict(images)
    seconds = time.perf_counter() - t
    edits = exact = turned = 0
    for p, label in zip(preds, labels):
        got, want = norm(p.text, model), norm(label, model)
        d = Levenshtein.distance(got, want)
        edits += d
        exact += d == 0
        turned += p.rotation != 0
    return {
        "exact": exact,
        "edits": edits,
        "turned": turned,
        "ms_per_crop": round(1000 * seconds / len(images), 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {','.join(SETS)}")
    p.add_argument(
        "--classifier", default="bundled", help="an orient-*.onnx (default: the bundled one)"
    )
    p.add_argument(
        "--turn",
        type=int,
        choices=(90, 180, 270),
        default=180,
        help="how far to turn the crops clockwise (default 180)",
    )
    p.add_argument("--json")
    args = p.parse_args(argv)
    rows = []
    for name in args.sets.split(","):
        folder, model = SETS[name]
        if not (folder / "gt.txt").exists():
            print(f"{name}: {folder} absent, skipped")
            continue
        lines = [ln for ln in read_gt(folder / "gt.txt").lines if norm(ln.label, model)]
        images = [Image.open(folder / ln.path).convert("RGB") for ln in lines]
        if args.turn != 180:  # the crops that lie on their side once turned
            keep = [k for k, im in enumerate(images) if im.width > im.height]
            lines, images = [lines[k] for k in keep], [images[k] for k in keep]
        labels = [ln.label for ln in lines]
        turned = [im.rotate(-args.turn, expand=True) for im in images]  # PIL turns anticlockwise
        readers = (
            (("without", None), ("with", args.classifier))
            if args.turn == 180
            else (("with", args.classifier),)
        )
        for label, orientation in readers:
            rec = Recognizer.bundled(model, orientation=orientation)
            for way, imgs in (("as given", images), (f"turned {args.turn}", turned)):
                r = {
                    "set": name,
                    "crops": len(images),
                    "classifier": label,
                    "input": way,
                    **score(rec, imgs, labels, model),
                }
                rows.append(r)
                print(
                    f"{name:<13} {way:<10} classifier {label:<7} exact "
                    f"{r['exact']:>5}/{len(images)}  "
                    f"edits {r['edits']:>6}  turned {r['turned']:>5}  {r['ms_per_crop']} ms/crop",
                    flush=True,
                )
    if args.json:
        meta = {
            "command": " ".join(["python", "benchmarks/turned_crops.py", *(argv or sys.argv[1:])]),
            "machine": platform.processor() or platform.machine(),
            "classifier": args.classifier,
            "turn": args.turn,
        }
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
