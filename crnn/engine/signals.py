"""SIGINT/SIGTERM during training: finish the current step, save, stop; and a watchdog
for the rank that cannot.

A scheduler preempting a job (SIGTERM), Ctrl-C, or the launcher stopping the survivors
of a failed rank all reach the training loop as a stop request, which it honours after
its current step. A rank blocked in a collective with a rank that died (NCCL waits in
a CUDA call that no Python signal handler interrupts) never gets there: torch's launch
agent kills it 30 s later, and newer versions report it as failed too. The
:class:`StopWatchdog` cuts that short: the stop signal also wakes a thread (through
``signal.set_wakeup_fd``, which works while the main thread is blocked in C), and when
a sibling rank of this machine has exited while this one has not finished a step for
:data:`STUCK_AFTER_S` seconds, it records why and leaves at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from crnn.io import pid_alive

log = logging.getLogger(__name__)

# Seconds without a finished step, after a stop signal and a sibling rank's exit, before
# the watchdog ends a rank that is blocked waiting for it.
STUCK_AFTER_S = 3.0
# Exit code of a rank the watchdog ends: the launcher's "stopped by a signal" code.
EXIT_STOPPED = 130


def sibling_pids(pid: int | None = None) -> set[int]:
    """The other children of this process's parent (the launcher's ranks on this
    machine), from /proc; empty where there is no /proc."""
    me = os.getpid() if pid is None else pid
    out: set[int] = set()
    ppid = os.getppid()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{ppid}/task"):
            with open(f"/proc/{ppid}/task/{task}/children") as f:
                out.update(int(p) for p in f.read().split())
    return out - {me}


class StopWatchdog:
    """Ends this rank when, after a stop signal, a sibling rank has exited and this rank
    has made no progress (:meth:`beat`) for ``stuck_after_s`` seconds. ``on_exit`` is
    called with the reason before ``os._exit`` (the launcher's error record)."""

    def __init__(self, stuck_after_s: float = STUCK_AFTER_S, on_exit: Any = None) -> None:
        self.stuck_after_s = stuck_after_s
        self.on_exit = on_exit
        self.last_beat = time.monotonic()
        self.siblings: set[int] = set()
        self._rsock, self._wsock = socket.socketpair()
        self._wsock.setblocking(False)
        self._old_fd: int | None = None
        self._thread = threading.Thread(target=self._watch, name="crnn-stop-watchdog", daemon=True)

    def start(self) -> None:
        self.siblings = sibling_pids()
        self._old_fd = signal.set_wakeup_fd(self._wsock.fileno(), warn_on_full_buffer=False)
        self._thread.start()

    def beat(self, *_: Any) -> None:
        """Progress (a finished step); a step callback of the trainer."""
        self.last_beat = time.monotonic()
        if not self.siblings:  # the other ranks may start a moment after this one
            self.siblings = sibling_pids()

    def _watch(self) -> None:
        try:
            self._rsock.recv(1)  # a signal arrived (written by the C-level handler)
        except OSError:
            return
        signalled = time.monotonic()
        while True:
            time.sleep(0.5)
            gone = sorted(p for p in self.siblings if not pid_alive(p))
            idle = time.monotonic() - max(self.last_beat, signalled)
            if gone and idle >= self.stuck_after_s:
                why = (
                    f"stopped by the launcher while blocked for {idle:.0f} s waiting for a rank "
                    f"of this machine that had exited (pid {', '.join(map(str, gone))})"
                )
                if self.on_exit is not None:
                    with contextlib.suppress(Exception):
                        self.on_exit(why)
                os._exit(EXIT_STOPPED)

    def stop(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(self._old_fd if self._old_fd is not None else -1)
        for s in (self._wsock, self._rsock):
            s.close()


class StopRequest:
    """While active, SIGINT/SIGTERM set :attr:`requested` instead of raising; the loop
    checks it after each step (all ranks agree via ``any_rank``). A second SIGINT aborts
    at once with ``KeyboardInterrupt``. With ``watchdog`` (a rank of a multi-process
    run), a :class:`StopWatchdog` watches for the rank that cannot get there."""

    def __init__(self, announce: bool = True, watchdog: StopWatchdog | None = None) -> None:
        self.requested = False
        self.announce = announce  # rank 0 says it; the other ranks just stop
        self.watchdog = watchdog
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
            if self.watchdog is not None:
                self.watchdog.start()
        return self

    def beat(self, *_: Any) -> None:
        if self.watchdog is not None:
            self.watchdog.beat()

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        if not self.announce:
            return
        log.warning(
            "%s received: stopping after the current step and saving a checkpoint "
            "(press Ctrl-C again to abort at once)",
            signal.Signals(signum).name,
        )

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        if self.watchdog is not None and self._old:
            self.watchdog.stop()


def watchdog(info: Any) -> StopWatchdog | None:
    """A :class:`StopWatchdog` for a rank of a multi-process run (None otherwise) that
    tells the launcher why it ended the rank."""
    if not info.distributed:
        return None
    from crnn.engine.faults import write_rank_record

    return StopWatchdog(on_exit=lambda why: write_rank_record(why, "stopped"))
