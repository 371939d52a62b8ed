"""Which line finder reads an image best: the learned detector or the classical page
finder (``crnn.layout``), decided from the image itself.

The classical finder is built for print on a flat background: clean pages, scans and
screenshots, where it finds every line (the page benchmarks: 0.24 % CER English, 0.96 %
Chinese), and long screenshots, which the detector would have to shrink to its
``limit_side`` and lose. The detector is for everything else: photographs, product and
advertising images, text on pictures and gradients.

The detector is asked only about what the classical finder would read whole, as one
line (its own page decision keeps every page it finds), and not about images shaped like
crops. The decision reads what the classical finder itself sees: the rows of print it finds
stacked as a page's lines are (``crnn.layout.page.page_rows``). Measured on development
images (docs/detection.md): the drawn clean and scanned pages of
``benchmarks/pages_vs_peers.py`` (English and Chinese, 32 pages) have 7-17 such rows,
every one of 80 real web images of ``zh_web_train`` at most 5 (median 0). A grey-level
flatness feature was tried first and refused: scans (unevenly lit, noisy) overlap the
web images there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# An image with at least this many stacked rows of print is a page: the classical finder.
PAGE_ROWS = 6
# An image this many times as tall as wide (and at least LONG_MIN_HEIGHT px) is a long
# screenshot or a scroll: the classical finder reads it at full resolution.
LONG_ASPECT = 4.0
LONG_MIN_HEIGHT = 3000
# An image this many times as wide as high is a line crop, and one whose short side is
# under PICTURE_MIN_SIDE px a word or line: read whole, as before.
CROP_ASPECT = 2.0
PICTURE_MIN_SIDE = 400


def is_long(grey: np.ndarray) -> bool:
    h, w = grey.shape
    return h >= LONG_MIN_HEIGHT and h >= LONG_ASPECT * w


def is_picture(grey: np.ndarray) -> bool:
    """Shaped like a picture, not a line crop or a long screenshot: the short side at
    least :data:`PICTURE_MIN_SIDE` px, under :data:`CROP_ASPECT` times as wide as high."""
    h, w = grey.shape
    return not is_long(grey) and w < CROP_ASPECT * h and min(h, w) >= PICTURE_MIN_SIDE


def prefers_detector(grey: np.ndarray, found: Any) -> bool:
    """Whether the detector should find this image's lines, given the classical
    finder's result ``found`` on it (``crnn.layout.find_lines``; None: not run, a line
    crop)."""
    from crnn.layout.page import page_rows

    if found is None or not is_picture(grey):
        return False
    return len(page_rows(found)) < PAGE_ROWS
