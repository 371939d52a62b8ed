"""Mixed precision: the autocast choices shared by training, evaluation and inference."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import torch

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

log = logging.getLogger(__name__)


def resolve_amp(amp: str, device: torch.device) -> str:
    """The autocast mode that will really run on ``device``: ``bf16`` on a GPU without
    bfloat16 support (before Ampere: V100, T4) falls back to ``fp16`` (trained with a
    GradScaler), with a message; the CPU trains in fp32 whatever is asked."""
    if device.type != "cuda" or amp != "bf16" or torch.cuda.is_bf16_supported():
        return amp
    log.warning(
        "train.amp=bf16, but %s has no bfloat16 support (it needs an Ampere or newer "
        "GPU): using fp16 with loss scaling instead (set train.amp=fp16 to silence this)",
        torch.cuda.get_device_name(device),
    )
    return "fp16"


def autocast_for(device: torch.device, amp: str) -> contextlib.AbstractContextManager[Any]:
    """Mixed precision on CUDA (``amp`` in bf16/fp16); a no-op elsewhere or for "none"."""
    if device.type != "cuda" or amp not in AMP_DTYPES:
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=AMP_DTYPES[amp])
