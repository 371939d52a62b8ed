"""Geometry of the synthetic generator: the warps of the text's ink mask.

The text's ink mask is warped once, straight into the output image: rotation, slant,
perspective, the crop and the resize to the output height compose into one 3x3 matrix
(canvas -> output pixels), which one PIL transform applies to only the output's pixels.
Curvature is not a homography; it is applied to the canvas first. Matrices map column
vectors (x, y, 1) forward; PIL wants the inverse map. Reference points (the line box's
edges, each character's box) are mapped with the same matrices, so the caller knows
where the text went.
"""

from __future__ import annotations

import math
import random

import numpy as np
from PIL import Image

from crnn.data.synth.layout import EDGE_POINTS


def rotation(degrees: float) -> np.ndarray:
    """3x3 rotation by ``degrees`` (counter-clockwise on screen) about the origin."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """3x3 matrix mapping the 4 points ``src`` onto ``dst``."""
    a = np.zeros((8, 8))
    a[0::2, 0:2] = src
    a[0::2, 2] = 1.0
    a[1::2, 3:5] = src
    a[1::2, 5] = 1.0
    a[0::2, 6:8] = -src * dst[:, 0:1]
    a[1::2, 6:8] = -src * dst[:, 1:2]
    sol = np.linalg.solve(a, dst.reshape(-1))
    return np.append(sol, 1.0).reshape(3, 3)


def perspective(quad: np.ndarray, r: random.Random, shift: float) -> np.ndarray:
    """A homography moving each corner of ``quad`` (4x2, clockwise from top-left) by up to
    ``shift`` pixels in x and y: a keystone or slanted view of the text."""
    w = float(np.linalg.norm(quad[1] - quad[0]))
    h = float(np.linalg.norm(quad[3] - quad[0]))
    # Corners may not cross half-way to their neighbours (that would fold the image).
    shift = min(shift, 0.25 * w, 0.25 * h)
    moves = np.array([[r.uniform(-shift, shift), r.uniform(-shift, shift)] for _ in range(4)])
    return homography(quad, quad + moves)


def apply_h(h: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Map ``(N, 2)`` points through the 3x3 matrix ``h``."""
    p = pts @ h[:2, :2].T + h[:2, 2]
    if h[2, 0] == 0.0 and h[2, 1] == 0.0:
        return p / h[2, 2]
    return p / (pts @ h[2, :2] + h[2, 2])[:, None]


def warp(img: Image.Image, h: np.ndarray, size: tuple[int, int]) -> Image.Image:
    """The ``size`` output of mapping ``img`` through ``h`` (input -> output pixels),
    bilinear; output pixels whose source lies outside ``img`` get 0."""
    inv = np.linalg.inv(h)
    inv /= inv[2, 2]
    if abs(inv[2, 0]) < 1e-12 and abs(inv[2, 1]) < 1e-12:
        return img.transform(size, Image.AFFINE, tuple(inv[:2].reshape(-1)), Image.BILINEAR)
    return img.transform(size, Image.PERSPECTIVE, tuple(inv.reshape(-1)[:8]), Image.BILINEAR)


class Curve:
    """A vertical bend: each column moves down by ``s(x)``, a parabola through 0 at the
    canvas ends and ``sag`` pixels in the middle (negative bows upwards), applied as
    ``strips`` linear pieces. Points and boxes are mapped with the same piecewise-linear
    ``s`` that the pixels get, so tracked extents match the drawn ink."""

    def __init__(self, width: int, sag: float, strips: int = 8) -> None:
        self.off = max(0.0, -sag)
        self.knots = np.unique(np.linspace(0, width, strips + 1).round())
        t = 2.0 * self.knots / max(width, 1) - 1.0
        self.shift = sag * (1.0 - t * t) + self.off
        self.grow = int(math.ceil(abs(sag))) + 1

    def __call__(self, img: Image.Image) -> Image.Image:
        w, h = img.size
        out_h = h + self.grow
        mesh = []
        for x0, x1, s0, s1 in zip(
            self.knots[:-1], self.knots[1:], self.shift[:-1], self.shift[1:], strict=True
        ):
            quad = (x0, -s0, x0, out_h - s0, x1, out_h - s1, x1, -s1)
            mesh.append(((int(x0), 0, int(x1), out_h), quad))
        return img.transform((w, out_h), Image.MESH, mesh, Image.BILINEAR)

    def points(self, pts: np.ndarray) -> np.ndarray:
        out = pts.copy()
        out[:, 1] += np.interp(pts[:, 0], self.knots, self.shift)
        return out

    def boxes(self, boxes: np.ndarray) -> np.ndarray:
        """Bounding boxes ``(N, 4)`` (x0, y0, x1, y1) of the bent boxes: the shift over a
        box's columns is extreme at its ends or at a knot inside it."""
        ends = np.interp(boxes[:, [0, 2]], self.knots, self.shift)
        inside = (self.knots[None, :] > boxes[:, 0:1]) & (self.knots[None, :] < boxes[:, 2:3])
        lo = np.minimum(ends.min(1), np.where(inside, self.shift, np.inf).min(1))
        hi = np.maximum(ends.max(1), np.where(inside, self.shift, -np.inf).max(1))
        out = boxes.copy()
        out[:, 1] += lo
        out[:, 3] += hi
        return out


def shear(degrees: float) -> np.ndarray:
    """3x3 horizontal shear: a slanted (oblique) face, the top leaning right for a
    positive angle, the baseline fixed."""
    return np.array(
        [[1.0, -math.tan(math.radians(degrees)), 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    )


def line_perspective(
    r: random.Random, pts: np.ndarray, h: np.ndarray | None, shift: float
) -> np.ndarray:
    """A random perspective of the (possibly already warped by ``h``) line box, whose
    edge points ``pts`` a :class:`crnn.data.synth.layout.Layout` gives, composed onto
    ``h``: each corner moves by up to ``shift`` pixels."""
    n = EDGE_POINTS
    quad = pts[[0, n - 1, 2 * n - 1, n]]  # line box corners, clockwise from top-left
    if h is not None:
        quad = apply_h(h, quad)
    p = perspective(quad, r, shift)
    return p if h is None else p @ h
