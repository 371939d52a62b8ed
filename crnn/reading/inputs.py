"""Inputs as every front end takes them: files, folders (their images and PDFs, sorted)
and PDF pages (``doc.pdf#page=N``), and reading them with a Recognizer in order, one bad
file never costing the others (its ``ImageDecodeError`` comes back in its place)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from crnn.data import usable_cores
from crnn.data.pdf import DEFAULT_DPI

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".pgm", ".ppm"}
# Images decoded and predicted per round: bounds memory on very large folders.
_CHUNK = 1024
# Pages are planned until their lines reach ROUND_LINES (or ROUND_PAGES pages are planned),
# then those lines are read in one round, batched together by width: a folder of line
# crops is read 256 at a time, as its lines' batches fill (the development Kai lines
# 96-114 -> 75-77 ms a line through read_inputs, web lines 44-50 -> 38, at 16 pages a
# round before), and a folder of pages a few pages at a time.
ROUND_LINES = 256
ROUND_PAGES = 256


def expand_inputs(
    inputs: list[str], pages: str | None = None, password: str | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """Files as given, folders expanded to their images and PDFs (sorted), each PDF to
    its pages (``doc.pdf#page=N``, those ``pages`` picks); plus (path, error) pairs.
    Raises ValueError for a bad ``pages``."""
    from crnn.data.pdf import PdfError, expand_pdf, is_pdf_file, page_ranges

    page_ranges(pages)  # a bad spec is a usage error before anything is opened
    files: list[str] = []
    errors: list[tuple[str, str]] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = sorted(
                str(f)
                for f in p.rglob("*")
                if f.is_file() and f.suffix.lower() in (*IMAGE_SUFFIXES, ".pdf")
            )
            if not found:
                errors.append(
                    (
                        item,
                        f"folder has no images or PDFs ({', '.join(sorted(IMAGE_SUFFIXES))}, .pdf)",
                    )
                )
        elif p.exists():
            found = [item]
        else:
            errors.append((item, "no such file or folder"))
            continue
        for f in found:
            # A folder's files by their names (no read of each image); a file named on the
            # command line also by its first bytes.
            if not (f.lower().endswith(".pdf") if p.is_dir() else is_pdf_file(f)):
                files.append(f)
                continue
            try:
                refs = expand_pdf(f, pages, password)
            except PdfError as e:
                errors.append((f, str(e)))
                continue
            if not refs:
                errors.append(
                    (f, f"no page selected by --pages {pages}" if pages else "the PDF has no pages")
                )
            files.extend(refs)
    return files, errors


def open_input(name: str, rgb: bool, dpi: int = DEFAULT_DPI, password: str | None = None) -> Any:
    """What to read for an input name: the path, or a PDF page (``doc.pdf#page=N``)
    rendered at ``dpi``. Raises ``ImageDecodeError``."""
    from crnn.data.pdf import open_source

    return open_source(name, dpi, password, rgb)


def predict_files(
    rec: Any, files: list[str], dpi: int = DEFAULT_DPI, password: str | None = None
) -> Iterator[tuple[str, Any]]:
    """``(path, Prediction or ImageDecodeError)`` for each file, in order; images are
    decoded on threads (PIL releases the GIL) and predicted in rounds of ``_CHUNK``."""
    from crnn.data.image import ImageDecodeError, load_image

    def load(path: str) -> Any:
        try:
            img = load_image(open_input(path, rec.spec.rgb, dpi, password), rec.spec.rgb)
            return rec.preprocess(img), img.size
        except ImageDecodeError as e:
            return e

    with ThreadPoolExecutor(max_workers=min(8, usable_cores())) as pool:
        for k in range(0, len(files), _CHUNK):
            chunk = files[k : k + _CHUNK]
            loaded = list(pool.map(load, chunk))
            good = [t for t in loaded if not isinstance(t, ImageDecodeError)]
            preds = iter(zip(rec.predict_preprocessed([t[0] for t in good]), good))
            for f, t in zip(chunk, loaded):
                if isinstance(t, ImageDecodeError):
                    yield f, t
                else:
                    p, (item, size) = next(preds)
                    yield f, rec.locate(p, item, size)


def read_inputs(
    rec: Any,
    files: list[str],
    layout: str = "auto",
    dpi: int = DEFAULT_DPI,
    password: str | None = None,
    pdf_text: bool = False,
) -> Iterator[tuple[str, Any]]:
    """``(path, Page or ImageDecodeError)`` for each file (an image, or a PDF's page as
    :func:`expand_inputs` names it), in order, read by ``rec`` as ``layout`` says: pages'
    lines are batched together, in rounds of about :data:`ROUND_LINES` lines; with
    ``layout="line"`` each image is read whole, decoded on threads. ``pdf_text``: a PDF
    page's text layer, where it has one, stands for its read (layout ``"text"``)."""
    from crnn.data.image import ImageDecodeError
    from crnn.layout import Line, Page

    texts = text_layers(files, password) if pdf_text else {}
    if layout == "line":
        for f, p in predict_files(rec, files, dpi, password):
            if isinstance(p, Exception):
                yield f, p
            else:
                yield (
                    f,
                    Page(
                        [
                            Line(
                                p.text,
                                p.confidence,
                                [],
                                p.char_confidences,
                                p.rotation,
                                p.char_boxes,
                            )
                        ],
                        "line",
                    ),
                )
        return

    def source(f: str) -> Any:  # what the planner reads for f, or why it cannot
        try:
            return texts[f] if f in texts else open_input(f, rec.spec.rgb, dpi, password)
        except ImageDecodeError as e:
            return e

    pages = rec.planner.read_rounds(map(source, files), layout, "return", ROUND_LINES, ROUND_PAGES)
    yield from zip(files, pages)


def text_layers(files: list[str], password: str | None = None) -> dict[str, Any]:
    """``--pdf-text``: the PDF pages among ``files`` that have a text layer, as pages of
    layout ``"text"`` (confidence 1, no boxes)."""
    from crnn.data.pdf import PdfError, page_text, split_ref
    from crnn.layout import Line, Page

    texts: dict[str, Any] = {}
    for f in files:
        ref = split_ref(f)
        if ref is None:
            continue
        try:
            lines = [ln.strip() for ln in page_text(ref[0], ref[1], password).split("\n")]
        except PdfError:
            continue  # read its pixels, which report the error
        if any(lines):
            texts[f] = Page([Line(ln, 1.0, []) for ln in lines if ln], "text")
    return texts
