"""Evaluate a checkpoint, or its ONNX export, on labelled datasets.

DATA may be LMDB directories, folders holding LMDBs, or image folders with a gt.txt.
Prints one row per dataset: word accuracy (exact, charset-normalised), case-insensitive
alphanumeric accuracy (the field's convention for IIIT5K/SVT/IC13/IC15: lower-case,
keep 0-9a-z, exact match), CER, NED and images/s. Labels with characters the model
cannot write are kept and count as errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, setup_logging
from crnn.config import TrainConfig, choices

log = logging.getLogger("crnn.eval")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="eval.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "checkpoint",
        help="checkpoint file, run directory, release file, or an .onnx export (ONNX Runtime)",
    )
    p.add_argument("data", nargs="+", help="datasets to evaluate (one table row each)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument(
        "--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)"
    )
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    p.add_argument(
        "--amp", choices=choices(TrainConfig, "amp"), default="none", help="autocast on CUDA"
    )
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def format_table(rows: list[dict[str, object]]) -> str:
    head = f"{'dataset':<24} {'n':>6} {'acc':>7} {'alnum':>7} {'CER':>7} {'NED':>7} {'img/s':>8} {'bad':>5}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{str(r['dataset'])[:24]:<24} {int(r['count']):>6} {r['accuracy']:>7.2%} {r['alnum_accuracy']:>7.2%} "  # type: ignore[call-overload]
            f"{r['cer']:>7.4f} {r['ned']:>7.4f} {r['images_per_s']:>8.0f} {int(r['bad_images']):>5}"  # type: ignore[call-overload]
        )
    return "\n".join(lines)


def evaluate_path(backend: Any, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """One table row: ``path`` read and scored with ``backend``."""
    from crnn.data.datasets import RecognitionDataset, open_sources
    from crnn.evaluation import evaluate, make_eval_loader

    ds = RecognitionDataset(
        open_sources([path]), backend.charset, backend.spec, backend.output_length,
        evaluation=True,
    )  # fmt: skip
    loader = make_eval_loader(ds, args.batch_size, args.workers, widths=ds.widths)
    res = evaluate(backend, loader)
    if res.bad_images:
        log.warning("%s: %d images could not be read and were left out", path, res.bad_images)
    return {
        "dataset": Path(path).name or path,
        "path": str(path),
        **res.metrics,
        "images_per_s": res.images_per_s,
        "bad_images": res.bad_images,
        "skipped_empty_labels": ds.skipped.get("empty", 0),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.backends import load_backend
    from crnn.data.errors import DataError

    try:  # a CheckpointError is a RuntimeError
        backend = load_backend(args.checkpoint, device=args.device, amp=args.amp)
    except (RuntimeError, ValueError, FileNotFoundError, ImportError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    rows = []
    failed = False
    for path in args.data:
        try:
            rows.append(evaluate_path(backend, path, args))
        except (FileNotFoundError, DataError) as e:
            log.error("%s: %s", path, e)
            failed = True
    if rows:
        print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        log.info("wrote %s", args.json)
    return EXIT_FAILURE if failed or not rows else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
