"""Read line crops with a peer, in the peer's own environment: the Chinese benchmarks run
this file with another interpreter (``--peer-python``), so that the peers' packages
(rapidocr-onnxruntime pulls opencv-python, which shares the ``cv2`` folder with our
opencv-python-headless) never enter ours. It imports nothing of crnn-ocr.

    /path/to/peers/bin/python benchmarks/peer_read.py --reader ppocr-v6-tiny a.png b.png >
    reads.json

Readers:

* ``ppocr-v4-rec``: PP-OCRv4's recognizer alone (``rapidocr-onnxruntime`` 1.4.4: its
  ``ch_PP-OCRv4_rec_infer.onnx`` and its own preprocessing, height 48);
* ``ppocr-v6-tiny``, ``ppocr-v6-small``: PP-OCRv6 (``faster-paddle`` 1.0.4, whose wheel
  embeds both models). It has no recognition-only call, so each crop goes through its
  detector too; the texts it finds are joined in its reading order.

Whole images (a detector finds the lines, then they are read; ``boxes`` per image, each
line's four corners):

* ``ppocr-v4``: PP-OCRv4's detector and recognizer (``rapidocr-onnxruntime`` 1.4.4's
  ``RapidOCR()`` with its defaults);
* ``ppocr-v6-tiny-page``: PP-OCRv6 tiny (``faster-paddle`` 1.0.4's ``OcrEngine.ocr``).

Prints a JSON object: ``{"reader": NAME, "version": ..., "reads": [...], "seconds": ...}``
(and ``"boxes"`` for the whole-image readers).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path


def ppocr_v4(paths: list[Path]) -> tuple[list[str], str]:
    import numpy as np
    import rapidocr_onnxruntime
    from PIL import Image
    from rapidocr_onnxruntime.ch_ppocr_rec.text_recognize import TextRecognizer
    from rapidocr_onnxruntime.utils import read_yaml

    base = Path(rapidocr_onnxruntime.__file__).parent
    cfg = read_yaml(str(base / "config.yaml"))["Rec"]
    cfg["model_path"] = str(base / cfg["model_path"])
    rec = TextRecognizer(cfg)
    bgr = [np.asarray(Image.open(p).convert("RGB"))[:, :, ::-1].copy() for p in paths]
    out, _ = rec(bgr)
    return [
        t for t, _ in out
    ], f"rapidocr-onnxruntime {version('rapidocr-onnxruntime')}, {Path(cfg['model_path']).name}"


def ppocr_v6(paths: list[Path], size: str) -> tuple[list[str], str]:
    from faster_paddle import OcrEngine

    engine = OcrEngine(model_size=size)
    reads = []
    for p in paths:
        result = engine.ocr(p.read_bytes())
        reads.append("".join(str(result.get("text", "")).split("\n")))
    return reads, f"faster-paddle {version('faster-paddle')}, PP-OCRv6 {size}"


def ppocr_v4_page(paths: list[Path]) -> tuple[list[str], list[list], str]:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    reads, boxes = [], []
    for p in paths:
        result, _ = engine(str(p))
        result = result or []
        reads.append("\n".join(r[1] for r in result))
        boxes.append([[[float(v) for v in pt] for pt in r[0]] for r in result])
    return (
        reads,
        boxes,
        f"rapidocr-onnxruntime {version('rapidocr-onnxruntime')} (PP-OCRv4 det + rec)",
    )


def ppocr_v6_page(paths: list[Path], size: str) -> tuple[list[str], list[list], str]:
    from faster_paddle import OcrEngine

    engine = OcrEngine(model_size=size)
    reads, boxes = [], []
    for p in paths:
        result = engine.ocr(p.read_bytes())
        reads.append(str(result.get("text", "")))
        found = []
        for line in result.get("lines", []) or []:
            pts = line.get("box") or line.get("points") or line.get("polygon")
            if pts is not None:
                found.append(pts)
        boxes.append(found)
    return reads, boxes, f"faster-paddle {version('faster-paddle')}, PP-OCRv6 {size} (det + rec)"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--reader",
        required=True,
        choices=(
            "ppocr-v4-rec",
            "ppocr-v6-tiny",
            "ppocr-v6-small",
            "ppocr-v4",
            "ppocr-v6-tiny-page",
        ),
    )
    ap.add_argument("images", nargs="+", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    extra = {}
    if args.reader == "ppocr-v4-rec":
        reads, what = ppocr_v4(args.images)
    elif args.reader == "ppocr-v4":
        reads, extra["boxes"], what = ppocr_v4_page(args.images)
    elif args.reader == "ppocr-v6-tiny-page":
        reads, extra["boxes"], what = ppocr_v6_page(args.images, "tiny")
    else:
        reads, what = ppocr_v6(args.images, args.reader.rsplit("-", 1)[1])
    seconds = time.perf_counter() - t0
    json.dump(
        {"reader": args.reader, "version": what, "reads": reads, "seconds": seconds, **extra},
        sys.stdout,
        ensure_ascii=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
