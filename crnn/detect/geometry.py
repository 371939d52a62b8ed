"""Polygon geometry the detector needs, in NumPy: offsetting (shrink and unclip), areas,
perimeters, distances to edges and the IoU of two convex quadrilaterals.

DBNet shrinks each labelled polygon by ``D = A (1 - r²) / L`` (A its area, L its
perimeter, r the shrink ratio) to get the kernel it learns, and grows each found kernel
by ``D' = A' u / L'`` (u the unclip ratio) to get the line back. PaddleOCR and the paper
do both with the Clipper library; for the convex quadrilaterals and rectangles they are
applied to here, moving each edge along its normal and intersecting neighbours is the
same polygon (Clipper only rounds the outer corners, which the minimum-area rectangle
taken afterwards removes again).
"""

from __future__ import annotations

import numpy as np


def polygon_area(poly: np.ndarray) -> float:
    """Unsigned area of a polygon ``(N, 2)``."""
    x, y = poly[:, 0].astype(np.float64), poly[:, 1].astype(np.float64)
    return abs(0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)))


def polygon_perimeter(poly: np.ndarray) -> float:
    d = np.roll(poly, -1, axis=0).astype(np.float64) - poly
    return float(np.sqrt((d**2).sum(axis=1)).sum())


def offset_polygon(poly: np.ndarray, distance: float) -> np.ndarray | None:
    """Move every edge of a convex polygon ``(N, 2)`` outward by ``distance`` pixels
    (inward when negative). None when an inward offset leaves nothing (the polygon is
    thinner than twice the distance)."""
    p = poly.astype(np.float64)
    n = len(p)
    area = polygon_area(p)
    if area <= 0:
        return None
    # Orientation-independent outward normals: + for clockwise on screen (y down).
    x, y = p[:, 0], p[:, 1]
    signed = 0.5 * (np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))
    sign = 1.0 if signed > 0 else -1.0
    edges = np.roll(p, -1, axis=0) - p
    lengths = np.sqrt((edges**2).sum(axis=1))
    if (lengths < 1e-9).any():
        keep = lengths >= 1e-9
        if keep.sum() < 3:
            return None
        return offset_polygon(p[keep], distance)
    # y down and clockwise on screen: the outward normal of edge (dx, dy) is (dy, -dx).
    normals = sign * np.stack([edges[:, 1], -edges[:, 0]], axis=1) / lengths[:, None]
    moved = p + normals * distance  # a point on each moved edge (its start)
    out = np.empty_like(p)
    for i in range(n):
        j = (i - 1) % n  # edges j (ending at corner i) and i (starting there)
        a, da = moved[j], edges[j]
        b, db = moved[i], edges[i]
        cross = da[0] * db[1] - da[1] * db[0]
        if abs(cross) < 1e-9 * lengths[i] * lengths[j]:  # parallel: keep the shifted corner
            out[i] = p[i] + normals[i] * distance
            continue
        t = ((b[0] - a[0]) * db[1] - (b[1] - a[1]) * db[0]) / cross
        out[i] = a + t * da
    if distance < 0:
        # The edges' order flips when the polygon collapsed past a point.
        ox, oy = out[:, 0], out[:, 1]
        new_signed = 0.5 * (np.dot(ox, np.roll(oy, -1)) - np.dot(np.roll(ox, -1), oy))
        if new_signed * signed <= 0 or polygon_area(out) < 1e-6:
            return None
        # Each moved edge must point the same way as the original one.
        new_edges = np.roll(out, -1, axis=0) - out
        if ((new_edges * edges).sum(axis=1) <= 0).any():
            return None
    return out


def shrink_distance(poly: np.ndarray, ratio: float) -> float:
    """DBNet's ``D = A (1 - r²) / L``."""
    perimeter = polygon_perimeter(poly)
    return polygon_area(poly) * (1 - ratio**2) / perimeter if perimeter > 0 else 0.0


def unclip_distance(poly: np.ndarray, ratio: float) -> float:
    """DBNet's ``D' = A' u / L'``."""
    perimeter = polygon_perimeter(poly)
    return polygon_area(poly) * ratio / perimeter if perimeter > 0 else 0.0


def segment_distances(xs: np.ndarray, ys: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of every point ``(xs, ys)`` (any equal shapes) to the segment ``ab``."""
    d = b - a
    dd = float(d @ d)
    px, py = xs - a[0], ys - a[1]
    t = np.clip((px * d[0] + py * d[1]) / dd, 0.0, 1.0) if dd > 0 else np.zeros_like(px)
    return np.sqrt((px - t * d[0]) ** 2 + (py - t * d[1]) ** 2)


def convex_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two convex polygons ``(N, 2)``."""
    inter = convex_intersection_area(a, b)
    union = polygon_area(a) + polygon_area(b) - inter
    return inter / union if union > 0 else 0.0


def convex_intersection_area(a: np.ndarray, b: np.ndarray) -> float:
    import cv2

    area, _ = cv2.intersectConvexConvex(a.astype(np.float32), b.astype(np.float32))
    return max(float(area), 0.0)


def convex_hull(poly: np.ndarray) -> np.ndarray:
    """The convex hull of a polygon ``(N, 2)`` (a concave quadrilateral's triangle or
    quadrilateral), for the convex-only operations above."""
    import cv2

    return cv2.convexHull(poly.astype(np.float32)).reshape(-1, 2)
