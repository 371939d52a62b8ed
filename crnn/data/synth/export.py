"""Writing synthetic samples to an LMDB, in parallel and deterministically.

Samples are rendered in chunks of consecutive indices by a process pool and written
in index order (``imap`` keeps order), so the LMDB holds the same bytes whatever the
number of workers: sample ``i`` of the file is always ``render(start + i)``.
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator

from PIL import Image
from tqdm import tqdm

from crnn.data.lmdb import LmdbWriter
from crnn.data.synth.render import SynthGenerator

log = logging.getLogger(__name__)

Encoded = tuple[bytes, str, tuple[int, int]]

# zlib level for stored PNGs: 3 is about twice as fast to write as the default 6 and
# only a few per cent larger on these small images.
PNG_COMPRESS_LEVEL = 3


def encode_png(img: Image.Image) -> bytes:
    """Lossless PNG bytes of ``img`` (deterministic for a given zlib)."""
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


def render_range(gen: SynthGenerator, start: int, stop: int) -> list[Encoded]:
    """Samples ``start`` .. ``stop - 1`` as (PNG bytes, label, (width, height))."""
    out = []
    for i in range(start, stop):
        img, label = gen.render(i)
        out.append((encode_png(img), label, img.size))
    return out


# Jobs at least this large warm the glyph cache up before forking workers.
WARM_UP_MIN_COUNT = 10_000

_WORKER_GEN: SynthGenerator | None = None


def _init_worker(gen: SynthGenerator) -> None:
    global _WORKER_GEN  # one generator per worker process, set once by the pool
    _WORKER_GEN = gen


def _worker_range(span: tuple[int, int]) -> list[Encoded]:
    assert _WORKER_GEN is not None, "pool initializer did not run"
    return render_range(_WORKER_GEN, *span)


def iter_rendered(
    gen: SynthGenerator, count: int, start: int = 0, workers: int = 1, chunk_size: int = 256
) -> Iterator[list[Encoded]]:
    """Chunks of encoded samples ``start .. start + count - 1``, in index order."""
    spans = [
        (a, min(a + chunk_size, start + count)) for a in range(start, start + count, chunk_size)
    ]
    if workers <= 1:
        for a, b in spans:
            yield render_range(gen, a, b)
        return
    with multiprocessing.get_context().Pool(
        workers, initializer=_init_worker, initargs=(gen,)
    ) as pool:
        yield from pool.imap(_worker_range, spans)


def write_lmdb(
    gen: SynthGenerator,
    out: str | os.PathLike[str],
    count: int,
    start: int = 0,
    workers: int = 1,
    chunk_size: int = 256,
    overwrite: bool = False,
    progress: bool = True,
) -> int:
    """Render ``count`` samples into a new LMDB at ``out``; returns the number written.

    Images are stored as PNG with their ``(width, height)``; labels are normalised by
    the generator's charset. Raises ``FileExistsError`` if ``out`` holds an LMDB and
    ``overwrite`` is false.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    t0 = time.perf_counter()
    if workers > 1 and count >= WARM_UP_MIN_COUNT and multiprocessing.get_start_method() == "fork":
        # Forked workers inherit the parent's glyph cache: rasterising every glyph once
        # here saves each worker doing it again (a few seconds apiece).
        n = gen.warm_up()
        log.info("glyph cache warmed up: %d glyphs in %.1f s", n, time.perf_counter() - t0)
    with LmdbWriter(out, overwrite=overwrite) as writer:
        bar = tqdm(total=count, unit="img", disable=not progress, desc="synth")
        for chunk in iter_rendered(gen, count, start, workers, chunk_size):
            for png, label, size in chunk:
                writer.add(png, label, size=size)
            bar.update(len(chunk))
        bar.close()
        n = writer.count
    dt = time.perf_counter() - t0
    log.info(
        "wrote %d samples to %s in %.1f s (%.0f images/s, %d workers)", n, out, dt, n / dt, workers
    )
    return n
