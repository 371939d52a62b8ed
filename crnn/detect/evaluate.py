"""Evaluating a detector on labelled images, alone (ICDAR 2015 precision, recall, hmean
at IoU 0.5 with don't-care regions) and end to end with a recognizer (order-free
character precision, recall and F1 of everything read against everything labelled,
through :meth:`crnn.reading.recognizer.Recognizer.read_pages`, the reader every front end calls).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from crnn.data.quads import LabelledImage
from crnn.detect.metrics import DetCounts, char_counts, f1_of, match_image


@dataclass
class DetEvalResult:
    """One set's figures: detection counts, end-to-end character counts (when a reader
    read it), images that could not be read, seconds."""

    counts: DetCounts = field(default_factory=DetCounts)
    chars: list[int] = field(default_factory=lambda: [0, 0, 0])
    images: int = 0
    unreadable: int = 0
    seconds: float = 0.0

    def metrics(self) -> dict[str, float]:
        out = dict(self.counts.compute())
        if self.chars[2]:
            out.update(f1_of(*self.chars))
        out["s_per_image"] = self.seconds / max(1, self.images)
        return out


def evaluate_detector(detector: Any, items: Iterable[LabelledImage]) -> DetEvalResult:
    """ICDAR 2015 counts of ``detector`` (``.find(rgb)``) over ``items``."""
    from crnn.data.detection import read_rgb

    res = DetEvalResult()
    t0 = time.perf_counter()
    for item in items:
        try:
            image = read_rgb(str(item.image))
        except (OSError, ValueError):
            res.unreadable += 1
            continue
        found = [d.quad for d in detector.find(image)]
        res.counts.add(match_image(found, item.quads, item.ignore))
        res.images += 1
    res.seconds = time.perf_counter() - t0
    return res


def evaluate_reader(
    reader: Any, items: Iterable[LabelledImage], layout: str = "auto"
) -> DetEvalResult:
    """End to end: each image read by ``reader.read_pages`` (its finder as set), its
    lines' boxes against the labels (ICDAR counts, the lines the reader found) and its
    text against the legible labels (order-free character counts)."""
    res = DetEvalResult()
    t0 = time.perf_counter()
    for item in items:
        (page,) = reader.read_pages([str(item.image)], layout, errors="return")
        if isinstance(page, Exception):
            res.unreadable += 1
            continue
        import numpy as np

        quads = [
            np.asarray(line.quad, np.float32) if line.quad else _box_quad(line.box)
            for line in page.lines
            if line.box
        ]
        res.counts.add(match_image(quads, item.quads, item.ignore))
        truth = [t for t, skip in zip(item.texts, item.ignore) if not skip]
        for k, v in enumerate(char_counts(page.text, truth)):
            res.chars[k] += v
        res.images += 1
    res.seconds = time.perf_counter() - t0
    return res


def _box_quad(box: list[int]) -> Any:
    import numpy as np

    x0, y0, x1, y1 = box
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
