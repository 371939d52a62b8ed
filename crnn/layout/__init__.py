"""Pages: finding the text lines of an image in reading order (``lines``) and the result
of reading them (``page``). NumPy and OpenCV only; never imports the training engine."""

from crnn.layout.lines import Layout, LineBox, find_lines
from crnn.layout.page import Line, Page, decide_layout, unrotate_box

__all__ = ["Layout", "Line", "LineBox", "Page", "decide_layout", "find_lines", "unrotate_box"]
