"""The picture the trainer logs to TensorBoard: each validation sample beside its label
and read."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from crnn.reports.drawing import label_fonts


def render_prediction_grid(
    images: Any, widths: Any, labels: list[str], preds: list[str], fonts: Any = None
) -> Image.Image:
    """``(B, C, H, W)`` uint8 images -> one RGB picture, a row per sample with
    ``label -> prediction`` beside it (green when right, red when wrong), in a font that
    has their glyphs (``fonts``, a ``LabelFonts``)."""
    fonts = label_fonts(fonts, 13)
    n = len(labels)
    h = images.shape[2]
    texts = [f"{labels[i]} -> {preds[i]}" for i in range(n)]
    text_w = max([260] + [fonts.length(t) + 8 for t in texts])
    row_h = max(h, 18) + 4
    max_w = int(max(int(w) for w in widths[:n]))
    canvas = Image.new("RGB", (max_w + text_w + 12, row_h * n + 4), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    for i in range(n):
        crop = images[i, :, :, : int(widths[i])]
        img = np.asarray(crop.cpu() if hasattr(crop, "cpu") else crop)
        img = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
        canvas.paste(Image.fromarray(img).convert("RGB"), (4, 4 + i * row_h))
        ok = labels[i] == preds[i]
        fonts.draw(
            draw,
            (max_w + 10, 4 + i * row_h + (row_h - 16) // 2),
            texts[i],
            (0, 120, 0) if ok else (200, 0, 0),
        )
    return canvas
