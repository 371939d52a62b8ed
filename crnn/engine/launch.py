"""From ``--gpus``/``--nproc`` to running processes.

* Started by ``torchrun`` (``RANK``/``WORLD_SIZE`` set): join that run.
* Several GPUs with DDP (or ``--gpus cpu --nproc N``): start one process per device
  with PyTorch's own elastic launcher (the engine behind ``torchrun``), each re-running
  this command line, which then takes the first branch.
* Otherwise one process: one device, or DataParallel over the listed GPUs.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

import torch

from crnn.config import Config
from crnn.engine.distributed import cleanup, env_rank, init_distributed

log = logging.getLogger(__name__)


class LaunchError(RuntimeError):
    """Bad device selection, or a distributed run that failed."""


@dataclass(frozen=True)
class Devices:
    """What ``--gpus``/``--nproc`` asked for."""

    kind: str = "cpu"  # cpu | cuda
    ids: list[int] = field(default_factory=list)  # CUDA ordinals among the visible devices
    nproc: int = 1  # processes on the CPU

    def torch_devices(self) -> list[torch.device]:
        if self.kind == "cpu":
            return [torch.device("cpu")]
        return [torch.device("cuda", i) for i in self.ids]


def parse_gpus(spec: str | None, nproc: int | None = None) -> Devices:
    """``None`` (GPU 0 if any, else CPU), ``"cpu"``, ``"all"`` or ``"0,1"``.

    GPU numbers index the devices CUDA lets this process see, so they honour
    ``CUDA_VISIBLE_DEVICES`` (``CUDA_VISIBLE_DEVICES=2,3 --gpus 0,1`` uses physical 2, 3).
    """
    n_visible = torch.cuda.device_count()
    if spec is None:
        spec = "0" if n_visible else "cpu"
    spec = spec.strip().lower()
    if spec == "cpu":
        if nproc is not None and nproc < 1:
            raise LaunchError(f"--nproc must be >= 1, got {nproc}")
        return Devices("cpu", [], nproc or 1)
    if nproc is not None:
        raise LaunchError("--nproc is for --gpus cpu; with GPUs, one process runs per listed GPU")
    if spec == "all":
        ids = list(range(n_visible))
    else:
        try:
            ids = [int(s) for s in spec.split(",") if s.strip()]
        except ValueError:
            raise LaunchError(
                f"--gpus {spec!r}: expected GPU numbers like 0 or 0,1, or 'all' or 'cpu'"
            ) from None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
    if not ids or n_visible == 0:
        raise LaunchError(f"--gpus {spec}: no CUDA GPU is visible{where}; use --gpus cpu")
    bad = [i for i in ids if not 0 <= i < n_visible]
    if bad:
        raise LaunchError(
            f"--gpus {spec}: GPU {bad[0]} does not exist; {n_visible} visible{where}, numbered 0..{n_visible - 1}"
        )
    if len(set(ids)) != len(ids):
        raise LaunchError(f"--gpus {spec}: a GPU is listed twice")
    return Devices("cuda", ids, 1)


def run_training(
    cfg: Config,
    devices: Devices,
    resume: str | None = None,
    argv: list[str] | None = None,
    **fit_kwargs: Any,
) -> Any:
    """Train with ``cfg`` on ``devices``; returns the trainer's ``FitResult``.

    ``fit_kwargs`` go to :meth:`Trainer.fit` (``stop_at_step``, ``time_limit_s``)."""
    from crnn.engine.trainer import Trainer

    if env_rank() is not None:  # inside torchrun or our own launch
        info = init_distributed(devices.torch_devices(), cfg.dist.backend, cfg.dist.timeout_s)
        try:
            return Trainer(cfg, info, resume=resume).fit(**fit_kwargs)
        finally:
            cleanup()
    n_procs = devices.nproc if devices.kind == "cpu" else len(devices.ids)
    if n_procs > 1 and (cfg.dist.strategy == "ddp" or devices.kind == "cpu"):
        return launch_processes(n_procs, argv if argv is not None else sys.argv[1:])
    info = init_distributed(devices.torch_devices())
    device_ids = devices.ids if devices.kind == "cuda" and cfg.dist.strategy == "dp" else None
    return Trainer(cfg, info, resume=resume, device_ids=device_ids).fit(**fit_kwargs)


@dataclass
class LaunchResult:
    interrupted: bool


def launch_processes(nproc: int, argv: list[str]) -> LaunchResult:
    """Run ``python -m crnn.cli.train argv`` in ``nproc`` processes on this machine."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"crnn-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.5,
    )
    # The children run `python -m crnn.cli.train`: make this crnn importable for them
    # even when it runs from a clone that was never pip-installed.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    log.info("starting %d processes (DDP)", nproc)
    try:
        elastic_launch(config, entrypoint=sys.executable)("-m", "crnn.cli.train", *argv)
    except ChildFailedError as e:
        codes = {f.local_rank: f.exitcode for f in e.failures.values()}
        if codes and all(c == 130 for c in codes.values()):
            return LaunchResult(interrupted=True)
        parts = []
        for rank, f in sorted(e.failures.items()):
            why = f"signal {f.signal_name()}" if f.exitcode < 0 else f"exit code {f.exitcode}"
            parts.append(f"rank {rank} failed with {why}")
        raise LaunchError("distributed training failed: " + "; ".join(parts)) from None
    return LaunchResult(interrupted=False)
