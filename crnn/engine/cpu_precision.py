"""bf16 on the CPU where it is measurably faster than fp32 (``train.cpu_bf16``).

On a CPU with bfloat16 units (AVX512-BF16, AMX) autocast in bf16 ran the Chinese model's
train step at 1.88x fp32 (1.46x the whole training, generator included, at the same
accuracy: docs/training/crnn_zh.md); on an AVX2-only CPU bf16 is emulated and ran at 0.06x. So
``"auto"`` (the default) times both on the run's first batch where the CPU has the units
and keeps bf16 only when it is at least 10 % faster; ``true`` forces it, ``false`` never.
The LSTMs and the CTC loss stay in fp32 either way (``crnn/model/__init__.py``, ``crnn/ctc``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from crnn.precision import cpu_bf16_units

log = logging.getLogger(__name__)

# bf16 must beat fp32 by this factor to be kept (timing noise on a shared machine).
MARGIN = 0.9


def decide(
    setting: Any,
    device: torch.device,
    make_step: Callable[[], Callable[[str], None]],
    cpuinfo: str | None = None,
    distributed: bool = False,
) -> str:
    """``"bf16"`` or ``"none"`` for a CPU run; ``make_step()`` gives the probe, a function
    running one training step's forward and backward under an autocast (built only when
    timing is needed). Several processes (DDP) do not time: ``auto`` is fp32 there."""
    if device.type != "cpu" or setting is False:
        return "none"
    if setting is True:
        log.info("train.cpu_bf16=true: training under bf16 autocast on the CPU")
        return "bf16"
    units = cpu_bf16_units(cpuinfo)
    if not units:
        log.info(
            "training in fp32: this CPU has no bfloat16 units (avx512_bf16, amx_bf16), so "
            "bf16 would be emulated and slower (train.cpu_bf16)"
        )
        return "none"
    if distributed:
        log.info(
            "training in fp32: train.cpu_bf16=auto does not time bf16 in a distributed run "
            "(set train.cpu_bf16=true to use it)"
        )
        return "none"
    step = make_step()
    t32, t16 = _time(step, "none"), _time(step, "bf16")
    use = t16 < MARGIN * t32
    log.info(
        "bf16 autocast on this CPU (%s): %.2fx the fp32 step (%.3f s against %.3f s): %s",
        "+".join(units),
        t32 / t16,
        t16,
        t32,
        "training in bf16" if use else "training in fp32",
    )
    return "bf16" if use else "none"


def _time(step: Callable[[str], None], amp: str, repeats: int = 3) -> float:
    step(amp)  # warm-up: kernels, allocator
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(amp)
        best = min(best, time.perf_counter() - t0)
    return best


def probe(trainer: Any) -> Callable[[str], None]:
    """One forward and backward pass of ``trainer``'s module on one of its batches, under
    a given autocast; gradients are dropped, BatchNorm statistics and the random states
    put back, so the probe leaves the run as it found it (drawing a batch seeds a loader
    iterator from torch's generator: left advanced, the run that follows was another)."""
    from crnn.engine.data import to_device
    from crnn.engine.state import rng_state, set_rng_state

    rng = rng_state()
    batch = next(iter(trainer.data.loader))
    if isinstance(batch, list):  # the width-sorted stream gives samples, not a batch
        from crnn.data.batching import collate

        batch = collate(batch)
    inputs = to_device(batch, trainer.device)
    module = getattr(trainer.train_module, "module", trainer.train_module)
    buffers = {
        k: v.clone()
        for k, v in trainer.model.state_dict().items()
        if "running" in k or "num_batches" in k
    }

    def step(amp: str) -> None:
        old = getattr(module, "amp", "none")
        module.amp = amp
        try:
            module(*inputs).mean().backward()
        finally:
            module.amp = old
            trainer.optimizer.zero_grad(set_to_none=True)
            trainer.model.load_state_dict(buffers, strict=False)
            set_rng_state(rng)

    return step


def apply(trainer: Any) -> None:
    """Decide ``trainer``'s CPU precision (``train.cpu_bf16``) and set it on its module."""
    trainer.amp = decide(
        trainer.cfg.train.cpu_bf16,
        trainer.device,
        lambda: probe(trainer),
        distributed=trainer.info.distributed,
    )
    getattr(trainer.train_module, "module", trainer.train_module).amp = trainer.amp
