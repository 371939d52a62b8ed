"""PDF pages as images: what a scan reaches people as.

Each page is rendered by PDFium (``pypdfium2``: wheels for every platform, no system
package) at ``dpi`` and read like any other image; the text layer is ignored unless asked
for (:func:`page_text`), since a scan's text layer is often an old OCR's errors.

A page of a PDF on disk is named ``doc.pdf#page=3`` (1-based, the PDF open-parameter
form): :func:`expand_pdf` gives those names and :func:`open_source` renders one. Bad PDFs
(encrypted, broken, a page too large to render) raise :class:`PdfError`, an
:class:`~crnn.data.image.ImageDecodeError`, so a tool reports them and reads the rest.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from crnn.data.image import MAX_PIXELS, ImageDecodeError, ImageTooLargeError

# 200 dpi puts 10 pt print at about 28 px a line: enough for the line finder and the
# recognizer (which reads lines at 32 px) without the cost of 300 dpi.
DEFAULT_DPI = 200
_REF = re.compile(r"^(?P<path>.+)#page=(?P<page>[1-9][0-9]*)$")
# PDFium is not thread-safe (pypdfium2's docs): one call into it at a time per process.
_LOCK = threading.RLock()


class PdfError(ImageDecodeError):
    """A PDF (or one of its pages) that cannot be read."""


def is_pdf(source: str | os.PathLike[str] | bytes) -> bool:
    """Whether a path ends in ``.pdf`` or bytes start as a PDF does."""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source[:1024]).lstrip().startswith(b"%PDF-")
    return str(source).lower().endswith(".pdf")


def page_ref(path: str, page: int) -> str:
    """The name of a PDF's page (1-based): ``doc.pdf#page=3``."""
    return f"{path}#page={page}"


def split_ref(name: str) -> tuple[str, int] | None:
    """``(pdf path, page)`` for a name :func:`page_ref` made, else None (also for a file
    that really is named so)."""
    m = _REF.match(name)
    if m is None or os.path.exists(name) or not is_pdf_file(m["path"]):
        return None
    return m["path"], int(m["page"])


def page_ranges(spec: str | None) -> list[tuple[int, int | None]]:
    """``"1-3,5,9-"`` as 1-based ``(first, last)`` ranges (last None: to the end).
    Raises ValueError with what was expected."""
    out: list[tuple[int, int | None]] = []
    for part in (spec or "").split(",") if spec else []:
        m = re.fullmatch(r"\s*(\d*)\s*(-?)\s*(\d*)\s*", part)
        if m is None or not (m[1] or m[3]) or (not m[2] and not m[1]):
            raise ValueError(
                f"--pages {spec!r}: expected page numbers and ranges like 1-3,5,9- (from 1)"
            )
        first = int(m[1]) if m[1] else 1
        last = (int(m[3]) if m[3] else None) if m[2] else first
        if first < 1 or (last is not None and last < first):
            raise ValueError(f"--pages {spec!r}: {part.strip()!r} is not a range of pages from 1")
        out.append((first, last))
    return out


def parse_pages(spec: str | None, count: int) -> list[int]:
    """1-based page numbers of a PDF of ``count`` pages that ``spec`` picks (see
    :func:`page_ranges`; None or ``""``: all), in the order given, each once; numbers
    past the last page are dropped. Raises ValueError."""
    if not spec:
        return list(range(1, count + 1))
    out: list[int] = []
    for first, last in page_ranges(spec):
        end = count if last is None else min(last, count)
        out.extend(p for p in range(first, end + 1) if p not in out)
    return out


def _open(source: str | os.PathLike[str] | bytes, password: str | None = None) -> Any:
    import pypdfium2 as pdfium

    name = "the PDF" if isinstance(source, (bytes, bytearray)) else str(source)
    try:
        return pdfium.PdfDocument(
            bytes(source) if isinstance(source, bytearray) else source, password=password
        )
    except pdfium.PdfiumError as e:
        # PDFium's error code is left over from the last failure when this one sets none:
        # "password" is believed only where the file says it is encrypted.
        if "password" in str(e).lower() and _declares_encryption(source):
            raise PdfError(
                f"{name} is encrypted: give its password (--pdf-password) or save an "
                "unencrypted copy"
            ) from None
        if _holds_no_page(source):  # PDFium refuses a document whose page tree is empty
            raise PdfError(f"{name} has no pages (its page tree is empty)") from None
        raise PdfError(f"{name} is not a readable PDF ({e}): is it complete?") from None
    except (OSError, ValueError) as e:
        raise PdfError(f"{name} could not be opened as a PDF ({e})") from None


def _declares_encryption(source: str | os.PathLike[str] | bytes) -> bool:
    """Whether a PDF's trailer names an /Encrypt dictionary (read from its last MiB)."""
    try:
        if isinstance(source, (bytes, bytearray)):
            tail = bytes(source[-(1 << 20) :])
        else:
            with open(source, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - (1 << 20)))
                tail = f.read()
    except OSError:
        return True
    return b"/Encrypt" in tail


def _holds_no_page(source: str | os.PathLike[str] | bytes) -> bool:
    """Whether a PDF that PDFium refused has a page tree of count 0 and no page object
    (read from its first 64 MiB): PDFium's own error code for it is whatever the last
    failure left."""
    import re

    try:
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source[: 64 << 20])
        else:
            with open(source, "rb") as f:
                data = f.read(64 << 20)
    except OSError:
        return False
    return bool(re.search(rb"/Count\s+0\b", data)) and not re.search(
        rb"/Type\s*/Page(?![a-zA-Z])", data
    )


def load_page(doc: Any, name: str, page: int) -> Any:
    """Page ``page`` (1-based) of an open document; a page object PDFium cannot load (a
    page tree that promises more pages than it holds, a broken page) is a
    :class:`PdfError` naming that page alone, so the document's other pages are read."""
    import pypdfium2 as pdfium

    try:
        return doc[page - 1]
    except pdfium.PdfiumError as e:
        raise PdfError(
            f"{page_ref(name, page)} cannot be loaded ({e}): the PDF's page tree "
            f"lists {len(doc)} pages, this one is missing or broken"
        ) from None


def page_count(source: str | os.PathLike[str] | bytes, password: str | None = None) -> int:
    """How many pages a PDF has. Raises :class:`PdfError`."""
    with _LOCK:
        doc = _open(source, password)
        try:
            return len(doc)
        finally:
            doc.close()


def render(
    source: str | os.PathLike[str] | bytes,
    page: int,
    dpi: int = DEFAULT_DPI,
    password: str | None = None,
    rgb: bool = False,
) -> Any:
    """Page ``page`` (1-based) as a PIL image (``L``, or ``RGB``) at ``dpi``: white paper,
    annotations and form fields drawn. Raises :class:`PdfError` (a page over
    :data:`~crnn.data.image.MAX_PIXELS` at this dpi, or whose images hold more:
    ``ImageTooLargeError``)."""
    pdf = OpenedPdf(source, password)
    try:
        return pdf.render(page, dpi, rgb)
    finally:
        pdf.close()


def page_sizes(
    source: str | os.PathLike[str] | bytes, dpi: int = DEFAULT_DPI, password: str | None = None
) -> list[tuple[int, int]]:
    """Each page's size in pixels at ``dpi`` (what :func:`render` would make), from the
    PDF's page boxes: nothing is rendered. Raises :class:`PdfError`."""
    pdf = OpenedPdf(source, password)
    try:
        return pdf.sizes(dpi)
    finally:
        pdf.close()


class OpenedPdf:
    """A PDF opened once for all that is asked of it (its page count, its pages' sizes,
    each page rendered): the server reads a request's pages from one (reopening a 17.7 MiB
    PDF without an xref table twice a page took 11 s for 8 pages). Every call holds the
    PDFium lock; after :meth:`close` a call raises :class:`PdfError`. Raises
    :class:`PdfError` when it cannot be opened."""

    def __init__(self, source: str | os.PathLike[str] | bytes, password: str | None = None):
        self.name = "the PDF" if isinstance(source, (bytes, bytearray)) else str(source)
        with _LOCK:
            self._doc: Any = _open(source, password)
        self._sizes: dict[int, list[tuple[int, int]]] = {}
        self._stop = threading.Event()  # set by close(): a render under way stops

    def _open_doc(self) -> Any:
        if self._doc is None:
            raise PdfError(f"{self.name} was closed (its request had ended)")
        return self._doc

    def __len__(self) -> int:
        with _LOCK:
            return len(self._open_doc())

    def sizes(self, dpi: int = DEFAULT_DPI) -> list[tuple[int, int]]:
        """Each page's size in pixels at ``dpi``, from its page box (a broken page: 0 x 0,
        its own error when rendered)."""
        with _LOCK:
            if dpi not in self._sizes:
                doc, sizes = self._open_doc(), []
                for i in range(len(doc)):
                    try:
                        w, h = load_page(doc, "", i + 1).get_size()
                    except PdfError:
                        w = h = 0
                    sizes.append((round(w * dpi / 72), round(h * dpi / 72)))
                self._sizes[dpi] = sizes
            return list(self._sizes[dpi])

    def render(self, page: int, dpi: int = DEFAULT_DPI, rgb: bool = False) -> Any:
        """Page ``page`` (1-based) as :func:`render` draws it."""
        if not 18 <= dpi <= 1200:
            raise ValueError(f"dpi must be between 18 and 1200, got {dpi}")
        with _LOCK:
            try:
                return _render_page(self._open_doc(), self.name, page, dpi, rgb, self._stop)
            finally:
                if self._stop.is_set():  # closed while rendering: the close falls to us
                    self._close_doc()

    def close(self) -> None:
        """Close the document. A render under way in another thread stops at its next
        pause (PDFium's progressive renderer asks every 100 page objects) and raises
        :class:`PdfError`; this call does not wait for it (the server closes a timed-out
        request's PDFs from its event loop, and the PDFium lock must be free for the
        next request at once, not when a slow page is done)."""
        self._stop.set()
        if _LOCK.acquire(blocking=False):
            try:
                self._close_doc()
            finally:
                _LOCK.release()

    def _close_doc(self) -> None:
        if self._doc is not None:
            self._doc.close()
            self._doc = None


def _render_page(doc: Any, name: str, page: int, dpi: int, rgb: bool, stop: Any = None) -> Any:
    if not 1 <= page <= len(doc):
        raise PdfError(f"{name} has {len(doc)} pages; there is no page {page}")
    pg = load_page(doc, name, page)
    w_pt, h_pt = pg.get_size()
    w, h = round(w_pt * dpi / 72), round(h_pt * dpi / 72)
    if w * h > MAX_PIXELS:
        raise ImageTooLargeError(
            f"{page_ref(name, page)}: {w_pt / 72:.1f} x {h_pt / 72:.1f} in at {dpi} dpi is "
            f"{w} x {h} "
            f"pixels, more than the {MAX_PIXELS:,} any tool decodes: give a lower --dpi"
        )
    if w < 1 or h < 1:
        raise PdfError(f"{page_ref(name, page)} is empty ({w_pt:.0f} x {h_pt:.0f} pt)")
    held = image_pixels(pg, stop, page_ref(name, page))
    if held > MAX_PIXELS:
        raise ImageTooLargeError(
            f"{page_ref(name, page)}: its images hold {held:,} pixels, more than the "
            f"{MAX_PIXELS:,} any tool decodes (whatever the page's size): not rendered"
        )
    return draw_page(pg, page_ref(name, page), dpi / 72, rgb, stop).convert("RGB" if rgb else "L")


def draw_page(pg: Any, ref: str, scale: float, rgb: bool, stop: Any = None) -> Any:
    """A loaded page drawn as a PIL image by PDFium's progressive renderer, on white, with
    its annotations: what ``PdfPage.render`` draws, but stoppable. The renderer asks
    whether to pause every 100 page objects; when ``stop`` (a ``threading.Event``) is set
    it pauses, the render is abandoned and :class:`PdfError` says so. The image limits
    bound what a page's images decode; this bounds what its vector content costs (a
    0.7 MB page of 300,000 filled rectangles takes 3.5 s to draw, 40 MB would take
    minutes, and a timed-out request's render held the PDFium lock that long)."""
    import ctypes
    import math

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    w, h = math.ceil(pg.get_width() * scale), math.ceil(pg.get_height() * scale)
    bitmap = pdfium.PdfBitmap.new_native(w, h, raw.FPDFBitmap_BGR if rgb else raw.FPDFBitmap_Gray)
    raw.FPDFBitmap_FillRect(bitmap, 0, 0, w, h, 0xFFFFFFFF)
    flags = raw.FPDF_ANNOT | (0 if rgb else raw.FPDF_GRAYSCALE)
    pause = raw.IFSDK_PAUSE(version=1)
    asked = dict(raw.IFSDK_PAUSE._fields_)["NeedToPauseNow"]
    callback = asked(lambda _: int(stop is not None and stop.is_set()))
    pause.NeedToPauseNow = callback  # kept alive by ``callback`` until the render ends
    try:
        status = raw.FPDF_RenderPageBitmap_Start(
            bitmap, pg, 0, 0, w, h, 0, flags, ctypes.byref(pause)
        )
        while status == raw.FPDF_RENDER_TOBECONTINUED:
            if stop is not None and stop.is_set():
                raise PdfError(f"{ref}: rendering stopped (its request had ended)")
            status = raw.FPDF_RenderPage_Continue(pg, ctypes.byref(pause))
    finally:
        raw.FPDF_RenderPage_Close(pg)
    if status != raw.FPDF_RENDER_DONE:
        raise PdfError(f"{ref} could not be rendered (PDFium's renderer failed)")
    try:
        return bitmap.to_pil()
    except Exception as e:  # noqa: BLE001 -- PDFium's own failures: one page, not the run
        raise PdfError(f"{ref} could not be rendered ({e})") from None


def image_pixels(page: Any, stop: Any = None, ref: str = "the page") -> int:
    """The pixels a page's images hold, summed over every image drawn (inside forms too),
    from their headers: what rendering it would decode, which its page box does not tell
    (a 100 pt page may draw a 20,000 x 20,000 image ten times). Walks the page's objects
    through PDFium's C calls (a page of 300,000 vector objects: pypdfium2's object
    helpers took 1.5 s), asking ``stop`` every 1,000 objects (:func:`draw_page`)."""
    import ctypes

    import pypdfium2.raw as raw

    pixel_size = getattr(raw, "FPDFImageObj_GetImagePixelSize", None)
    if pixel_size is None:  # an older PDFium: pypdfium2's own walk
        return _image_pixels_by_helpers(page)
    w, h = ctypes.c_uint(), ctypes.c_uint()
    total, walked, forms = 0, 0, [(None, 0)]
    while forms:
        form, depth = forms.pop()
        count = raw.FPDFFormObj_CountObjects(form) if form else raw.FPDFPage_CountObjects(page)
        for i in range(max(count, 0)):
            walked += 1
            if walked % 1000 == 0 and stop is not None and stop.is_set():
                raise PdfError(f"{ref}: rendering stopped (its request had ended)")
            obj = raw.FPDFFormObj_GetObject(form, i) if form else raw.FPDFPage_GetObject(page, i)
            if not obj:
                continue
            kind = raw.FPDFPageObj_GetType(obj)
            if kind == raw.FPDF_PAGEOBJ_IMAGE:
                if pixel_size(obj, ctypes.byref(w), ctypes.byref(h)):
                    total += w.value * h.value
            elif kind == raw.FPDF_PAGEOBJ_FORM and depth < 15:
                forms.append((obj, depth + 1))
    return total


def _image_pixels_by_helpers(page: Any) -> int:
    import pypdfium2.raw as raw

    total = 0
    for obj in page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,)):
        size = getattr(obj, "get_px_size", None) or getattr(obj, "get_size", None)
        try:
            w, h = size() if size is not None else (0, 0)
        except Exception:  # noqa: BLE001 -- an unreadable image header: PDFium's to judge
            continue
        total += int(w) * int(h)
    return total


def page_text(
    source: str | os.PathLike[str] | bytes, page: int, password: str | None = None
) -> str:
    """The text layer of page ``page`` (1-based), as PDFium extracts it ("" if none)."""
    with _LOCK:
        doc = _open(source, password)
        try:
            tp = load_page(doc, "the PDF", page).get_textpage()
            try:
                return str(tp.get_text_range()).replace("\r\n", "\n").replace("\r", "\n")
            finally:
                tp.close()
        finally:
            doc.close()


def expand_pdf(path: str, pages: str | None = None, password: str | None = None) -> list[str]:
    """The names (``doc.pdf#page=N``) of the pages of ``path`` that ``pages`` selects
    (see :func:`parse_pages`). Raises :class:`PdfError` or ValueError."""
    return [page_ref(path, p) for p in parse_pages(pages, page_count(path, password))]


def open_source(
    name: str, dpi: int = DEFAULT_DPI, password: str | None = None, rgb: bool = False
) -> Any:
    """What a tool reads for an input name: a PDF page rendered (``doc.pdf#page=3``), or
    the path itself. Raises :class:`PdfError`."""
    ref = split_ref(name)
    if ref is None:
        return name
    return render(ref[0], ref[1], dpi, password, rgb)


def is_pdf_file(path: str | os.PathLike[str]) -> bool:
    """Whether a file on disk is a PDF, by its name or its first bytes."""
    p = Path(path)
    if is_pdf(str(p)):
        return True
    try:
        with p.open("rb") as f:
            return is_pdf(f.read(1024))
    except OSError:
        return False
