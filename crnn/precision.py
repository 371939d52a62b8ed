"""Mixed precision: the autocast choices shared by training, evaluation and inference."""

from __future__ import annotations

import contextlib
import inspect
import logging
from typing import Any

import torch

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

log = logging.getLogger(__name__)


def native_bf16(device: torch.device) -> bool:
    """Whether the GPU computes in bfloat16 natively (Ampere, compute capability 8.0,
    and newer). ``torch.cuda.is_bf16_supported()`` also says yes where bf16 is only
    emulated (V100, T4: slow, some kernels missing), so emulation is ruled out
    (``including_emulation=False`` where this PyTorch has it, the compute capability
    otherwise)."""
    fn = torch.cuda.is_bf16_supported
    try:
        if "including_emulation" in inspect.signature(fn).parameters:
            return bool(fn(including_emulation=False))
    except (TypeError, ValueError):  # a builtin without a signature
        pass
    major, _ = torch.cuda.get_device_capability(device)
    return major >= 8 and bool(fn())


def resolve_amp(amp: str, device: torch.device) -> str:
    """The autocast mode that will really run on ``device``: ``bf16`` on a GPU without
    native bfloat16 (before Ampere: V100, T4) falls back to ``fp16`` (trained with a
    GradScaler), with a message; the CPU trains in fp32 unless ``train.cpu_bf16`` chose bf16
    (``crnn.engine.cpu_precision``)."""
    if device.type == "cpu":
        return "none"
    if amp != "bf16" or native_bf16(device):
        return amp
    log.warning(
        "train.amp=bf16, but %s has no bfloat16 support (it needs an Ampere or newer "
        "GPU): using fp16 with loss scaling instead (set train.amp=fp16 to silence this)",
        torch.cuda.get_device_name(device),
    )
    return "fp16"


def inference_amp(amp: str, device: torch.device) -> str:
    """The autocast mode a reader (``crnn-eval``, a PyTorch ``Recognizer``) runs with on
    ``device``: on a CPU, ``bf16`` only where it has bfloat16 units (emulated, an AVX2 CPU
    ran it at 0.06x fp32, with bf16's rounding) and never ``fp16`` (no CPU autocast);
    each refusal is said once, with the mode used instead."""
    if device.type != "cpu" or amp == "none":
        return amp
    if amp == "bf16" and cpu_bf16_units():
        return amp
    reason = (
        "this CPU has no bfloat16 units (avx512_bf16, amx_bf16): it would be emulated, "
        "many times slower"
        if amp == "bf16"
        else "fp16 autocast is for CUDA"
    )
    log.warning("--amp %s on the CPU: %s; reading in fp32", amp, reason)
    return "none"


def autocast_for(device: torch.device, amp: str) -> contextlib.AbstractContextManager[Any]:
    """Mixed precision on CUDA (``amp`` in bf16/fp16), and bf16 on a CPU chosen for it
    (``crnn.engine.cpu_precision``); a no-op otherwise or for "none"."""
    if device.type == "cpu" and amp == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if device.type != "cuda" or amp not in AMP_DTYPES:
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=AMP_DTYPES[amp])


def cpu_bf16_units(cpuinfo: str | None = None) -> list[str]:
    """The bfloat16 units this x86 CPU has (``avx512_bf16``, ``amx_bf16`` in
    /proc/cpuinfo's flags); empty where bf16 would only be emulated (AVX2-only CPUs
    run the bf16 train step at 0.06x fp32)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return []
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return sorted(flags & {"avx512_bf16", "amx_bf16"})
