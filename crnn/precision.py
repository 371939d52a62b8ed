"""Mixed precision: the autocast choices shared by training, evaluation and inference."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_for(device: torch.device, amp: str) -> contextlib.AbstractContextManager[Any]:
    """Mixed precision on CUDA (``amp`` in bf16/fp16); a no-op elsewhere or for "none"."""
    if device.type != "cuda" or amp not in AMP_DTYPES:
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=AMP_DTYPES[amp])
