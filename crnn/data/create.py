"""Creating an LMDB from an image folder and a gt.txt (``tools/create_lmdb.py``).

Each file is read once and checked once, in one process per core, the processes writing
straight into the LMDB at indices fixed beforehand. A PNG stored as it is is checked by
:func:`check_png` (every byte a decoder reads, without rebuilding the pixels: 3x faster
than decoding); anything else is decoded. Image files are stored as they are (or
re-encoded at a height), or as training-ready pixels (a *prepared* LMDB; see
:mod:`crnn.data.lmdb`).
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb

from crnn.data import usable_cores
from crnn.data.lmdb import (
    IMAGE_KEY,
    LABEL_KEY,
    NUM_SAMPLES_KEY,
    PIXELS_KEY,
    PREPARED_KEY,
    SIZE_KEY,
    clear_output,
    prepared_header,
    sample_key,
)


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
    label_format: str = "gt"  # how the labels were read (crnn.data.formats)


def create_lmdb(
    root: str | os.PathLike[str],
    gt: str | os.PathLike[str] | None,
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
    label_format: str = "auto",
    index_file: str | os.PathLike[str] | None = None,
    held_root: str | os.PathLike[str] | None = None,
) -> CreateReport:
    """Write the images listed in ``gt`` (paths relative to ``root``) into an LMDB at
    ``out``, and a ``val_fraction`` of them (by :func:`held_out`) into ``val_out``; with
    ``held_root`` (a second folder with its gt.txt: a split made beforehand, e.g. by
    image) ``val_out`` holds that folder's samples instead.

    Every file is read once and checked once (a PNG stored as it is by
    :func:`check_png`, anything else by decoding it), in ``workers`` processes (0: one
    per core; the writer stays in this process, in gt order); lines with a missing or unreadable
    image or an empty label are reported in
    the result and left out. ``charset`` (a ``Charset``) only counts labels with
    characters it lacks (they are written: training skips and counts them).
    ``height`` re-encodes each image as a PNG resized to that height (aspect ratio kept;
    ``grayscale`` also drops colour): a dataset at training resolution, several times
    smaller; 0 stores the files as they are. ``prepared`` stores training-ready pixels
    instead (at ``height``, default 32; grayscale unless ``grayscale=False``; see the
    module docstring): an epoch then decodes nothing. ``gt`` is read in
    ``label_format`` (see :mod:`crnn.data.formats`: gt.txt, PaddleOCR, an index list
    with its ``index_file``, one .txt per image; ``auto`` detects them). Raises
    ``FileNotFoundError`` for a missing gt file, ``FileExistsError`` for an existing
    output without ``overwrite``, ``ValueError`` for a bad split request or an index
    list without its alphabet file.
    """
    from tqdm import tqdm

    from crnn.data.formats import read_labels

    if not 0.0 <= val_fraction < 1.0 or bool(val_fraction) != bool(val_out):
        raise ValueError("--val-fraction (in [0, 1)) and --val-out go together")
    if held_root is not None:
        same = dict(progress=progress, height=height, grayscale=grayscale, encoding=encoding)
        same.update(prepared=prepared, workers=workers, label_format=label_format)
        same.update(index_file=index_file)
        report = create_lmdb(root, gt, out, None, 0.0, charset, overwrite, **same)  # type: ignore[arg-type]
        held = create_lmdb(held_root, None, val_out, None, 0.0, charset, overwrite, **same)  # type: ignore[arg-type]
        report.held_out = held.written
        report.bad += held.bad
        report.outside_charset += held.outside_charset
        return report
    if height < 0:
        raise ValueError(f"--height {height}: expected a positive number of pixels (or 0)")
    root = Path(root)
    parsed, report_format = read_labels(root, gt, label_format, index_file, encoding)
    report = CreateReport(bad=list(parsed.bad), label_format=report_format)
    gray = prepared if grayscale is None else grayscale
    job = _Job(root, height or (32 if prepared else 0), gray, prepared)
    meta = job.prepared_meta() if prepared else None
    lines = []
    for line in parsed.lines:
        if line.label.strip():
            lines.append(line)
        else:
            report.bad.append((line.lineno, f"empty label for {line.path!r}"))
    # Where each line goes (the training or the held-out LMDB) and under which index,
    # fixed before any image is read: the processes write their samples straight into
    # the LMDBs (LMDB serialises writers), so nothing travels back but the failures. The
    # few indices of failed images are closed up at the end.
    outs = [Path(out)] + ([Path(val_out)] if val_out else [])
    for o in outs:
        _create_output(o, overwrite, meta)
    dests, slots, counts = [], [], [0] * len(outs)
    for line in lines:
        d = 1 if val_out and held_out(line.path, val_fraction) else 0
        dests.append(d)
        slots.append(counts[d])
        counts[d] += 1
    work = _Work(
        job,
        [line.path for line in lines],
        [line.label for line in lines],
        dests,
        slots,
        [str(o) for o in outs],
    )
    failed: dict[int, str] = {}
    with tqdm(total=len(lines), desc="create_lmdb", unit="img", disable=not progress) as bar:
        for a, b, errors in _run(work, workers):
            failed.update(errors)
            bar.update(b - a)
    _close_envs()
    missing: list[list[int]] = [[] for _ in outs]
    for i, why in failed.items():
        report.bad.append((lines[i].lineno, why))
        missing[dests[i]].append(slots[i])
    written = [_finish(o, n, sorted(m)) for o, n, m in zip(outs, counts, missing)]
    report.written = written[0]
    report.held_out = written[1] if val_out else 0
    if charset is not None:
        report.outside_charset = sum(
            1
            for i, line in enumerate(lines)
            if i not in failed and charset.unknown_chars(line.label)
        )
    report.bad.sort()
    return report


# Below this many images a process pool costs more than it saves.
_MIN_POOL_IMAGES = 512
_CHUNK = 64
# Address space reserved for each output LMDB: the file grows only as pages are written
# (Linux, macOS), and every writing process must map the same size.
_MAP_SIZE = 2**40


@dataclass(frozen=True)
class _Work:
    job: _Job
    paths: list[str]
    labels: list[str]
    dests: list[int]
    slots: list[int]
    outs: list[str]


# What a pool process works on, inherited when it starts (not sent with every task),
# and the environments this process opened (pid, path) -> env.
_WORK: _Work | None = None
_OPEN: dict[tuple[int, str], Any] = {}


def _env(path: str) -> Any:
    key = (os.getpid(), path)
    if key not in _OPEN:
        # No flush per transaction: _finish flushes the whole file once at the end.
        _OPEN[key] = lmdb.open(path, map_size=_MAP_SIZE, subdir=True, sync=False, metasync=False)
    return _OPEN[key]


def _close_envs() -> None:
    pid = os.getpid()
    for key in [k for k in _OPEN if k[0] == pid]:
        _OPEN.pop(key).close()


def _create_output(path: Path, overwrite: bool, meta: dict[str, Any] | None) -> None:
    """An empty output LMDB (with the prepared settings): no ``num-samples`` until
    :func:`_finish`, so an interrupted run leaves an LMDB that readers refuse, not a
    silently partial one."""
    clear_output(path, overwrite)
    env = lmdb.open(str(path), map_size=_MAP_SIZE, subdir=True)
    if meta is not None:
        with env.begin(write=True) as txn:
            txn.put(PREPARED_KEY, prepared_header(meta))
    env.close()


def _set_work(work: _Work | None) -> None:
    global _WORK
    _WORK = work


def _write_range(bounds: tuple[int, int]) -> tuple[int, int, list[tuple[int, str]]]:
    """Read, check and write lines ``a..b``; returns the failures ``(line index, why)``."""
    assert _WORK is not None
    w, (a, b) = _WORK, bounds
    items: list[list[tuple[bytes, bytes]]] = [[] for _ in w.outs]
    errors = []
    for i in range(a, b):
        data, size, error = w.job(w.paths[i])
        if error:
            errors.append((i, error))
            continue
        k, put = w.slots[i], items[w.dests[i]]
        if w.job.prepared:
            put.append((sample_key(PIXELS_KEY, k), data.tobytes()))
        else:
            put.append((sample_key(IMAGE_KEY, k), data))
        put.append((sample_key(LABEL_KEY, k), w.labels[i].encode("utf-8")))
        put.append((sample_key(SIZE_KEY, k), f"{size[0]} {size[1]}".encode("ascii")))  # type: ignore[index]
    for out, put in zip(w.outs, items):
        if put:
            with _env(out).begin(write=True) as txn:
                txn.cursor().putmulti(put)
    return a, b, errors


def _run(work: _Work, workers: int) -> Iterator[tuple[int, int, list[tuple[int, str]]]]:
    """Every range of lines, written by ``workers`` processes (0: one per usable core),
    or here for one core or few images; yields ``(a, b, failures)`` as ranges finish."""
    if workers <= 0:
        workers = usable_cores()
    n = len(work.paths)
    import multiprocessing

    if (
        workers <= 1
        or n < _MIN_POOL_IMAGES
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        _set_work(work)
        try:
            for a in range(0, n, _CHUNK):
                yield _write_range((a, min(a + _CHUNK, n)))
        finally:
            _set_work(None)
        return
    chunk = max(1, min(_CHUNK, n // (8 * workers)))
    from PIL import Image

    Image.preinit()  # load the common decoders once, before the processes start
    if work.job.prepared:
        import crnn.data.image  # noqa: F401 -- likewise (NumPy)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_set_work, initargs=(work,)) as pool:
        yield from pool.imap_unordered(
            _write_range, [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
        )


def _finish(path: Path, planned: int, missing: list[int]) -> int:
    """Close up the indices of images that failed (moving the later samples down, in
    order) and write ``num-samples``; returns the number of samples."""
    env = lmdb.open(str(path), map_size=_MAP_SIZE, subdir=True)
    try:
        with env.begin(write=True) as txn:
            if missing:
                gone, new = set(missing), missing[0]
                fmts = (IMAGE_KEY, PIXELS_KEY, LABEL_KEY, SIZE_KEY)
                for old in range(missing[0], planned):
                    if old in gone:
                        continue
                    for fmt in fmts:
                        value = txn.get(sample_key(fmt, old))
                        if value is not None:
                            txn.put(sample_key(fmt, new), value)
                    new += 1
                for old in range(new, planned):
                    for fmt in fmts:
                        txn.delete(sample_key(fmt, old))
            count = planned - len(missing)
            txn.put(NUM_SAMPLES_KEY, str(count).encode("ascii"))
        env.sync(True)
    finally:
        env.close()
    return count


@dataclass(frozen=True)
class _Job:
    """Read, check and convert one image (runs in the pool's processes)."""

    root: Path
    height: int
    grayscale: bool
    prepared: bool

    def spec(self) -> Any:
        from crnn.config.image_spec import ImageSpec

        return ImageSpec(height=self.height, rgb=not self.grayscale)

    def prepared_meta(self) -> dict[str, Any]:
        spec = self.spec()
        return {
            "height": spec.height,
            "channels": spec.channels,
            "min_width": spec.min_width,
            "width_multiple": spec.width_multiple,
        }

    def __call__(self, path: str) -> tuple[Any, tuple[int, int] | None, str]:
        """``(bytes or pixels, (width, height), "")`` or ``(None, None, why)``."""

        try:
            data = (self.root / path).read_bytes()  # read once, decoded from memory
            if not self.prepared and not self.height:
                size = check_png(data)  # stored as it is: checking is enough
                if size is not None:
                    from crnn.data.image import MAX_PIXELS

                    if size[0] * size[1] > MAX_PIXELS:
                        return (
                            None,
                            None,
                            (
                                f"image {path!r} has {size[0]} x {size[1]} pixels, more than the "
                                f"{MAX_PIXELS:,} any tool decodes (crnn.data.image.MAX_PIXELS)"
                            ),
                        )
                    return data, size, ""
            if self.prepared:
                from crnn.data.image import load_image, to_array, to_model_height

                pixels = to_array(
                    to_model_height(load_image(data, not self.grayscale), self.spec())
                )
                return pixels, (pixels.shape[2], pixels.shape[1]), ""
            from crnn.data.image import open_image, oriented_size, upright

            with open_image(data) as im:
                im.load()
                if self.height:
                    data, im = _reencode(upright(im), self.height, self.grayscale)
                    return data, im.size, ""
                return data, oriented_size(im), ""
        except FileNotFoundError:
            return None, None, f"image {path!r} not found"
        except Exception as e:  # noqa: BLE001 -- any decoder failure means a bad image
            return None, None, f"image {path!r} cannot be decoded ({e})"


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Channels per colour type (grey, RGB, palette, grey + alpha, RGBA) and allowed depths.
_PNG_TYPES = {
    0: (1, (1, 2, 4, 8, 16)),
    2: (3, (8, 16)),
    3: (1, (1, 2, 4, 8)),
    4: (2, (8, 16)),
    6: (4, (8, 16)),
}
_PNG_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")


def _broken(why: str) -> Exception:
    """The image error for a broken PNG (imported here, on failure only: the module that
    defines it loads NumPy, a tenth of a second on every run)."""
    from crnn.data.image import ImageDecodeError

    return ImageDecodeError(f"broken PNG: {why}")


def check_png(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` of a PNG checked down to its last byte without rebuilding its
    pixels; None when ``data`` is not a PNG this check covers (interlaced, or anything
    unusual), for a full decode to judge. Raises
    :class:`~crnn.data.image.ImageDecodeError`.

    What a decoder reads is all checked: every critical chunk's CRC-32, the header, and
    the compressed pixel stream inflated to its end (zlib verifies its Adler-32) to at
    least the size the header implies, with a valid filter byte on every row. Only
    undoing the filters, which cannot fail once those hold, is left out: about 3x faster
    than Pillow's decode.
    """
    if not data.startswith(_PNG_SIGNATURE):
        return None
    view, pos, end = memoryview(data), 8, len(data)
    header, idat, seen_end, palette = None, [], False, False
    while pos + 12 <= end:
        n, kind = struct.unpack_from(">I4s", data, pos)
        if pos + 12 + n > end:
            break
        if kind in _PNG_CRITICAL:
            (crc,) = struct.unpack_from(">I", data, pos + 8 + n)
            if zlib.crc32(view[pos + 4 : pos + 8 + n]) != crc:
                raise _broken(f"the {kind.decode()} chunk fails its CRC check")
        if header is None:
            if kind != b"IHDR" or n != 13:
                raise _broken("it does not start with an IHDR chunk")
            header = struct.unpack_from(">IIBBBBB", data, pos + 8)
        elif kind == b"IDAT":
            idat.append(view[pos + 8 : pos + 8 + n])
        elif kind == b"PLTE":
            palette = True
        elif kind == b"IEND":
            seen_end = True
            break
        pos += 12 + n
    if header is None:
        raise _broken("truncated before its header")
    width, height, depth, color, compression, filtering, interlace = header
    channels, depths = _PNG_TYPES.get(color, (0, ()))
    if (
        not seen_end
        or interlace
        or compression
        or filtering
        or depth not in depths
        or (color == 3 and not palette)
        or not width
        or not height
    ):
        return None  # truncated, or unusual: let the decoder decide
    row = 1 + (width * channels * depth + 7) // 8
    need = row * height
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(b"".join(idat), need)
        if not inflate.eof and len(raw) == need:
            inflate.decompress(inflate.unconsumed_tail, 1 << 16)  # the end and checksum
    except zlib.error as e:
        raise _broken(f"its pixel data does not inflate ({e})") from None
    if len(raw) < need:
        raise _broken(f"its pixel data ends early ({len(raw)} of {need} bytes)")
    if not inflate.eof:
        return None  # more data than the header says, or no end: let the decoder decide
    if max(raw[::row]) > 4:
        raise _broken("a row has an unknown filter type")
    return width, height


def _reencode(im: Any, height: int, grayscale: bool) -> tuple[bytes, Any]:
    """``im`` resized to ``height`` (ratio kept, Pillow's antialiasing filter) as PNG."""
    from PIL import Image

    im = im.convert("L" if grayscale else "RGB")
    width = max(1, round(im.width * height / im.height))
    im = im.resize((width, height), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False)
    return buf.getvalue(), im
