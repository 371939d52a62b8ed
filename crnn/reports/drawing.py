"""What every picture of a read shares: a font that has the text's glyphs."""

from __future__ import annotations

from typing import Any


def label_fonts(fonts: Any, size: int) -> Any:
    """``fonts``, or the default :class:`~crnn.data.synth.labelfonts.LabelFonts`."""
    from crnn.data.synth.labelfonts import LabelFonts

    return fonts if fonts is not None else LabelFonts(size)
