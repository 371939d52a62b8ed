"""A labelled set read as ``crnn-predict`` reads it, and scored: what ``crnn-eval``
reports by default, so that its figures are the ones users get.

Each sample's image (its file's bytes, or a prepared LMDB's pixels) goes through
:meth:`Recognizer.read_pages <crnn.reading.recognizer.Recognizer.read_pages>` with the
layout and every option the reader was built with (views, turns, page finding, the blank
check, decoding), a few dozen at a time, and the page's text is compared with the label.
The training engine's validation decodes padded loader batches instead
(:func:`crnn.evaluation.evaluate`, ``crnn-eval --batched``): faster, but not what
``crnn-predict`` reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crnn.ctc import Prediction
from crnn.text.metrics import TextMetrics

# Samples handed to read_pages at once (their lines are batched together).
CHUNK = 32


@dataclass
class LabelledReads:
    """What reading a labelled set gave: the sums the metrics come from, the images that
    could not be read (counted, the first 20 named) and the speed."""

    sums: TextMetrics = field(default_factory=TextMetrics)
    images: int = 0
    bad_images: int = 0
    bad_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0


class _Pixels(Sequence):
    """The model-height pixels of a chunk's samples, decoded only for those asked for (an
    error report's pictures of the wrong reads)."""

    def __init__(self, dataset: Any, indices: list[int]) -> None:
        self.dataset, self.indices = dataset, indices
        self._done: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int) -> Any:
        if k not in self._done:
            item = self.dataset[self.indices[k]]
            self._done[k] = None if "error" in item else item["image"].numpy()
        return self._done[k]


def read_labelled(
    reader: Any,
    dataset: Any,
    layout: str = "auto",
    world: int = 1,
    rank: int = 0,
    observe: Callable[[dict[str, Any], list[Prediction]], None] | None = None,
    tick: Callable[[int], None] | None = None,
) -> LabelledReads:
    """Read this rank's share of ``dataset`` (a ``RecognitionDataset`` built with
    ``evaluation=True``: every sample ``rank``, ``rank + world``, ...) with ``reader`` as
    ``crnn-predict --layout LAYOUT`` reads files, and score it. ``observe(batch,
    predictions)`` sees each chunk as :func:`crnn.evaluation.evaluate`'s callers do
    (``labels``, ``raw_labels``, ``sources``, lazily decoded ``images`` and ``widths``);
    ``tick(n)`` hears of each ``n`` samples read (a progress bar)."""
    out = LabelledReads()
    share = list(range(rank, len(dataset), world))
    t0 = time.perf_counter()
    for k in range(0, len(share), CHUNK):
        chunk = share[k : k + CHUNK]
        images, raws, sources, kept = [], [], [], []
        for i in chunk:
            try:
                image, raw, source = dataset.original(i)
            except (OSError, ValueError) as e:  # a damaged record: counted, the rest go on
                out.bad_images += 1
                if len(out.bad_examples) < 20:
                    out.bad_examples.append(f"sample {i + 1}: {e}")
                continue
            images.append(image)
            raws.append(raw)
            sources.append(source)
            kept.append(i)
        pages = reader.read_pages(images, layout, errors="return")
        if tick is not None:
            tick(len(chunk))
        good = [n for n, page in enumerate(pages) if not isinstance(page, Exception)]
        for n, page in enumerate(pages):
            if isinstance(page, Exception):
                out.bad_images += 1
                if len(out.bad_examples) < 20:
                    out.bad_examples.append(f"{sources[n]}: {page}")
        if not good:
            continue
        preds = [Prediction(pages[n].text, pages[n].confidence) for n in good]
        ids = [kept[n] for n in good]
        labels = [dataset.label(i) for i in ids]
        out.sums.update([p.text for p in preds], labels, [raws[n] for n in good])
        out.images += len(ids)
        if observe is not None:
            pixels = _Pixels(dataset, ids)
            batch = {
                "labels": labels,
                "raw_labels": [raws[n] for n in good],
                "sources": [sources[n] for n in good],
                "images": pixels,
                "widths": _Widths(pixels),
            }
            observe(batch, preds)
    out.seconds = time.perf_counter() - t0
    return out


class _Widths(Sequence):
    """Each lazily decoded image's width (what the error pictures crop to)."""

    def __init__(self, pixels: _Pixels) -> None:
        self.pixels = pixels

    def __len__(self) -> int:
        return len(self.pixels)

    def __getitem__(self, k: Any) -> int:
        a = self.pixels[k]
        return 0 if a is None else int(a.shape[-1])
