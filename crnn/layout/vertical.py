"""Vertical text: a column of characters read top to bottom (Chinese signs, book spines,
classical print), read by a model trained on horizontal lines.

CJK characters stand upright in a vertical column, one per square cell. So the column
is cut into its cells and the cells are laid side by side as a horizontal line, which
the recognizer reads as it reads any line, with its context. How the cells are found:

1. On a grid (:func:`grid_cells`), as print and most signs set a column: the pitch is
   fitted to the centres of the runs of ink rows that are whole characters, and each
   grid cell that holds ink is cut a full pitch high, so that punctuation keeps its
   place in its cell (quote marks high, 。，、 low, as horizontal print has them).
2. Else by the ink (:func:`column_cells`): the runs of ink rows, separated by blank
   rows, grouped by dynamic programming (a character may hold several runs: 二, 三, 旦),
   a group costing nothing up to 1.15 column widths high and more above, more the
   shorter it is than the column's usual character, and more the wider the gaps inside it.

A tall crop is read as a column only when it may be one (:func:`looks_vertical`), its
read has one character per cell (:func:`one_per_cell`), is probable enough
(:data:`COLUMN_MIN_LOG_CONFIDENCE`) and more probable than the crop read whole
(``Recognizer.plan_page``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crnn.layout.chars import ink_mask

# A crop at least this many times as high as wide may be a vertical column.
VERTICAL_MIN_ASPECT = 1.5
# A cell is at most this many column widths high before it costs.
CELL_MAX = 1.15


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of the True runs of a 1-D bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def column_width(ink: np.ndarray) -> tuple[int, int]:
    """The column's ink ``[x0, x1)``: the outermost columns holding at least 5 % of the
    inkiest column's ink (a speck at a side does not widen it)."""
    cols = ink.sum(axis=0)
    keep = np.flatnonzero(cols >= max(1.0, 0.05 * float(cols.max()))) if cols.size else []
    if not len(keep):
        return 0, ink.shape[1]
    return int(keep[0]), int(keep[-1]) + 1


def column_cells(ink: np.ndarray) -> list[tuple[int, int]]:
    """The character cells ``[y0, y1)`` of a vertical column's ink mask ``(H, W)``, top
    to bottom (see the module's docstring); [] when it has no ink."""
    x0, x1 = column_width(ink)
    cw = max(1.0, float(x1 - x0))
    runs = [(a, b) for a, b in _runs(ink[:, x0:x1].any(axis=1)) if b - a >= max(1, 0.03 * cw)]
    n = len(runs)
    if n == 0:
        return []
    # A character's usual height: the runs that are whole characters by themselves.
    tall = [b - a for a, b in runs if b - a >= 0.6 * cw]
    typ = min(1.1, max(0.7, float(np.median(tall)) / cw if tall else 0.9))
    best = [0.0] + [float("inf")] * n
    prev = [0] * (n + 1)
    for j in range(1, n + 1):
        inside = 0.0  # what the gaps inside the group cost: wide gaps part characters
        for i in range(j - 1, -1, -1):
            h = runs[j - 1][1] - runs[i][0]
            if h > 2.5 * cw:
                break
            if i < j - 1:
                inside += max(0.0, (runs[i + 1][0] - runs[i][1]) / cw - 0.15)
            over = max(0.0, h / cw - CELL_MAX)
            cost = best[i] + 10.0 * over + max(0.0, typ - h / cw) + inside
            if cost < best[j]:
                best[j], prev[j] = cost, i
    cells = []
    j = n
    while j > 0:
        i = prev[j]
        cells.append((runs[i][0], runs[j - 1][1]))
        j = i
    return cells[::-1]


def grid_cells(ink: np.ndarray) -> list[tuple[int, int]] | None:
    """The cells of a column set on a regular grid (as CJK print and most signs set
    it): one pitch, fitted to the centres of the runs that are whole characters, and
    every cell of that grid that holds ink, each a full pitch high, so that a mark keeps
    its place in its cell. None when the column is not on a grid (fewer than 3 whole
    characters, or a centre more than a fifth of the pitch off it)."""
    x0, x1 = column_width(ink)
    cw = max(1.0, float(x1 - x0))
    runs = _runs(ink[:, x0:x1].any(axis=1))
    centres = np.array([(a + b) / 2.0 for a, b in runs if 0.6 * cw <= b - a <= CELL_MAX * cw])
    if len(centres) < 3:
        return None
    steps = np.diff(centres)
    near = steps[steps < 1.6 * cw]
    if not len(near):
        return None
    pitch = float(np.median(near))
    k = np.round((centres - centres[0]) / pitch)
    if len(set(k.tolist())) < 2:
        return None
    pitch, phase = np.polyfit(k, centres, 1)
    if pitch < 0.7 * cw or np.abs(centres - (phase + k * pitch)).max() > 0.2 * pitch:
        return None
    rows = ink[:, x0:x1].any(axis=1)
    first = int(np.floor((np.flatnonzero(rows)[0] - phase) / pitch + 0.5))
    last = int(np.floor((np.flatnonzero(rows)[-1] - phase) / pitch + 0.5))
    cells = []
    for j in range(first, last + 1):
        y0 = max(0, int(round(phase + (j - 0.5) * pitch)))
        y1 = min(ink.shape[0], int(round(phase + (j + 0.5) * pitch)))
        if y1 > y0 and rows[y0:y1].any():
            cells.append((y0, y1))
    return cells


def _is_mark(ink: np.ndarray, cw: float) -> bool:
    """Whether a cell is punctuation: less than half the column's width high and wide."""
    xs = np.flatnonzero(ink.any(axis=0))
    return ink.shape[0] < 0.5 * cw and len(xs) > 0 and xs[-1] - xs[0] < 0.5 * cw


def stack_cells(
    grey: np.ndarray, cells: list[tuple[int, int]], ink: np.ndarray
) -> tuple[np.ndarray, StackPlacement]:
    """The column's cells laid left to right as a horizontal line (uint8 ``(h, w)``, its
    background the column's), and where each of its tiles came from. A cell keeps its
    pixels as they are, but a narrow one (a Latin letter or a digit set upright; not a
    mark, which a full-width cell holds in horizontal print too) only its ink's width
    and a margin, so that a word's letters are not spaced out."""
    x0, x1 = column_width(ink)
    cw = x1 - x0
    pad = max(1, round(0.08 * cw))
    bg = int(np.median(grey))
    height = max(b - a for a, b in cells)
    tiles, boxes = [], []
    for y0, y1 in cells:
        xs = np.flatnonzero(ink[y0:y1].any(axis=0))
        narrow = (
            len(xs)
            and xs[-1] - xs[0] < 0.7 * cw
            and not _is_mark(ink[y0:y1][ink[y0:y1].any(axis=1)], cw)
        )
        a, b = (int(xs[0]), int(xs[-1]) + 1) if narrow else (x0, x1)
        lo, hi = max(0, a - pad), min(grey.shape[1], b + pad)
        tile = np.full((height, b - a + 2 * pad), bg, np.uint8)
        top = (height - (y1 - y0)) // 2
        tile[top : top + y1 - y0, pad - (a - lo) : pad - (a - lo) + hi - lo] = grey[y0:y1, lo:hi]
        ys = np.flatnonzero(ink[y0:y1, a:b].any(axis=1))
        boxes.append((a, y0 + int(ys[0]), b, y0 + int(ys[-1]) + 1) if len(ys) else (a, y0, b, y1))
        tiles.append(tile)
    line = np.hstack(tiles)
    ends = np.cumsum([t.shape[1] for t in tiles]).tolist()
    return line, StackPlacement(boxes, ends, line.shape[1], (grey.shape[1], grey.shape[0]))


@dataclass
class StackPlacement:
    """Where the characters of a column read as a line (:func:`stack_cells`) are on the
    column: a box on the line falls in one tile (by its centre), whose cell's box it is.
    The same interface as :class:`crnn.layout.chars.Placement`."""

    boxes: list[tuple[int, int, int, int]]  # each tile's cell on the column
    ends: list[int]  # each tile's right end on the line, in the line's own pixels
    width: int  # the line's width in its own pixels
    size: tuple[int, int]  # the image's (W, H)
    origin: tuple[int, int] = (0, 0)  # where the column's top left is on the image

    def box(self, b: Sequence[float], width: int, height: int, turn: int = 0) -> list[int]:
        """A box on the line as read (``width`` px wide) -> its cell on the image."""
        centre = (b[0] + b[2]) / 2.0 * self.width / max(1, width)
        k = min(int(np.searchsorted(self.ends, centre, side="right")), len(self.boxes) - 1)
        x0, y0, x1, y1 = self.boxes[k]
        return [x0 + self.origin[0], y0 + self.origin[1], x1 + self.origin[0], y1 + self.origin[1]]


def looks_vertical(grey: np.ndarray) -> tuple[bool, list[tuple[int, int]], np.ndarray]:
    """Whether a crop ``(H, W)`` may be one vertical column of characters: at least
    :data:`VERTICAL_MIN_ASPECT` times as high as wide and cut into 2 or more cells of
    which most are about square; with its cells and ink mask."""
    h, w = grey.shape
    if h < VERTICAL_MIN_ASPECT * w:
        return False, [], np.zeros((0, 0), bool)
    ink = ink_mask(grey)
    grid = grid_cells(ink)
    if grid is not None:
        return len(grid) >= 2, grid, ink
    cells = column_cells(ink)
    x0, x1 = column_width(ink)
    cw = max(1, x1 - x0)
    square = sum(0.6 * cw <= b - a <= CELL_MAX * cw for a, b in cells)
    return len(cells) >= 2 and square >= 0.5 * len(cells), cells, ink


def one_per_cell(text: str, cells: Sequence[tuple[int, int]]) -> bool:
    """Whether a column's read has one character per cell (within 15 % of the cells,
    or one), and at least 3 cells: a word turned on its side, cut into cells of several
    letters each, does not."""
    n = len(text.replace(" ", ""))
    return len(cells) >= 3 and abs(n - len(cells)) <= max(1, round(0.15 * len(cells)))


# Columns found on a page whose characters stand this many times further apart down a
# column than the columns stand apart are rows of text cut across: a page of horizontal
# lines set on a grid (each line's characters one under another) also reads as columns,
# as probably as the rows (a development page of white lines on black read as 42 columns
# of each line's n-th characters, CER 95 %). Print sets a column's characters closer than
# its columns (1.0-1.1 against 1.1-2 characters); horizontal print, the other way round.
ACROSS_PITCH_RATIO = 1.15


def runs_across(
    column_x: Sequence[tuple[int, int]], cells: Sequence[Sequence[tuple[int, int]]]
) -> bool:
    """Whether a page's columns (each one's ``(x0, x1)`` and its cells ``[y0, y1)``) are
    rows of text cut across: the median pitch of the cells down a column at least
    :data:`ACROSS_PITCH_RATIO` times the median pitch of neighbouring columns (False
    where either cannot be measured)."""
    down = [float(np.median(np.diff([(a + b) / 2.0 for a, b in c]))) for c in cells if len(c) >= 2]
    width = float(np.median([x1 - x0 for x0, x1 in column_x])) if column_x else 0.0
    centres = sorted((x0 + x1) / 2.0 for x0, x1 in column_x)
    steps = [d for d in np.diff(centres) if d >= 0.5 * width] if len(centres) >= 2 else []
    if not down or not steps:
        return False
    return float(np.median(down)) >= ACROSS_PITCH_RATIO * float(np.median(steps))


# A column's read must be at least this probable (mean log confidence per character):
# the words turned on their side of ICDAR 2015 that pass every other test read at -0.5
# to -1.4, Chinese columns at -0.0 to -0.2.
COLUMN_MIN_LOG_CONFIDENCE = -0.3
