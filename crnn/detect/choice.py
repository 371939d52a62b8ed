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


# A smaller picture-shaped image (a photographed sign, a cropped poster) with its short
# side at least this many px: read whole, unless the detector finds SMALL_PICTURE_LINES
# lines or more in it that read more probably (the planner reads both ways).
SMALL_PICTURE_MIN_SIDE = 160
SMALL_PICTURE_LINES = 2


def is_small_picture(grey: np.ndarray) -> bool:
    """Picture-shaped (under :data:`CROP_ASPECT` times as wide as high, not long) with a
    short side of :data:`SMALL_PICTURE_MIN_SIDE` to :data:`PICTURE_MIN_SIDE` px."""
    h, w = grey.shape
    return (
        not is_long(grey)
        and w < CROP_ASPECT * h
        and SMALL_PICTURE_MIN_SIDE <= min(h, w) < PICTURE_MIN_SIDE
    )


def prefers_detector(grey: np.ndarray, found: Any) -> bool:
    """Whether the detector should find this image's lines, given the classical
    finder's result ``found`` on it (``crnn.layout.find_lines``; None: not run, a line
    crop)."""
    from crnn.layout.page import page_rows

    if found is None or not is_picture(grey):
        return False
    return len(page_rows(found)) < PAGE_ROWS


# A page candidate of the classical finder's is the detector's when at least this many of
# the detector's lines, and this share of them, lie mostly (over half their area) outside
# every line the classical finder found: text on a picture that print-finding missed.
NEW_LINES = 2
NEW_SHARE = 0.25


def finds_more(detected: list[list[int]], found: Any) -> bool:
    """Whether the detector's line boxes ``detected`` (``[x0, y0, x1, y1]`` on the
    image) find text that the classical finder's lines ``found`` (its page candidate)
    leave out. On a printed page both find the same lines (the detector splits some of
    them at wide word gaps); on a web image it finds many the classical finder missed."""
    h, w = found.page.shape[:2]
    covered = np.zeros((h, w), bool)
    for b in found.lines:
        covered[max(0, b.y0) : max(0, b.y1), max(0, b.x0) : max(0, b.x1)] = True
    new = 0
    for x0, y0, x1, y1 in detected:
        x0, y0 = max(0, min(x0, w)), max(0, min(y0, h))
        x1, y1 = max(x0, min(x1, w)), max(y0, min(y1, h))
        area = (x1 - x0) * (y1 - y0)
        if area and covered[y0:y1, x0:x1].sum() <= 0.5 * area:
            new += 1
    return new >= NEW_LINES and new >= NEW_SHARE * len(detected)
