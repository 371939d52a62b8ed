"""Where each character of a read line is: boxes from the CTC alignment and the ink.

CTC says at which output frames each character fired (``Prediction.char_frames``), not
where the character's ink is: a spike sits somewhere inside its character (the English
models' spikes 0.8 frames left of the centre on average, the first character's at the
line's start; the Chinese model's within 0.3 frames of it). So the frames give only the
order and the rough place of each character; the boxes come from the line's ink:

1. each character's centre is its frames' middle; the first and last are pulled inside
   the ink's ends by half the typical spacing (a first spike fires early);
2. neighbours are split halfway between their centres, moved to the lightest column
   near there (the gap between two characters where there is one);
3. each cell is tightened to the ink inside it (a space keeps its cell).

Everything here is in the pixels of the line as the recognizer read it; ``Placement``
maps a box back onto the image the user gave (the line's crop on the levelled page, the
page's tilt and turn).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Box = tuple[int, int, int, int]


def ink_mask(arr: np.ndarray, width: int | None = None) -> np.ndarray:
    """``(H, W)`` bool: the pixels of a ``(C, H, W)`` (or ``(H, W)``) uint8 line that
    differ from its background (its median grey) by more than 40 % of the largest
    difference, dark on light or light on dark alike."""
    g = np.asarray(arr, np.float32)
    g = g.mean(axis=0) if g.ndim == 3 else g
    g = g[:, : width or g.shape[1]]
    dev = np.abs(g - np.median(g))
    top = float(dev.max()) if dev.size else 0.0
    return dev > max(16.0, 0.4 * top)


def char_cells(
    frames: Sequence[tuple[int, int]], stride: float, ink: np.ndarray
) -> list[tuple[float, float]]:
    """Each character's ``[x0, x1)`` on the line, from its frames (``stride``: pixels per
    output frame) and the line's ink mask (steps 1 and 2 above)."""
    return _cells(frames, stride, ink.sum(axis=0).tolist())


def _cells(
    frames: Sequence[tuple[int, int]], stride: float, col: list[int]
) -> list[tuple[float, float]]:
    """:func:`char_cells` on the ink's column sums ``col`` (plain Python: a line has a few
    dozen characters, and numpy's per-call cost was most of the time)."""
    n, w = len(frames), len(col)
    if n == 0:
        return []
    inked = [x for x, c in enumerate(col) if c]
    lo, hi = (float(inked[0]), float(inked[-1] + 1)) if inked else (0.0, float(w))
    centres = [(f0 + f1 + 1) / 2.0 * stride for f0, f1 in frames]
    if n == 1:
        return [(lo, hi)]
    spacing = statistics.median(b - a for a, b in zip(centres, centres[1:]))
    centres[0] = min(max(centres[0], lo + 0.5 * spacing), centres[1] - 0.25 * spacing)
    centres[-1] = max(min(centres[-1], hi - 0.5 * spacing), centres[-2] + 0.25 * spacing)
    # The line's spike bias: how far the lightest column between two neighbours sits
    # from their centres' midpoint, as a median over the line (0 for the Chinese model,
    # about +3 px at 32 px high for the English ones, whose spikes fire early).
    bias = statistics.median(
        _lightest(col, (a + b) / 2.0, 0.5 * (b - a)) - (a + b) / 2.0
        for a, b in zip(centres, centres[1:])
    )
    cuts = [lo]
    for a, b in zip(centres, centres[1:]):
        mid = (a + b) / 2.0 + bias
        cuts.append(min(max(_lightest(col, mid, 0.3 * (b - a)), cuts[-1]), hi))
    cuts.append(max(hi, cuts[-1]))
    return list(zip(cuts[:-1], cuts[1:]))


def _lightest(col: Sequence[int], mid: float, half: float) -> float:
    """The column of least ink within ``half`` px of ``mid`` (the one nearest ``mid``
    among equals), as the position of its centre."""
    half = max(1.0, half)
    x0, x1 = max(int(math.floor(mid - half)), 0), min(int(math.ceil(mid + half)) + 1, len(col))
    if x1 <= x0:
        return mid
    least = min(col[x0:x1])
    return (
        min((x for x in range(x0, x1) if col[x] == least), key=lambda x: abs(x + 0.5 - mid)) + 0.5
    )


def char_boxes(
    arr: np.ndarray, width: int, n_frames: int, frames: Sequence[tuple[int, int]], text: str = ""
) -> list[tuple[float, float, float, float]]:
    """Each character's box ``(x0, y0, x1, y1)`` on the line ``arr`` ``(C, H, W)`` (its
    first ``width`` columns real) that the model read into ``n_frames`` frames; a space
    (in ``text``) keeps its whole cell."""
    ink = ink_mask(arr, width)
    h = ink.shape[0]
    col = ink.sum(axis=0).tolist()
    inked = ink.any(axis=0)
    tops = np.where(inked, ink.argmax(axis=0), h).tolist()  # each column's first and last ink row
    bottoms = np.where(inked, h - ink[::-1].argmax(axis=0), 0).tolist()
    out = []
    for k, (a, b) in enumerate(_cells(frames, width / max(1, n_frames), col)):
        x0, x1 = int(math.floor(a)), max(int(math.ceil(b)), int(math.floor(a)) + 1)
        cols = [x for x in range(x0, min(x1, len(col))) if col[x]]
        if (k < len(text) and text[k].isspace()) or not cols:
            out.append((a, 0.0, b, float(h)))
        else:
            top, bottom = min(tops[x] for x in cols), max(bottoms[x] for x in cols)
            out.append((float(cols[0]), float(top), float(cols[-1] + 1), float(bottom)))
    return out


@dataclass
class Placement:
    """Where a line the recognizer read sits on the user's image: ``rect`` ``(x0, y0, x1,
    y1)`` is the region (on the page levelled by ``angle`` degrees; the image as given is
    ``size`` (W, H)) whose pixels, turned and resized, the recognizer read;
    ``page_turn``: degrees the whole page was turned clockwise to be read (90, 180 or
    270; then ``size`` is the turned page's and ``angle`` levelled the turned page)."""

    rect: tuple[float, float, float, float]
    size: tuple[int, int]
    angle: float = 0.0
    page_turn: int = 0

    def box(self, b: Sequence[float], width: int, height: int, turn: int = 0) -> list[int]:
        """A box on the line read (``width`` x ``height`` px, the region turned by
        ``turn`` degrees clockwise first) -> ``[x0, y0, x1, y1]`` on the image as given."""
        x0, y0, x1, y1 = self.rect
        rw, rh = x1 - x0, y1 - y0
        tw, th = (rh, rw) if turn in (90, 270) else (rw, rh)
        sx, sy = tw / max(1, width), th / max(1, height)
        bx0, by0, bx1, by1 = b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy
        if turn == 180:
            bx0, by0, bx1, by1 = rw - bx1, rh - by1, rw - bx0, rh - by0
        elif turn == 90:  # turned clockwise: x' = rh - y, y' = x
            bx0, by0, bx1, by1 = by0, rh - bx1, by1, rh - bx0
        elif turn == 270:  # x' = y, y' = rw - x
            bx0, by0, bx1, by1 = rw - by1, bx0, rw - by0, bx1
        corners = [(x0 + bx, y0 + by) for bx in (bx0, bx1) for by in (by0, by1)]
        w, h = self.size
        if self.angle:  # the page was levelled by turning it -angle about its centre
            a = math.radians(self.angle)
            c, s = math.cos(a), math.sin(a)
            cx, cy = w / 2.0, h / 2.0
            corners = [
                (cx + c * (x - cx) + s * (y - cy), cy - s * (x - cx) + c * (y - cy))
                for x, y in corners
            ]
        if self.page_turn == 180:
            corners = [(w - x, h - y) for x, y in corners]
        elif self.page_turn == 90:  # read turned clockwise: (x, y) read is (y, w - x) given
            corners, (w, h) = [(y, w - x) for x, y in corners], (h, w)
        elif self.page_turn == 270:  # turned anticlockwise: (x, y) read is (h - y, x) given
            corners, (w, h) = [(h - y, x) for x, y in corners], (h, w)
        xs, ys = [x for x, _ in corners], [y for _, y in corners]
        return [
            max(0, int(math.floor(min(xs)))),
            max(0, int(math.floor(min(ys)))),
            min(w, int(math.ceil(max(xs)))),
            min(h, int(math.ceil(max(ys)))),
        ]
