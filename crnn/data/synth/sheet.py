"""Contact sheets: a grid of samples with their labels printed under each, to see at a
glance whether images look like text in the wild and whether labels match them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image, ImageDraw

from crnn.data.synth.fonts import bundled_font_dir
from crnn.data.synth.labelfonts import LabelFonts


def contact_sheet(
    samples: Sequence[tuple[Image.Image, str]],
    cols: int = 8,
    image_height: int = 48,
    cell_width: int = 200,
    fonts: Any = None,
) -> Image.Image:
    """Tile ``(image, label)`` pairs into one RGB image.

    Args:
        samples: images of any size and mode, with their labels.
        cols: cells per row.
        image_height: each image is scaled to this height in pixels (keeping its
            aspect ratio), and shrunk further if it is wider than ``cell_width``.
        cell_width: width of a cell in pixels.
        fonts: a :class:`LabelFonts` for the labels (default: a bold monospace face,
            then any font that has their glyphs: labels in any script stay readable).
    """
    if not samples:
        raise ValueError("contact_sheet needs at least one sample, got none")
    if fonts is None:
        fonts = LabelFonts(13, [bundled_font_dir() / "dejavu" / "DejaVuSansMono-Bold.ttf"])
    pad, label_h = 6, 18
    cell_h = image_height + label_h + pad
    rows = -(-len(samples) // cols)
    sheet = Image.new("RGB", (cols * cell_width + pad, rows * cell_h + pad), (235, 235, 235))
    draw = ImageDraw.Draw(sheet)
    for i, (img, label) in enumerate(samples):
        x = pad + (i % cols) * cell_width
        y = pad + (i // cols) * cell_h
        w = max(1, round(img.width * image_height / img.height))
        h = image_height
        if w > cell_width - pad:
            h = max(1, round(h * (cell_width - pad) / w))
            w = cell_width - pad
        tile = img.convert("RGB").resize((w, h), Image.BILINEAR)
        sheet.paste(tile, (x, y + (image_height - h) // 2))
        draw.rectangle((x - 1, y - 1, x + w, y + image_height), outline=(160, 160, 160))
        fonts.draw(draw, (x, y + image_height + 2), label, (0, 0, 160), cell_width - pad)
    return sheet
