"""How far a line's writing leans (italic and oblique display faces, signs seen at an
angle), and the line sheared upright: a second read that ``Recognizer(deslant=...)``
makes of a crop that leans. NumPy and Pillow, and Otsu's threshold from ``lines``.

The lean is the shear that makes the ink's column profile peakiest, the classical
deslanting of handwriting recognisers: sheared upright, a line's vertical strokes each
fall into a few columns, so the sum of the squared column counts is largest. Chinese
characters are rich in vertical strokes, which makes the measure sharp for them.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

from crnn.layout.lines import otsu

# The leans tried, in degrees (positive: the tops of the letters to the right).
LEANS = tuple(sorted(range(-20, 21, 2), key=abs))
# The height a line is measured at (px): enough for its strokes, cheap for long lines.
MEASURE_HEIGHT = 48


def _ink(img: Image.Image) -> np.ndarray:
    """The line's ink as a boolean array at :data:`MEASURE_HEIGHT` rows: Otsu's threshold,
    the side that is not the border's majority."""
    h = MEASURE_HEIGHT
    grey = img.convert("L").resize((max(8, round(img.width * h / max(1, img.height))), h))
    a = np.asarray(grey, dtype=np.uint8)
    ink = a <= otsu(a)
    border = np.concatenate([ink[0], ink[-1], ink[:, 0], ink[:, -1]])
    return ~ink if border.mean() > 0.5 else ink


def lean_of(img: Image.Image) -> float:
    """How far the writing of a line image leans, in degrees (positive: the tops of the
    letters to the right, as in italics), within ``LEANS``; 0 for an image without ink
    or one as upright as any lean tried (ties keep the smaller lean)."""
    ink = _ink(img)
    ys, xs = np.nonzero(ink)
    if xs.size == 0:
        return 0.0
    rise = ys - ink.shape[0] / 2.0
    best, lean = -1.0, 0
    for d in LEANS:
        cols = np.rint(xs + math.tan(math.radians(d)) * rise).astype(np.int64)
        peak = float((np.bincount(cols - cols.min()).astype(np.float64) ** 2).sum())
        if peak > best * (1 + 1e-9):
            best, lean = peak, d
    return float(lean)


def shear_margin(height: int, lean: float) -> int:
    """Columns added on each side of an image ``height`` px tall sheared upright by
    :func:`unslant` (its shifted rows stay whole)."""
    return int(math.ceil(abs(math.tan(math.radians(lean))) * height / 2)) + 1


def unslant(img: Image.Image, lean: float) -> Image.Image:
    """``img`` sheared so that writing leaning ``lean`` degrees stands upright, about its
    middle row (which keeps its place), widened by :func:`shear_margin` columns on each
    side, filled with the edge columns repeated."""
    s = math.tan(math.radians(lean))
    pad = shear_margin(img.height, lean)
    a = np.asarray(img)
    # Twice the margin repeated, so that the sheared rows' ends too are the edge columns.
    a = np.concatenate([np.repeat(a[:, :1], 2 * pad, 1), a, np.repeat(a[:, -1:], 2 * pad, 1)], 1)
    wide = Image.fromarray(a, img.mode)
    # The output pixel (x, y) is the input's (x - s * (y - h / 2), y): rows above the middle
    # move left by as much as a leaning stroke moved them right.
    upright = wide.transform(
        wide.size, Image.AFFINE, (1, -s, s * img.height / 2, 0, 1, 0), resample=Image.BICUBIC
    )
    return upright.crop((pad, 0, wide.width - pad, img.height))
