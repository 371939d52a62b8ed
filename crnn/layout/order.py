"""Reading order of a page's lines: recursive XY cuts (columns left to right, rows top to
bottom) over the boxes ``crnn.layout.lines`` found; pure functions."""

from __future__ import annotations

from crnn.layout.boxes import LineBox


def reading_order(boxes: list[LineBox], ch: float) -> list[LineBox]:
    """Recursive XY cut at the widest gap: a vertical gap of at least a character height
    (a column gutter; 0.6 of one between two columns of 3 lines or more side by side) or a
    horizontal one; columns left to right, rows top to bottom.
    Worked with a stack of its own, not Python's: a screenshot of a thousand log lines
    cuts a thousand times deep."""
    out: list[LineBox] = []
    todo: list[list[LineBox]] = [list(boxes)]
    while todo:
        part = todo.pop()
        if len(part) <= 1:
            out.extend(part)
            continue
        vx, vcut = _widest_gap([(b.x0, b.x1) for b in part])
        hy, hcut = _widest_gap([(b.y0, b.y1) for b in part])
        if (vx >= ch or (vx >= 0.6 * ch and _columns(part, vcut))) and vx >= 0.8 * hy:
            first = [b for b in part if b.x1 <= vcut]
            second = [b for b in part if b.x1 > vcut]
        elif hy > 0:
            first = [b for b in part if b.y1 <= hcut]
            second = [b for b in part if b.y1 > hcut]
        else:  # boxes that share rows everywhere: rows top to bottom, each left to right
            out.extend(_by_rows(part))
            continue
        todo.append(second)  # popped after everything the first part holds
        todo.append(first)
    return out


def _columns(boxes: list[LineBox], cut: float) -> bool:
    """Whether the boxes either side of a vertical cut are two columns: at least 3 lines
    each, side by side over most of the shorter one's height. (A tilted two-column scan,
    levelled, keeps a gutter narrower than a character height: 26 px at 39.)"""
    left = [b for b in boxes if b.x1 <= cut]
    right = [b for b in boxes if b.x1 > cut]
    if len(left) < 3 or len(right) < 3:
        return False
    (a0, a1), (b0, b1) = [
        (min(b.y0 for b in side), max(b.y1 for b in side)) for side in (left, right)
    ]
    return min(a1, b1) - max(a0, b0) >= 0.6 * min(a1 - a0, b1 - b0)


def _by_rows(boxes: list[LineBox]) -> list[LineBox]:
    """Rows top to bottom, each left to right: a box joins the row above when they share
    at least half the smaller one's height, so that the pieces of one tilted line (a
    heading with a wide gap, the right piece a pixel higher) stay left to right."""
    rows: list[list[LineBox]] = []
    for b in sorted(boxes, key=lambda b: (b.y0 + b.y1) / 2):
        if rows:
            top, bottom = min(r.y0 for r in rows[-1]), max(r.y1 for r in rows[-1])
            if min(b.y1, bottom) - max(b.y0, top) >= 0.5 * min(b.height, bottom - top):
                rows[-1].append(b)
                continue
        rows.append([b])
    return [b for row in rows for b in sorted(row, key=lambda b: b.x0)]


def _widest_gap(spans: list[tuple[int, int]]) -> tuple[float, float]:
    """The widest gap between the union of ``spans`` and where to cut: (width, middle)."""
    spans = sorted(spans)
    best, cut = 0.0, 0.0
    end = spans[0][1]
    for a, b in spans[1:]:
        if a - end > best:
            best, cut = float(a - end), (a + end) / 2.0
        end = max(end, b)
    return best, cut
