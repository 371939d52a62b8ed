"""``tools/train.py --dry-run``: build everything a run needs, take one training step,
say what the run would do, and write nothing."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from crnn.config import Config
from crnn.data.datasets import MixedDataset, RecognitionDataset, SynthDataset
from crnn.engine.distributed import init_distributed


def _describe_dataset(ds: Any) -> list[str]:
    if isinstance(ds, MixedDataset):
        return [line for part in ds.parts for line in _describe_dataset(part)]
    if isinstance(ds, SynthDataset):
        gen = ds.generator
        return [
            f"synthetic text, endless: {len(gen.fonts)} fonts, {len(gen.alphabet)} drawable "
            "characters"
        ]
    if isinstance(ds, RecognitionDataset):
        names = ", ".join(getattr(s, "name", "?") for s in ds.sources)
        skipped = ", ".join(f"{n} {r}" for r, n in sorted(ds.skipped.items())) or "none"
        return [f"{names}: {len(ds)} samples kept, skipped: {skipped}"]
    return [f"{type(ds).__name__}: {len(ds)} samples"]


def dry_run(cfg: Config, devices: Any, resume: str | None = None) -> str:
    """The report of a dry run of the run ``devices`` would start, built and stepped in
    this one process: with DDP over N devices each rank's share of the batch (the
    per-device micro-batch the real run takes), with DataParallel the listed GPUs."""
    import copy

    from crnn.engine.distributed import env_rank
    from crnn.engine.trainer import Trainer

    n_devices = devices.nproc if devices.kind == "cpu" else len(devices.ids)
    strategy = cfg.dist.strategy
    ranks = env_rank()
    world = ranks[2] if ranks else (n_devices if strategy == "ddp" else 1)
    cfg.validate(world, devices.kind, n_devices)  # the refusals the real run would give
    run_cfg, cfg = cfg, copy.deepcopy(cfg)
    if world > 1:  # one rank's share, stepped here without the others
        cfg.train.batch_size //= world
        cfg.dist.strategy = "none"
    device_ids = devices.ids if strategy == "dp" and devices.kind == "cuda" else None
    info = init_distributed(devices.torch_devices()[:1])
    t = Trainer(cfg, info, resume=resume, device_ids=device_ids)
    t.logger.enabled = False  # nothing reaches disk
    tc, d = run_cfg.train, cfg.data
    sampler = t.data.sampler
    batches = t.batches()
    loss_sum, n = t.train_step(batches)  # the first step warms up (allocator, autotuning)
    t0 = time.perf_counter()
    for _ in range(2):
        t.train_step(batches)
    step_s = (time.perf_counter() - t0) / 2
    spe = sampler.steps_per_epoch // world  # this sampler saw the whole set alone
    epochs = f"{tc.max_steps / spe:.1f} epochs of {spe} steps" if spe else "endless data"
    params = sum(p.numel() for p in t.model.parameters())
    out = Path(tc.output_dir)
    lines = [
        f"model      {t.model.arch}, {params / 1e6:.2f} M parameters, {t.charset.num_classes} "
        f"classes (charset {t.charset.name}), input {t.spec.channels}x{t.spec.height}, width "
        f"{t.spec.min_width}-{t.spec.max_width} px",
        f"device     {_where(devices, world, strategy)}, "
        + (f"amp {t.amp}" if t.device.type == "cuda" else "fp32 (autocast is for CUDA)"),
        "training   " + "; ".join(_describe_dataset(t.data.dataset)),
        *(f"validation {name}: {len(loader.dataset)} samples" for name, loader in t.val_sets),  # type: ignore[arg-type]
        f"batch      {tc.batch_size} per optimizer step = {sampler.micro_batch_size} per "
        f"device x {tc.accum_steps} accumulation x {world} process{'es' if world > 1 else ''}"
        + (f" (DataParallel splits each over {n_devices} GPUs)" if strategy == "dp" else ""),
        f"schedule   {tc.max_steps} steps ({epochs}, {tc.max_steps * tc.batch_size:,} images), "
        f"lr {tc.lr:g} {tc.schedule} after {tc.warmup_steps} warm-up steps, validation every "
        f"{tc.val_every}"
        + (f", time budget {tc.time_budget_min:g} min" if tc.time_budget_min else ""),
        f"steps      first loss {float(loss_sum) / max(n, 1):.3f}; {step_s:.2f} s a step after "
        f"warm-up: about {math.ceil(tc.max_steps * step_s / 60)} min for {tc.max_steps} steps"
        + (
            f" (one rank's step, measured alone here; the {world} processes share this "
            "machine's cores in the real run)"
            if world > 1 and devices.kind == "cpu"
            else ""
        ),
        f"would write {out}/last.pt, best.pt, config.yaml, train.log, tb/ (TensorBoard: "
        f"tensorboard --logdir {out})",
        f"data       {d.num_workers} DataLoader workers setting; bucketing "
        f"{'on' if d.bucketing else 'off'}; augmentation {'on' if d.augment.enabled else 'off'}",
    ]
    return "\n".join(lines)


def _where(devices: Any, world: int, strategy: str) -> str:
    if devices.kind == "cpu":
        return f"cpu, {world} DDP processes (gloo)" if world > 1 else "cpu, one process"
    gpus = ",".join(map(str, devices.ids))
    if strategy == "dp":
        return f"GPUs {gpus}, DataParallel in one process"
    return f"GPUs {gpus}, {world} DDP processes (one per GPU)" if world > 1 else f"GPU {gpus}"
