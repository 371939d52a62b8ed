"""From ``--gpus``/``--nproc`` to running processes.

* Started by ``torchrun`` (``RANK``/``WORLD_SIZE`` set): join that run.
* Several GPUs with DDP (or ``--gpus cpu --nproc N``): start one process per device
  with PyTorch's own elastic launcher (the engine behind ``torchrun``), each running the
  command the CLI gives (:class:`ChildProcess`), which then takes the first branch.
* Otherwise one process: one device, or DataParallel over the listed GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.distributed.elastic.multiprocessing.errors import ErrorHandler, ProcessFailure, record

from crnn.config import Config
from crnn.config.devices import Devices, DeviceSpecError, parse_devices
from crnn.engine.distributed import cleanup, env_rank, init_distributed
from crnn.engine.faults import FaultInjection, write_rank_record
from crnn.engine.logging import run_log_file

_T = TypeVar("_T")

log = logging.getLogger(__name__)


class LaunchError(RuntimeError):
    """Bad device selection or launch request: nothing was trained."""


class DistributedRunError(LaunchError):
    """A rank of a multi-process run failed; the message names it and the cause."""


# Seconds the ranks get to finish their step and save after Ctrl-C/SIGTERM reaches the
# launcher, before it kills them (checkpoints are atomic, so even then last.pt is whole).
# PyTorch versions whose LaunchConfig has no shutdown_timeout use their own 30 s.
SHUTDOWN_GRACE_S = 60


def parse_gpus(spec: str | None, nproc: int | None = None) -> Devices:
    """``--gpus``/``--nproc`` for training (:func:`crnn.config.devices.parse_devices`,
    the GPUs PyTorch sees; under torchrun every visible GPU by default)."""
    try:
        return parse_devices(spec, nproc, torch.cuda.device_count, env_rank() is not None)
    except DeviceSpecError as e:
        raise LaunchError(str(e)) from None


def run_training(
    cfg: Config,
    devices: Devices,
    resume: str | None = None,
    child: ChildProcess | None = None,
    **fit_kwargs: Any,
) -> Any:
    """Train with ``cfg`` on ``devices``; returns the trainer's ``FitResult``, or a
    :class:`LaunchResult` from the process that started the ranks.

    Started by a launcher (``RANK``/``WORLD_SIZE`` set), this process is one rank. Else
    DDP over several devices starts ``child`` once per device (:func:`launch`); anything
    else trains here. Every rule the run must satisfy is checked first
    (:meth:`Config.validate`), before any process starts. ``fit_kwargs`` go to
    :meth:`Trainer.fit` (``stop_at_step``, ``time_limit_s``).
    """
    out = Path(cfg.train.output_dir)
    if out.exists() and not out.is_dir():
        raise LaunchError(
            f"train.output_dir={str(out)!r} is a file, not a folder; choose another run "
            "directory (--output-dir or --set train.output_dir=...)"
        )
    ranks = env_rank()
    n_devices = devices.nproc if devices.kind == "cpu" else len(devices.ids)
    world = ranks[2] if ranks is not None else (n_devices if cfg.dist.strategy == "ddp" else 1)
    cfg.validate(world, devices.kind, 1 if ranks is not None else n_devices)
    if ranks is not None:  # one rank of torchrun or of our own launch
        # Recorded from the first line: a rank that fails while it sets up (no GPU for
        # its local rank, NCCL's init) is named with its error, not "no exception".
        return run_recorded(lambda: _run_rank(cfg, devices, resume, fit_kwargs))
    # Checked once here, before any process starts: a bad charset file is one message,
    # not one traceback per rank.
    from crnn.text.alphabet import Charset

    Charset.from_spec(cfg.data.charset, cfg.data.case_fold, cfg.data.bidi)
    if world > 1:
        if child is None:
            raise LaunchError("a multi-process run needs the command that starts one rank")
        return launch(child, world, devices, Path(cfg.train.output_dir) / "logs")
    info = init_distributed(devices.torch_devices())
    device_ids = devices.ids if devices.kind == "cuda" and cfg.dist.strategy == "dp" else None
    with run_log_file(Path(cfg.train.output_dir) / "train.log"):
        return _fit(trainer_class(cfg)(cfg, info, resume=resume, device_ids=device_ids), fit_kwargs)


def trainer_class(cfg: Config) -> Any:
    """The loop for the config's task: the recognizer's Trainer or the DetTrainer."""
    if cfg.task == "detect":
        from crnn.engine.det_trainer import DetTrainer

        return DetTrainer
    from crnn.engine.trainer import Trainer

    return Trainer


def _run_rank(cfg: Config, devices: Devices, resume: str | None, fit_kwargs: dict[str, Any]) -> Any:
    info = init_distributed(devices.torch_devices(), cfg.dist.backend, cfg.dist.timeout_s)
    try:
        with run_log_file(Path(cfg.train.output_dir) / "train.log", info.is_main):
            return _fit(trainer_class(cfg)(cfg, info, resume=resume), fit_kwargs)
    finally:
        cleanup()


def _fit(trainer: Any, fit_kwargs: dict[str, Any]) -> Any:
    for fault in FaultInjection.all_from_env():  # tests of failure handling only
        trainer.step_callbacks.append(fault.maybe_fire)
    return trainer.fit(**fit_kwargs)


@dataclass
class LaunchResult:
    """How a launch ended (failures raise :class:`DistributedRunError` instead).

    ``signal`` names the signal that stopped the launcher itself. torch's launch agent
    then deliberately leaves its rendezvous (a TCPStore server thread) running, and
    tearing that down at interpreter exit sometimes aborts the process ("terminate
    called without an active exception", exit -6 instead of 130): a command-line caller
    should flush its output and leave with ``os._exit``."""

    interrupted: bool
    signal: str = ""


# ---- failures of launched ranks -------------------------------------------------------

# Words of the errors a rank gets when *another* rank died or hung: symptoms, not causes.
_PEER_LOST = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "remote process exited",
    "connection refused",
    "communicator was aborted",
    "socket closed",
)
_PEER_TIMEOUT = ("timed out", "timeout")


def peer_failure(e: BaseException) -> str:
    """What ``e`` says about the *other* ranks: ``"lost"`` (one died), ``"timeout"``
    (one stopped answering within ``dist.timeout_s``) or ``""`` (a failure of its own)."""
    import torch.distributed as dist

    text = str(e).lower()
    if any(w in text for w in _PEER_TIMEOUT):
        return "timeout"
    if isinstance(e, getattr(dist, "DistNetworkError", ())) or any(w in text for w in _PEER_LOST):
        return "lost"
    return ""


class _RankErrorHandler(ErrorHandler):
    """Writes a rank's exception to the file the elastic agent collects
    (``TORCHELASTIC_ERROR_FILE``), adding what the launcher needs to tell the cause of a
    failure from its echoes: the precise time and whether it was a lost peer."""

    def record_exception(self, e: BaseException) -> None:
        write_rank_record(f"{type(e).__name__}: {e}", peer_failure(e), traceback.format_exc())


def run_recorded(fn: Callable[[], _T]) -> _T:
    """Run ``fn`` in a launched rank; an exception is recorded for the launcher (which
    names the rank and the exception in its message) and then re-raised."""
    return record(fn, error_handler=_RankErrorHandler())()  # type: ignore[return-value]


def record_rank_error(e: BaseException) -> None:
    """Record an error a rank handled itself (e.g. a bad config) for the launcher."""
    if env_rank() is not None:
        _RankErrorHandler().record_exception(e)


_SIGNAL_HINTS = {
    "SIGKILL": " (if nobody killed it, the kernel's out-of-memory killer may have: see dmesg)",
    "SIGSEGV": " (a crash in native code)",
    "SIGABRT": " (aborted, e.g. by a CUDA or NCCL error)",
}


# What PyTorch's NCCL watchdog writes before it aborts a rank stuck in a collective.
_WATCHDOG_WORDS = (
    "watchdog caught collective operation timeout",
    "processgroupnccl's watchdog",
    "watchdog thread terminated",
    "collective operation timeout",
)
# Signals the launcher itself sends to stop the ranks that are still running.
_STOP_SIGNALS = ("SIGTERM", "SIGKILL")
# What a rank raises when the launcher's stop reached its DataLoader workers before it
# (PyTorch versions or loaders that do not ignore it): the stop, not a failure.
_WORKER_STOPPED = ("dataloader worker", "killed by signal: terminated")
# Seconds between the first failure and a SIGKILL that counts as the launcher's own
# stop of a survivor (it kills what did not stop within its grace, 30 s in torch).
_LATER_S = 1.0


def _recorded_text(f: ProcessFailure) -> str:
    if isinstance(f.message, dict) and f.message.get("message"):
        lines = str(f.message["message"]).strip().splitlines()
        return lines[0][:500] if lines else ""
    return ""


def describe_failures(
    failures: dict[int, ProcessFailure],
    nproc: int | None = None,
    logs: dict[int, str] | None = None,
) -> str:
    """One message for the failed ranks (keys: global ranks): the cause first, then the
    ranks that only failed because of it (lost their peer, timed out waiting for it, or
    were stopped by the launcher).

    Args:
        nproc: processes started on this machine. On NCCL the survivors of a failure
            block inside a CUDA sync, cannot run Python, and may never be reported as
            failed; ranks of this machine missing from ``failures`` are then named.
        logs: the end of each rank's stderr (keys: global ranks). A rank aborted
            (SIGABRT) by NCCL's watchdog has no Python exception, only the watchdog's
            words there: it timed out waiting for a peer, it did not crash.
    """
    logs = logs or {}
    rows = []
    for rank, f in failures.items():
        data = f.error_file_data if isinstance(f.error_file_data, dict) else {}
        extra = data.get("crnn", {})
        text = _recorded_text(f)
        signame = f.signal_name() if f.exitcode < 0 else ""
        peer = extra.get("peer", "")
        if text and all(w in text.lower() for w in _WORKER_STOPPED):
            peer = "stopped"
        watchdog = (
            signame == "SIGABRT"
            and not text
            and any(w in logs.get(rank, "").lower() for w in _WATCHDOG_WORDS)
        )
        rows.append((rank, f, text, signame, "timeout" if watchdog else peer, watchdog, extra))
    # The others timed out waiting: a rank that was then killed had hung, not crashed.
    hung = any(r[4] == "timeout" for r in rows)
    # A failure of its own: an exception or exit code, or a crash by a signal that the
    # launcher does not send. The launcher's stops that follow one are echoes.
    own = any(
        not peer and (text or not signame or signame not in _STOP_SIGNALS)
        for _, _, text, signame, peer, _, _ in rows
    )
    # Without a failure of its own, the first to fail is the cause: the launcher SIGKILLs
    # survivors that ignored its SIGTERM (blocked in a CUDA call) well after it.
    first = min((float(r[6].get("time", r[1].timestamp)) for r in rows if not r[4]), default=0.0)
    out = []
    for rank, f, text, signame, peer, watchdog, extra in rows:
        echo = bool(peer)
        when = float(extra.get("time", f.timestamp))
        if peer == "stopped":
            what = (
                text
                if text.startswith("stopped")
                else f"was stopped by the launcher (its data workers got the stop first: {text})"
            )
        elif text:
            what = f"raised {text}"
            if signame:
                what += f" (and was then stopped by {signame})"
        elif watchdog:
            what = (
                "timed out waiting for a peer (NCCL's watchdog aborted it after "
                "dist.timeout_s; see its log)"
            )
        elif signame and hung:
            what = (
                f"stopped responding (the other ranks timed out waiting for it, after "
                f"dist.timeout_s) and was killed by the launcher ({signame})"
            )
        elif signame in _STOP_SIGNALS and (own or when - first > _LATER_S):
            what = f"was stopped by the launcher ({signame})"
            if not own:
                what += ", having not stopped on SIGTERM (blocked waiting for the failed rank?)"
            echo = True
        elif signame:
            what = f"was killed by signal {signame}{_SIGNAL_HINTS.get(signame, '')}"
            echo = signame == "SIGTERM" and not hung
        else:
            what = f"exited with code {f.exitcode} (no exception recorded; see its log above)"
        out.append(
            (echo, when, rank, f"rank {rank} (local rank {f.local_rank}, pid {f.pid}) {what}")
        )
    if hung and nproc and failures:
        # On NCCL the rank that hung is often not among the failures at all: the
        # launcher stopped it after the others were aborted.
        any_rank, f0 = next(iter(failures.items()))
        base = any_rank - f0.local_rank
        seen = {f.local_rank for f in failures.values()}
        for lr in sorted(set(range(nproc)) - seen):
            what = (
                "stopped responding (the other ranks timed out waiting for it, after "
                "dist.timeout_s) and was stopped by the launcher"
            )
            out.append((False, 0.0, base + lr, f"rank {base + lr} (local rank {lr}) {what}"))
    elif nproc and failures:
        # Older agents (torch 2.4) do not list a rank they stopped after another failed:
        # name it as what it is, stopped because of the failure, never as a cause.
        any_rank, f0 = next(iter(failures.items()))
        base = any_rank - f0.local_rank
        seen = {f.local_rank for f in failures.values()}
        for lr in sorted(set(range(nproc)) - seen):
            what = "was stopped by the launcher after that failure"
            out.append(
                (True, float("inf"), base + lr, f"rank {base + lr} (local rank {lr}) {what}")
            )
    out.sort()
    causes = [r for r in out if not r[0]] or out[:1]
    echoes = [r for r in out if r not in causes]
    msg = "distributed training failed: " + "; ".join(r[3] for r in causes)
    if echoes:
        msg += ". Then, as a consequence: " + "; ".join(r[3] for r in echoes)
    return msg + ". The last checkpoint, if any, is intact (resume with --resume RUN_DIR)."


def _log_tails(log_dir: str | os.PathLike[str], ranks: Any, size: int = 16384) -> dict[int, str]:
    """The last ``size`` bytes of each rank's stderr log (see :func:`launch`)."""
    out = {}
    for rank in ranks:
        path = Path(log_dir) / f"rank{rank}.stderr"
        with contextlib.suppress(OSError), open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            out[rank] = f.read().decode("utf-8", "replace")
    return out


def _supported(cls: Any, **kwargs: Any) -> dict[str, Any]:
    """The ``kwargs`` that this PyTorch's dataclass ``cls`` accepts (feature detection,
    not version numbers: e.g. ``LaunchConfig.shutdown_timeout`` is missing from 2.4 and
    2.11, where the agent's own 30 s grace applies)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in kwargs.items() if k in fields}


def local_launch_config(nproc: int, name: str = "crnn") -> Any:
    """torch's elastic ``LaunchConfig`` for ``nproc`` processes on this machine, no
    restarts: its agent binds the rendezvous store on a port the kernel picks and holds it
    (a port picked, closed and handed on can be taken by another process in between)."""
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"{name}-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.5,
        **_supported(LaunchConfig, shutdown_timeout=SHUTDOWN_GRACE_S),
    )


@dataclass(frozen=True)
class ChildProcess:
    """How to start one rank: its command line and the environment variables to add.

    The CLI supplies it (the engine does not know which program trains); the launcher's
    own environment is left untouched."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def launch(
    child: ChildProcess,
    nproc: int,
    devices: Devices | None = None,
    log_dir: str | os.PathLike[str] | None = None,
) -> LaunchResult:
    """Run ``child`` in ``nproc`` processes on this machine and wait for them.

    Each process gets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` (plus ``child.env``) and
    joins the run. When one fails, the others are stopped (SIGTERM, then SIGKILL) and
    :class:`DistributedRunError` names the failed rank and why. Ctrl-C (SIGINT) or
    SIGTERM here is passed on to every rank, which finish their step, save ``last.pt``
    once (rank 0) and exit; the result then says ``interrupted`` and names the
    ``signal`` (see :class:`LaunchResult` for what the caller should then do).

    Each rank's stderr also goes to ``log_dir/rankN.stderr`` (``bash`` and ``tee``, when
    there), unchanged on the console: what a rank aborted by native code (NCCL's
    watchdog) last said is all there is to tell why it stopped.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    config = local_launch_config(nproc)
    # `env NAME=VALUE... command`: the children get child.env, this process keeps its own.
    command = list(child.command)
    bash, tee = shutil.which("bash"), shutil.which("tee")
    if log_dir is not None and bash and tee:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        # exec: the rank keeps the pid the launcher signals. tee ignores Ctrl-C and
        # SIGTERM sent to the whole group (it must not die before the rank has said why
        # it stops) and ends when the rank's stderr closes, so it outlives an abort.
        keep = (
            'exec "$@" 2> >(trap "" INT TERM; exec tee -a "$CRNN_RANK_LOGS/rank$RANK.stderr" >&2)'
        )
        command = [bash, "-c", keep, "crnn-rank", *command]
    env = {**child.env, **({"CRNN_RANK_LOGS": str(log_dir)} if log_dir is not None else {})}
    args = [f"{k}={v}" for k, v in env.items()] + command
    where = (
        f"GPUs {','.join(map(str, devices.ids))}"
        if devices is not None and devices.kind == "cuda"
        else "the CPU (gloo)"
    )
    log.info("starting %d processes (DDP) on %s", nproc, where)
    try:
        elastic_launch(config, entrypoint=shutil.which("env") or "/usr/bin/env")(*args)
    except ChildFailedError as e:
        if all(f.exitcode == 130 for f in e.failures.values()):
            return LaunchResult(interrupted=True)
        logs = _log_tails(log_dir, e.failures) if log_dir is not None else {}
        raise DistributedRunError(describe_failures(e.failures, nproc, logs)) from None
    except SignalException as e:
        # The agent has already passed the signal on and waited for the ranks to save.
        name = signal.Signals(e.sigval).name
        log.warning("%s: every rank was told to stop after saving its step", name)
        return LaunchResult(interrupted=True, signal=name)
    return LaunchResult(interrupted=False)
