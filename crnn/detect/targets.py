"""DBNet's training targets for one image, in NumPy and OpenCV.

- the **probability map**: 1 inside each line's shrunk kernel (the labelled polygon moved
  inward by ``D = A (1 - r²) / L``), 0 elsewhere; its **mask** is 0 over don't-care
  regions and lines too small to learn, so they are neither rewarded nor punished;
- the **threshold map**: inside each polygon grown by ``D``, ``1 - distance to the
  nearest edge / D``, mapped to ``[thresh_min, thresh_max]``; its **mask** covers the
  grown polygons (the border the threshold is learnt on).

As in the paper and PaddleOCR's ``make_shrink_map.py`` / ``make_border_map.py``: r = 0.4,
thresholds 0.3 to 0.7, lines shorter than 8 px on their short side masked out.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from crnn.detect.geometry import convex_hull, offset_polygon, segment_distances, shrink_distance

SHRINK_RATIO = 0.4
THRESH_MIN = 0.3
THRESH_MAX = 0.7
MIN_TEXT_SIZE = 8


@dataclass
class DetTargets:
    """The four maps of one image, each ``(H, W)`` float32."""

    prob: np.ndarray
    prob_mask: np.ndarray
    thresh: np.ndarray
    thresh_mask: np.ndarray

    def stack(self) -> np.ndarray:
        """``(4, H, W)``: prob, prob mask, thresh, thresh mask."""
        return np.stack([self.prob, self.prob_mask, self.thresh, self.thresh_mask])


def _short_side(quad: np.ndarray) -> float:
    (_, _), (w, h), _ = cv2.minAreaRect(quad.astype(np.float32))
    return min(w, h)


def make_targets(
    quads: np.ndarray,
    ignore: np.ndarray,
    size: tuple[int, int],
    shrink_ratio: float = SHRINK_RATIO,
    min_text_size: float = MIN_TEXT_SIZE,
) -> DetTargets:
    """The maps for lines ``quads`` ``(N, 4, 2)`` (pixels) on an image of ``size``
    ``(height, width)``; ``ignore`` ``(N,)`` marks don't-care lines."""
    h, w = size
    prob = np.zeros((h, w), np.float32)
    prob_mask = np.ones((h, w), np.float32)
    thresh = np.zeros((h, w), np.float32)
    thresh_mask = np.zeros((h, w), np.float32)
    for quad, skip in zip(quads, ignore):
        poly = convex_hull(quad)
        if len(poly) < 3:
            continue
        if skip or _short_side(poly) < min_text_size:
            cv2.fillPoly(prob_mask, [np.round(poly).astype(np.int32)], 0.0)
            continue
        d = shrink_distance(poly, shrink_ratio)
        kernel = offset_polygon(poly, -d)
        if kernel is None:
            cv2.fillPoly(prob_mask, [np.round(poly).astype(np.int32)], 0.0)
            continue
        cv2.fillPoly(prob, [np.round(kernel).astype(np.int32)], 1.0)
        _draw_border(poly, d, thresh, thresh_mask)
    thresh = thresh * (THRESH_MAX - THRESH_MIN) + THRESH_MIN
    return DetTargets(prob, prob_mask, thresh, thresh_mask)


def _draw_border(poly: np.ndarray, d: float, thresh: np.ndarray, mask: np.ndarray) -> None:
    """Inside ``poly`` grown by ``d``: ``max(thresh, 1 - dist/d)`` and the mask set."""
    if d <= 0:
        return
    grown = offset_polygon(poly, d)
    if grown is None:
        return
    cv2.fillPoly(mask, [np.round(grown).astype(np.int32)], 1.0)
    h, w = thresh.shape
    x0, y0 = np.floor(grown.min(axis=0)).astype(int)
    x1, y1 = np.ceil(grown.max(axis=0)).astype(int)
    cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, w - 1), min(y1, h - 1)
    if cx1 < cx0 or cy1 < cy0:
        return
    ys, xs = np.mgrid[cy0 : cy1 + 1, cx0 : cx1 + 1].astype(np.float64)
    dist = np.full(xs.shape, np.inf)
    for i in range(len(poly)):
        a, b = poly[i].astype(np.float64), poly[(i + 1) % len(poly)].astype(np.float64)
        dist = np.minimum(dist, segment_distances(xs, ys, a, b))
    value = 1.0 - np.clip(dist / d, 0.0, 1.0)
    region = thresh[cy0 : cy1 + 1, cx0 : cx1 + 1]
    np.maximum(region, value.astype(np.float32), out=region)
