"""Measure the speed of the data pipeline, training and inference (issue 6's targets).

Prints a table last and writes the figures as JSON (--json). Runs on the CPU, or on a
GPU with --device cuda (bf16/fp16, channels_last, torch.compile and cuDNN autotuning
variants, the training floor from the GPU's bf16 rate). See docs/benchmarks.md for
figures and how to read them.

    python tools/bench.py                         # everything, CPU
    python tools/bench.py --quick --sections infer,predict
    python tools/bench.py --device cuda --data data/lmdb/iiit5k_train --peak-tflops 989
    python tools/bench.py --wait-load 1.2         # on a shared machine: wait for quiet
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, setup_logging

log = logging.getLogger("crnn.bench")


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _words(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def build_parser() -> argparse.ArgumentParser:
    from crnn.bench import SECTIONS

    p = argparse.ArgumentParser(
        prog="bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--quick", action="store_true", help="short runs (a smoke test, not figures)")
    p.add_argument(
        "--sections", type=_words, default=SECTIONS,
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)",
    )  # fmt: skip
    p.add_argument(
        "--shapes", type=_words, default=("word", "line"), help="word,line (default both)"
    )
    p.add_argument(
        "--data", action="append", default=[], metavar="DATA",
        help="LMDB or image folder of word images for padding/data/e2e (repeatable; default: "
        "a synthetic LMDB written to a temporary folder)",
    )  # fmt: skip
    p.add_argument("--line-data", action="append", default=[], metavar="DATA",
                   help="the same for text lines (default: synthetic lines)")  # fmt: skip
    p.add_argument("--workers", type=_ints, default=(0, 1, 2),
                   help="DataLoader worker counts to measure (default 0,1,2)")  # fmt: skip
    p.add_argument("--batch-sizes", type=_ints, default=(1, 8, 64),
                   help="inference batch sizes (default 1,8,64)")  # fmt: skip
    p.add_argument("--train-batch", type=int, default=0,
                   help="training batch (default 64 on CPU, 512 on GPU)")  # fmt: skip
    p.add_argument("--e2e-workers", type=int, default=-1,
                   help="DataLoader workers of the end-to-end training row (default: CPUs - 1, "
                   "at most 12)")  # fmt: skip
    p.add_argument("--threads", type=int, default=0,
                   help="intra-op threads for PyTorch and ONNX Runtime (default: theirs)")  # fmt: skip
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="the GPU's dense bf16 rate for the floor (default: measure a matmul)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=5, help="timed runs per figure (default 5)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one timed run (default 2)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile training variant (default: on GPU only)")  # fmt: skip
    p.add_argument("--no-int8", action="store_true", help="skip the int8 ONNX rows")
    p.add_argument("--channels", type=_ints, default=None,
                   help="model conv widths (default: the classic CRNN)")  # fmt: skip
    p.add_argument("--hidden", type=int, default=None, help="LSTM hidden size (default 256)")
    p.add_argument("--wait-load", type=float, default=0.0, metavar="L",
                   help="before each figure, wait until the 1-minute load average is below L")  # fmt: skip
    p.add_argument("--json", metavar="FILE", default=None,
                   help="where to write the JSON (default runs/bench/<device>-<time>.json)")  # fmt: skip
    p.add_argument("--work-dir", default="", help="keep temporary files (LMDBs, models) here")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.bench import BenchOptions, format_tables, run_bench

    model: dict[str, object] = {}
    if args.channels is not None:
        model["channels"] = list(args.channels)
    if args.hidden is not None:
        model["hidden"] = args.hidden
    try:
        opts = BenchOptions(
            device=args.device, quick=args.quick, sections=args.sections, shapes=args.shapes,
            data=args.data, line_data=args.line_data, workers=args.workers,
            batch_sizes=args.batch_sizes, train_batch=args.train_batch,
            e2e_workers=args.e2e_workers, threads=args.threads, peak_tflops=args.peak_tflops,
            repeats=args.repeats, seconds=args.seconds, compile=args.compile,
            int8=not args.no_int8, model=model, wait_load=args.wait_load, work_dir=args.work_dir,
        )  # fmt: skip
    except ValueError as e:
        log.error("%s", e)
        return EXIT_USAGE
    try:
        result = run_bench(opts)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    out = Path(
        args.json
        or f"runs/bench/{args.device.replace(':', '')}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result.to_json(), encoding="utf-8")
    print(format_tables(result))
    print(f"\nJSON: {out}")
    sys.stdout.flush()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
