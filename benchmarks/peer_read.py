"""Read line crops with a peer, in the peer's own environment: the Chinese benchmarks run
this file with another interpreter (``--peer-python``), so that the peers' packages
(rapidocr-onnxruntime pulls opencv-python, which shares the ``cv2`` folder with our
opencv-python-headless) never enter ours. It imports nothing of crnn-ocr.

    /path/to/peers/bin/python benchmarks/peer_read.py --reader ppocr-v6-tiny a.png b.png > reads.json

Readers:

* ``ppocr-v4-rec``: PP-OCRv4's recognizer alone (``rapidocr-onnxruntime`` 1.4.4: its
  ``ch_PP-OCRv4_rec_infer.onnx`` and its own preprocessing, height 48);
* ``ppocr-v6-tiny``, ``ppocr-v6-small``: PP-OCRv6 (``faster-paddle`` 1.0.4, whose wheel
  embeds both models). It has no recognition-only call, so each crop goes through its
  detector too; the texts it finds are joined in its reading order.

Prints a JSON object: ``{"reader": NAME, "version": ..., "reads": [...], "seconds": ...}``.
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
    return [t for t, _ in out], f"rapidocr-onnxruntime {version('rapidocr-onnxruntime')}, {Path(cfg['model_path']).name}"


def ppocr_v6(paths: list[Path], size: str) -> tuple[list[str], str]:
    from faster_paddle import OcrEngine

    engine = OcrEngine(model_size=size)
    reads = []
    for p in paths:
        result = engine.ocr(p.read_bytes())
        reads.append("".join(str(result.get("text", "")).split("\n")))
    return reads, f"faster-paddle {version('faster-paddle')}, PP-OCRv6 {size}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", required=True, choices=("ppocr-v4-rec", "ppocr-v6-tiny", "ppocr-v6-small"))
    ap.add_argument("images", nargs="+", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.reader == "ppocr-v4-rec":
        reads, what = ppocr_v4(args.images)
    else:
        reads, what = ppocr_v6(args.images, args.reader.rsplit("-", 1)[1])
    seconds = time.perf_counter() - t0
    json.dump({"reader": args.reader, "version": what, "reads": reads, "seconds": seconds}, sys.stdout,
              ensure_ascii=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
