"""A read page as the formats OCR tools exchange: plain text, hOCR 1.2 and ALTO 4.

- **hOCR** (the microformat Tesseract, OCRopus and docTR write): an XHTML document with an
  ``ocr_page`` (``bbox`` of the image) > ``ocr_carea`` > ``ocr_par`` > an ``ocr_line`` per
  line > an ``ocrx_word`` per word, each with its ``bbox`` and ``x_wconf`` (0-100).
- **ALTO 4** (the Library of Congress's schema, ``alto-4-2.xsd``): ``Page`` >
  ``PrintSpace`` > ``TextBlock`` > ``TextLine`` > ``String`` (``CONTENT``, ``HPOS``,
  ``VPOS``, ``WIDTH``, ``HEIGHT``, ``WC`` 0-1) with ``SP`` between words, in pixels.

Words are the line's whitespace-separated pieces; a line without spaces (Chinese) is one
word. A word's box is the union of its characters' boxes where the read has them, else
its share of the line's box by character count.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from crnn import __version__
from crnn.text.bidi import first_strong_level

FORMATS = ("tsv", "json", "txt", "hocr", "alto")
SUFFIX = {"tsv": ".tsv", "json": ".json", "txt": ".txt", "hocr": ".hocr", "alto": ".xml"}


def words(line: Any) -> list[tuple[str, list[int], float]]:
    """``(word, [x0, y0, x1, y1], confidence)`` for each word of a line."""
    text, box = line.text, list(line.box or [0, 0, 0, 0])
    boxes: Sequence[Sequence[int]] = getattr(line, "char_boxes", ()) or ()
    confs: Sequence[float] = line.char_confidences or ()
    out = []
    i, n = 0, max(1, len(text))
    for piece in text.split(" "):
        start, end = i, i + len(piece)
        i = end + 1
        if not piece.strip():
            continue
        if boxes and len(boxes) == len(text):
            cb = [boxes[k] for k in range(start, end) if not text[k].isspace()]
            wb = [
                min(b[0] for b in cb),
                min(b[1] for b in cb),
                max(b[2] for b in cb),
                max(b[3] for b in cb),
            ]
        else:
            x0, y0, x1, y1 = box
            wb = [round(x0 + (x1 - x0) * start / n), y0, round(x0 + (x1 - x0) * end / n), y1]
        conf = min(confs[start:end]) if len(confs) == len(text) and end > start else line.confidence
        out.append((piece, [int(v) for v in wb], float(conf)))
    return out


def page_size(page: Any) -> tuple[int, int] | None:
    """The image's ``(width, height)`` where the page knows it."""
    places = getattr(page, "placements", None)
    if places:
        return tuple(places[0].size)  # type: ignore[return-value]
    return None


def to_text(page: Any) -> str:
    return page.text + "\n"


def to_hocr(page: Any, size: tuple[int, int], name: str = "") -> str:
    w, h = size
    title = (
        f"image {quoteattr(name)[1:-1]}; bbox 0 0 {w} {h}; ppageno 0"
        if name
        else f"bbox 0 0 {w} {h}; ppageno 0"
    )
    rows = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">',
        '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="und" lang="und">',
        "<head>",
        f"<title>{escape(name)}</title>",
        '<meta http-equiv="Content-Type" content="text/html;charset=utf-8"/>',
        f'<meta name="ocr-system" content="crnn-ocr {__version__}"/>',
        '<meta name="ocr-capabilities" content="ocr_page ocr_carea ocr_par ocr_line ocrx_word '
        'ocrp_wconf"/>',
        "</head>",
        "<body>",
        f'<div class="ocr_page" id="page_1" title={quoteattr(title)}>',
    ]
    if page.lines:
        # Block, paragraph, lines, words: the nesting Tesseract writes and hOCR readers
        # (OCRmyPDF's HocrParser, hocr-tools) look for; without the paragraph OCRmyPDF
        # found no lines and laid no text over the page.
        union = " ".join(map(str, _union(page)))
        rtl = sum(first_strong_level(ln.text) == 1 for ln in page.lines) * 2 > len(page.lines)
        rows.append(f'<div class="ocr_carea" id="block_1_1" title="bbox {union}">')
        rows.append(
            f'<p class="ocr_par" id="par_1_1" dir="{"rtl" if rtl else "ltr"}" title="bbox {union}">'
        )
    for i, line in enumerate(page.lines, 1):
        b = " ".join(map(str, line.box))
        rows.append(
            f'<span class="ocr_line" id="line_1_{i}" title="bbox {b}; x_wconf '
            f'{round(100 * line.confidence)}">'
        )
        for j, (word, wb, conf) in enumerate(words(line), 1):
            t = f"bbox {' '.join(map(str, wb))}; x_wconf {round(100 * conf)}"
            rows.append(
                f'<span class="ocrx_word" id="word_1_{i}_{j}" title="{t}">{escape(word)}</span>'
            )
        rows.append("</span>")
    if page.lines:
        rows += ["</p>", "</div>"]
    rows += ["</div>", "</body>", "</html>", ""]
    return "\n".join(rows)


def _union(page: Any) -> list[int]:
    boxes = [ln.box for ln in page.lines if ln.box]
    if not boxes:
        return [0, 0, 0, 0]
    return [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]


def _pos(b: Sequence[int]) -> str:
    return (
        f'HPOS="{b[0]}" VPOS="{b[1]}" WIDTH="{max(0, b[2] - b[0])}" HEIGHT="{max(0, b[3] - b[1])}"'
    )


def to_alto(page: Any, size: tuple[int, int], name: str = "") -> str:
    w, h = size
    rows = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://www.loc.gov/standards/alto/ns-v4# '
        'http://www.loc.gov/alto/v4/alto-4-2.xsd">',
        "<Description>",
        "<MeasurementUnit>pixel</MeasurementUnit>",
        f"<sourceImageInformation><fileName>{escape(name)}</fileName></sourceImageInformation>",
        '<OCRProcessing ID="OCR_0"><ocrProcessingStep><processingSoftware>'
        f"<softwareName>crnn-ocr</softwareName><softwareVersion>{__version__}</softwareVersion>"
        "</processingSoftware></ocrProcessingStep></OCRProcessing>",
        "</Description>",
        "<Layout>",
        f'<Page ID="page_1" PHYSICAL_IMG_NR="1" WIDTH="{w}" HEIGHT="{h}">',
        f'<PrintSpace HPOS="0" VPOS="0" WIDTH="{w}" HEIGHT="{h}">',
    ]
    if page.lines:
        rows.append(f'<TextBlock ID="block_1" {_pos(_union(page))}>')
    for i, line in enumerate(page.lines, 1):
        rows.append(f'<TextLine ID="line_{i}" {_pos(line.box)}>')
        for j, (word, wb, conf) in enumerate(words(line), 1):
            if j > 1:
                rows.append("<SP/>")
            rows.append(
                f'<String ID="string_{i}_{j}" CONTENT={quoteattr(word)} {_pos(wb)} '
                f'WC="{conf:.3f}"/>'
            )
        rows.append("</TextLine>")
    if page.lines:
        rows.append("</TextBlock>")
    rows += ["</PrintSpace>", "</Page>", "</Layout>", "</alto>", ""]
    return "\n".join(rows)


def document(
    page: Any,
    fmt: str,
    path: str,
    size: tuple[int, int],
    rotate: bool = False,
    floor: float | None = None,
) -> str:
    """One input's read as one document of ``fmt``: ``hocr``, ``alto``, ``json`` (the
    result :func:`crnn.reading.results.page_result` builds), ``tsv`` (path, text,
    confidence per line) or ``txt``; ``size``: the image's (W, H)."""
    import json

    from crnn.reading.results import page_result

    if fmt == "hocr":
        return to_hocr(page, size, Path(path).name)
    if fmt == "alto":
        return to_alto(page, size, Path(path).name)
    if fmt == "json":
        return (
            json.dumps(page_result(page, path, rotate, floor), ensure_ascii=False, indent=1) + "\n"
        )
    if fmt == "tsv":
        return "".join(f"{path}\t{ln.text}\t{ln.confidence:.4f}\n" for ln in page.lines)
    return to_text(page)
