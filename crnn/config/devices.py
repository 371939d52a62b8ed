"""``--gpus`` and ``--nproc`` as every command reads them (training, prediction,
evaluation): one parser, so ``--gpus all``, ``0,1`` and ``cpu`` mean the same everywhere.
No PyTorch: the caller says how many GPUs it sees."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class DeviceSpecError(ValueError):
    """A ``--gpus``/``--nproc`` that cannot be run; the message says what to give."""


@dataclass(frozen=True)
class Devices:
    """What ``--gpus``/``--nproc`` asked for."""

    kind: str = "cpu"  # cpu | cuda
    ids: list[int] = field(default_factory=list)  # CUDA ordinals among the visible devices
    nproc: int = 1  # processes on the CPU

    def torch_devices(self) -> list[Any]:
        import torch

        if self.kind == "cpu":
            return [torch.device("cpu")]
        return [torch.device("cuda", i) for i in self.ids]


def parse_devices(
    spec: str | None,
    nproc: int | None,
    visible: Callable[[], int],
    launched: bool = False,
) -> Devices:
    """``None`` (default), ``"cpu"``, ``"all"`` or ``"0,1"``, and ``--nproc`` for CPU
    processes. ``visible()``: how many GPUs this process sees (asked only when needed).

    GPU numbers index the devices CUDA lets this process see, so they honour
    ``CUDA_VISIBLE_DEVICES`` (``CUDA_VISIBLE_DEVICES=2,3 --gpus 0,1`` uses physical 2, 3).
    The default is GPU 0 if there is one, else the CPU; under a launcher (``launched``:
    torchrun, srun) it is every visible GPU, local rank ``i`` taking the ``i``-th."""
    if spec is None:
        n = visible()
        spec = ("all" if launched else "0") if n else "cpu"
    spec = spec.strip().lower()
    if spec == "cpu":
        if nproc is not None and nproc < 1:
            raise DeviceSpecError(f"--nproc must be >= 1, got {nproc}")
        return Devices("cpu", [], nproc or 1)
    if nproc is not None:
        raise DeviceSpecError(
            f"--nproc {nproc} is for --gpus cpu; with --gpus {spec} one process runs per listed GPU"
        )
    n_visible = visible()
    if spec == "all":
        ids = list(range(n_visible))
    else:
        try:
            ids = [int(s) for s in spec.split(",") if s.strip()]
        except ValueError:
            raise DeviceSpecError(
                f"--gpus {spec!r}: expected GPU numbers like 0 or 0,1, or 'all' or 'cpu'"
            ) from None
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={env})" if env is not None else ""
    if not ids or n_visible == 0:
        raise DeviceSpecError(f"--gpus {spec}: no CUDA GPU is visible{where}; use --gpus cpu")
    bad = [i for i in ids if not 0 <= i < n_visible]
    if bad:
        raise DeviceSpecError(
            f"--gpus {spec}: GPU {bad[0]} does not exist; {n_visible} visible{where}, "
            f"numbered 0..{n_visible - 1} (numbers count the visible GPUs, not physical ones)"
        )
    if len(set(ids)) != len(ids):
        raise DeviceSpecError(f"--gpus {spec}: a GPU is listed twice")
    return Devices("cuda", ids, 1)


def visible_gpus() -> int:
    """How many CUDA GPUs this process sees, without importing PyTorch where it can be
    helped (a reader-only install has none): ``CUDA_VISIBLE_DEVICES`` where set, else
    PyTorch's count where it is installed, else ``nvidia-smi -L``'s, else 0."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    try:
        import torch
    except ImportError:
        pass
    else:
        return int(torch.cuda.device_count())
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
