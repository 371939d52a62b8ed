"""``crnn-eval DETECTOR DATA...``: a text detector on labelled images (folders of
images/ + labels/NAME.txt, ICDAR's gt_NAME.txt, or a PaddleOCR Label.txt).

One row per set: ICDAR 2015 precision, recall and hmean at IoU 0.5 with don't-care
regions, and seconds per image. With ``--end-to-end MODEL`` (a recognizer: a bundled
name such as zh, or a checkpoint) each image is read whole by the reader users get
(``crnn-predict``'s defaults, the detector given), and the row adds order-free character
precision, recall and F1 of everything read against everything labelled.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE

log = logging.getLogger("crnn.eval")


def is_detector(path: str) -> bool:
    """Whether ``path`` is a detector: an .onnx whose metadata says so, or a
    ``task: detect`` checkpoint (a run directory: its best.pt)."""
    p = Path(path)
    if p.is_dir():
        p = p / "best.pt"
    if not p.is_file():
        return False
    if p.suffix == ".onnx":
        try:
            from crnn.detect.runtime import OnnxDetector

            OnnxDetector(p)
            return True
        except (ValueError, ImportError):
            return False
    from crnn.cli.export import detector_checkpoint

    return detector_checkpoint(str(p)) is not None


def evaluate_detector_cli(args: argparse.Namespace) -> int:
    from crnn.data.errors import DataError
    from crnn.data.quads import count_problems, describe_problems, find_labelled
    from crnn.detect.evaluate import evaluate_detector, evaluate_reader
    from crnn.detect.runtime import load_detector

    detector = load_detector(args.checkpoint)
    reader = None
    if getattr(args, "end_to_end", None):
        from crnn.reading.recognizer import BUNDLED, Recognizer

        name = args.end_to_end
        reader = (
            Recognizer.bundled(name, detector=detector, finder="detector")
            if name in BUNDLED
            else Recognizer.from_checkpoint(name, detector=detector, finder="detector")
        )
    rows = []
    for data in args.data:
        try:
            items = find_labelled(data)
        except DataError as e:
            log.error("%s", e)
            return EXIT_USAGE
        problems = count_problems(items)
        if problems:
            log.warning("%s: %s", data, describe_problems(problems))
        res = (
            evaluate_reader(reader, items)
            if reader is not None
            else evaluate_detector(detector, items)
        )
        m = res.metrics()
        rows.append({"data": data, "images": res.images, "unreadable": res.unreadable, **m})
    head = f"{'data':40s} {'images':>6s} {'P':>7s} {'R':>7s} {'hmean':>7s}"
    if reader is not None:
        head += f" {'char P':>7s} {'char R':>7s} {'char F1':>7s}"
    print(head + f" {'s/image':>8s}")
    for r in rows:
        line = (
            f"{r['data'][-40:]:40s} {r['images']:6d} {r['precision']:7.2%} {r['recall']:7.2%} "
            f"{r['hmean']:7.2%}"
        )
        if reader is not None:
            line += f" {r['char_precision']:7.2%} {r['char_recall']:7.2%} {r['char_f1']:7.2%}"
        print(line + f" {r['s_per_image']:8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    return EXIT_OK
