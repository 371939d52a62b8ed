"""Finding lines in a whole image with the detector, over any map function (ONNX
Runtime at read time, the PyTorch module in training's validation): NumPy only.

``prepare`` scales an image as training's validation and reading both do (long side at
most ``limit_side``, never up, then each side padded up to a multiple of 32, the
network's stride), the map function gives the probability map, and
``crnn.detect.postprocess`` turns it into quadrilaterals on the input image.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from crnn.detect.postprocess import DEFAULT_OPTIONS, Detection, DetOptions, boxes_from_map

LIMIT_SIDE = 960
STRIDE = 32
# Smallest side the network is given: below it the feature pyramid has too few cells.
MIN_SIDE = 64


@dataclass
class Prepared:
    """An image ready for the network: ``batch`` ``(1, 3, H, W)`` uint8 and how to map
    back: ``size`` (the scaled content's width and height inside the padding) and the
    input's ``(width, height)``."""

    batch: np.ndarray
    size: tuple[int, int]
    original: tuple[int, int]


def prepare(image: np.ndarray, limit_side: int = LIMIT_SIDE) -> Prepared:
    """``(H, W, 3)`` uint8 RGB -> :class:`Prepared`."""
    h, w = image.shape[:2]
    s = min(1.0, limit_side / max(h, w))
    nw, nh = max(int(round(w * s)), 1), max(int(round(h * s)), 1)
    scaled = (
        image if (nw, nh) == (w, h) else cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    )
    pw = max(-(-nw // STRIDE) * STRIDE, MIN_SIDE)
    ph = max(-(-nh // STRIDE) * STRIDE, MIN_SIDE)
    canvas = np.zeros((ph, pw, 3), np.uint8)
    canvas[:nh, :nw] = scaled
    return Prepared(canvas.transpose(2, 0, 1)[None].copy(), (nw, nh), (w, h))


def detect(
    image: np.ndarray,
    prob_map: Callable[[np.ndarray], np.ndarray],
    opts: DetOptions = DEFAULT_OPTIONS,
    limit_side: int = LIMIT_SIDE,
) -> list[Detection]:
    """Lines of ``image`` ``(H, W, 3)`` uint8 RGB; ``prob_map`` maps a ``(1, 3, H, W)``
    uint8 batch to ``(1, 1, H, W)`` probabilities."""
    p = prepare(image, limit_side)
    prob = np.asarray(prob_map(p.batch))[0, 0]
    nw, nh = p.size
    prob = prob[:nh, :nw]
    w, h = p.original
    return boxes_from_map(prob, (w / nw, h / nh), (w, h), opts)
