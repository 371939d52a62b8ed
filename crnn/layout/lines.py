"""Finding the text lines of a printed page, in reading order: pure functions on NumPy
images (OpenCV for the image processing: 1.4-20x SciPy's speed on these operations with the
same results, ``benchmarks/layout_libs.py``).

One page, start to end::

    grey page        uint8 (H, W)
    normalise        light text on a dark page turned over; the background (uneven light,
                     a coloured page) estimated by a grey closing and divided out
    binarise         Otsu's threshold on the flattened page
    components       connected ink; the typical character height is their median height;
                     rules (long thin strokes) and pictures (large blocks, or areas
                     denser in ink than print ever is) left out
    deskew           the angle (within +-6 degrees) at which the components' rows are
                     sharpest; the page is turned by it
    lines            ink smeared along the line by about a character height, so that
                     characters, words and CJK punctuation join and column gutters do
                     not; too-tall blobs (touching lines) split at their thinnest row;
                     accents and other small marks joined to the line they belong to
    reading order    recursive XY cut at the widest gap: columns left to right, lines top
                     to bottom, a heading above columns before them

What it handles: printed pages, scans and photos of pages taken square-on (tilted a few
degrees, unevenly lit, on a coloured page), screenshots, slides, receipts; one or several
columns; pictures and rules ignored. What it does not: vertical text, text along curves
or at large angles, handwriting, text over pictures (a learned scene-text detector is
the tool for photographs of streets and signs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crnn.layout.boxes import LineBox
from crnn.layout.order import reading_order  # noqa: F401 (used below; re-exported)

try:
    import cv2
except ImportError as e:  # a broken OpenCV install: say how to mend it, not only that it broke
    raise ImportError(
        f"reading a page finds its lines with OpenCV, and `import cv2` failed ({e}). "
        "Mend it with: pip install --force-reinstall opencv-python-headless. Two OpenCV "
        "wheels in one environment (opencv-python and opencv-python-headless) share the "
        "cv2 folder, so removing either breaks the other; opencv-python also needs the "
        "system's libGL."
    ) from e

# Line candidates shorter than this share of the typical character height are marks,
# not lines (joined to a neighbouring line, or dropped).
_MARK = 0.55
# A blob taller than this many character heights holds more than one line.
_TWO_LINES = 2.0
# Printed text covers well under this share of a page with ink (10 % on dense pages,
# Otsu's threshold on noise or a photo's grain gives about half).
_MAX_INK = 0.3
# A rule: a stroke longer than this many character heights and thinner than _RULE_THIN
# of one (a blurred 5 px rule binarises to 0.43 of a 21 px character height; no line of
# text is one stroke that thin and long).
_RULE_LONG = 8.0
_RULE_THIN = 0.5
# Print keeps at least this share of a window two character heights wide paper-white
# (measured: at most 0.49 off the paper over pages in Latin and CJK faces, scans and bold
# headings included); a textured picture covers over 0.9.
_DENSE = 0.75
# Dust: a component no larger than this share of a character height either way (a full
# stop or the dot of an i is about twice as large).
_SPECK = 0.12
# Deskew search: angles (degrees) tried, coarse then fine.
_MAX_SKEW = 6.0


@dataclass
class Layout:
    """What :func:`find_lines` found.

    Attributes:
        lines: line boxes in reading order, on ``page``.
        line_height: the median height of the lines' boxes.
        page: the grey page the boxes refer to (turned by ``angle``; dark text on light).
        angle: degrees the page was turned (counter-clockwise) to level its lines.
        char_height: the typical character height in pixels (0 when no text was found).
        inverted: the page had light text on a dark background and was turned over.
    """

    lines: list[LineBox]
    page: np.ndarray
    angle: float
    char_height: float
    inverted: bool
    line_height: float = 0.0


def _square(k: int) -> np.ndarray:
    """A ``k`` x ``k`` structuring element (OpenCV's erode, dilate and closing)."""
    return np.ones((k, k), np.uint8)


def rotate(grey: np.ndarray, degrees: float) -> np.ndarray:
    """``grey`` (uint8) turned ``degrees`` counter-clockwise about its centre, same size,
    bilinear, edges repeated outward."""
    h, w = grey.shape
    m = cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), degrees, 1.0)
    return cv2.warpAffine(grey, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def is_light_on_dark(grey: np.ndarray) -> bool:
    """Whether the page is light text on a dark background: its background (the median
    grey, since most of a page is background) lies nearer its darkest tones than its
    lightest (0.1st and 99.9th percentiles). The median alone turned a dim photo of paper
    (grey ~100, text darker still) over, and then no line was found."""
    sample = grey[:: max(1, grey.shape[0] // 400), :: max(1, grey.shape[1] // 400)]
    qs = (0.1, 50, 99.9)
    dark, median, light = (
        grey_percentiles(sample, qs) if sample.dtype == np.uint8 else np.percentile(sample, qs)
    )
    return bool(median - dark < light - median)


def grey_percentiles(grey: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(grey, qs)`` (linear interpolation) of a non-empty uint8 array, the
    same values, from its histogram: the order statistics are read off the cumulative
    counts instead of partitioning the pixels (a 400 x 400 sample: 4.1 -> 0.3 ms; equal to
    NumPy's on 3,000 random arrays, flat and few-valued ones included)."""
    counts = np.cumsum(np.bincount(grey.ravel(), minlength=256))
    n = int(counts[-1])
    out = []
    for q in qs:
        pos = q / 100.0 * (n - 1)
        lo = int(np.floor(pos))
        t = pos - lo
        a = float(np.searchsorted(counts, lo, side="right"))
        b = float(np.searchsorted(counts, min(lo + 1, n - 1), side="right"))
        # NumPy's lerp, which interpolates from the nearer end.
        out.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t))
    return out


def normalise(grey: np.ndarray, scale: float = 25.0) -> tuple[np.ndarray, bool]:
    """Dark text on an evenly lit white page: the page turned over when it is mostly
    dark (light text, as on slides), and its background (estimated by a grey closing at
    about ``1/scale`` of the page's size) divided out. Returns ``(page, inverted)``."""
    g = grey.astype(np.float32)
    inverted = is_light_on_dark(grey)
    if inverted:
        g = 255.0 - g
    h, w = g.shape
    # The background at low resolution: cheap, and smooth by construction. A closing of
    # whole grey levels is the same in uint8, where OpenCV runs it 3x faster.
    step = max(1, int(round(max(h, w) / 600)))
    small = g[::step, ::step]
    size = max(3, int(round(max(small.shape) / scale)))
    if grey.dtype == np.uint8:
        small = (255 - grey if inverted else grey)[::step, ::step]
    bg = cv2.morphologyEx(np.ascontiguousarray(small), cv2.MORPH_CLOSE, _square(size))
    bg = bg.astype(np.float32)
    bg = cv2.blur(bg, (size, size), borderType=cv2.BORDER_REFLECT)
    bg = np.repeat(np.repeat(bg, step, axis=0), step, axis=1)[:h, :w]
    flat = np.clip(g / np.maximum(bg, 1.0) * 255.0, 0, 255)
    return flat.astype(np.uint8), inverted


def otsu(values: np.ndarray) -> float:
    """Otsu's threshold of uint8 ``values``."""
    hist = np.bincount(values.ravel(), minlength=256).astype(np.float64)
    total = hist.sum()
    if total == 0:
        return 128.0
    omega = np.cumsum(hist) / total
    mu = np.cumsum(hist * np.arange(256)) / total
    mu_t = mu[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mu_t * omega - mu) ** 2 / (omega * (1.0 - omega))
    between[~np.isfinite(between)] = 0
    return float(np.argmax(between))


def binarise(page: np.ndarray) -> np.ndarray:
    """Ink mask (bool) of a normalised page: Otsu's threshold, kept below 200 so that a
    page with little ink does not make grain into text."""
    t = min(otsu(page), 200.0)
    return page < t


def components(ink: np.ndarray) -> tuple[np.ndarray, list[tuple[slice, slice]]]:
    """Connected ink (8-neighbourhood): the label image and each component's slices."""
    _, labels, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    return labels, [(slice(y, y + h), slice(x, x + w)) for x, y, w, h, _ in stats[1:].tolist()]


def char_height(slices: list[tuple[slice, slice]], page_h: int) -> float:
    """The typical height of a line's tall characters: a high percentile of the heights
    of components that look like characters (not specks, not blocks). Latin lowercase
    without ascenders is about half of it; a CJK character is about all of it."""
    hs = np.array([s[0].stop - s[0].start for s in slices], dtype=np.float64)
    ws = np.array([s[1].stop - s[1].start for s in slices], dtype=np.float64)
    ok = (hs >= 5) & (hs <= page_h / 3) & (ws <= 8 * hs)
    if not ok.any():
        return 0.0
    return float(np.percentile(hs[ok], 80))


def estimate_char_height(ink: np.ndarray) -> float:
    """:func:`char_height` of the page's characters, whole: a CJK character is several
    components (its strokes and radicals), so they are first joined by a grow of a tenth
    of a first estimate."""
    labels, slices = components(ink)
    first = char_height(slices, ink.shape[0])
    if first <= 0:
        return 0.0
    # Dust left in, grown, would be counted among the joined characters and pull the
    # estimate down (a dusty scan's lines were then split and their specks read).
    sizes = np.array([0] + [max(sy.stop - sy.start, sx.stop - sx.start) for sy, sx in slices])
    ink = (sizes > _SPECK * first)[labels] & ink
    grow = max(1, int(round(0.1 * first)))
    joined = cv2.dilate(ink.astype(np.uint8), _square(2 * grow + 1)).astype(bool)
    _, slices = components(joined)
    return max(first, char_height(slices, ink.shape[0]) - 2 * grow)


def solid_blocks(page: np.ndarray, ch: float) -> np.ndarray:
    """Solid areas many strokes thick (pictures, filled boxes, photos): dark on the page
    after an opening a character and a half wide, which removes every stroke of text.
    Dark is judged with the light evened out at half the page's size: a scan's shaded
    bottom was a "block" that hid its last lines, while a picture up to half the page
    across stays dark."""
    k = max(5, int(round(1.5 * ch)))
    page, _ = normalise(page, scale=2.0)
    dark = (page < min(otsu(page), 200.0)).astype(np.uint8)
    blocks = cv2.dilate(cv2.erode(dark, _square(k)), _square(k))
    return cv2.dilate(blocks, _square(k // 2 * 2 + 1)).astype(bool)


def dense_areas(grey: np.ndarray, ch: float) -> np.ndarray:
    """Textured pictures (photos, halftones, noise) that Otsu's threshold breaks into
    specks: areas at least a character height across where over :data:`_DENSE` of every
    window two character heights wide is off the paper (darker than 220 once light is
    evened out at a sixth of the page's size, a scale at which a picture is not taken for
    the paper), grown by a character height (a picture's ragged edge). Print leaves most
    of such a window paper: strokes, the gaps between them, the gaps between lines."""
    page, _ = normalise(grey, scale=6.0)
    k = max(5, int(round(2 * ch)))
    dense = (
        cv2.blur((page < 220).astype(np.float32), (k, k), borderType=cv2.BORDER_REFLECT) > _DENSE
    )
    m = max(3, int(round(ch)))
    dense = cv2.dilate(cv2.erode(dense.astype(np.uint8), _square(m)), _square(m))
    return cv2.dilate(dense, _square(2 * m + 1)).astype(bool)


def pictures(grey: np.ndarray, inverted: bool, ch: float) -> np.ndarray:
    """Where the grey page (as given: ``inverted`` says whether it was turned over) has
    pictures: solid blocks and textured areas."""
    return solid_blocks(255 - grey if inverted else grey, ch) | dense_areas(grey, ch)


def text_mask(ink: np.ndarray, ch: float) -> np.ndarray:
    """The ink of text alone: rules (long thin strokes), pictures (blocks many character
    heights tall and wide, or dense areas) and specks (dust on a scan, no larger than
    :data:`_SPECK` of a character height: a full stop is about twice that) left out."""
    labels, slices = components(ink)
    keep = np.zeros(len(slices) + 1, bool)
    for i, (sy, sx) in enumerate(slices, start=1):
        h, w = sy.stop - sy.start, sx.stop - sx.start
        rule = (w > _RULE_LONG * ch and h < _RULE_THIN * ch) or (
            h > _RULE_LONG * ch and w < _RULE_THIN * ch
        )
        block = h > 2.5 * ch and w > 2.5 * ch
        speck = max(h, w) <= _SPECK * ch
        keep[i] = not (rule or block or speck)
    return keep[labels]


def skew_angle(ink: np.ndarray, ch: float) -> float:
    """Degrees (counter-clockwise) that level the page's lines: the angle at which the
    rows of ink are sharpest (sum of squares of the row histogram of ink pixels)."""
    ys, xs = np.nonzero(ink)
    if len(ys) < 50:
        return 0.0
    if len(ys) > 60_000:  # a sample is enough
        pick = np.random.default_rng(0).choice(len(ys), 60_000, replace=False)
        ys, xs = ys[pick], xs[pick]
    ys = ys.astype(np.float64)
    xs = xs.astype(np.float64) - xs.mean()
    bin_h = max(1.0, ch / 4.0)

    def sharpness(deg: float) -> float:
        yr = ys + xs * math.tan(math.radians(deg))
        hist = np.bincount(((yr - yr.min()) / bin_h).astype(np.int64))
        return float((hist.astype(np.float64) ** 2).sum())

    coarse = np.arange(-_MAX_SKEW, _MAX_SKEW + 1e-9, 0.5)
    best = float(coarse[int(np.argmax([sharpness(a) for a in coarse]))])
    fine = np.arange(best - 0.5, best + 0.5 + 1e-9, 0.1)
    best = float(fine[int(np.argmax([sharpness(a) for a in fine]))])
    return 0.0 if abs(best) < 0.2 else best


def line_blobs(text: np.ndarray, ch: float) -> list[LineBox]:
    """Line candidates: text ink smeared along the line by about a character height
    (characters and words join, column gutters stay apart), as boxes."""
    reach = max(3, int(round(0.9 * ch)))
    smeared = cv2.dilate(text.astype(np.uint8), np.ones((1, reach), np.uint8)).astype(bool)
    _, slices = components(smeared)
    return [LineBox(s[1].start, s[0].start, s[1].stop, s[0].stop) for s in slices]


def split_tall(box: LineBox, text: np.ndarray, ch: float) -> list[LineBox]:
    """A blob holding several touching lines, cut at its thinnest rows (where the ink
    thins to a quarter of its usual row count or less; a line in a larger size, a
    heading, has no such row and stays whole)."""
    n = int(round(box.height / (1.2 * ch)))
    if box.height < _TWO_LINES * ch or n < 2:
        return [box]
    rows = text[box.y0 : box.y1, box.x0 : box.x1].sum(axis=1).astype(np.float64)
    typical = float(np.median(rows[rows > 0])) if (rows > 0).any() else 0.0
    cuts = []
    for k in range(1, n):
        centre = int(round(k * box.height / n))
        lo, hi = max(1, centre - int(0.35 * ch)), min(box.height - 1, centre + int(0.35 * ch))
        if hi > lo:
            at = lo + int(np.argmin(rows[lo:hi]))
            # Only where the ink thins out: a heading in a larger size has none such row.
            if rows[at] <= 0.25 * typical:
                cuts.append(at)
    edges = [0, *sorted(set(cuts)), box.height]
    return [
        LineBox(box.x0, box.y0 + a, box.x1, box.y0 + b)
        for a, b in zip(edges, edges[1:])
        if b - a > 2
    ]


def attach_marks(boxes: list[LineBox], ch: float) -> list[LineBox]:
    """Small blobs (accents, dots, CJK punctuation on their own, the upper and lower
    parts of a character such as 台 left apart) joined: first to each other where they
    stack into something a line high, then to the line they sit on or beside (within half
    a character height); marks near no line are dropped."""
    # A low blob as wide as a short word is a line (a last line of x-height letters:
    # "sunset." in a face with low ascenders), not a mark.
    is_mark = [b.height < _MARK * ch and b.width < 3 * ch for b in boxes]
    lines = [b for b, m in zip(boxes, is_mark) if not m]
    marks = _stack(sorted((b for b, m in zip(boxes, is_mark) if m), key=lambda b: b.y0), ch)
    lines += [m for m in marks if m.height >= _MARK * ch]
    marks = [m for m in marks if m.height < _MARK * ch]
    grown = [[b.x0, b.y0, b.x1, b.y1] for b in lines]
    for m in marks:
        best, best_d = None, 0.5 * ch
        for i, b in enumerate(lines):
            if m.x1 < b.x0 - ch or m.x0 > b.x1 + ch:
                continue
            d = max(b.y0 - m.y1, m.y0 - b.y1, 0)
            if d <= best_d:
                best, best_d = i, d
        if best is not None:
            g = grown[best]
            grown[best] = [min(g[0], m.x0), min(g[1], m.y0), max(g[2], m.x1), max(g[3], m.y1)]
    return [LineBox(*g) for g in grown]


def _stack(marks: list[LineBox], ch: float) -> list[LineBox]:
    """Marks (sorted by top) that overlap in x and lie a quarter of a character height
    or less apart in y, joined while the result stays at most 1.3 character heights.
    A joined mark whose bottom is more than that above the next mark's top can join no
    later mark (they come sorted by top), so it leaves the search: linear in the marks of
    a dusty scan, not quadratic."""
    out: list[LineBox] = []
    active: list[int] = []  # indices into out that a later mark may still join
    for m in marks:
        active = [i for i in active if m.y0 - out[i].y1 <= 0.25 * ch]
        for i in active:
            o = out[i]
            union = LineBox(min(o.x0, m.x0), min(o.y0, m.y0), max(o.x1, m.x1), max(o.y1, m.y1))
            if min(o.x1, m.x1) > max(o.x0, m.x0) and union.height <= 1.3 * ch:
                out[i] = union
                break
        else:
            out.append(m)
            active.append(len(out) - 1)
    return out


def merge_row_pieces(boxes: list[LineBox], ch: float) -> list[LineBox]:
    """Pieces of one line that the smear left apart (a wide gap after a CJK comma, a
    piece a pixel higher than the rest): boxes that share most of their rows and lie
    less than half a character height apart join. Sorted by left edge, a box is compared
    only with those that start before its right edge plus that gap; passes repeat until
    nothing joins (a joined box is taller and may now share rows with another)."""
    out = sorted(boxes, key=lambda b: b.x0)
    merged = True
    while merged:
        merged = False
        i = 0
        while i < len(out):
            j = i + 1
            while j < len(out):
                a, b = out[i], out[j]
                if b.x0 - a.x1 >= 0.5 * ch:  # every later box starts further right
                    break
                overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
                if (
                    overlap >= 0.6 * min(a.height, b.height)
                    and max(a.x0, b.x0) - min(a.x1, b.x1) < 0.5 * ch
                ):
                    out[i] = LineBox(a.x0, min(a.y0, b.y0), max(a.x1, b.x1), max(a.y1, b.y1))
                    del out[j]
                    merged = True
                    continue
                j += 1
            i += 1
    return out


def find_lines(grey: np.ndarray) -> Layout:
    """The text lines of a grey page (uint8 ``(H, W)``), in reading order."""
    page, inverted = normalise(grey)
    ink = binarise(page)
    ch = estimate_char_height(ink)
    if ch <= 0:
        return Layout([], page, 0.0, 0.0, inverted)
    blocks = pictures(grey, inverted, ch)
    if (ink & ~blocks).mean() > _MAX_INK:  # grain, a photo, noise: not print on a page
        return Layout([], page, 0.0, ch, inverted)
    text = text_mask(ink, ch) & ~blocks
    angle = skew_angle(text, ch)
    if angle:
        turned = rotate(grey, -angle)
        page, _ = normalise(turned)
        ink = binarise(page)
        text = text_mask(ink, ch) & ~pictures(turned, inverted, ch)
    boxes: list[LineBox] = []
    for b in line_blobs(text, ch):
        boxes.extend(split_tall(b, text, ch))
    boxes = [b for b in merge_row_pieces(attach_marks(boxes, ch), ch) if b.width >= 0.5 * ch]
    line_h = float(np.median([b.height for b in boxes])) if boxes else 0.0
    return Layout(reading_order(boxes, ch), page, angle, ch, inverted, line_h)


def split_wide(page: np.ndarray, box: LineBox, max_width: int) -> list[LineBox]:
    """``box`` cut into pieces at most ``max_width`` px wide (on ``page``, dark text on
    light), each cut at the lightest column of the last fifth of its piece (a gap between
    words where there is one): a line too long for the recognizer (a log line in a wide
    screenshot) is read in pieces instead of failing its page."""
    pieces, x = [], box.x0
    while box.x1 - x > max_width:
        lo, hi = x + int(0.8 * max_width), x + max_width
        ink = (255 - page[box.y0 : box.y1, lo:hi].astype(np.int64)).sum(axis=0)
        cut = lo + int(np.argmin(ink)) if len(ink) else hi
        pieces.append(LineBox(x, box.y0, cut, box.y1))
        x = cut
    return [*pieces, LineBox(x, box.y0, box.x1, box.y1)]


def crop(page: np.ndarray, box: LineBox, ch: float, line_h: float = 0.0) -> np.ndarray:
    """The line's pixels as a recognizer trained on line crops expects them: half of the
    room a line without descenders or ascenders lacks against the page's typical line
    height ``line_h``, plus 0.15 character heights above and below and 0.05 at the ends,
    clipped to the page. (Measured on pages in faces the bundled models never saw: wider
    margins cost the English line model 1.3 -> 2.4 % CER and the Chinese one 4.4 ->
    7.5 %; a wide blank margin at the start reads as a quote mark; 0.05 against 0.1 at
    the ends: 1.58 -> 1.26 % in English, 2.07 -> 1.76 % in Chinese, on 6 pages each.)"""
    x0, y0, x1, y1 = crop_rect(page.shape, box, ch, line_h)
    return page[y0:y1, x0:x1]


def crop_rect(
    shape: tuple[int, ...], box: LineBox, ch: float, line_h: float = 0.0
) -> tuple[int, int, int, int]:
    """The region :func:`crop` takes for ``box`` on a page of ``shape``: ``(x0, y0, x1, y1)``."""
    extra = max(0.0, line_h - box.height) / 4.0
    size = max(ch, box.height / 1.4)  # a heading in a larger size gets margins to match
    my, mx = int(round(0.15 * size + extra)), int(round(0.05 * size))
    h, w = shape[:2]
    return max(0, box.x0 - mx), max(0, box.y0 - my), min(w, box.x1 + mx), min(h, box.y1 + my)
