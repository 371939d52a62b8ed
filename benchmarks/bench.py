"""Speed benchmark: data pipeline, training step, inference, FLOPs and the floor.

``python benchmarks/bench.py`` runs :func:`run_bench` and prints :func:`format_tables`
last, with the JSON written beside (see ``--help``). Sections (``--sections``):

* ``flops`` -- FLOPs per image of the model, forward and training step (forward +
  backward; ``torch.utils.flop_counter`` with oneDNN off so the LSTMs decompose into
  the matrix products it counts), and on a GPU the floor: the fastest possible
  training step at the GPU's bf16 rate (``--peak-tflops``, or a measured matmul).
* ``padding`` -- the share of the batch's pixels that are padding, with and without
  width bucketing, on the data's real width distribution (no decoding).
* ``data`` -- LMDB read + decode + preprocess (+ collate): images per CPU-second in
  one process, then through the training DataLoader per worker count.
* ``train`` -- one training step (model + CTC + AdamW) on a fixed synthetic batch:
  fp32 on CPU; fp32, bf16, fp16, channels_last, without cuDNN autotuning and
  ``torch.compile`` on a GPU.
* ``e2e`` -- the real :class:`~crnn.engine.trainer.Trainer` step with its DataLoader
  (augmentation on, as the default config): the figure for the GPU target, with the
  share of time spent waiting for data and, on a GPU, the share of time the GPU was
  busy, which together name the bottleneck.
* ``infer`` -- model-only inference at batch 1, 8, 64: PyTorch (fp32; bf16 on a GPU)
  and ONNX Runtime (fp32 and the int8 flavour).
* ``predict`` -- ``predict image.png`` from the command line, start-up included, with
  the ONNX file (no PyTorch import) and the ``.pt`` checkpoint.

Each figure is the median of ``repeats`` timed runs after a warm-up, with the min and
max beside it. Two shapes: words (32 x 100) and text lines (32 x 400). Memory is the
process's peak resident set (CPU; reset per case through ``/proc/self/clear_refs``)
or the CUDA allocator's peak (GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

# Runnable as a script from a clone: put the repository root on the path.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import (  # noqa: E402
    PeakMemory,
    Timing,
    machine_info,
    sync,
    time_calls,
    wait_for_quiet,
)
from crnn.cli import EXIT_OK, EXIT_USAGE, setup_logging  # noqa: E402
from crnn.config import ModelConfig  # noqa: E402
from crnn.data.image import ImageSpec  # noqa: E402
from crnn.model import CRNN, build_model  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

log = logging.getLogger(__name__)

SHAPES: dict[str, tuple[int, int]] = {"word": (32, 100), "line": (32, 400)}
# Characters per label in the synthetic training batch, per shape.
LABEL_LENGTHS = {"word": (3, 10), "line": (15, 30)}
SECTIONS = ("flops", "padding", "data", "train", "e2e", "infer", "predict")
# The speed targets.
TARGET_DATA_PER_CORE = 3000.0  # word images/s per CPU core
TARGET_CPU_BATCHED = 150.0  # images/s, classic CRNN, 32x100, 2 cores
TARGET_CPU_SINGLE_MS = 10.0  # ms per single image
TARGET_GPU_TRAIN = 20_000.0  # training images/s on one H100/H200, bf16, pipeline included
TARGET_PREDICT_S = 2.0  # predict image.png, command to answer


@dataclass
class BenchOptions:
    """What to measure. Defaults are the full run; ``quick`` shortens every case."""

    device: str = "cpu"
    quick: bool = False
    sections: tuple[str, ...] = SECTIONS
    shapes: tuple[str, ...] = ("word", "line")
    # LMDBs or image folders for padding/data/e2e; empty: synthetic LMDBs are written.
    data: list[str] = field(default_factory=list)
    line_data: list[str] = field(default_factory=list)
    workers: tuple[int, ...] = (0, 1, 2)
    batch_sizes: tuple[int, ...] = (1, 8, 64)
    # Training batch (0: 64 on CPU, 512 on GPU) and DataLoader workers for e2e (-1: auto).
    train_batch: int = 0
    e2e_workers: int = -1
    threads: int = 0  # torch/ORT intra-op threads (0: their defaults)
    peak_tflops: float = 0.0  # GPU bf16 dense peak (0: measure a matmul)
    repeats: int = 5
    seconds: float = 2.0  # target duration of one timed run
    compile: bool | None = None  # torch.compile variants (None: on GPU only)
    int8: bool = True
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    charset: str = "alnum36"
    wait_load: float = 0.0  # wait until the 1-min load average is below this (0: don't)
    wait_timeout_s: float = 1800.0
    work_dir: str = ""  # where to write temporary files (default: a temporary directory)

    def __post_init__(self) -> None:
        unknown = set(self.sections) - set(SECTIONS)
        if unknown:
            raise ValueError(
                f"unknown bench sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}"
            )
        bad = set(self.shapes) - set(SHAPES)
        if bad:
            raise ValueError(f"unknown shapes {sorted(bad)}; choose from {', '.join(SHAPES)}")
        if self.quick:
            self.repeats = min(self.repeats, 3)
            self.seconds = min(self.seconds, 0.5)


# ---- fixtures: model, data ----------------------------------------------------------


def make_model(opts: BenchOptions, charset: Charset, seed: int = 0) -> CRNN:
    """The benchmarked network: the classic CRNN unless ``opts.model`` overrides it."""
    cfg = ModelConfig()
    for k, v in opts.model.items():
        if not hasattr(cfg, k):
            raise ValueError(f"unknown model setting {k!r}; valid: arch, channels, hidden")
        setattr(cfg, k, v)
    torch.manual_seed(seed)
    return build_model(cfg, charset.num_classes, 1)


def spec_for(shape: str) -> ImageSpec:
    """Words keep the default spec (widths up to 128); lines allow up to 400."""
    return ImageSpec() if shape == "word" else ImageSpec(max_width=400)


def synthetic_lmdb(path: Path, shape: str, count: int, charset: Charset) -> Path:
    """``count`` rendered samples (grayscale PNG, the synthetic generator's default
    effects) in an LMDB: words, or ~20-30-character lines for ``shape="line"``."""
    from crnn.config import SynthConfig
    from crnn.data.lmdb import LmdbWriter
    from crnn.data.synth import SynthGenerator
    from crnn.data.synth.export import encode_png

    cfg = SynthConfig()
    if shape == "line":
        cfg.min_length, cfg.max_length = 20, 30
        cfg.p_word, cfg.p_number, cfg.p_date, cfg.p_price, cfg.p_code = 0, 0, 0, 0, 0
        cfg.p_random = 1.0
    gen = SynthGenerator(charset, cfg, seed=1234, height=32)
    with LmdbWriter(path, overwrite=True) as w:
        for i in range(count):
            img, text = gen.render(i)
            w.add(encode_png(img), text, img.size)
    return path


def _data_for(
    shape: str, opts: BenchOptions, work: Path, charset: Charset, batch: int = 0
) -> list[str]:
    """The data a section reads: ``--data``/``--line-data``, else a synthetic LMDB of
    2,000 images, or 16 of ``batch`` when that is more: an epoch of a few batches starts
    each time with the workers' queues empty, and the first GPU run's end-to-end row
    (2,000 images, batch 512: four batches an epoch) waited for data 76 % of its time."""
    given = opts.data if shape == "word" else opts.line_data
    if given:
        return list(given)
    count = 512 if opts.quick else max(2000, 16 * batch)
    path = work / f"synth_{shape}_{count}"
    if not (path / "data.mdb").is_file():
        synthetic_lmdb(path, shape, count, charset)
    return [str(path)]


def _dataset(paths: list[str], shape: str, charset: Charset, model: CRNN, augment: bool) -> Any:
    from crnn.config import AugmentConfig
    from crnn.data.datasets import RecognitionDataset, open_sources
    from crnn.data.transforms import TrainAugment

    return RecognitionDataset(
        open_sources(paths),
        charset,
        spec_for(shape),
        model.output_length,  # type: ignore[arg-type]
        augment=TrainAugment(AugmentConfig()) if augment else None,
    )


# ---- sections -------------------------------------------------------------------------


@contextlib.contextmanager
def _onednn_off() -> Iterator[None]:
    with warnings.catch_warnings():
        # Switching oneDNN off and on warns about Intel GPUs' TF32, beside the point here.
        warnings.filterwarnings("ignore", message="TF32 acceleration")
        with torch.backends.mkldnn.flags(enabled=False):
            yield


def count_flops(model: CRNN, height: int, width: int) -> dict[str, float]:
    """FLOPs per image (forward, training step) and the conv/recurrent split.

    Counted on the CPU with oneDNN off: its fused LSTM kernel is invisible to the
    counter, the decomposed one is made of the matrix products it counts. A training
    step is forward + backward of the CTC loss (the optimizer's few FLOPs per
    parameter are left out).
    """
    from torch.utils.flop_counter import FlopCounterMode

    from crnn.ctc.loss import ctc_loss

    m = CRNN(
        model.num_classes,
        model.hparams["in_channels"],
        model.hparams["channels"],
        model.hparams["hidden"],
        model.arch,
    )
    b = 2
    x = torch.randn(b, m.hparams["in_channels"], height, width)
    out: dict[str, float] = {}
    with _onednn_off():
        m.eval()
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            m(x)
        counts = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}
        out["forward_gflop"] = fc.get_total_flops() / b / 1e9
        out["forward_conv_gflop"] = counts.get("aten.convolution", 0) / b / 1e9
        out["forward_recurrent_gflop"] = out["forward_gflop"] - out["forward_conv_gflop"]
        m.train()
        with FlopCounterMode(display=False) as fc:
            logits = m(x)
            t = logits.shape[1]
            n = max(1, t // 3)
            ctc_loss(
                logits,
                torch.ones(b, n, dtype=torch.long),
                torch.full((b,), t),
                torch.full((b,), n),
            ).backward()
        out["train_gflop"] = fc.get_total_flops() / b / 1e9
    out["params_m"] = sum(p.numel() for p in m.parameters()) / 1e6
    out["steps"] = float(m.output_length(width))
    return out


def measure_peak_tflops(device: torch.device, n: int = 8192) -> float:
    """Dense bf16 matmul rate of the GPU (TFLOP/s), ``n x n`` by ``n x n``."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize(device)
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def padding_fraction(
    widths: np.ndarray, batch_size: int, bucketing: bool, epochs: int = 3
) -> float:
    """Share of the padded batches' pixels (so of conv compute) that is padding, over
    ``epochs`` epochs of the training sampler."""
    from crnn.data.batching import BucketBatchSampler

    s = BucketBatchSampler(
        len(widths), batch_size, widths=widths if bucketing else None, shuffle=True
    )
    real = padded = 0
    for e in range(epochs):
        s.set_epoch(e)
        for gb in s.global_batches():
            w = widths[gb]
            real += int(w.sum())
            padded += int(w.max()) * len(w)
    return 1.0 - real / max(padded, 1)


def _per_core_decode(ds: Any, seconds: float, repeats: int) -> list[float]:
    """Items per CPU-second of ``ds[i]`` + collate in this process (CPU time, so other
    processes on a shared machine change it little)."""
    from crnn.data.batching import collate

    n = len(ds)
    rates = []
    # Warm up: the first read of each LMDB page faults it into this process (kernel
    # time, charged to us) and Pillow loads its plugins; a training run pays that once.
    for k in range(0, min(n, 4096), 64):
        collate([ds[j] for j in range(k, min(k + 64, n))])
    i = 0
    for _ in range(repeats):
        c0 = time.process_time()
        count = 0
        while time.process_time() - c0 < seconds:
            items = [ds[(i + k) % n] for k in range(64)]
            collate(items)
            i += 64
            count += 64
        rates.append(count / (time.process_time() - c0))
    return rates


def _loader_rate(
    ds: Any, workers: int, batch: int, device: torch.device, opts: BenchOptions
) -> Timing:
    from torch.utils.data import DataLoader

    from crnn.data.batching import BucketBatchSampler, collate

    sampler = BucketBatchSampler(len(ds), batch, widths=ds.widths, shuffle=True)
    loader = DataLoader(
        ds,
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=collate,
        pin_memory=device.type == "cuda",
        persistent_workers=workers > 0,
        prefetch_factor=4 if workers > 0 else None,
    )

    def batches() -> Iterator[dict[str, Any]]:
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from loader
            epoch += 1

    it = batches()
    try:
        # Start the workers and drain what they prefetched, so the runs see steady state.
        for _ in range(2 + 4 * workers):
            next(it)
        rates, per_call = [], []
        for _ in range(opts.repeats):  # timed by the clock: a prefetched batch costs ~0
            n, t0 = 0, time.perf_counter()
            while (dt := time.perf_counter() - t0) < opts.seconds or n == 0:
                next(it)
                n += 1
            rates.append(n * batch / dt)
            per_call.append(dt / n)
        return Timing(rates, 1000 * statistics.median(per_call), batch)
    finally:
        it.close()
        _stop_workers(loader)


def _stop_workers(loader: Any) -> None:
    """Shut persistent DataLoader workers down now: idle ones left behind would share
    the CPU with the next figures (and on a 2-core machine ruin them)."""
    import gc

    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None
    gc.collect()


def _train_case(
    model: CRNN,
    shape: str,
    batch: int,
    device: torch.device,
    amp: str,
    channels_last: bool,
    compile: bool,
) -> tuple[Callable[[], Any], Any]:
    """A closure running one training step on a fixed batch, and the train module."""
    from crnn.engine.parallel import wrap

    h, w = SHAPES[shape]
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch, 1, h, w), dtype=torch.uint8, generator=g)
    lo, hi = LABEL_LENGTHS[shape]
    lengths = torch.randint(lo, hi + 1, (batch,), generator=g)
    targets = torch.randint(1, model.num_classes, (batch, hi), generator=g)
    widths = torch.full((batch,), w, dtype=torch.long)
    train_module, bare = wrap(
        model, strategy="none", device=device, amp=amp, compile=compile, channels_last=channels_last
    )
    opt_kwargs: dict[str, Any] = {"lr": 1e-4}
    if device.type == "cuda":
        opt_kwargs["fused"] = True
    opt = torch.optim.AdamW(bare.parameters(), **opt_kwargs)
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda" and amp == "fp16")
    # As the trainer does on one device: lengths stay on the host for the CTC loss.
    inputs = (images.to(device), widths, targets.to(device), lengths)
    train_module.train()

    def step() -> None:
        losses = train_module(*inputs)
        scaler.scale(losses.mean()).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(bare.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return step, train_module


def _gpu_busy_fraction(fn: Callable[[], Any], calls: int, device: torch.device) -> float | None:
    """Share of wall time during which a GPU kernel ran while ``fn`` ran ``calls`` times
    (torch.profiler with CUDA activity only, so the host is not slowed by recording its
    ops; overlapping kernels are counted once). None if the profiler saw no kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        wall_us = (time.perf_counter() - t0) * 1e6
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
    )
    busy, end = 0.0, float("-inf")
    for a, b in spans:  # union of the kernel intervals
        if a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return min(1.0, busy / wall_us) if busy > 0 else None


# ---- the run --------------------------------------------------------------------------


@dataclass
class BenchResult:
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    flops: dict[str, dict[str, float]]
    targets: list[dict[str, Any]]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)


class _Run:
    def __init__(self, opts: BenchOptions) -> None:
        self.opts = opts
        self.device = torch.device(opts.device)
        self.gpu = self.device.type == "cuda"
        self.charset = Charset.from_spec(opts.charset)
        self.rows: list[dict[str, Any]] = []
        self.flops: dict[str, dict[str, float]] = {}
        self.peak_tflops: float | None = None
        self.peak_source = ""

    def add(self, section: str, case: str, shape: str, batch: int | None, **values: Any) -> None:
        row = {"section": section, "case": case, "shape": shape, "batch": batch, **values}
        self.rows.append(row)
        ips = values.get("images_per_s")
        log.info(
            "%-8s %-34s %-5s b=%-4s %s",
            section,
            case,
            shape,
            batch,
            f"{ips:,.1f} img/s"
            if ips is not None
            else {k: v for k, v in values.items() if k != "runs"},
        )

    def timed(
        self,
        section: str,
        case: str,
        shape: str,
        batch: int,
        fn: Callable[[], Any],
        images: int,
        **extra: Any,
    ) -> Timing:
        with PeakMemory(self.device) as mem:
            t = time_calls(fn, images, self.opts.repeats, self.opts.seconds, self.device)
        self.add(section, case, shape, batch, **t.as_dict(), peak_mib=_round(mem.mib), **extra)
        return t

    # sections

    def flops_section(self) -> None:
        model = make_model(self.opts, self.charset)
        for shape in self.opts.shapes:
            self.flops[shape] = count_flops(model, *SHAPES[shape])
        if self.gpu:
            if self.opts.peak_tflops > 0:
                self.peak_tflops, self.peak_source = self.opts.peak_tflops, "given (--peak-tflops)"
            else:
                self.peak_tflops = measure_peak_tflops(self.device)
                self.peak_source = "measured: bf16 8192^3 matmul on this GPU"
            for f in self.flops.values():
                f["peak_tflops"] = self.peak_tflops
                f["floor_train_images_per_s"] = self.peak_tflops * 1e12 / (f["train_gflop"] * 1e9)

    def padding_section(self, work: Path) -> None:
        model = make_model(self.opts, self.charset)
        batch = self.opts.train_batch or 64
        for shape in self.opts.shapes:
            paths = _data_for(shape, self.opts, work, self.charset)
            ds = _dataset(paths, shape, self.charset, model, augment=False)
            for bucketing in (False, True):
                frac = padding_fraction(ds.widths, min(batch, len(ds)), bucketing)
                self.add(
                    "padding",
                    f"bucketing {'on' if bucketing else 'off'}",
                    shape,
                    batch,
                    padding_fraction=round(frac, 4),
                    samples=len(ds),
                    data=",".join(Path(p).name for p in paths),
                )

    def data_section(self, work: Path) -> None:
        model = make_model(self.opts, self.charset)
        for shape in self.opts.shapes:
            paths = _data_for(shape, self.opts, work, self.charset)
            names = ",".join(Path(p).name for p in paths)
            for augment in (False, True):
                ds = _dataset(paths, shape, self.charset, model, augment)
                tag = " +augment" if augment else ""
                load = wait_for_quiet(
                    self.opts.wait_load, self.opts.wait_timeout_s, f"data {shape}"
                )
                rates = _per_core_decode(ds, self.opts.seconds, self.opts.repeats)
                self.add(
                    "data",
                    f"1 process, per CPU-second{tag}",
                    shape,
                    64,
                    images_per_s=round(statistics.median(rates), 1),
                    min=round(min(rates), 1),
                    max=round(max(rates), 1),
                    runs=[round(r, 1) for r in rates],
                    data=names,
                    load=round(load, 2),
                )
                if augment:
                    continue  # the DataLoader rows use the plain pipeline
                for w in self.opts.workers:
                    load = wait_for_quiet(
                        self.opts.wait_load, self.opts.wait_timeout_s, f"data {shape} workers={w}"
                    )
                    t = _loader_rate(ds, w, 64, self.device, self.opts)
                    self.add(
                        "data",
                        f"DataLoader, {w} workers",
                        shape,
                        64,
                        **t.as_dict(),
                        per_worker=round(t.median / max(w, 1), 1),
                        data=names,
                        load=round(load, 2),
                    )

    def train_section(self) -> None:
        batch = self.opts.train_batch or (512 if self.gpu else 64)
        variants: list[tuple[str, str, bool, bool, bool]] = [("fp32", "none", False, False, True)]
        if not self.gpu:
            variants.append(("fp32 + channels_last", "none", True, False, True))
        if self.gpu:
            variants += [
                ("bf16", "bf16", False, False, True),
                ("fp16 (GradScaler)", "fp16", False, False, True),
                ("bf16 + channels_last", "bf16", True, False, True),
                ("bf16, cudnn.benchmark off", "bf16", False, False, False),
            ]
        compile = self.opts.compile if self.opts.compile is not None else self.gpu
        if compile:
            variants.append(
                (
                    "bf16 + torch.compile" if self.gpu else "fp32 + torch.compile",
                    "bf16" if self.gpu else "none",
                    False,
                    True,
                    True,
                )
            )
        for shape in self.opts.shapes:
            f = self.flops.get(shape) or count_flops(
                make_model(self.opts, self.charset), *SHAPES[shape]
            )
            self.flops.setdefault(shape, f)
            for name, amp, cl, comp, bench in variants:
                if self.gpu:
                    torch.backends.cudnn.benchmark = bench
                model = make_model(self.opts, self.charset)
                load = wait_for_quiet(
                    self.opts.wait_load, self.opts.wait_timeout_s, f"train {shape} {name}"
                )
                try:
                    step, _ = _train_case(model, shape, batch, self.device, amp, cl, comp)
                    with PeakMemory(self.device) as mem:
                        t = time_calls(
                            step, batch, self.opts.repeats, self.opts.seconds, self.device, warmup=3
                        )
                except Exception as e:  # noqa: BLE001 -- one variant failing must not end the run
                    log.warning("train %s %s failed: %s", shape, name, e)
                    self.add("train", name, shape, batch, error=str(e)[:200])
                    continue
                tflops = t.median * f["train_gflop"] / 1e3
                extra: dict[str, Any] = {"achieved_tflops": round(tflops, 3)}
                if self.peak_tflops:
                    extra["of_floor"] = round(tflops / self.peak_tflops, 4)
                self.add(
                    "train",
                    name,
                    shape,
                    batch,
                    **t.as_dict(),
                    peak_mib=_round(mem.mib),
                    load=round(load, 2),
                    **extra,
                )
                del step, model
                if self.gpu:
                    torch.cuda.empty_cache()
        if self.gpu:
            torch.backends.cudnn.benchmark = True

    def e2e_section(self, work: Path) -> None:
        from crnn.config import load_config
        from crnn.engine.distributed import DistInfo
        from crnn.engine.trainer import Trainer

        batch = self.opts.train_batch or (512 if self.gpu else 64)
        cpus = os.cpu_count() or 1
        workers = self.opts.e2e_workers if self.opts.e2e_workers >= 0 else max(1, min(cpus - 1, 12))
        for shape in self.opts.shapes:
            paths = _data_for(shape, self.opts, work, self.charset, batch)
            spec = spec_for(shape)
            overrides = [
                f"data.train={json.dumps(paths)}",
                f"data.val={json.dumps(paths[:1])}",
                f"data.max_width={spec.max_width}",
                f"data.num_workers={workers}",
                f"train.batch_size={batch}",
                "train.max_steps=1000000",
                "train.amp=" + ("bf16" if self.gpu else "none"),
                f"train.output_dir={work / 'e2e_run'}",
                "dist.strategy=none",
                f"data.charset={self.opts.charset}",
            ]
            overrides += [f"model.{k}={json.dumps(v)}" for k, v in self.opts.model.items()]
            cfg = load_config(None, overrides)
            info = DistInfo(device=self.device)
            load = wait_for_quiet(self.opts.wait_load, self.opts.wait_timeout_s, f"e2e {shape}")
            trainer = Trainer(cfg, info)
            trainer.train_module.train()
            waited = [0.0]
            batches = _timed(trainer.batches(), waited)

            def step(trainer: Trainer = trainer, batches: Iterator[Any] = batches) -> None:
                trainer.train_step(batches)

            with PeakMemory(self.device) as mem:
                # Warm up over a whole epoch: each new width bucket costs cuDNN's autotuning
                # once (on an H200 one timed repeat of two fell from 15,826 to 105 img/s
                # when the warm-up was 3 steps).
                for _ in range(min(64, max(3, _epoch_batches(trainer)))):
                    step()
                waited[0] = 0.0
                t0 = time.perf_counter()
                t = time_calls(
                    step, batch, self.opts.repeats, self.opts.seconds, self.device, warmup=0
                )
                wall = time.perf_counter() - t0
            extra: dict[str, Any] = {
                "data_wait_fraction": round(waited[0] / wall, 3),
                "workers": workers,
                "load": round(load, 2),
            }
            if self.gpu:
                with contextlib.suppress(Exception):
                    busy = _gpu_busy_fraction(step, 10, self.device)
                    extra["gpu_busy_fraction"] = None if busy is None else round(busy, 3)
                f = self.flops.get(shape)
                if f and self.peak_tflops:
                    extra["of_floor"] = round(t.median / f["floor_train_images_per_s"], 4)
            extra["bottleneck"] = _bottleneck(extra, self.gpu)
            self.add(
                "e2e",
                "Trainer.train_step + DataLoader" + (" (bf16)" if self.gpu else ""),
                shape,
                batch,
                **t.as_dict(),
                peak_mib=_round(mem.mib),
                **extra,
            )
            batches.close()
            _stop_workers(trainer.data.loader)

    def infer_section(self, work: Path) -> None:
        model = make_model(self.opts, self.charset).to(self.device).eval()
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)
        from crnn.backends.torch import normalize
        from crnn.engine.parallel import autocast_for

        torch_cases: list[tuple[str, str, bool]] = [("PyTorch fp32", "none", False)]
        if self.gpu:
            torch_cases.append(("PyTorch bf16", "bf16", False))
        else:
            torch_cases.append(("PyTorch fp32 channels_last", "none", True))
        ort_models = self._onnx_models(model, work)
        g = torch.Generator().manual_seed(0)
        for shape in self.opts.shapes:
            h, w = SHAPES[shape]
            for b in self.opts.batch_sizes:
                x = torch.randint(0, 256, (b, 1, h, w), dtype=torch.uint8, generator=g)
                xd = x.to(self.device)
                for name, amp, cl in torch_cases:
                    fmt = torch.channels_last if cl else torch.contiguous_format
                    m = model.to(memory_format=fmt)  # type: ignore[call-overload]

                    def fwd(m: CRNN = m, amp: str = amp, cl: bool = cl, xd: Any = xd) -> None:
                        with torch.inference_mode(), autocast_for(self.device, amp):
                            inp = normalize(xd)
                            if cl:
                                inp = inp.contiguous(memory_format=torch.channels_last)
                            m(inp)

                    load = wait_for_quiet(
                        self.opts.wait_load, self.opts.wait_timeout_s, f"infer {shape} {name} b{b}"
                    )
                    self.timed(
                        "infer",
                        name,
                        shape,
                        b,
                        fwd,
                        b,
                        load=round(load, 2),
                        threads=torch.get_num_threads(),
                    )
                model.to(memory_format=torch.contiguous_format)
                xn = x.numpy()
                for name, om in ort_models.items():
                    load = wait_for_quiet(
                        self.opts.wait_load, self.opts.wait_timeout_s, f"infer {shape} {name} b{b}"
                    )
                    self.timed(
                        "infer",
                        name,
                        shape,
                        b,
                        lambda om=om, xn=xn: om(xn),
                        b,
                        load=round(load, 2),
                        threads=self.opts.threads or None,
                    )

    def _onnx_models(self, model: CRNN, work: Path) -> dict[str, Any]:
        try:
            from crnn.backends.onnx import OnnxBackend as OnnxModel
            from crnn.backends.onnx import require_onnx
            from crnn.data.datasets import sample_images
            from crnn.export import export_onnx, int8_path, quantize_int8

            require_onnx()
        except ImportError as e:
            log.warning("ONNX rows skipped: %s", e)
            return {}
        path = work / "bench.onnx"
        spec = ImageSpec(max_width=400)
        export_onnx(model.cpu().eval(), self.charset, spec, path)
        model.to(self.device)
        threads = self.opts.threads or None
        where = " (CPU)" if self.gpu else ""  # the CPU execution provider, also on a GPU box
        out = {f"ONNX Runtime fp32{where}": OnnxModel(path, threads=threads)}
        if self.opts.int8:
            calib = sample_images(self.charset, spec, 32 if self.opts.quick else 128)
            q = quantize_int8(path, int8_path(path), calib)
            out[f"ONNX Runtime int8{where}"] = OnnxModel(q, threads=threads)
        return out

    def predict_section(self, work: Path) -> None:
        from crnn import checkpoint as ck
        from crnn.config import SynthConfig
        from crnn.data.synth import SynthGenerator
        from crnn.export import export_onnx
        from crnn.io import atomic_save

        model = make_model(self.opts, self.charset).eval()
        ckpt = ck.ModelBundle(model, self.charset, ImageSpec()).header()
        pt = atomic_save(ckpt, work / "predict.pt")
        onnx_path = work / "predict.onnx"
        have_onnx = True
        try:
            export_onnx(model, self.charset, ImageSpec(), onnx_path)
        except ImportError:
            have_onnx = False
        image = work / "word.png"
        img, _ = SynthGenerator(self.charset, SynthConfig(), seed=7, height=32).render(0)
        img.save(image)
        root = Path(__file__).resolve().parents[1]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        }
        cases = [("predict word.png, .onnx (no torch)", onnx_path)] if have_onnx else []
        cases.append(("predict word.png, .pt", pt))
        for name, path in cases:
            cmd = [
                sys.executable,
                "-m",
                "crnn.cli.predict",
                "-c",
                str(path),
                str(image),
                "--device",
                "cpu",
            ]
            load = wait_for_quiet(self.opts.wait_load, self.opts.wait_timeout_s, name)
            times = []
            for _ in range(self.opts.repeats):
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                if r.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-500:]}")
            self.add(
                "predict",
                name,
                "word",
                1,
                seconds=round(statistics.median(times), 3),
                min=round(min(times), 3),
                max=round(max(times), 3),
                runs=[round(t, 3) for t in times],
                load=round(load, 2),
            )


def _epoch_batches(trainer: Any) -> int:
    """Batches in one epoch of the trainer's loader (0 when it cannot say)."""
    try:
        return len(trainer.data.loader)
    except TypeError:
        return 0


def _timed(src: Iterator[Any], waited: list[float]) -> Iterator[Any]:
    """``src``, adding the seconds spent waiting for each item to ``waited[0]``."""
    while True:
        t0 = time.perf_counter()
        item = next(src)
        waited[0] += time.perf_counter() - t0
        yield item


def _bottleneck(extra: dict[str, Any], gpu: bool) -> str:
    """Name what limits the end-to-end step from the measured shares."""
    if extra.get("data_wait_fraction", 0) > 0.1:
        return "input pipeline"
    if not gpu:
        return "CPU compute"
    busy = extra.get("gpu_busy_fraction")
    if busy is None:
        return "unknown (no profiler times)"
    return "GPU compute" if busy > 0.8 else "launch overhead / host"


def _round(v: float | None, nd: int = 1) -> float | None:
    return None if v is None else round(v, nd)


def run_bench(opts: BenchOptions) -> BenchResult:
    """Measure every section in ``opts.sections``; see the module docstring."""
    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"--device {opts.device}: CUDA is not available on this machine")
    if opts.threads:
        torch.set_num_threads(opts.threads)
    run = _Run(opts)
    meta: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "device": str(device),
        "machine": machine_info(device),
        "load_start": [round(v, 2) for v in os.getloadavg()],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "options": dataclasses.asdict(opts),
    }
    with contextlib.ExitStack() as stack:
        if opts.work_dir:
            work = Path(opts.work_dir)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="crnn-bench-")))
        if "flops" in opts.sections or (run.gpu and {"train", "e2e"} & set(opts.sections)):
            run.flops_section()
        if "padding" in opts.sections:
            run.padding_section(work)
        if "data" in opts.sections:
            run.data_section(work)
        if "train" in opts.sections:
            run.train_section()
        if "e2e" in opts.sections:
            run.e2e_section(work)
        if "infer" in opts.sections:
            run.infer_section(work)
        if "predict" in opts.sections:
            run.predict_section(work)
    meta["load_end"] = [round(v, 2) for v in os.getloadavg()]
    meta["peak_tflops"] = run.peak_tflops
    meta["peak_tflops_source"] = run.peak_source
    return BenchResult(meta, run.rows, run.flops, targets(run.rows, run.flops, run.gpu))


def targets(
    rows: list[dict[str, Any]], flops: dict[str, dict[str, float]], gpu: bool
) -> list[dict[str, Any]]:
    """Each issue-6 target this run measured: figure, target, ratio (>= 1 is met)."""

    def pick(section: str, pred: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [r for r in rows if r["section"] == section and r["shape"] == "word" and pred(r)]

    out: list[dict[str, Any]] = []
    per_core = pick("data", lambda r: r["case"] == "1 process, per CPU-second")
    if per_core:
        v = per_core[0]["images_per_s"]
        out.append(
            {
                "target": "data pipeline, word images/s per CPU core",
                "measured": v,
                "target_value": TARGET_DATA_PER_CORE,
                "ratio": v / TARGET_DATA_PER_CORE,
            }
        )
    if not gpu:
        batched = pick(
            "infer",
            lambda r: (
                r["batch"] == max(x["batch"] for x in rows if x["section"] == "infer")
                and "images_per_s" in r
            ),
        )
        if batched:
            best = max(batched, key=lambda r: r["images_per_s"])
            out.append(
                {
                    "target": f"CPU inference batched (best: {best['case']}, "
                    "b={best['batch']}), img/s",
                    "measured": best["images_per_s"],
                    "target_value": TARGET_CPU_BATCHED,
                    "ratio": best["images_per_s"] / TARGET_CPU_BATCHED,
                }
            )
        single = pick("infer", lambda r: r["batch"] == 1 and "ms_per_call" in r)
        if single:
            best = min(single, key=lambda r: r["ms_per_call"])
            out.append(
                {
                    "target": f"CPU inference single image (best: {best['case']}), ms",
                    "measured": best["ms_per_call"],
                    "target_value": TARGET_CPU_SINGLE_MS,
                    "ratio": TARGET_CPU_SINGLE_MS / best["ms_per_call"],
                }
            )
    e2e = pick("e2e", lambda r: "images_per_s" in r)
    if e2e and gpu:
        v = e2e[0]["images_per_s"]
        out.append(
            {
                "target": "GPU training img/s, bf16, pipeline included (bottleneck: "
                "{e2e[0].get('bottleneck')})",
                "measured": v,
                "target_value": TARGET_GPU_TRAIN,
                "ratio": v / TARGET_GPU_TRAIN,
            }
        )
    for r in pick("predict", lambda r: "seconds" in r):
        out.append(
            {
                "target": f"{r['case']}, s",
                "measured": r["seconds"],
                "target_value": TARGET_PREDICT_S,
                "ratio": TARGET_PREDICT_S / r["seconds"],
            }
        )
    for o in out:
        o["ratio"] = round(o["ratio"], 3)
    return out


def format_tables(result: BenchResult) -> str:
    """The results as plain-text tables (Markdown-compatible): measurements, FLOPs,
    targets."""
    m = result.meta
    lines = [
        f"machine: {m['machine'].get('cpu')} ({m['machine'].get('cpu_count')} CPUs)"
        + (f", {m['machine']['gpu']}" if "gpu" in m["machine"] else "")
        + f"; torch {m['machine']['torch']}, onnxruntime {m['machine'].get('onnxruntime', '-')}",
        f"command: {m['command']}",
        f"load average (1, 5, 15 min): start {m['load_start']}, end {m['load_end']}",
        "",
        "| section | case | shape | batch | images/s (median) | min-max | ms/call | peak MiB | "
        "notes |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in result.rows:
        notes = []
        for k in (
            "padding_fraction",
            "per_worker",
            "achieved_tflops",
            "of_floor",
            "data_wait_fraction",
            "gpu_busy_fraction",
            "bottleneck",
            "load",
            "error",
        ):
            if r.get(k) is not None:
                notes.append(f"{k}={r[k]}")
        if "seconds" in r:
            ips, rng, ms = f"{r['seconds']} s", f"{r['min']}-{r['max']} s", ""
        elif "images_per_s" in r:
            ips = f"{r['images_per_s']:,.1f}"
            rng = f"{r['min']:,.1f}-{r['max']:,.1f}"
            ms = f"{r['ms_per_call']:.2f}" if "ms_per_call" in r else ""
        else:
            ips = rng = ms = ""
        lines.append(
            f"| {r['section']} | {r['case']} | {r['shape']} | {r['batch'] or ''} | {ips} | {rng} "
            f"| {ms} | {r.get('peak_mib') or ''} | {', '.join(notes)} |"
        )
    if result.flops:
        lines += [
            "",
            "| shape | params (M) | forward GFLOP/img (conv + recurrent) | train step GFLOP/img "
            "| GPU bf16 peak TFLOP/s | floor: train img/s |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for shape, f in result.flops.items():
            peak = f.get("peak_tflops")
            floor = f.get("floor_train_images_per_s")
            lines.append(
                f"| {shape} {SHAPES[shape][0]}x{SHAPES[shape][1]} | {f['params_m']:.2f} | "
                f"{f['forward_gflop']:.3f} ({f['forward_conv_gflop']:.3f} + "
                f"{f['forward_recurrent_gflop']:.3f}) | "
                f"{f['train_gflop']:.3f} | {'' if peak is None else f'{peak:.0f}'} | "
                f"{'' if floor is None else f'{floor:,.0f}'} |"
            )
    if result.targets:
        lines += [
            "",
            "| target | measured | target | ratio (>= 1 met) |",
            "| --- | ---: | ---: | ---: |",
        ]
        for t in result.targets:
            lines.append(
                f"| {t['target']} | {t['measured']:,} | {t['target_value']:,} | {t['ratio']:.2f} |"
            )
    return "\n".join(lines)


# ---- command line -----------------------------------------------------------------

USAGE = """Measure the speed of the data pipeline, training and inference (against its targets).

Prints a table last and writes the figures as JSON (--json). Runs on the CPU, or on a
GPU with --device cuda (bf16/fp16, channels_last, torch.compile and cuDNN autotuning
variants, the training floor from the GPU's bf16 rate). See docs/benchmarks.md for
figures and how to read them.

    python benchmarks/bench.py                         # everything, CPU
    python benchmarks/bench.py --quick --sections infer,predict
    python benchmarks/bench.py --device cuda --data data/lmdb/iiit5k_train --peak-tflops 989
    python benchmarks/bench.py --wait-load 1.2         # on a shared machine: wait for quiet
"""


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
    p = argparse.ArgumentParser(
        prog="bench.py", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--quick", action="store_true", help="short runs (a smoke test, not figures)")
    p.add_argument(
        "--sections",
        type=_words,
        default=SECTIONS,
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)",
    )
    p.add_argument(
        "--shapes", type=_words, default=("word", "line"), help="word,line (default both)"
    )
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="DATA",
        help="LMDB or image folder of word images for padding/data/e2e (repeatable; default: "
        "a synthetic LMDB written to a temporary folder)",
    )
    p.add_argument(
        "--line-data",
        action="append",
        default=[],
        metavar="DATA",
        help="the same for text lines (default: synthetic lines)",
    )
    p.add_argument(
        "--workers",
        type=_ints,
        default=(0, 1, 2),
        help="DataLoader worker counts to measure (default 0,1,2)",
    )
    p.add_argument(
        "--batch-sizes",
        type=_ints,
        default=(1, 8, 64),
        help="inference batch sizes (default 1,8,64)",
    )
    p.add_argument(
        "--train-batch", type=int, default=0, help="training batch (default 64 on CPU, 512 on GPU)"
    )
    p.add_argument(
        "--e2e-workers",
        type=int,
        default=-1,
        help="DataLoader workers of the end-to-end training row (default: CPUs - 1, at most 12)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="intra-op threads for PyTorch and ONNX Runtime (default: theirs)",
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=0.0,
        help="the GPU's dense bf16 rate for the floor (default: measure a matmul)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs per figure (default 5)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one timed run (default 2)")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile training variant (default: on GPU only)",
    )
    p.add_argument("--no-int8", action="store_true", help="skip the int8 ONNX rows")
    p.add_argument(
        "--channels", type=_ints, default=None, help="model conv widths (default: the classic CRNN)"
    )
    p.add_argument("--hidden", type=int, default=None, help="LSTM hidden size (default 256)")
    p.add_argument(
        "--wait-load",
        type=float,
        default=0.0,
        metavar="L",
        help="before each figure, wait until the 1-minute load average is below L",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="where to write the JSON (default runs/bench/<device>-<time>.json)",
    )
    p.add_argument("--work-dir", default="", help="keep temporary files (LMDBs, models) here")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    model: dict[str, object] = {}
    if args.channels is not None:
        model["channels"] = list(args.channels)
    if args.hidden is not None:
        model["hidden"] = args.hidden
    try:
        opts = BenchOptions(
            device=args.device,
            quick=args.quick,
            sections=args.sections,
            shapes=args.shapes,
            data=args.data,
            line_data=args.line_data,
            workers=args.workers,
            batch_sizes=args.batch_sizes,
            train_batch=args.train_batch,
            e2e_workers=args.e2e_workers,
            threads=args.threads,
            peak_tflops=args.peak_tflops,
            repeats=args.repeats,
            seconds=args.seconds,
            compile=args.compile,
            int8=not args.no_int8,
            model=model,
            wait_load=args.wait_load,
            work_dir=args.work_dir,
        )
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
