"""Found lines in reading order, and each cut out perspective-corrected for the
recognizer: NumPy and OpenCV.

Reading order: lines whose vertical extents overlap by more than half the shorter one's
height share a row, rows top to bottom, each left to right (the order PaddleOCR's
``sorted_boxes`` approximates with a 10 px tolerance, which breaks on large text).
Columns (lines more than :data:`COLUMN_ASPECT` times as tall as wide) are read right to
left among themselves, as vertical Chinese is, after the rows above them. Where the lines
lean together (a photographed sign, a page shot at an angle: their median slope more than
:data:`LEAN_DEGREES`), rows are found in the frame turned upright by that slope: the
bounding boxes of two leaning lines one above the other overlap, and were taken for one
row read left to right.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from crnn.detect.postprocess import Detection

COLUMN_ASPECT = 1.5
LEAN_DEGREES = 3.0
# The cut keeps this share of the line's height as margin on each side (the recognizer
# was trained on lines with a little background around the ink).
CUT_MARGIN = 0.08


def _extent(q: np.ndarray) -> tuple[float, float, float, float]:
    return float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max())


def is_column(quad: np.ndarray) -> bool:
    """Whether a quadrilateral stands upright (a vertical line of text)."""
    w = (math.dist(quad[0], quad[1]) + math.dist(quad[3], quad[2])) / 2
    h = (math.dist(quad[0], quad[3]) + math.dist(quad[1], quad[2])) / 2
    return h > COLUMN_ASPECT * w


def page_lean(dets: list[Detection]) -> float:
    """The lines' median slope in radians (their top edges; columns left out), 0 when
    there are none."""
    angles = [
        math.atan2(float(q[1][1] - q[0][1]), float(q[1][0] - q[0][0]))
        for q in (d.quad for d in dets)
        if not is_column(q)
    ]
    return float(np.median(angles)) if angles else 0.0


def reading_order(dets: list[Detection]) -> list[Detection]:
    """``dets`` sorted into reading order (see the module docstring)."""
    lean = page_lean(dets)
    if abs(math.degrees(lean)) <= LEAN_DEGREES:
        lean = 0.0
    c, s = math.cos(-lean), math.sin(-lean)
    turn = np.array([[c, -s], [s, c]], np.float64)

    def extent(d: Detection) -> tuple[float, float, float, float]:
        return _extent(d.quad @ turn.T) if lean else _extent(d.quad)

    rows: list[list[Detection]] = []
    columns = [d for d in dets if is_column(d.quad)]
    lines = sorted((d for d in dets if not is_column(d.quad)), key=lambda d: extent(d)[1])
    spans: list[tuple[float, float]] = []
    for d in lines:
        _, y0, _, y1 = extent(d)
        for i, (r0, r1) in enumerate(spans):
            overlap = min(y1, r1) - max(y0, r0)
            if overlap > 0.5 * min(y1 - y0, r1 - r0):
                rows[i].append(d)
                spans[i] = (min(r0, y0), max(r1, y1))
                break
        else:
            rows.append([d])
            spans.append((y0, y1))
    out = [d for row in rows for d in sorted(row, key=lambda d: extent(d)[0])]
    return out + sorted(columns, key=lambda d: -_extent(d.quad)[2])


def cut_line(image: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """The line inside ``quad`` (clockwise from its top-left corner) as an upright
    rectangle, perspective-corrected, with a margin of :data:`CUT_MARGIN` of its height
    (columns keep their shape: the caller decides how to read them)."""
    q = np.asarray(quad, np.float32)
    w = (math.dist(q[0], q[1]) + math.dist(q[3], q[2])) / 2
    h = (math.dist(q[0], q[3]) + math.dist(q[1], q[2])) / 2
    m = CUT_MARGIN * min(w, h)
    # Grow the quadrilateral along its own axes by the margin.
    ux = (q[1] - q[0] + q[2] - q[3]) / 2
    uy = (q[3] - q[0] + q[2] - q[1]) / 2
    ux /= max(np.linalg.norm(ux), 1e-6)
    uy /= max(np.linalg.norm(uy), 1e-6)
    grown = np.stack(
        [
            q[0] - m * ux - m * uy,
            q[1] + m * ux - m * uy,
            q[2] + m * ux + m * uy,
            q[3] - m * ux + m * uy,
        ]
    )
    out_w, out_h = max(int(round(w + 2 * m)), 1), max(int(round(h + 2 * m)), 1)
    dst = np.array([[0, 0], [out_w, 0], [out_w, out_h], [0, out_h]], np.float32)
    t = cv2.getPerspectiveTransform(grown.astype(np.float32), dst)
    return cv2.warpPerspective(
        image, t, (out_w, out_h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
