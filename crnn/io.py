"""Files written whole or not at all, and file hashes.

:func:`atomic_write` is the one way this project writes a checkpoint, a release file or
an ONNX export: the bytes go to a temporary file in the target's folder, are fsync'd and
renamed over the target (``os.replace`` is atomic on POSIX), so a run killed at any
moment leaves the old file or the new one, never a torn one.

The temporary's name is part of the API (:func:`temporary_path`): ``.NAME.tmp-PID`` in
the same folder, so that tools (and tests) can find what a killed writer left behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
from collections.abc import Callable
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, BinaryIO


def temporary_path(path: str | os.PathLike[str], pid: int | None = None) -> Path:
    """Where :func:`atomic_write` stages ``path`` in process ``pid`` (default: this one)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid() if pid is None else pid}")


class WriteError(OSError):
    """A file that could not be written (disk full...). The previous version of the file,
    if any, is intact: only the temporary was lost."""


def _write_error(path: Path, e: BaseException) -> WriteError | None:
    """A clear :class:`WriteError` for a failed write that ran out of space: torch's
    zip writer reports that as ``unexpected pos N vs M``, not as ENOSPC."""
    if not isinstance(e, (OSError, RuntimeError)):
        return None
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = -1
    full = getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or (
        "unexpected pos" in str(e) and 0 <= free < 64 * 2**20
    )
    if not full:
        return None
    return WriteError(
        errno.ENOSPC,
        f"no space left on device at {path.parent} ({max(free, 0) / 2**20:.1f} MiB free) while "
        f"writing {path.name}; the previous {path.name}, if any, is intact. Free some space or "
        "write somewhere else (train.output_dir)",
    )


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine: it exists (another user's counts) and
    is not a zombie (exited, not yet reaped by its parent)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Delete what writers of ``path`` that no longer run left behind (a process killed
    inside :func:`atomic_write` cannot clean up). Temporaries of live processes are
    kept. Returns the files removed."""
    path = Path(path)
    removed = []
    prefix = temporary_path(path, pid=0).name[:-1]  # ".NAME.tmp-"
    if not path.parent.is_dir():
        return removed
    for tmp in path.parent.glob(f"{glob_escape(prefix)}*"):
        pid = tmp.name[len(prefix) :]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], Any]) -> Path:
    """Write a file atomically: ``write(f)`` fills a temporary file in the same folder
    (:func:`temporary_path`), which is fsync'd and renamed over ``path``; a crash leaves
    the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        clear = _write_error(path, e)
        if clear is not None:
            raise clear from e
        raise
    finally:
        tmp.unlink(missing_ok=True)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to ``path`` atomically (see :func:`atomic_write`)."""
    import torch

    return atomic_write(path, lambda f: torch.save(obj, f))


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
