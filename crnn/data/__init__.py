"""Data: preprocessing, LMDB and folder sources, batching, the synthetic generator."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity on Linux), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ignore_stop_signals(_: int = 0) -> None:
    """``worker_init_fn`` of every DataLoader: a worker ignores SIGINT and SIGTERM.

    Ctrl-C reaches the whole process group, and so does a scheduler's SIGTERM forwarded
    by a launcher (torch's elastic agent signals each rank's process group): a worker
    that died of it first would make its rank fail with "DataLoader worker ... killed by
    signal" before the rank could save. The main process finishes its step, saves and
    shuts its workers down (:func:`stop_workers_at_exit`); a worker whose main process
    is gone exits by itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


_EXIT_HOOK: list[bool] = []


def stop_workers_at_exit() -> None:
    """Make this process kill its daemonic multiprocessing children (DataLoader
    workers, which ignore SIGTERM) when it exits. multiprocessing's own exit handler
    stops them with SIGTERM and then waits for them, which would hang a rank that saved
    after a stop request until its launcher killed it; this one is registered after
    it, so it runs first. Once per process."""
    if _EXIT_HOOK:
        return
    import atexit
    import multiprocessing
    import signal

    def stop() -> None:
        children = [c for c in multiprocessing.active_children() if c.daemon]
        if not children:
            return
        # PyTorch's SIGCHLD handler would report the workers killed here as a failure.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for child in children:
            if child.pid is not None:
                try:
                    os.kill(child.pid, signal.SIGKILL)
                except OSError:
                    pass
                child.join(timeout=5)

    atexit.register(stop)
    _EXIT_HOOK.append(True)
