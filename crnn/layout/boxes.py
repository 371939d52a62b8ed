"""A found line's box, what the line finder (``crnn.layout.lines``) gives and the reading
order (``crnn.layout.order``) sorts: below both, so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LineBox:
    """A line's box on the (deskewed) page: ``x0, y0, x1, y1`` in pixels, exclusive end."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    @property
    def width(self) -> int:
        return self.x1 - self.x0
