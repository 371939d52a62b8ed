"""Creating an LMDB from an image folder and a gt.txt (``tools/create_lmdb.py``).

Each file is read once and decoded once, in a pool of processes; the writer stays in
the calling process and writes in gt order. Image files are stored as they are (or
re-encoded at a height), or as training-ready pixels (a *prepared* LMDB; see
:mod:`crnn.data.lmdb`).
"""

from __future__ import annotations

import contextlib
import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crnn.data.lmdb import LmdbWriter


def held_out(rel_path: str, fraction: float) -> bool:
    """Whether a sample belongs to the held-out split: a hash of its path, so the split
    is the same on every run and in any line order."""
    return zlib.crc32(rel_path.encode("utf-8")) % 1_000_000 < fraction * 1_000_000


@dataclass
class CreateReport:
    """What :func:`create_lmdb` wrote and left out."""

    written: int = 0
    held_out: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)  # (gt line number, why)
    outside_charset: int = 0  # written, but with characters the given charset lacks


def create_lmdb(
    root: str | os.PathLike[str],
    gt: str | os.PathLike[str],
    out: str | os.PathLike[str],
    val_out: str | os.PathLike[str] | None = None,
    val_fraction: float = 0.0,
    charset: Any = None,
    overwrite: bool = False,
    progress: bool = True,
    height: int = 0,
    grayscale: bool | None = None,
    encoding: str = "utf-8",
    prepared: bool = False,
    workers: int = 0,
) -> CreateReport:
    """Write the images listed in ``gt`` (paths relative to ``root``) into an LMDB at
    ``out``, and a ``val_fraction`` of them (by :func:`held_out`) into ``val_out``.

    Every file is read once and decoded once (to check it and to store its size), in
    ``workers`` processes (0: one per core; the writer stays in this process, in gt
    order); lines with a missing or unreadable image or an empty label are reported in
    the result and left out. ``charset`` (a ``Charset``) only counts labels with
    characters it lacks (they are written: training skips and counts them).
    ``height`` re-encodes each image as a PNG resized to that height (aspect ratio kept;
    ``grayscale`` also drops colour): a dataset at training resolution, several times
    smaller; 0 stores the files as they are. ``prepared`` stores training-ready pixels
    instead (at ``height``, default 32; grayscale unless ``grayscale=False``; see the
    module docstring): an epoch then decodes nothing. Raises ``FileNotFoundError`` for a missing gt file,
    ``FileExistsError`` for an existing output without ``overwrite``, ``ValueError``
    for a bad split request.
    """
    from tqdm import tqdm

    from crnn.data.gt import read_gt

    if not 0.0 <= val_fraction < 1.0 or bool(val_fraction) != bool(val_out):
        raise ValueError("--val-fraction (in [0, 1)) and --val-out go together")
    if height < 0:
        raise ValueError(f"--height {height}: expected a positive number of pixels (or 0)")
    root = Path(root)
    parsed = read_gt(gt, encoding)
    report = CreateReport(bad=list(parsed.bad))
    gray = prepared if grayscale is None else grayscale
    job = _Job(root, height or (32 if prepared else 0), gray, prepared)
    meta = job.prepared_meta() if prepared else None
    lines = []
    for line in parsed.lines:
        if line.label.strip():
            lines.append(line)
        else:
            report.bad.append((line.lineno, f"empty label for {line.path!r}"))
    writer = LmdbWriter(out, overwrite=overwrite, prepared=meta)
    val_writer = LmdbWriter(val_out, overwrite=overwrite, prepared=meta) if val_out else None
    with writer, val_writer or contextlib.nullcontext(), _load_pool(workers, len(lines)) as pool:
        results = map(job, lines) if pool is None else pool.imap(job, lines, _chunk(len(lines), pool))
        for line, (data, size, error) in tqdm(
            zip(lines, results), total=len(lines), desc="create_lmdb", unit="img",
            disable=not progress,
        ):  # fmt: skip
            if error:
                report.bad.append((line.lineno, error))
                continue
            if charset is not None and charset.unknown_chars(line.label):
                report.outside_charset += 1
            w = val_writer if val_writer is not None and held_out(line.path, val_fraction) else writer
            if prepared:
                w.add_pixels(data, line.label)
            else:
                w.add(data, line.label, size)
        report.written = writer.count
        report.held_out = val_writer.count if val_writer is not None else 0
    report.bad.sort()
    return report


# Below this many images a process pool costs more than it saves.
_MIN_POOL_IMAGES = 512


def _chunk(n: int, pool: Any) -> int:
    """Images per task: large enough to amortise the pickling, small enough to share."""
    return max(1, min(64, n // (8 * pool._processes)))


@contextlib.contextmanager
def _load_pool(workers: int, n: int) -> Iterator[Any]:
    """A process pool of ``workers`` (0: one per usable core), or None when one process
    will do (one core, or few images)."""
    if workers <= 0:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            workers = os.cpu_count() or 1
    if workers <= 1 or n < _MIN_POOL_IMAGES:
        yield None
        return
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ctx.Pool(workers)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()


@dataclass(frozen=True)
class _Job:
    """Read, check and convert one image (runs in the pool's processes)."""

    root: Path
    height: int
    grayscale: bool
    prepared: bool

    def spec(self) -> Any:
        from crnn.data.image import ImageSpec

        return ImageSpec(height=self.height, rgb=not self.grayscale)

    def prepared_meta(self) -> dict[str, Any]:
        spec = self.spec()
        return {
            "height": spec.height,
            "channels": spec.channels,
            "min_width": spec.min_width,
            "width_multiple": spec.width_multiple,
        }

    def __call__(self, line: Any) -> tuple[Any, tuple[int, int] | None, str]:
        """``(bytes or pixels, (width, height), "")`` or ``(None, None, why)``."""
        from PIL import Image

        try:
            data = (self.root / line.path).read_bytes()  # read once, decoded from memory
            if self.prepared:
                from crnn.data.image import load_image, to_array, to_model_height

                pixels = to_array(to_model_height(load_image(data, not self.grayscale), self.spec()))
                return pixels, (pixels.shape[2], pixels.shape[1]), ""
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                if self.height:
                    data, im = _reencode(im, self.height, self.grayscale)
                return data, im.size, ""
        except FileNotFoundError:
            return None, None, f"image {line.path!r} not found"
        except Exception as e:  # noqa: BLE001 -- any decoder failure means a bad image
            return None, None, f"image {line.path!r} cannot be decoded ({e})"


def _reencode(im: Any, height: int, grayscale: bool) -> tuple[bytes, Any]:
    """``im`` resized to ``height`` (ratio kept, Pillow's antialiasing filter) as PNG."""
    from PIL import Image

    im = im.convert("L" if grayscale else "RGB")
    width = max(1, round(im.width * height / im.height))
    im = im.resize((width, height), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False)
    return buf.getvalue(), im
