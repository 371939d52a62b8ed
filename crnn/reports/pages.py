"""Pages drawn with their reads (``crnn-predict --draw``): line boxes or quadrilaterals,
character boxes, and each read written where its line is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw


def draw_page(image: Image.Image, page: Any, fonts: Any = None) -> Image.Image:
    """A page and its reads side by side, for checking a page reader by looking: the
    image with each line's box (its quadrilateral where the detector found it; green, or
    orange below 0.5 confidence) and numbered,
    each character's box in thin blue (where the read has them), and beside it a white panel with
    each read written where its line is, in a font
    that has its glyphs (``fonts``: a ``LabelFonts``; the default finds one)."""
    from crnn.data.synth.labelfonts import LabelFonts

    img = image.convert("RGB")
    w, h = img.size
    out = Image.new("RGB", (2 * w + 8, h), (255, 255, 255))
    out.paste(img, (0, 0))
    draw = ImageDraw.Draw(out)
    draw.rectangle((w, 0, w + 7, h), fill=(200, 200, 200))
    sizes: dict[int, Any] = {}
    for i, line in enumerate(page.lines, start=1):
        x0, y0, x1, y1 = line.box
        colour = (0, 160, 0) if line.confidence >= 0.5 else (230, 120, 0)
        quad = getattr(line, "quad", ())
        if quad:  # the detector's quadrilateral (a rotated or slanted line) as found
            draw.polygon([tuple(map(float, pt)) for pt in quad], outline=colour, width=2)
        else:
            draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=colour, width=2)
        for c, b in zip(line.text, getattr(line, "char_boxes", ())):
            if not c.isspace():
                draw.rectangle(
                    (b[0], b[1], max(b[0], b[2] - 1), max(b[1], b[3] - 1)),
                    outline=(40, 90, 220),
                    width=1,
                )
        size = max(10, min(48, int(0.7 * (y1 - y0))))
        if fonts is None:
            label = sizes.setdefault(size, LabelFonts(size))
        else:
            label = fonts
        label.draw(draw, (w + 8 + x0, y0), line.text, (20, 20, 20), max_width=max(10, w - x0))
        draw.text((max(0, x0 - 14), y0), str(i), fill=colour)
    return out


def draw_read(
    path: str, page: Any, folder: str | Path, dpi: int, password: str | None = None
) -> Path:
    """``crnn-predict --draw``: the image (or a PDF's page) at ``path`` drawn with its read
    ``page`` (:func:`draw_page`) into ``folder/<name>.draw.png``, which is returned."""
    from crnn.data.image import load_image
    from crnn.data.pdf import open_source, split_ref

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    img = load_image(open_source(path, dpi, password, rgb=True), rgb=True)
    if page.layout == "line" and page.lines and not page.lines[0].box:
        page.lines[0].box = [0, 0, img.width, img.height]
    ref = split_ref(path)
    stem = f"{Path(ref[0]).stem}-p{ref[1]}" if ref else Path(path).stem
    target = out / f"{stem}.draw.png"
    draw_page(Image.Image.copy(img), page).save(target)
    return target
