"""The result of reading a page, and whether an image is a page at all."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crnn.layout.lines import Layout, LineBox, find_lines

# Below this height an image is one line (or word) whatever it holds.
LINE_MAX_HEIGHT = 48
# A page holds at least this many rows of print (page_rows), each no higher than this
# share of the image: a sign of two or three big lines is read whole, as one line.
PAGE_MIN_ROWS = 2
PAGE_MAX_ROW = 0.25
# ...or, for a row at least STRIP_ASPECT times as wide as high (a line of some 30
# characters or more: no sign's), this share: a strip of two or three lines of a
# screenshot (a 1,167 x 54 px strip of two 16 px lines was read whole, as garbage).
STRIP_ASPECT = 20.0
STRIP_MAX_ROW = 0.5
# A row of print is at least this many times as wide as it is high (a line's fragments,
# a letter's pieces, a stroke are not), and a page's rows this many at their median.
ROW_MIN_CHARS = 3.0
PAGE_MIN_ASPECT = 6.0


@dataclass
class Line:
    """One text line of a page: its read and its box ``[x0, y0, x1, y1]`` on the input
    image (pixels, exclusive end)."""

    text: str
    confidence: float
    box: list[int]
    char_confidences: tuple[float, ...] = ()
    # Degrees the line was turned (clockwise) to read it (``rotate="auto"``).
    rotation: int = 0
    # Each character's box on the input image (crnn.layout.chars), where known.
    char_boxes: tuple[tuple[int, ...], ...] = ()
    # The line's quadrilateral on the input image, clockwise from its top-left corner,
    # where the detector found it (a rotated or slanted line; box is its bounds).
    quad: tuple[tuple[float, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "confidence": round(self.confidence, 4),
            "box": self.box,
        }
        if self.quad:
            out["quad"] = [[round(float(x), 1), round(float(y), 1)] for x, y in self.quad]
        if self.char_boxes:
            out["chars"] = chars_json(self.text, self.char_confidences, self.char_boxes)
        return out


def chars_json(
    text: str, confidences: Sequence[float], boxes: Sequence[Sequence[int]]
) -> list[dict[str, Any]]:
    """``[{"char", "confidence", "box"}]``: a read's characters with their boxes."""
    return [
        {"char": c, "confidence": round(float(p), 4), "box": list(b)}
        for c, p, b in zip(text, confidences, boxes)
    ]


@dataclass
class Page:
    """A page's lines in reading order. ``layout`` says how the image was read:
    ``"page"`` (lines found and read one by one) or ``"line"`` (the whole image as one
    line); ``note`` why, when ``auto`` could not place it."""

    lines: list[Line] = field(default_factory=list)
    layout: str = "page"
    angle: float = 0.0
    note: str = ""
    # Degrees the page was turned (clockwise) to read it (``rotate="auto"``: 0 or 180).
    rotation: int = 0
    # "ttb": the image is one vertical column, read top to bottom (crnn.layout.vertical).
    direction: str = "ltr"
    # Where each line to read sits on the image (crnn.layout.chars.Placement), in the
    # order Recognizer.plan_page returns the lines; not part of the result.
    placements: list[Any] = field(default_factory=list, repr=False, compare=False)
    # The detector's quadrilateral of each line to read, in the same order (empty when the
    # lines were found by the classical finder); not part of the result.
    quads: list[Any] = field(default_factory=list, repr=False, compare=False)
    # How the lines were found: "detector" (crnn.detect) or "classical" (crnn.layout).
    finder: str = field(default="classical", compare=False)

    @property
    def text(self) -> str:
        """The page's text, one line per text line."""
        return "\n".join(line.text for line in self.lines)

    @property
    def confidence(self) -> float:
        """The lines' confidences averaged by their lengths (0 without lines)."""
        weights = [max(1, len(line.text)) for line in self.lines]
        if not weights:
            return 0.0
        return sum(w * line.confidence for w, line in zip(weights, self.lines)) / sum(weights)

    def to_dict(self, path: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {"path": path} if path else {}
        out.update(
            {
                "text": self.text,
                "confidence": round(self.confidence, 4),
                "layout": self.layout,
                "lines": [line.to_dict() for line in self.lines],
            }
        )
        if self.note:
            out["note"] = self.note
        if self.rotation:
            out["rotation"] = self.rotation
        if self.direction != "ltr":
            out["direction"] = self.direction
        return out


def text_rows(found: Layout) -> list[LineBox]:
    """The rows of print on the line finder's page, top to bottom: its boxes that share
    rows joined, then only rows that look like a line of print kept: at least
    :data:`ROW_MIN_CHARS` times as wide as high, 0.6-2.5 character heights high (not a
    stroke, not a blob of fragments), not a line cut by the image's top or bottom edge
    (a crop's neighbouring line: lower than the tallest row by a fifth), and of about
    the height of the others (0.6-1.6 times their median)."""
    ch = found.char_height
    h = found.page.shape[0]
    rows: list[LineBox] = []
    for b in sorted(found.lines, key=lambda b: b.y0):
        for i, r in enumerate(rows):
            if min(b.y1, r.y1) - max(b.y0, r.y0) >= 0.5 * min(b.height, r.height):
                rows[i] = LineBox(
                    min(r.x0, b.x0), min(r.y0, b.y0), max(r.x1, b.x1), max(r.y1, b.y1)
                )
                break
        else:
            rows.append(b)
    rows = [
        r for r in rows if r.width >= ROW_MIN_CHARS * r.height and 0.6 * ch <= r.height <= 2.5 * ch
    ]
    if not rows:
        return []
    tallest = max(r.height for r in rows)
    rows = [r for r in rows if not ((r.y0 <= 1 or r.y1 >= h - 1) and r.height < 0.8 * tallest)]
    if not rows:
        return []
    median = float(np.median([r.height for r in rows]))
    return sorted((r for r in rows if 0.6 * median <= r.height <= 1.6 * median), key=lambda r: r.y0)


def page_rows(found: Layout) -> list[LineBox]:
    """The :func:`text_rows` that stack as the lines of a page do: each no higher than
    :data:`PAGE_MAX_ROW` of the image (:data:`STRIP_MAX_ROW` for a long row), with a row
    above or below it that overlaps it across (by 0.3 of the shorter) and lies apart by a
    clear gap (0.15-3 of the lower row's height; the strokes of one big character, 三,
    touch or nearly)."""
    h = found.page.shape[0]
    rows = [
        r
        for r in text_rows(found)
        if r.height <= PAGE_MAX_ROW * h
        or (r.width >= STRIP_ASPECT * r.height and r.height <= STRIP_MAX_ROW * h)
    ]
    stacked: dict[LineBox, None] = {}
    for a, b in zip(rows, rows[1:]):
        low = min(a.height, b.height)
        across = min(a.x1, b.x1) - max(a.x0, b.x0)
        if 0.15 * low <= b.y0 - a.y1 <= 3 * low and across >= 0.3 * min(a.width, b.width):
            stacked[a] = stacked[b] = None
    return list(stacked)


# A lone line of print this small against the image (its height at most this share of
# the image's) is cut out and read, where a crop's line fills it: a one-line screenshot,
# a caption on a blank canvas, a page with one line (read whole, the line came out a few
# pixels high: a 1,100 x 500 scan of 12 characters read as "一。").
LONE_MAX_ROW = 0.2


def lone_line(found: Layout, image_h: int) -> Layout | None:
    """The image's one line of print, as a layout of that line alone, when every box the
    line finder found lies in one :func:`text_rows` row no higher than
    :data:`LONE_MAX_ROW` of the image and long (:data:`PAGE_MIN_ASPECT` times as wide as
    high, as a page's lines are); else None. A candidate, as a page is: the planner
    keeps it only when the line reads more probably than the image read whole."""
    rows = text_rows(found)
    if len(rows) != 1 or rows[0].height > LONE_MAX_ROW * image_h:
        return None
    if rows[0].width < PAGE_MIN_ASPECT * rows[0].height:
        return None  # a word, or a stroke of one big character
    row = rows[0]
    if any(b.y0 < row.y0 or b.y1 > row.y1 for b in found.lines):
        return None  # other print beside it: not a lone line
    return dataclasses.replace(found, lines=[row])


# An image read whole has its flat margins above and below its ink trimmed: the grey of
# its 2-pixel border may vary this much (a screenshot, a render, a transparent PNG
# flattened; a photograph's border varies more and is left as it is) ...
FLAT_BORDER_STD = 6.0
# ... a pixel is ink where it differs from the border's grey by this much ...
INK_CONTRAST = 24
# ... the band kept has a margin of this share of the ink's height above and below (the
# generator pads its lines by 2-60 % of their height) ...
TRIM_PAD = 0.2
# ... and beside it of this share (a faint letter at a word's end may be no ink to the
# threshold: the wider margin keeps some of it).
TRIM_SIDE_PAD = 0.5
# ... and the image is trimmed only when that band is at most this share of its height
# and the image at least TRIM_MIN_HEIGHT px high (a word crop of 30-60 px is read at
# about its own scale: trimmed, 'CALIFORNIA' on a real crop read worse).
TRIM_MAX_HEIGHT = 0.7
TRIM_MIN_HEIGHT = 96


def flat_margins_trimmed(grey: np.ndarray) -> tuple[int, int, int, int] | None:
    """The box ``(x0, y0, x1, y1)`` an image read whole is cut to: its ink's extent with
    a :data:`TRIM_PAD` margin above and below and :data:`TRIM_SIDE_PAD` beside, where its
    border is flat (:data:`FLAT_BORDER_STD`), it is :data:`TRIM_MIN_HEIGHT` px high or
    more and the band is at most :data:`TRIM_MAX_HEIGHT` of that; else None (read as it
    is). A line of 5 characters in the middle of a 1,890 x 503 transparent PNG was read at
    32 px with the text 14 px high, a stray quote before it; trimmed, it reads."""
    h, w = grey.shape
    if h < TRIM_MIN_HEIGHT or w < 16:
        return None
    ring = np.concatenate(
        [grey[:2].ravel(), grey[-2:].ravel(), grey[:, :2].ravel(), grey[:, -2:].ravel()]
    ).astype(np.float32)
    if float(ring.std()) > FLAT_BORDER_STD:
        return None
    ink = np.abs(grey.astype(np.int16) - int(np.median(ring))) >= INK_CONTRAST
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return None
    ink_h = int(rows[-1]) + 1 - int(rows[0])
    pad, side = max(2, round(TRIM_PAD * ink_h)), max(2, round(TRIM_SIDE_PAD * ink_h))
    y0, y1 = max(0, int(rows[0]) - pad), min(h, int(rows[-1]) + 1 + pad)
    if y1 - y0 > TRIM_MAX_HEIGHT * h:
        return None
    return max(0, int(cols[0]) - side), y0, min(w, int(cols[-1]) + 1 + side), y1


def decide_layout(found: Layout, image_h: int) -> tuple[str, str]:
    """``auto``'s choice for an image by its geometry, and why: ``("page", "")`` only when
    it holds at least :data:`PAGE_MIN_ROWS` :func:`page_rows` (lines of print small
    against the image, stacked with gaps between them) that are long (their median at
    least :data:`PAGE_MIN_ASPECT` times as wide as high); ``("line", "")`` for everything
    else that has text: a word or a line of any size, a sign, a photo with big or broken
    letters, a crop with a neighbouring line cut at its edge; ``("line", note)`` when no
    text line was found (read whole, and said).

    A ``"page"`` here is a candidate: :meth:`crnn.reading.recognizer.Recognizer.plan_page` reads
    it both ways and keeps the more probable reading (:func:`reads_better_as_page`).
    Measured by ``benchmarks/page_decision.py``."""
    if image_h <= LINE_MAX_HEIGHT:
        return "line", ""
    if not found.lines:
        return "line", "no text lines found: read as one line"
    rows = page_rows(found)
    if (
        len(rows) < PAGE_MIN_ROWS
        or float(np.median([r.width / r.height for r in rows])) < PAGE_MIN_ASPECT
    ):
        return "line", ""
    return "page", ""


def mean_log(confidences: Sequence[float]) -> float:
    """The mean log confidence of a read's characters (-inf without any)."""
    if not confidences:
        return -math.inf
    return sum(math.log(max(c, 1e-9)) for c in confidences) / len(confidences)


def reads_better_as_page(
    whole: Sequence[float], lines: Sequence[Sequence[float]], min_chars_per_line: float = 0.0
) -> bool:
    """Whether a page candidate's lines read more probably than the whole image read as
    one line: the mean log confidence of their characters against the whole read's (no
    character read: never better). A crop taken for a page reads as letter fragments
    (mean log confidence -1.1 to -2.7 on the real crops that reach this test, against
    -0.0 to -0.5 read whole, one at -1.5); a page read whole is a few characters
    (-0.5 to -3.5, against -0.2 or better read as lines).

    ``min_chars_per_line``: lines that read fewer characters than this on average never
    win, however probable (a sign cut into stacked strokes reads as ``一``, ``二``,
    ``三``, one a line; a page's widest lines hold many)."""
    if lines and sum(map(len, lines)) < min_chars_per_line * len(lines):
        return False
    return mean_log([c for line in lines for c in line]) > mean_log(whole)


def choose_layout(
    grey: np.ndarray, layout: str = "auto", found: Layout | None = None
) -> tuple[str, str, Layout | None]:
    """How to read a grey image (uint8 ``(H, W)``): ``(choice, note, found)``, ``choice``
    ``"page"`` or ``"line"``, ``note`` why when no line was found, ``found`` the line
    finder's result (None where it was not run). ``layout``: ``"page"`` and ``"line"``
    force the choice, ``"auto"`` is :func:`decide_layout`'s. An image no higher than
    :data:`LINE_MAX_HEIGHT` is a line without a search (which cost a 32 x 119 word crop
    6 ms, more than reading it). ``found``: the line finder's result on ``grey`` where
    the caller has it already."""
    if layout == "line" or (layout == "auto" and grey.shape[0] <= LINE_MAX_HEIGHT):
        return "line", "", None
    if found is None:
        found = find_lines(grey)
    if layout == "page":
        return "page", "", found
    choice, note = decide_layout(found, grey.shape[0])
    return choice, note, found


def unrotate_box(box: Any, angle: float, size: tuple[int, int]) -> list[int]:
    """A box on the page turned by ``angle`` degrees about its centre, mapped back to
    the input image: the bounding box of its four corners, clipped to ``size`` (W, H)."""
    x0, y0, x1, y1 = box.x0, box.y0, box.x1, box.y1
    if not angle:
        return [int(x0), int(y0), int(x1), int(y1)]
    w, h = size
    cx, cy = w / 2.0, h / 2.0
    a = math.radians(angle)
    c, s = math.cos(a), math.sin(a)
    xs, ys = [], []
    for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)):
        dx, dy = x - cx, y - cy
        # The page was turned by -angle (counter-clockwise for +, lines.rotate): undo.
        xs.append(cx + c * dx + s * dy)
        ys.append(cy - s * dx + c * dy)
    return [
        max(0, int(min(xs))),
        max(0, int(min(ys))),
        min(w, int(math.ceil(max(xs)))),
        min(h, int(math.ceil(max(ys)))),
    ]
