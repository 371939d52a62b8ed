"""Pages: finding the text lines of an image in reading order (``lines``) and the result
of reading them (``page``). NumPy and OpenCV only; never imports the training engine."""

from crnn.layout.lines import Layout, LineBox, find_lines
from crnn.layout.page import (
    Line,
    Page,
    choose_layout,
    decide_layout,
    reads_better_as_page,
    unrotate_box,
)

__all__ = [
    "Layout",
    "Line",
    "LineBox",
    "Page",
    "choose_layout",
    "decide_layout",
    "find_lines",
    "reads_better_as_page",
    "unrotate_box",
]
