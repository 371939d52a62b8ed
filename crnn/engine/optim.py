"""The optimiser and the learning-rate schedule."""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from torch import nn

from crnn.config import TrainConfig


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Multiplier of ``train.lr`` for optimizer step ``step`` (0-based): linear warm-up,
    then cosine or linear decay to ``min_lr_ratio``, or constant."""
    warm = cfg.warmup_steps
    if step < warm:
        return (step + 1) / warm
    if cfg.schedule == "constant":
        return 1.0
    p = min(1.0, (step - warm) / max(1, cfg.max_steps - warm))
    lo = cfg.min_lr_ratio
    if cfg.schedule == "linear":
        return 1.0 - (1.0 - lo) * p
    return lo + (1.0 - lo) * 0.5 * (1.0 + math.cos(math.pi * p))


def make_optimizer(
    model: nn.Module, cfg: TrainConfig, device: torch.device
) -> torch.optim.Optimizer:
    """Adam(W) with weight decay on weights only (biases and normalisation scales are
    not weights to shrink); fused kernels on CUDA."""
    decay, no_decay = [], []
    for p in model.parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    kwargs: dict[str, Any] = {"lr": cfg.lr, "betas": tuple(cfg.betas)}
    if device.type == "cuda":
        kwargs["fused"] = True
    return cls(groups, **kwargs)


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> Any:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))


def step_schedule(scheduler: torch.optim.lr_scheduler.LRScheduler) -> None:
    """One step of the schedule per batch, taken or skipped: a step skipped by the NaN
    guard or fp16 loss scaling still counts, so that resume and the time budget see one
    step per batch (torch warns "lr_scheduler.step() before optimizer.step()" when the
    first one is skipped; that is intended here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)`")
        scheduler.step()
