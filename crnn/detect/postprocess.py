"""From the detector's probability map to line quadrilaterals, in NumPy and OpenCV.

DBNet's post-processing (the paper; PaddleOCR's ``db_postprocess.py`` has the same
steps): binarize the probability map at ``thresh``, take each connected region's
contour, its minimum-area rectangle, the mean probability inside it as its score (drop
those under ``box_thresh``), grow the rectangle by ``D' = A' u / L'`` (the kernel was
shrunk in training; ``u`` = ``unclip_ratio``), and scale back to the input image.
Rotated lines come back rotated, columns upright.

One step of its own before the rectangles: a region that the map, binarized again at the
higher ``split_thresh``, parts into two or more pieces of at least ``split_share`` of its
area each is taken as those pieces where they lie one beside the next across the line's
direction (two stacked rows of a poster's block that the map joins at 0.3 but holds apart
at 0.45) or along it with gaps of at least their thickness (text groups set apart); a
line the map weakens at a thin character stays one line.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from crnn.detect.geometry import offset_polygon, unclip_distance

THRESH = 0.3
BOX_THRESH = 0.6
UNCLIP_RATIO = 1.5
MIN_SIZE = 3
MAX_CANDIDATES = 1000
# A region parts where the map binarized at SPLIT_THRESH falls into pieces of at least
# SPLIT_SHARE of its area each (0: never), lying across the line or apart along it
# (_separate). Chosen on the detector's 82 validation web images (a development set), end
# to end, every parting taken: char F1 74.91 % unparted; 0.45 with 0.2 75.78 %, with 0.15
# 75.66 %; 0.4 and 0.5 with 0.15 75.43 and 75.31 %; 0.7 74.31 %; a share of 0.08-0.1
# 74.41-74.74 %. At 0.45 and 0.2, stacked pieces alone 75.00 %, with GAP_PARTS 1 75.37 %.
SPLIT_THRESH = 0.45
SPLIT_SHARE = 0.2


@dataclass(frozen=True)
class DetOptions:
    """The post-processing's knobs (defaults as the DBNet paper's and PaddleOCR's)."""

    thresh: float = THRESH
    box_thresh: float = BOX_THRESH
    unclip_ratio: float = UNCLIP_RATIO
    min_size: float = MIN_SIZE
    max_candidates: int = MAX_CANDIDATES
    split_thresh: float = SPLIT_THRESH
    split_share: float = SPLIT_SHARE


DEFAULT_OPTIONS = DetOptions()


@dataclass
class Detection:
    """One found line: ``quad`` ``(4, 2)`` float32 on the input image, clockwise from
    the top-left corner, and its ``score`` (mean kernel probability)."""

    quad: np.ndarray
    score: float


def box_score(prob: np.ndarray, box: np.ndarray) -> float:
    """Mean of ``prob`` inside the polygon ``box`` ``(4, 2)`` (map pixels)."""
    h, w = prob.shape
    x0 = int(np.clip(np.floor(box[:, 0].min()), 0, w - 1))
    x1 = int(np.clip(np.ceil(box[:, 0].max()), 0, w - 1))
    y0 = int(np.clip(np.floor(box[:, 1].min()), 0, h - 1))
    y1 = int(np.clip(np.ceil(box[:, 1].max()), 0, h - 1))
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    shifted = box - np.array([x0, y0], np.float32)
    cv2.fillPoly(mask, [np.round(shifted).astype(np.int32)], 1)
    return float(cv2.mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)[0])


def rect_corners(rect: tuple) -> np.ndarray:
    """A ``cv2.minAreaRect`` as 4 corners clockwise from the top-left."""
    from crnn.data.quads import order_corners

    pts = cv2.boxPoints(rect).astype(np.float32)
    ordered = order_corners(pts)
    return pts if ordered is None else ordered


def boxes_from_map(
    prob: np.ndarray,
    scale: tuple[float, float],
    size: tuple[int, int],
    opts: DetOptions = DEFAULT_OPTIONS,
) -> list[Detection]:
    """Lines on the input image from a probability map ``(h, w)`` in [0, 1].

    Args:
        scale: ``(sx, sy)``: input pixels per map pixel.
        size: the input image's ``(width, height)``, to clip to.
    """
    bitmap = (prob > opts.thresh).astype(np.uint8)
    contours, _ = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    contours = parted(prob, bitmap, list(contours), opts)
    out: list[Detection] = []
    width, height = size
    for contour in contours[: opts.max_candidates]:
        if len(contour) < 3:
            continue
        rect = cv2.minAreaRect(contour)
        if min(rect[1]) < opts.min_size:
            continue
        box = cv2.boxPoints(rect).astype(np.float32)
        score = box_score(prob, box)
        if score < opts.box_thresh:
            continue
        grown = offset_polygon(box, unclip_distance(box, opts.unclip_ratio))
        if grown is None:
            continue
        rect = cv2.minAreaRect(grown.astype(np.float32))
        if min(rect[1]) < opts.min_size + 2:
            continue
        quad = rect_corners(rect)
        quad[:, 0] = np.clip(quad[:, 0] * scale[0], 0, width)
        quad[:, 1] = np.clip(quad[:, 1] * scale[1], 0, height)
        out.append(Detection(quad, score))
    return out


def parted(
    prob: np.ndarray, bitmap: np.ndarray, contours: list[np.ndarray], opts: DetOptions
) -> list[np.ndarray]:
    """``contours`` (of ``bitmap``'s regions) with each region that ``prob`` binarized at
    ``opts.split_thresh`` parts into two or more pieces of at least ``opts.split_share``
    of its area, set apart as lines are (:func:`_separate`), replaced by those pieces'
    outlines."""
    if not opts.split_thresh or not contours:
        return contours
    n, labels, stats, _ = cv2.connectedComponentsWithStats(bitmap, connectivity=8)
    high = prob > opts.split_thresh
    pieces: dict[int, list[np.ndarray]] = {}
    for i in range(1, n):
        x, y, w, h, area = stats[i]
        region = labels[y : y + h, x : x + w] == i
        m, part, part_stats, _ = cv2.connectedComponentsWithStats(
            (region & high[y : y + h, x : x + w]).astype(np.uint8), connectivity=8
        )
        big = [j for j in range(1, m) if part_stats[j, cv2.CC_STAT_AREA] >= opts.split_share * area]
        if len(big) < 2:
            continue
        masks = [part == j for j in big]
        if _separate(region, masks):
            pieces[i] = [
                c + np.array([[[x, y]]], np.int32)
                for mask in masks
                for c in cv2.findContours(
                    mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
                )[0]
            ]
    if not pieces:
        return contours
    # A contour (outer or a hole's) runs over its own region's pixels.
    kept = [c for c in contours if int(labels[c[0, 0, 1], c[0, 0, 0]]) not in pieces]
    return kept + [c for outlines in pieces.values() for c in outlines]


def _min_rect(mask: np.ndarray) -> tuple:
    """The minimum-area rectangle (``cv2.minAreaRect``) of ``mask``'s pixels."""
    ys, xs = np.nonzero(mask)
    return cv2.minAreaRect(np.stack([xs, ys], 1).astype(np.float32))


def _long_axis(rect: tuple) -> np.ndarray:
    """The unit direction of the longer side of the rectangle ``rect``."""
    corners = cv2.boxPoints(rect)
    a, b = corners[1] - corners[0], corners[2] - corners[1]
    side = a if np.hypot(*a) >= np.hypot(*b) else b
    return side / max(float(np.hypot(*side)), 1e-6)


# A region at least this many times as long as wide reads its line direction off itself;
# a squarer one (two short rows stacked) off its largest piece.
STACK_ASPECT = 1.5


def _separate(region: np.ndarray, pieces: list[np.ndarray]) -> bool:
    """Whether ``pieces`` (masks within ``region``) are lines of their own: along the line's
    direction with gaps of at least :data:`GAP_PARTS` of their thickness (text groups set
    apart), or one beside the next across it (rows stacked, or columns side by side), each
    pair overlapping there by under half the thinner. Not the halves of one line that the
    map weakens at a thin character."""
    rect = _min_rect(region)
    rw, rh = rect[1]
    elongated = max(rw, rh) >= STACK_ASPECT * max(min(rw, rh), 1.0)
    along = _long_axis(rect if elongated else _min_rect(max(pieces, key=lambda p: int(p.sum()))))
    normal = np.array([-along[1], along[0]])
    spans, runs = [], []
    for piece in pieces:
        py, px = np.nonzero(piece)
        across = px * normal[0] + py * normal[1]
        spans.append((float(across.min()), float(across.max())))
        on = px * along[0] + py * along[1]
        runs.append((float(on.min()), float(on.max()), spans[-1][1] - spans[-1][0]))
    if GAP_PARTS and _apart(runs):
        return True
    spans.sort()
    return all(
        min(a1, b1) - max(a0, b0) < 0.5 * min(a1 - a0, b1 - b0)
        for (a0, a1), (b0, b1) in zip(spans, spans[1:])
    )


# Pieces along the line are parted where each gap is at least this many times the
# thinner piece's thickness (0.5: 75.35 %, 1: 75.37 %, 2: 75.39 % on the 82 images; a
# caption's 本店商品一律八折 parted at its thin 一 at any gap).
GAP_PARTS = 1.0


def _apart(runs: list[tuple[float, float, float]]) -> bool:
    """Pieces along the line, each gap between neighbours at least GAP_PARTS of the thinner
    piece's thickness: text groups set apart, not a weak character between two."""
    runs = sorted(runs)
    return all(
        b0 - a1 >= GAP_PARTS * min(ta, tb) for (a0, a1, ta), (b0, b1, tb) in zip(runs, runs[1:])
    )


# A coarse scale's line is added where at most this share of it is covered by the finer
# scales' lines, or where it is surer (a higher box score) than the mean of the fine lines
# lying inside it; the fine lines lying this much inside an added one are its fragments
# and give way (chosen on the validation web images: 0.3-0.7 and 0.5-1.0 read the same to
# 0.1 point of char F1; "surer than their mean" 74.1 -> 74.5 %, than their best 74.3 %).
COARSE_NEW = 0.5
FRAGMENT_INSIDE = 0.7


def merge_coarse(
    fine: list[Detection], coarse: list[Detection], size: tuple[int, int]
) -> list[Detection]:
    """``fine`` (lines found at a finer scale) with the lines of ``coarse`` that they
    mostly miss, or that are surer than the fine lines inside them, in place of those: a
    headline too large for the network's field of view at the fine scale, found there
    missing or in weak pieces, comes back whole from the coarse one. Coverage is measured
    on a mask at a quarter of the image's ``(width, height)``."""
    if not coarse:
        return fine
    shape = (max(size[1] // 4, 1), max(size[0] // 4, 1))

    def mask(quads: list[np.ndarray]) -> np.ndarray:
        m = np.zeros(shape, np.uint8)
        for q in quads:
            cv2.fillPoly(m, [np.round(q / 4).astype(np.int32)], 1)
        return m

    def share_in(m: np.ndarray, other: np.ndarray) -> float:
        area = int(m.sum())
        return int((m & other).sum()) / area if area else 1.0

    # Each fine line's mask is drawn once: every coarse line is measured against them.
    fine_masks = [mask([d.quad]) for d in fine]
    covered = mask([d.quad for d in fine])

    def surer(c: Detection, inside: np.ndarray) -> bool:
        pieces = [
            d.score for d, m in zip(fine, fine_masks) if share_in(m, inside) > FRAGMENT_INSIDE
        ]
        return bool(pieces) and c.score > float(np.mean(pieces))

    added = []
    for c in coarse:
        cm = mask([c.quad])
        if share_in(cm, covered) < COARSE_NEW or surer(c, cm):
            added.append(c)
    if not added:
        return fine
    cover = mask([d.quad for d in added])
    return [d for d, m in zip(fine, fine_masks) if share_in(m, cover) <= FRAGMENT_INSIDE] + added
