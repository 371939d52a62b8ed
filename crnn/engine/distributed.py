"""Who am I in a (possibly distributed) run: data, not globals.

``torchrun`` (and the launcher in :mod:`crnn.engine.launch`) set ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE``; under SLURM's ``srun`` the same facts come from
``SLURM_PROCID``, ``SLURM_LOCALID`` and ``SLURM_STEP_NUM_TASKS``, and the rendezvous
from ``SLURM_STEP_NODELIST``/``SLURM_JOB_ID`` (:func:`slurm_env`), as Lightning reads
them. :func:`init_distributed` reads them, selects this process's device *before* any
CUDA work, joins the process group and returns a frozen :class:`DistInfo`. Global rank
(which shard of data, who logs) and local rank (which GPU on this machine) are different
numbers and are never mixed up.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    backend: str = ""  # "" when not distributed

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def expand_hostlist(nodelist: str) -> Iterator[str]:
    """The hosts of a SLURM host list, in order, as ``scontrol show hostnames`` prints them:
    ``"gpu[03-05,9],cpu1"`` -> gpu03 gpu04 gpu05 gpu9 cpu1; several bracket groups in one
    name multiply out, ``"rack[1-2]-node[01-02]"`` -> rack1-node01 rack1-node02
    rack2-node01 rack2-node02 (ranges keep their zero padding)."""
    for entry in _top_level_entries(nodelist.strip()):
        parts = re.split(r"(\[[^\]]*\])", entry)
        choices: list[list[str]] = []
        for part in parts:
            if part.startswith("[") and part.endswith("]"):
                choices.append(list(_expand_ranges(part[1:-1])))
            elif part:
                choices.append([part])
        yield from ("".join(p) for p in itertools.product(*choices))


def _top_level_entries(nodelist: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, c in enumerate(nodelist):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            out.append(nodelist[start:i])
            start = i + 1
    out.append(nodelist[start:])
    return [e for e in out if e]


def _expand_ranges(spec: str) -> Iterator[str]:
    for item in spec.split(","):
        lo, sep, hi = item.partition("-")
        if not sep:
            yield lo
            continue
        width = len(lo) if lo.startswith("0") else 0
        for n in range(int(lo), int(hi) + 1):
            yield str(n).zfill(width)


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list: ``"gpu[03-05,9],cpu1"`` -> ``"gpu03"``,
    ``"rack[1-2]-node[01-04]"`` -> ``"rack1-node01"``."""
    return next(expand_hostlist(nodelist), nodelist.strip())


def slurm_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The torchrun-style variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``) of a process started by ``srun`` with several
    tasks, or ``{}`` outside an ``srun`` step of more than one task.

    Only an ``srun`` step counts (``SLURM_STEP_NUM_TASKS``): a batch script itself
    runs one process even when the allocation has many tasks. ``MASTER_ADDR`` is the
    step's first node, ``MASTER_PORT`` 15000 + the job id's last four digits (the
    convention of Lightning), unless either is already set."""
    env = os.environ if environ is None else environ
    tasks = env.get("SLURM_STEP_NUM_TASKS", "")
    if not tasks.isdigit() or int(tasks) < 2 or "SLURM_PROCID" not in env:
        return {}
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
    job = "".join(ch for ch in env.get("SLURM_JOB_ID", "0") if ch.isdigit()) or "0"
    return {
        "RANK": env["SLURM_PROCID"],
        "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
        "WORLD_SIZE": tasks,
        "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes),
        "MASTER_PORT": env.get("MASTER_PORT") or str(15000 + int(job[-4:])),
    }


def env_rank() -> tuple[int, int, int] | None:
    """``(rank, local_rank, world_size)`` from a launcher's environment (torchrun, our
    own launcher, or SLURM's ``srun``, whose variables are then also exported for
    ``init_process_group``), or None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        slurm = slurm_env()
        if not slurm:
            return None
        os.environ.update(slurm)  # env:// rendezvous, as torchrun would have set it
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    return rank, local, world


def select_device(devices: list[torch.device], local_rank: int) -> torch.device:
    """The device of the process with ``local_rank`` on this machine.

    ``devices`` are this machine's devices in ``--gpus`` order, so local rank ``i`` gets
    the ``i``-th listed GPU (``--gpus 2,3``: local rank 1 -> ``cuda:3``). On the CPU every
    rank uses the CPU. A process that sees exactly one GPU uses it whatever its local rank
    (the scheduler bound one GPU to each process). The *local* rank picks a GPU; the *global*
    rank picks data and
    decides who writes, and the two differ on every node but the first.
    """
    if not devices:
        raise ValueError("no devices given; expected the CPU or a list of CUDA devices")
    if devices[0].type == "cpu":
        return torch.device("cpu")
    if local_rank >= 1 and len(devices) == 1 and torch.cuda.device_count() == 1:
        # One GPU per process, bound by the scheduler (SLURM --gpus-per-task=1,
        # Kubernetes device plugins): every rank sees exactly its own GPU as cuda:0.
        log.info(
            "local rank %d sees one GPU (CUDA_VISIBLE_DEVICES=%s): using it",
            local_rank,
            os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
        )
        return devices[0]
    if not 0 <= local_rank < len(devices):
        raise RuntimeError(
            f"local rank {local_rank} has no GPU: this machine offers {len(devices)} "
            f"({', '.join(str(d) for d in devices)}); start at most that many processes per "
            "node (torchrun --nproc-per-node) or list more GPUs with --gpus"
        )
    return devices[local_rank]


def init_distributed(
    devices: list[torch.device] | None = None,
    backend: str = "",
    timeout_s: int = 600,
) -> DistInfo:
    """Set up this process: pick its device and, when launched with several ranks,
    join the process group.

    Args:
        devices: the devices of this machine, indexed by local rank (default: every
            visible GPU, or the CPU when there is none).
        backend: ``nccl``/``gloo``; default nccl on CUDA, gloo on CPU.
        timeout_s: seconds a collective may wait for the other ranks before it fails
            (a rank that hangs then ends the run instead of stalling it forever).
    """
    if devices is None:
        n = torch.cuda.device_count()
        devices = [torch.device("cuda", i) for i in range(n)] or [torch.device("cpu")]
    ranks = env_rank()
    if ranks is None or ranks[2] == 1:
        device = devices[0]
        if device.type == "cuda":
            torch.cuda.set_device(device)
        return DistInfo(device=device)
    rank, local_rank, world = ranks
    device = select_device(devices, local_rank)
    if device.type == "cuda":
        # Before any CUDA work: otherwise every rank creates a context on GPU 0.
        torch.cuda.set_device(device)
    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise ValueError(
            "dist.backend=nccl needs GPUs; use gloo (or leave it empty) with --gpus cpu"
        )
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {}
        if device.type == "cuda" and backend == "nccl":
            # Binds the communicator to this GPU (eager init, no guessing by rank).
            kwargs["device_id"] = device
        try:
            dist.init_process_group(
                backend=backend,
                rank=rank,
                world_size=world,
                timeout=datetime.timedelta(seconds=timeout_s),
                **kwargs,
            )
        except Exception as e:  # NCCL's words for two ranks on one GPU are cryptic
            shared = re.search(r"Duplicate GPU detected\s*:\s*rank (\d+) and rank (\d+)", str(e))
            if not shared:
                raise
            a, b = sorted(int(x) for x in shared.groups())
            raise RuntimeError(
                f"ranks {a} and {b} of this machine were given the same GPU ({device}, "
                f"{torch.cuda.device_count()} visible to each): NCCL cannot run two ranks on "
                "one GPU. Start at most one process per GPU (torchrun --nproc-per-node, srun "
                "--ntasks-per-node), or give each task its own GPU (srun --gpus-per-task=1)"
            ) from None
    log.debug("rank %d/%d (local %d) on %s via %s", rank, world, local_rank, device, backend)
    return DistInfo(
        rank=rank, local_rank=local_rank, world_size=world, device=device, backend=backend
    )


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.distributed:
        if info.backend == "nccl":
            dist.barrier(device_ids=[info.device.index])
        else:
            dist.barrier()


def all_reduce_sum(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum a tensor over ranks (returns a new tensor on the original device)."""
    if not info.distributed:
        return t
    orig = t.device
    # Metrics are float64 on the CPU; NCCL needs them on the GPU. A copy either way:
    # .to() returns the caller's own tensor when it is already there, and all_reduce
    # works in place.
    work = t.to(info.device, copy=True) if info.backend == "nccl" else t.clone()
    dist.all_reduce(work, op=dist.ReduceOp.SUM)
    return work.to(orig)


def gather_to_main(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj`` (picklable) on rank 0, in rank order; ``[]`` elsewhere, and
    ``[obj]`` when not distributed."""
    if not info.distributed:
        return [obj]
    out: list[Any] = [None] * info.world_size if info.is_main else []
    dist.gather_object(obj, out if info.is_main else None, dst=0)
    return out


def broadcast_from_main(obj: Any, info: DistInfo) -> Any:
    """Rank 0's ``obj`` (picklable) on every rank: for what only rank 0 can read, as its
    run directory may be on a disk the other nodes do not share."""
    if not info.distributed:
        return obj
    box = [obj if info.is_main else None]
    dist.broadcast_object_list(box, src=0, device=info.device if info.backend == "nccl" else None)
    return box[0]


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True on every rank if ``flag`` is true on any rank."""
    if not info.distributed:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], dtype=torch.float64)
    return bool(all_reduce_sum(t, info).item() > 0)


def sync_buffers(module: nn.Module, info: DistInfo) -> None:
    """Copy rank 0's buffers (BatchNorm running statistics) to every rank.

    DDP broadcasts buffers at the start of each forward, and each rank then updates
    them with its own micro-batch, so after training they differ slightly between
    ranks; evaluation must use one model everywhere, the one rank 0 saves."""
    if not info.distributed:
        return
    with torch.no_grad():
        for buf in module.buffers():
            dist.broadcast(buf, src=0)
