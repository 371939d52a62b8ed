"""Throughput and memory of one training step under each parallel strategy.

Every variant runs the real :meth:`Trainer.train_step` (the one code path for one
device, DataParallel and DDP) on a fixed synthetic micro-batch that is already in
memory, so the figures measure the step (forward, CTC loss, backward, all-reduce,
optimizer) and not image decoding. Variants:

* ``single``: one process, one device;
* ``dp``: DataParallel over the listed GPUs in one process (CUDA only);
* ``ddp``: one process per listed GPU with NCCL; with a single GPU, two processes share
  it over gloo (NCCL refuses two ranks on one GPU), which measures DDP's overhead, not
  a speed-up; on the CPU, ``nproc`` processes over gloo;

each with and without activation checkpointing and with 1 or 2 accumulation steps,
always at the same global batch. Peak memory is per GPU (DP) or per rank (DDP).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.distributed.elastic.multiprocessing.errors import record

# Runnable as a script from a clone: put the repository root on the path.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import sync  # noqa: E402
from crnn.cli import EXIT_OK, EXIT_USAGE, setup_logging  # noqa: E402
from crnn.config import Config, ConfigError, load_config  # noqa: E402
from crnn.engine.distributed import (  # noqa: E402
    DistInfo,
    all_reduce_sum,
    barrier,
    cleanup,
    init_distributed,
)
from crnn.engine.logging import memory_stats  # noqa: E402

log = logging.getLogger(__name__)

# A model that runs a few steps per second on a CPU core (the tests' size).
TINY_MODEL = ["model.channels=[8,16,16,32,32,32,32]", "model.hidden=16"]


@dataclass
class BenchSpec:
    """What to measure. ``gpus``: CUDA ordinals, or empty for the CPU."""

    gpus: list[int] = field(default_factory=list)
    nproc: int = 2  # DDP processes on the CPU
    batch_size: int = 128  # global, per optimizer step
    width: int = 128  # image width in pixels (height from the config, 32)
    label_length: int = 10
    steps: int = 20  # optimizer steps per timed chunk
    repeats: int = 3  # timed chunks per variant; the median counts (shared machines are noisy)
    warmup: int = 3
    overrides: list[str] = field(default_factory=list)  # config overrides (model size, amp)
    strategies: list[str] = field(default_factory=lambda: ["single", "dp", "ddp"])
    grad_checkpoint: list[bool] = field(default_factory=lambda: [False, True])
    accum_steps: list[int] = field(default_factory=lambda: [1, 2])


@dataclass
class BenchRow:
    strategy: str
    device: str  # what ran it, e.g. "cuda:0,cuda:1" or "cpu x2 (gloo)"
    ranks: int
    grad_checkpoint: bool
    accum_steps: int
    global_batch: int
    micro_batch: int  # per rank (DDP) or per process (DP splits it over GPUs)
    images_per_s: float  # all ranks together
    images_per_s_per_rank: list[float]
    # MiB per GPU (DP) or per rank (DDP); empty on the CPU.
    peak_allocated_mib: dict[str, float]
    peak_reserved_mib: dict[str, float]
    note: str = ""


def _variants(spec: BenchSpec) -> list[tuple[bool, int]]:
    return list(itertools.product(spec.grad_checkpoint, spec.accum_steps))


def _data_dir(spec: BenchSpec, root: Path) -> Path:
    """A small LMDB the Trainer can be built on (its batches are not used)."""
    from PIL import Image

    from crnn.data.lmdb import LmdbWriter

    path = root / "bench-lmdb"
    if not (path / "data.mdb").exists():
        buf = io.BytesIO()
        Image.new("L", (spec.width, 32), 255).save(buf, format="PNG")
        with LmdbWriter(path) as w:
            for _ in range(spec.batch_size):
                # Distinct letters: no repeats that would need extra CTC frames.
                label = ("abcdefghijklmnopqrstuvwxyz" * 4)[: spec.label_length]
                w.add(buf.getvalue(), label, (spec.width, 32))
    return path


def _config(spec: BenchSpec, data: Path, ckpt: bool, accum: int, strategy: str) -> Config:
    return load_config(
        None,
        [
            f'data.train=["{data}"]',
            f'data.val=["{data}"]',
            "data.num_workers=0",
            "data.augment.enabled=false",
            f"data.max_width={spec.width}",
            f"train.batch_size={spec.batch_size}",
            f"train.accum_steps={accum}",
            f"train.grad_checkpoint={str(ckpt).lower()}",
            f"dist.strategy={'none' if strategy == 'single' else strategy}",
            f"train.output_dir={data.parent / 'run'}",
            *spec.overrides,
        ],
    )


def _batch(micro: int, width: int, label_length: int, classes: int) -> dict[str, Any]:
    """A fixed micro-batch as the collate function makes them (uint8 images on the host)."""
    g = torch.Generator().manual_seed(0)
    return {
        "images": torch.randint(0, 256, (micro, 1, 32, width), dtype=torch.uint8, generator=g),
        "widths": torch.full((micro,), width, dtype=torch.long),
        "targets": torch.randint(1, classes, (micro, label_length), generator=g),
        "target_lengths": torch.full((micro,), label_length, dtype=torch.long),
        "labels": ["x"] * micro,
        "errors": [],
    }


def _measure(
    spec: BenchSpec, cfg: Config, info: DistInfo, device_ids: list[int] | None
) -> tuple[float, dict[str, tuple[float, float]], int]:
    """Run warm-up steps, then ``repeats`` timed chunks of ``steps`` optimizer steps.

    Returns this rank's images/s (median over the chunks), the peak memory per GPU in
    MiB (allocated, reserved) after warm-up, and the micro-batch size."""
    from crnn.engine.trainer import Trainer

    trainer = Trainer(cfg, info, device_ids=device_ids)
    micro = trainer.data.sampler.micro_batch_size
    batches = itertools.repeat(
        _batch(micro, spec.width, spec.label_length, trainer.charset.num_classes)
    )
    trainer.train_module.train()
    gpus = [torch.device("cuda", d) for d in device_ids] if device_ids else [trainer.device]
    for _ in range(spec.warmup):
        trainer.train_step(batches)
    for d in gpus:
        sync(d)
        if d.type == "cuda":
            torch.cuda.reset_peak_memory_stats(d)
    rates = []
    images = spec.steps * micro * cfg.train.accum_steps
    for _ in range(spec.repeats):
        t0 = time.perf_counter()
        for _ in range(spec.steps):
            trainer.train_step(batches)
        for d in gpus:
            sync(d)
        rates.append(images / (time.perf_counter() - t0))
    peaks = {}
    for d in gpus:
        m = memory_stats(d)
        if m:
            peaks[str(d)] = (m["peak_allocated_mib"], m["peak_reserved_mib"])
    trainer.logger.close()
    del trainer
    if gpus[0].type == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(rates), peaks, micro


@record
def _ddp_worker(spec: BenchSpec, data: str, out: str) -> None:
    world = int(os.environ["WORLD_SIZE"])  # set by the elastic agent, with RANK and the store
    if spec.gpus:
        shared = len(spec.gpus) == 1  # two ranks on one GPU: gloo, since NCCL refuses
        devices = [torch.device("cuda", spec.gpus[0 if shared else i]) for i in range(world)]
        backend = "gloo" if shared else "nccl"
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        devices, backend = [torch.device("cpu")], "gloo"
    logging.basicConfig(level=logging.WARNING)
    info = init_distributed(devices, backend, timeout_s=300)
    rows = []
    try:
        for ckpt, accum in _variants(spec):
            cfg = _config(spec, Path(data), ckpt, accum, "ddp")
            ips, peaks, micro = _measure(spec, cfg, info, None)
            # Every rank's images/s and peaks, gathered by a sum over one-hot rows.
            table = torch.zeros(world, 3, dtype=torch.float64)
            alloc, reserved = next(iter(peaks.values()), (0.0, 0.0))
            table[info.rank] = torch.tensor([ips, alloc, reserved], dtype=torch.float64)
            table = all_reduce_sum(table, info)
            rows.append({"ckpt": ckpt, "accum": accum, "micro": micro, "table": table.tolist()})
        # Rank 0 hosts the rendezvous store: if it tore the group down first, another
        # rank still leaving could lose the store and abort (seen on torch 2.4).
        barrier(info)
    finally:
        cleanup()
    if info.rank == 0:
        Path(out).write_text(json.dumps({"backend": backend, "rows": rows}))


def _spawn_ranks(world: int, spec: BenchSpec, data: Path, out: Path) -> None:
    """Run :func:`_ddp_worker` in ``world`` processes through torch's elastic agent, as the
    trainer's launcher does (with ``mp.spawn`` on a port picked first, the benchmark
    failed once in CI beside the suite's other DDP tests)."""
    from torch.distributed.launcher.api import elastic_launch

    from crnn.engine.launch import local_launch_config

    elastic_launch(local_launch_config(world, "crnn-bench"), entrypoint=_ddp_worker)(
        spec, str(data), str(out)
    )


def run_benchmark(spec: BenchSpec, workdir: str | Path | None = None) -> list[BenchRow]:
    """Measure every variant of ``spec``; returns one row each."""
    with tempfile.TemporaryDirectory(prefix="crnn-bench-") as tmp:
        root = Path(workdir or tmp)
        data = _data_dir(spec, root)
        rows: list[BenchRow] = []
        cpu_threads = torch.get_num_threads()
        for strategy in spec.strategies:
            if strategy == "single":
                dev = torch.device("cuda", spec.gpus[0]) if spec.gpus else torch.device("cpu")
                if dev.type == "cuda":
                    torch.cuda.set_device(dev)
                for ckpt, accum in _variants(spec):
                    cfg = _config(spec, data, ckpt, accum, strategy)
                    ips, peaks, micro = _measure(spec, cfg, DistInfo(device=dev), None)
                    rows.append(_row(strategy, str(dev), 1, ckpt, accum, spec, micro, [ips], peaks))
            elif strategy == "dp":
                if not spec.gpus:
                    log.warning("dp: skipped, DataParallel needs CUDA GPUs")
                    continue
                dev = torch.device("cuda", spec.gpus[0])
                torch.cuda.set_device(dev)
                for ckpt, accum in _variants(spec):
                    cfg = _config(spec, data, ckpt, accum, strategy)
                    ips, peaks, micro = _measure(spec, cfg, DistInfo(device=dev), spec.gpus)
                    names = ",".join(f"cuda:{g}" for g in spec.gpus)
                    rows.append(_row(strategy, names, 1, ckpt, accum, spec, micro, [ips], peaks))
            elif strategy == "ddp":
                world = len(spec.gpus) if len(spec.gpus) > 1 else (2 if spec.gpus else spec.nproc)
                out = root / "ddp.json"
                _spawn_ranks(world, spec, data, out)
                result = json.loads(out.read_text())
                torch.set_num_threads(cpu_threads)
                for r in result["rows"]:
                    table = r["table"]
                    if spec.gpus:
                        shared = len(spec.gpus) == 1
                        devs = [f"cuda:{spec.gpus[0 if shared else i]}" for i in range(world)]
                        where = f"{world} ranks, " + ",".join(devs) + f" ({result['backend']})"
                        peaks = {f"rank{i}": (row[1], row[2]) for i, row in enumerate(table)}
                    else:
                        where, peaks = f"cpu x{world} (gloo)", {}
                    rows.append(
                        _row(
                            strategy,
                            where,
                            world,
                            r["ckpt"],
                            r["accum"],
                            spec,
                            r["micro"],
                            [row[0] for row in table],
                            peaks,
                        )
                    )
            else:
                raise ValueError(f"unknown strategy {strategy!r}; expected single, dp or ddp")
        return rows


def _row(
    strategy: str,
    device: str,
    ranks: int,
    ckpt: bool,
    accum: int,
    spec: BenchSpec,
    micro: int,
    per_rank: list[float],
    peaks: dict[str, tuple[float, float]],
) -> BenchRow:
    note = ""
    if strategy == "ddp" and len(spec.gpus) == 1:
        note = "2 ranks share 1 GPU over gloo: DDP overhead, not a speed-up"
    return BenchRow(
        strategy=strategy,
        device=device,
        ranks=ranks,
        grad_checkpoint=ckpt,
        accum_steps=accum,
        global_batch=spec.batch_size,
        micro_batch=micro,
        images_per_s=sum(per_rank),
        images_per_s_per_rank=per_rank,
        peak_allocated_mib={k: v[0] for k, v in peaks.items()},
        peak_reserved_mib={k: v[1] for k, v in peaks.items()},
        note=note,
    )


def format_table(rows: list[BenchRow]) -> str:
    """A fixed-width table, one line per variant (Markdown-friendly)."""
    head = (
        "| strategy | devices | ckpt | accum | batch (micro) | images/s | per rank "
        "| peak alloc / reserved MiB |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        mem = (
            ", ".join(
                f"{k} {r.peak_allocated_mib[k]:.0f}/{r.peak_reserved_mib[k]:.0f}"
                for k in r.peak_allocated_mib
            )
            or "n/a (CPU)"
        )
        per_rank = " + ".join(f"{v:.0f}" for v in r.images_per_s_per_rank)
        lines.append(
            f"| {r.strategy} | {r.device} | {'on' if r.grad_checkpoint else 'off'} "
            f"| {r.accum_steps} | {r.global_batch} ({r.micro_batch}) | {r.images_per_s:.0f} "
            f"| {per_rank} | {mem} |"
        )
    return "\n".join(lines)


def rows_to_json(rows: list[BenchRow], spec: BenchSpec) -> dict[str, Any]:
    device = (
        ", ".join(torch.cuda.get_device_name(g) for g in spec.gpus)
        if spec.gpus
        else f"CPU, {os.cpu_count()} cores"
    )
    return {
        "machine": {"device": device, "torch": torch.__version__},
        "spec": asdict(spec),
        "rows": [asdict(r) for r in rows],
    }


# ---- command line -----------------------------------------------------------------

USAGE = """Benchmark one training step under each parallel strategy: images/s and peak GPU
memory for single-device, DataParallel and DDP, with and without activation
checkpointing and gradient accumulation, at the same global batch.

On one GPU, DP runs with one replica and DDP runs two ranks sharing the GPU over gloo
(NCCL refuses that), so the table shows each strategy's overhead; with several GPUs it
shows the speed-up. On the CPU (no GPU, or --gpus cpu) it runs a tiny model to prove
the code paths; DataParallel is skipped there.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="parallel.py",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  benchmarks/parallel.py --json bench.json            # every visible GPU (or the CPU)\n"
        "  benchmarks/parallel.py --gpus 0 --batch-size 256    # one GPU\n"
        "  benchmarks/parallel.py --gpus cpu                   # prove it works on the CPU",
    )
    p.add_argument(
        "--gpus",
        default=None,
        help="GPUs (indices among CUDA_VISIBLE_DEVICES), 'all' or 'cpu'; default all visible, "
        "else cpu",
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
