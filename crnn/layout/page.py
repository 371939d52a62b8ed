"""The result of reading a page, and whether an image is a page at all."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from crnn.layout.lines import Layout

# Below this height an image is one line (or word) whatever it holds.
LINE_MAX_HEIGHT = 48


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

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "confidence": round(self.confidence, 4), "box": self.box}


@dataclass
class Page:
    """A page's lines in reading order. ``layout`` says how the image was read:
    ``"page"`` (lines found and read one by one) or ``"line"`` (the whole image as one
    line); ``note`` why, when ``auto`` could not place it."""

    lines: list[Line] = field(default_factory=list)
    layout: str = "page"
    angle: float = 0.0
    note: str = ""

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
        out.update({"text": self.text, "confidence": round(self.confidence, 4),
                    "layout": self.layout, "lines": [line.to_dict() for line in self.lines]})  # fmt: skip
        if self.note:
            out["note"] = self.note
        return out


def decide_layout(found: Layout, image_h: int) -> tuple[str, str]:
    """``auto``'s choice for an image and why: ``("page", "")`` when it holds several
    lines (or one line in a larger image), ``("line", "")`` for a line or a word that
    fills it, ``("line", note)`` when no text line was found (read whole, and said)."""
    if image_h <= LINE_MAX_HEIGHT:
        return "line", ""
    if len(found.lines) >= 2:
        return "page", ""
    if len(found.lines) == 1:
        box = found.lines[0]
        return ("line", "") if box.height >= 0.45 * image_h else ("page", "")
    return "line", "no text lines found: read as one line"


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
    return [max(0, int(min(xs))), max(0, int(min(ys))), min(w, int(math.ceil(max(xs)))),
            min(h, int(math.ceil(max(ys))))]  # fmt: skip
