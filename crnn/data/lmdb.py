"""LMDB datasets in the layout the scene-text community shares.

Keys (1-based): ``num-samples`` -> ASCII int, ``image-%09d`` -> encoded image file bytes,
``label-%09d`` -> UTF-8 label. This is the layout of clovaai's
``create_lmdb_dataset.py``, MMOCR and parseq, so their LMDBs read here and ours read
there. We add one optional key, ``size-%09d`` -> ASCII ``"W H"`` of the stored image,
so batches can be grouped by width without decoding; other readers ignore it.

A *prepared* LMDB (``create_lmdb --prepared``) is ours alone: it stores training-ready
pixels instead of image files, so an epoch decodes nothing. ``crnn-prepared`` holds
JSON (height, channels and the width rules the pixels were resized with) and
``pixels-%09d`` the ``(C, H, W)`` uint8 bytes of each image resized to that height,
its whole width kept, exactly as training's first resizing step makes them
(:func:`crnn.data.image.to_model_height`); labels and sizes are keyed as above.

The constants below are the single definition of the layout, shared by reader and
writer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import lmdb

from crnn.data.errors import DataError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

NUM_SAMPLES_KEY = b"num-samples"
IMAGE_KEY = "image-%09d"
LABEL_KEY = "label-%09d"
SIZE_KEY = "size-%09d"
PIXELS_KEY = "pixels-%09d"
PREPARED_KEY = b"crnn-prepared"
PREPARED_VERSION = 1

_INITIAL_MAP_SIZE = 64 * 2**20


class LmdbFormatError(DataError):
    """An LMDB that cannot be read as a text-recognition dataset."""


def sample_key(fmt: str, index0: int) -> bytes:
    return (fmt % (index0 + 1)).encode("ascii")


def is_lmdb_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / "data.mdb").is_file()


def find_lmdb_roots(path: str | os.PathLike[str]) -> list[Path]:
    """An LMDB directory itself, or every LMDB directory below ``path`` (sorted)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"dataset path {str(path)!r} does not exist")
    if is_lmdb_dir(path):
        return [path]
    roots = sorted(Path(d) for d, _, files in os.walk(path) if "data.mdb" in files)
    if not roots:
        raise LmdbFormatError(
            f"no LMDB found at or below {str(path)!r} (looked for folders holding data.mdb). "
            "Create one with tools/create_lmdb.py, or pass an image folder with a gt.txt."
        )
    return roots


def clear_output(path: Path, overwrite: bool) -> None:
    """Make ``path`` ready for a new LMDB: refuse an existing one unless ``overwrite``
    (then remove its files), create the folder."""
    if is_lmdb_dir(path) and not overwrite:
        raise FileExistsError(
            f"{str(path)!r} already holds an LMDB; choose another --out or pass "
            "--overwrite to replace it"
        )
    path.mkdir(parents=True, exist_ok=True)
    if overwrite:
        for name in ("data.mdb", "lock.mdb"):
            (path / name).unlink(missing_ok=True)


def prepared_header(settings: dict[str, Any]) -> bytes:
    """The ``crnn-prepared`` value for a prepared LMDB of these settings (height,
    channels, min_width, width_multiple); :class:`LmdbReader` reads it back."""
    return json.dumps({"version": PREPARED_VERSION, **settings}, sort_keys=True).encode()


class LmdbWriter:
    """Writes samples in the shared layout; the map grows as needed.

    Use as a context manager. ``num-samples`` is written on every commit, so an
    interrupted writer leaves a smaller but consistent dataset.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        commit_every: int = 1000,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        clear_output(self.path, overwrite)
        self._map_size = _INITIAL_MAP_SIZE
        self._env = lmdb.open(str(self.path), map_size=self._map_size, subdir=True)
        self._pending: list[tuple[bytes, bytes]] = []
        self._commit_every = commit_every
        self.count = 0

    def add(self, image: bytes, label: str, size: tuple[int, int] | None = None) -> int:
        """Queue one sample; returns its 0-based index."""
        i = self.count
        self._pending.append((sample_key(IMAGE_KEY, i), image))
        self._pending.append((sample_key(LABEL_KEY, i), label.encode("utf-8")))
        if size is not None:
            self._pending.append((sample_key(SIZE_KEY, i), f"{size[0]} {size[1]}".encode("ascii")))
        self.count += 1
        if self.count % self._commit_every == 0:
            self.commit()
        return i

    def commit(self) -> None:
        items = self._pending + [(NUM_SAMPLES_KEY, str(self.count).encode("ascii"))]
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    for k, v in items:
                        txn.put(k, v)
                break
            except lmdb.MapFullError:
                # The transaction was aborted; grow the map and write the batch again.
                self._map_size *= 2
                self._env.set_mapsize(self._map_size)
        self._pending.clear()

    def close(self) -> None:
        if self._env is not None:
            self.commit()
            self._env.sync()
            self._env.close()
            self._env = None  # type: ignore[assignment]

    def __enter__(self) -> LmdbWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# One read-only environment per LMDB per process. LMDB (and py-lmdb's guard) forbid
# opening the same files twice in a process, and an environment must not be used
# across fork(): a DataLoader worker closes what it inherited and opens its own.
_ENVS: dict[str, tuple[int, tuple[int, int, int], lmdb.Environment]] = {}


def _signature(path: Path) -> tuple[int, int, int]:
    st = (path / "data.mdb").stat()
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _replaced(old: tuple[int, int, int], new: tuple[int, int, int]) -> bool:
    """Whether an LMDB's data file is another file than the one opened: a new inode, or
    the same inode cut shorter (re-created in place). One that only grew or was written
    to is the same LMDB, appended to by another process: its handle stays open (closing
    it broke every reader still using it)."""
    return new[0] != old[0] or new[2] < old[2]


def _shared_env(path: Path, revalidate: bool = False) -> lmdb.Environment:
    """This process's environment for ``path``.

    ``revalidate`` compares the data file with the one opened before and reopens it if
    the LMDB was re-created meanwhile (readers check once, when they are built; a
    per-sample stat would cost a system call per image).
    """
    pid = os.getpid()
    if any(p != pid for p, _, _ in _ENVS.values()):
        for key in [k for k, (p, _, _) in _ENVS.items() if p != pid]:
            _close_quietly(_ENVS.pop(key)[2])  # inherited from the parent process
    key = str(path.resolve())
    cached = _ENVS.get(key)
    if cached is not None and not revalidate:
        return cached[2]
    if not is_lmdb_dir(path):
        raise LmdbFormatError(f"{str(path)!r} is not an LMDB directory (no data.mdb)")
    sig = _signature(path)
    if cached is not None:
        if not _replaced(cached[1], sig):
            return cached[2]
        _close_quietly(_ENVS.pop(key)[2])  # re-created since: the old handle is stale
    try:
        try:
            env = _open(path)
        except lmdb.Error as e:
            # py-lmdb 3 refuses a file of an environment it thinks is open, keyed on the
            # inodes of data.mdb and lock.mdb; a handle this process still holds on an LMDB
            # deleted and re-created since (read-only, lock-free: its lock file was not
            # kept open) may have handed its lock file's inode on to these files. Such
            # handles are stale: close them and try once more.
            if "already open" not in str(e) or not _close_stale():
                raise
            env = _open(path)
    except lmdb.Error as e:
        raise LmdbFormatError(
            f"cannot open LMDB {str(path)!r}: {e}. The file is corrupt or not an "
            "LMDB; recreate it with tools/create_lmdb.py."
        ) from e
    _check_complete(env, path)
    _ENVS[key] = (pid, sig, env)
    return env


def _open(path: Path) -> lmdb.Environment:
    return lmdb.open(
        str(path), readonly=True, lock=False, readahead=False, meminit=False, max_readers=4
    )


def _close_stale() -> bool:
    """Close this process's environments whose LMDB was deleted or re-created since they
    were opened; whether there were any."""
    pid, stale = os.getpid(), []
    for key, (p, sig, _) in _ENVS.items():
        try:
            fresh = p == pid and not _replaced(sig, _signature(Path(key)))
        except OSError:
            fresh = False
        if not fresh:
            stale.append(key)
    for key in stale:
        _close_quietly(_ENVS.pop(key)[2])
    return bool(stale)


def _check_complete(env: lmdb.Environment, path: Path) -> None:
    """Refuse an LMDB whose data file is shorter than its own header says (a copy that
    was cut off, a full disk): reading a page past the end of a memory-mapped file kills
    the process with SIGBUS ("Bus error", nothing printed), so check before any read."""
    need = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    have = (path / "data.mdb").stat().st_size
    if have < need:
        _close_quietly(env)
        raise LmdbFormatError(
            f"LMDB {str(path)!r} is damaged: data.mdb holds {have:,} bytes but its header "
            f"says {need:,} ({(need - have) / 2**20:.1f} MiB missing; the file was cut off, "
            "e.g. by an interrupted copy or a full disk). Copy it again or recreate it with "
            "tools/create_lmdb.py."
        )


def _close_quietly(env: lmdb.Environment) -> None:
    try:
        env.close()
    except lmdb.Error:
        pass


class LmdbReader:
    """Read-only access to one LMDB; opens its environment lazily in each process.

    The object holds only a path, so it pickles into DataLoader workers; every process
    opens its own read-only, lock-free environment on first access and shares it
    between readers of the same LMDB (LMDB handles must not cross ``fork``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._env_cache: tuple[int, lmdb.Environment] | None = None
        try:
            with _shared_env(self.path, revalidate=True).begin() as txn:
                raw = txn.get(NUM_SAMPLES_KEY)
                has_size = txn.get(sample_key(SIZE_KEY, 0)) is not None
                meta = txn.get(PREPARED_KEY)
        except lmdb.Error as e:
            raise LmdbFormatError(f"cannot read LMDB {str(self.path)!r}: {e}") from e
        if raw is None:
            raise LmdbFormatError(
                f"{str(self.path)!r} has no 'num-samples' key: it is not a text-recognition "
                "LMDB, or its writer was interrupted before the first commit. Expected the "
                "keys num-samples, image-%09d, label-%09d (1-based)."
            )
        try:
            self._len = int(bytes(raw).decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            raise LmdbFormatError(
                f"{str(self.path)!r}: 'num-samples' should be an ASCII integer, got "
                f"{bytes(raw)[:40]!r}"
            ) from None
        self.has_sizes = self._len > 0 and has_size
        # The prepared LMDB's settings (height, channels, min_width, width_multiple), or
        # None for an LMDB of image files.
        self.prepared: dict[str, Any] | None = None
        if meta is not None:
            try:
                self.prepared = json.loads(bytes(meta).decode("utf-8"))
                self._shape = (int(self.prepared["channels"]), int(self.prepared["height"]))
            except (ValueError, KeyError, TypeError) as e:
                raise LmdbFormatError(
                    f"{str(self.path)!r}: unreadable 'crnn-prepared' settings ({e}); recreate "
                    "it with tools/create_lmdb.py --prepared"
                ) from None
            if self.prepared.get("version") != PREPARED_VERSION:
                raise LmdbFormatError(
                    f"{str(self.path)!r} is a prepared LMDB of version "
                    f"{self.prepared.get('version')!r}; this crnn-ocr reads version "
                    f"{PREPARED_VERSION}. Recreate it with tools/create_lmdb.py --prepared."
                )

    @property
    def env(self) -> lmdb.Environment:
        """This process's environment for the LMDB (opened on first use)."""
        # Looking the environment up in _ENVS resolves the path and stats the data file,
        # which cost ~80 us per sample, a third of a small PNG's decode: remember it for
        # this process (a forked worker sees another pid and looks it up once itself).
        cached = self._env_cache
        pid = os.getpid()
        if cached is None or cached[0] != pid:
            cached = self._env_cache = (pid, _shared_env(self.path))
        return cached[1]

    def __getstate__(self) -> dict[str, object]:
        # Environments do not pickle (spawned DataLoader workers): send the path only.
        state = dict(self.__dict__)
        state["_env_cache"] = None
        return state

    def __len__(self) -> int:
        return self._len

    def _get(self, fmt: str, index0: int) -> bytes:
        if not 0 <= index0 < self._len:
            raise IndexError(f"index {index0} out of range for {self._len} samples")
        try:
            with self.env.begin() as txn:
                value = txn.get(sample_key(fmt, index0))
        except lmdb.Error as e:
            raise LmdbFormatError(f"{str(self.path)!r}: reading sample {index0 + 1}: {e}") from e
        if value is None:
            raise LmdbFormatError(
                f"{str(self.path)!r}: key {(fmt % (index0 + 1))!r} is missing although "
                f"num-samples is {self._len}; the LMDB is incomplete or corrupt"
            )
        return bytes(value)

    def image_bytes(self, index0: int) -> bytes:
        if self.prepared is not None:
            raise LmdbFormatError(
                f"{str(self.path)!r} is a prepared LMDB (pixels, not image files): read it "
                "with pixels(), or use the LMDB it was made from"
            )
        return self._get(IMAGE_KEY, index0)

    def pixels(self, index0: int) -> np.ndarray:
        """A prepared LMDB's sample as ``(C, H, W)`` uint8 (a writable copy)."""
        import numpy as np  # not at module level: creating an LMDB needs no NumPy

        raw = self._get(PIXELS_KEY, index0)
        c, h = self._shape
        if not raw or len(raw) % (c * h):
            raise LmdbFormatError(
                f"{str(self.path)!r}: sample {index0 + 1} holds {len(raw)} bytes, not a "
                f"multiple of {c} x {h} (channels x height); the LMDB is corrupt"
            )
        return np.frombuffer(bytearray(raw), dtype=np.uint8).reshape(c, h, -1)

    def label(self, index0: int) -> str:
        return self._get(LABEL_KEY, index0).decode("utf-8", errors="replace")

    def labels(self) -> list[str]:
        """Every label, in order (one transaction; used to filter before training)."""
        return [label for label, _ in self._scan(LABEL_KEY)]

    def sizes(self) -> list[tuple[int, int]] | None:
        """Stored ``(width, height)`` of every image, or None if this LMDB has no sizes."""
        if not self.has_sizes:
            return None
        out = []
        for raw, _ in self._scan(SIZE_KEY):
            w, h = raw.split()
            out.append((int(w), int(h)))
        return out

    def _scan(self, fmt: str) -> Iterator[tuple[str, int]]:
        try:
            with self.env.begin() as txn:
                for i in range(self._len):
                    value = txn.get(sample_key(fmt, i))
                    if value is None:
                        raise LmdbFormatError(
                            f"{str(self.path)!r}: key {(fmt % (i + 1))!r} is missing although "
                            f"num-samples is {self._len}; the LMDB is incomplete or corrupt"
                        )
                    yield bytes(value).decode("utf-8", errors="replace"), i
        except lmdb.Error as e:
            raise LmdbFormatError(f"{str(self.path)!r}: {e}") from e
