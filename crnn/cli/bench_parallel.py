"""Benchmark one training step under each parallel strategy: images/s and peak GPU
memory for single-device, DataParallel and DDP, with and without activation
checkpointing and gradient accumulation, at the same global batch.

On one GPU, DP runs with one replica and DDP runs two ranks sharing the GPU over gloo
(NCCL refuses that), so the table shows each strategy's overhead; with several GPUs it
shows the speed-up. On the CPU (no GPU, or --gpus cpu) it runs a tiny model to prove
the code paths; DataParallel is skipped there.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, setup_logging

log = logging.getLogger("crnn.bench_parallel")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench_parallel.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  tools/bench_parallel.py --json bench.json            # every visible GPU (or the CPU)\n"
        "  tools/bench_parallel.py --gpus 0 --batch-size 256    # one GPU\n"
        "  tools/bench_parallel.py --gpus cpu                   # prove it works on the CPU",
    )
    p.add_argument(
        "--gpus",
        default=None,
        help="GPUs (indices among CUDA_VISIBLE_DEVICES), 'all' or 'cpu'; default all visible, else cpu",
    )
    p.add_argument("--nproc", type=int, default=2, help="DDP processes on the CPU (default 2)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch (GPU 128, CPU 16)")
    p.add_argument("--width", type=int, default=128, help="image width in pixels (height 32)")
    p.add_argument("--steps", type=int, default=None, help="steps per timed chunk (GPU 20, CPU 10)")
    p.add_argument(
        "--repeats", type=int, default=3, help="timed chunks per variant; the median is reported"
    )
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (GPU 5, CPU 2)")
    p.add_argument(
        "--tiny",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the tests' tiny model instead of the default CRNN (default: tiny on the CPU only)",
    )
    p.add_argument(
        "--strategies", nargs="+", default=["single", "dp", "ddp"], choices=("single", "dp", "ddp")
    )
    p.add_argument("--accum", nargs="+", type=int, default=[1, 2], help="accumulation steps")
    p.add_argument(
        "--ckpt",
        choices=("both", "off", "on"),
        default="both",
        help="activation checkpointing variants",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides, e.g. train.amp=fp16 model.hidden=128",
    )
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    if not args.verbose:
        logging.getLogger("crnn").setLevel(logging.WARNING)  # Trainer set-up chatter
    import torch

    from crnn.config import ConfigError
    from crnn.engine.bench_parallel import (
        TINY_MODEL,
        BenchSpec,
        format_table,
        rows_to_json,
        run_benchmark,
    )
    from crnn.engine.launch import LaunchError, parse_gpus

    try:
        spec_gpus = args.gpus or ("all" if torch.cuda.is_available() else "cpu")
        devices = parse_gpus(spec_gpus)
    except LaunchError as e:
        log.error("%s", e)
        return EXIT_USAGE
    gpu = devices.kind == "cuda"
    tiny = (not gpu) if args.tiny is None else args.tiny
    spec = BenchSpec(
        gpus=devices.ids if gpu else [],
        nproc=args.nproc,
        batch_size=args.batch_size or (128 if gpu else 16),
        width=args.width,
        steps=args.steps or (20 if gpu else 10),
        repeats=args.repeats,
        warmup=args.warmup or (5 if gpu else 2),
        overrides=(TINY_MODEL if tiny else []) + list(args.overrides),
        strategies=list(args.strategies),
        grad_checkpoint={"both": [False, True], "off": [False], "on": [True]}[args.ckpt],
        accum_steps=list(args.accum),
    )
    try:
        rows = run_benchmark(spec)
    except (ConfigError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows_to_json(rows, spec), indent=2) + "\n")
        log.warning("wrote %s", args.json)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
