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

from crnn.io import pid_alive

log = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
HEARTBEAT_S = 30.0
# A lock not touched for this long belongs to a run that is gone.
STALE_S = 4 * HEARTBEAT_S
# Tries to create the lock (breaking a stale one in between) before giving up.
ATTEMPTS = 5
# A breaker's turn lasts microseconds; one this old was left by a process that died.
BREAK_STALE_S = 10.0


class RunDirectoryBusy(RuntimeError):
    """Another training run is writing to this run directory."""


class RunLock:
    """Held by rank 0 for the length of :meth:`Trainer.fit`; a context manager."""

    def __init__(self, run_dir: str | os.PathLike[str], heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}

    def _snapshot(self) -> tuple[tuple[int, int, int], str, float] | None:
        """The lock file as it is now: (device, inode, mtime ns), its text and its age in
        seconds; None when there is none."""
        try:
            st = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns), text, time.time() - st.st_mtime

    def _owner(
        self, snap: tuple[tuple[int, int, int], str, float] | None = None
    ) -> dict[str, Any] | None:
        """The holder of the lock as ``snap`` (default: now) shows it, or None when the
        lock is free or stale."""
        snap = self._snapshot() if snap is None else snap
        if snap is None:
            return None
        _, text, age = snap
        try:
            owner = json.loads(text)
        except ValueError:
            # Created this instant by another process that has not written it yet.
            return {"host": "?", "pid": "?", "started": time.time()} if age < 5 else None
        if owner.get("host") == self.me["host"]:
            if owner.get("pid") == self.me["pid"] or not pid_alive(int(owner.get("pid") or -1)):
                return None
            return owner
        return None if age > STALE_S else owner

    def _break(self, snap: tuple[tuple[int, int, int], str, float]) -> None:
        """Delete the stale lock ``snap`` showed, and only it: two runs may judge the same
        lock stale at once, and the slower one must not delete the lock the faster one has
        created since. Breakers take turns through ``.run.lock.break`` and delete only a
        file with the same identity and text as the one judged."""
        breaker = self.path.with_name(self.path.name + ".break")
        try:
            fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError):  # left by a breaker that died mid-turn
                if time.time() - breaker.stat().st_mtime > BREAK_STALE_S:
                    breaker.unlink()
            return
        os.close(fd)
        try:
            now = self._snapshot()
            if now is not None and now[:2] == snap[:2]:
                self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                breaker.unlink()

    def acquire(self) -> None:
        """Take the lock, or raise :class:`RunDirectoryBusy` naming who holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(ATTEMPTS):
            try:  # O_EXCL: of two runs starting at once, one creates it
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                snap = self._snapshot()
                if snap is None:
                    continue  # released in between: try again
                owner = self._owner(snap)
                if owner is not None:
                    self._busy(owner)
                self._break(snap)  # stale, or our own from before a resume
                time.sleep(0.01)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.me, f)
            self._thread = threading.Thread(target=self._beat, name="crnn-run-lock", daemon=True)
            self._thread.start()
            return
        owner = self._owner() or {"host": "?", "pid": "?", "started": time.time()}
        raise RunDirectoryBusy(
            f"could not take {self.path} in {ATTEMPTS} attempts: other runs keep creating it "
            f"(the last seen: pid {owner.get('pid')} on {owner.get('host')}). Start one run "
            "per --output-dir"
        )

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
