"""Whole web images read end to end: crnn-ocr's reader (its line detector and the bundled
Chinese recognizer, the defaults ``crnn-predict --model zh`` uses) against PP-OCRv4
(det + rec, rapidocr-onnxruntime) and PP-OCRv6 tiny (faster-paddle), in one run on the
same images and cores.

    python benchmarks/det_vs_peers.py --peer-python /work/peers/bin/python \\
        --json docs/bench/det_vs_peers.json

The images: the validation split of ``../shared/data/zh_web_train`` that the detector's
training kept aside (by image name, ``det.val_share`` 0.1 with ``train.seed`` 42: the
split ``configs/det_zh_cpu.yaml`` trains with), a development set: the detector's
post-processing and the reader's finder decision were chosen on it. Scores:

* end to end, order-free character precision, recall and F1 of everything read against
  every legible labelled line (NFKC, whitespace left out), summed over the images;
* detection alone (ours and PP-OCRv4, whose boxes come back): ICDAR 2015 precision,
  recall and hmean at IoU 0.5 with the ``###`` lines as don't-care regions;
* seconds per image, start-up left out, each reader in its own process, one after the
  other; the ratio to each peer is from this one run.

The peers run in their own environment (``benchmarks/peer_read.py``), at their defaults.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from crnn.data.quads import find_labelled, split_by_image  # noqa: E402
from crnn.detect.metrics import DetCounts, char_counts, f1_of, match_image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "zh_web_train"


def validation_images(count: int) -> list:
    items = find_labelled(DATA)
    _, val = split_by_image(items, 0.1, 42)
    return val[:count] if count else val


def score(items: list, reads: list[str], boxes: list[list] | None) -> dict[str, float]:
    chars = [0, 0, 0]
    det = DetCounts()
    for k, item in enumerate(items):
        truth = [t for t, skip in zip(item.texts, item.ignore) if not skip]
        for i, v in enumerate(char_counts(reads[k], truth)):
            chars[i] += v
        if boxes is not None:
            quads = [np.asarray(b, np.float32).reshape(-1, 2) for b in boxes[k] if len(b) >= 4]
            det.add(match_image(quads, item.quads, item.ignore))
    out = f1_of(*chars)
    if boxes is not None:
        out.update(det.compute())
    return out


def ours(items: list, detector: str | None) -> tuple[list[str], list[list], float]:
    """Our reader as crnn-predict --model zh builds it, in this process."""
    from crnn.detect.runtime import bundled_detector, load_detector
    from crnn.reading.recognizer import Recognizer

    det = load_detector(detector) if detector else bundled_detector()
    rec = Recognizer.bundled("zh", detector=det)
    reads, boxes = [], []
    rec.read_pages([str(items[0].image)])  # warm-up (ONNX Runtime's first run)
    t0 = time.perf_counter()
    for item in items:
        (page,) = rec.read_pages([str(item.image)], errors="return")
        if isinstance(page, Exception):
            reads.append("")
            boxes.append([])
            continue
        reads.append(page.text)
        boxes.append(
            [
                list(map(list, line.quad)) if line.quad else _corners(line.box)
                for line in page.lines
                if line.box
            ]
        )
    return reads, boxes, (time.perf_counter() - t0) / len(items)


def _corners(box: list[int]) -> list[list[float]]:
    x0, y0, x1, y1 = box
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def peer(python: str, reader: str, items: list) -> dict:
    cmd = [
        python,
        str(ROOT / "benchmarks" / "peer_read.py"),
        "--reader",
        reader,
        *(str(i.image) for i in items),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--count", type=int, default=0, help="the first N validation images (default all)"
    )
    ap.add_argument("--detector", help="our detector (default: the bundled one)")
    ap.add_argument("--peer-python", help="the peers' interpreter (none: ours only)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    items = validation_images(args.count)
    rows = {}
    reads, boxes, s = ours(items, args.detector)
    rows["crnn-ocr (default options)"] = {**score(items, reads, boxes), "s_per_image": s}
    if args.peer_python:
        for name, reader in (
            ("PP-OCRv4 det+rec", "ppocr-v4"),
            ("PP-OCRv6 tiny", "ppocr-v6-tiny-page"),
        ):
            got = peer(args.peer_python, reader, items)
            b = got.get("boxes")
            rows[name] = {
                **score(items, got["reads"], b if b and any(b) else None),
                "s_per_image": got["seconds"] / len(items),
                "version": got["version"],
            }
    print(
        f"{len(items)} validation images of zh_web_train, "
        f"{sum(int((~i.ignore).sum()) for i in items)} legible lines"
    )
    print(
        f"{'reader':30s} {'char P':>7s} {'char R':>7s} {'char F1':>7s} {'det P':>7s} "
        f"{'det R':>7s} {'hmean':>7s} {'s/img':>6s}"
    )
    for name, r in rows.items():
        det = "".join(
            f" {r[k]:7.1%}" if k in r else f" {'':7s}" for k in ("precision", "recall", "hmean")
        )
        print(
            f"{name:30s} {r['char_precision']:7.1%} {r['char_recall']:7.1%} "
            f"{r['char_f1']:7.1%}{det} {r['s_per_image']:6.2f}"
        )
    ours_s = rows["crnn-ocr (default options)"]["s_per_image"]
    for name, r in rows.items():
        if not name.startswith("crnn"):
            print(f"time ratio ours / {name}: {ours_s / r['s_per_image']:.2f}")
    if args.json:
        meta = {
            "images": len(items),
            "machine": platform.processor() or platform.machine(),
            "cores": __import__("os").cpu_count(),
        }
        args.json.write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1, ensure_ascii=False) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
