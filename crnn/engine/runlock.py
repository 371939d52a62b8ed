"""One run per run directory: a lock file that rank 0 holds while it trains.

Two trainings writing one ``output_dir`` overwrite each other's ``last.pt`` and
``best.pt`` and interleave their logs; it happens when ``srun --ntasks=2`` starts two
copies of a script that does not set up distributed training, or when a run is started
twice by mistake. ``RUN_DIR/.run.lock`` holds the owner's host, pid and start time, and
is touched every :data:`HEARTBEAT_S` seconds; a second run is refused with a message
naming the first. A lock whose process is gone (same host) or whose heartbeat stopped
(another host: a killed job) is stale and taken over, so a crash never blocks a resume.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
HEARTBEAT_S = 30.0
# A lock not touched for this long belongs to a run that is gone.
STALE_S = 4 * HEARTBEAT_S


class RunDirectoryBusy(RuntimeError):
    """Another training run is writing to this run directory."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """Held by rank 0 for the length of :meth:`Trainer.fit`; a context manager."""

    def __init__(self, run_dir: str | os.PathLike[str], heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}

    def _owner(self) -> dict[str, Any] | None:
        """The current holder, or None when the lock is free or stale."""
        try:
            age = time.time() - self.path.stat().st_mtime
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            owner = json.loads(text)
        except ValueError:
            # Created this instant by another process that has not written it yet.
            return {"host": "?", "pid": "?", "started": time.time()} if age < 5 else None
        if owner.get("host") == self.me["host"]:
            if owner.get("pid") == self.me["pid"] or not _alive(int(owner.get("pid") or -1)):
                return None
            return owner
        return None if age > STALE_S else owner

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:  # O_EXCL: of two runs starting at once, one creates it
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                if owner is not None:
                    self._busy(owner)
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()  # stale, or our own from before a resume
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.me, f)
            break
        self._thread = threading.Thread(target=self._beat, name="crnn-run-lock", daemon=True)
        self._thread.start()

    def _busy(self, owner: dict[str, Any]) -> None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("started", 0)))
        raise RunDirectoryBusy(
            f"another training run (pid {owner.get('pid')} on {owner.get('host')}, started "
            f"{since}) is writing to {self.path.parent}; two runs would overwrite each "
            "other's checkpoints. Choose another --output-dir, or wait for it to end. "
            "Under SLURM, start one distributed run with srun (its tasks join one run) "
            f"rather than independent copies; if no run is using the folder, delete {self.path}"
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                os.utime(self.path)
            except OSError:
                return

    def release(self) -> None:
        self._stop.set()
        try:
            owner = json.loads(self.path.read_text(encoding="utf-8"))
            if owner.get("pid") == self.me["pid"] and owner.get("host") == self.me["host"]:
                self.path.unlink()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> RunLock:
        if self._thread is None:
            self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
