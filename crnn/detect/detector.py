"""Finding lines in a whole image with the detector, over any map function (ONNX
Runtime at read time, the PyTorch module in training's validation): NumPy only.

``prepare`` scales an image (by default as training's validation does: long side at
most ``limit_side``, never up; then each side padded up to a multiple of 32, the
network's stride), the map function gives the probability map, and
``crnn.detect.postprocess`` turns it into quadrilaterals on the input image.

Reading looks at each image at two scales (``READ_ENLARGE``, ``READ_PYRAMID``): its long
side brought to ``limit_side`` (enlarged where smaller: small lines of a small web image
come into the network's reach), then half that, where headlines too large for the
network's field of view are found whole; a coarse line is kept where the fine scale
mostly missed it (``crnn.detect.postprocess.merge_coarse``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from crnn.detect.postprocess import (
    DEFAULT_OPTIONS,
    Detection,
    DetOptions,
    boxes_from_map,
    merge_coarse,
)

LIMIT_SIDE = 960
STRIDE = 32
# Smallest side the network is given: below it the feature pyramid has too few cells.
MIN_SIDE = 64
# What reading does (measured on the 82 validation web images, a development set, 2-core
# EPYC, 2026-12-04: char F1 67.9 % read at one scale, never enlarged; 70.4 % enlarged to
# 960 px; 71.6 % with the half scale too, +25 % of the time; a quarter scale as well:
# 70.4 %). The most an image is enlarged by (a 240 px picture to 960 px) and the scales,
# relative to the first, it is looked at.
READ_ENLARGE = 4.0
READ_PYRAMID = (1.0, 0.5)
# The coarser looks keep a line only from this box score (or the detector's own, if
# higher): their weak regions are a large crop's characters in pieces more often than a
# headline (two photographed 2-character crops of zh_real_dev, 维维 and 快乐, were read
# as nothing at the bundled 0.3; 0.4: char F1 74.1 % on the validation web images, 74.0 %
# at 0.3, 74.2 % at 0.5, where another crop became a page of pieces).
COARSE_BOX_THRESH = 0.4


@dataclass
class Prepared:
    """An image ready for the network: ``batch`` ``(1, 3, H, W)`` uint8 and how to map
    back: ``size`` (the scaled content's width and height inside the padding) and the
    input's ``(width, height)``."""

    batch: np.ndarray
    size: tuple[int, int]
    original: tuple[int, int]


def read_scale(h: int, w: int, limit_side: int, enlarge: float = 1.0) -> float:
    """The scale an ``h x w`` image is looked at: its long side to ``limit_side``, up by
    at most ``enlarge`` (1: down only). Training's crops and validation use it too."""
    return min(enlarge, limit_side / max(h, w))


def prepare(
    image: np.ndarray, limit_side: int = LIMIT_SIDE, scale: float | None = None
) -> Prepared:
    """``(H, W, 3)`` uint8 RGB -> :class:`Prepared`, scaled by ``scale`` (default: the
    long side down to ``limit_side``, never up)."""
    h, w = image.shape[:2]
    s = read_scale(h, w, limit_side) if scale is None else scale
    nw, nh = max(int(round(w * s)), 1), max(int(round(h * s)), 1)
    if (nw, nh) == (w, h):
        scaled = image
    else:
        up = nw > w
        scaled = cv2.resize(
            image, (nw, nh), interpolation=cv2.INTER_LINEAR if up else cv2.INTER_AREA
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
    enlarge: float = 1.0,
    pyramid: tuple[float, ...] = (1.0,),
) -> list[Detection]:
    """Lines of ``image`` ``(H, W, 3)`` uint8 RGB; ``prob_map`` maps a ``(1, 3, H, W)``
    uint8 batch to ``(1, 1, H, W)`` probabilities.

    The image is looked at with its long side brought to ``limit_side`` (enlarged by at
    most ``enlarge``; 1: never), then at each further scale of ``pyramid`` relative to
    that one, each coarser scale adding the lines (from a box score of at least
    :data:`COARSE_BOX_THRESH`) the finer ones mostly missed. The defaults are training's
    validation; reading passes ``READ_ENLARGE`` and ``READ_PYRAMID``."""
    h, w = image.shape[:2]
    first = read_scale(h, w, limit_side, enlarge)
    coarse = dataclasses.replace(opts, box_thresh=max(opts.box_thresh, COARSE_BOX_THRESH))
    found: list[Detection] | None = None
    for rel in pyramid:
        p = prepare(image, limit_side, first * rel)
        prob = np.asarray(prob_map(p.batch))[0, 0]
        nw, nh = p.size
        scale, size = (w / nw, h / nh), (w, h)
        if found is None:
            found = boxes_from_map(prob[:nh, :nw], scale, size, opts)
        else:
            found = merge_coarse(found, boxes_from_map(prob[:nh, :nw], scale, size, coarse), size)
    return found or []
