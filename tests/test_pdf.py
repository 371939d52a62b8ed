"""PDFs read page by page (crnn/data/pdf.py, crnn-predict): scans saved as PDFs, a PDF
with a text layer, broken and oversized ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from rapidfuzz.distance import Levenshtein
from test_pages import TRUTH, two_column_page

from benchmarks.hostile_inputs import pdf_bytes
from crnn.cli.predict import main as predict_main
from crnn.data.image import ImageTooLargeError
from crnn.data.pdf import PdfError, page_count, parse_pages, render, split_ref

REPO = Path(__file__).resolve().parents[1]


def text_pdf(path: Path, text: str, size: tuple[int, int] = (200, 36)) -> Path:
    """A one-page PDF that draws ``text`` in Helvetica: a text layer (and its pixels)."""
    stream = f"BT /F1 24 Tf 8 10 Td ({text}) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {size[0]} {size[1]}] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>".encode(),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    path.write_bytes(pdf_bytes(objs))
    return path


@pytest.fixture(scope="module")
def scan_pdf(tmp_path_factory) -> Path:
    """Two scanned pages in one PDF (images only, no text layer), at 150 dpi; the second
    is a different page (one column's lines only) so that the order shows."""
    path = tmp_path_factory.mktemp("pdf") / "scan.pdf"
    first = two_column_page().convert("L")
    second = first.crop((0, 80, 560, 380))
    first.save(path, "PDF", resolution=150, save_all=True, append_images=[second])
    return path


def run_json(capsys, *argv: str) -> tuple[int, list[dict], str]:
    code = predict_main([*argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_a_scanned_pdf_is_read_page_by_page_in_order(scan_pdf, capsys) -> None:
    code, res, _ = run_json(capsys, str(scan_pdf), "--model", "line", "--dpi", "150")
    assert code == 0
    assert [r["page"] for r in res] == [1, 2]
    assert [r["path"] for r in res] == [f"{scan_pdf}#page=1", f"{scan_pdf}#page=2"]
    assert Levenshtein.distance(res[0]["text"], TRUTH) / len(TRUTH) < 0.01, res[0]["text"]
    assert res[1]["text"].startswith("Reading a page"), res[1]["text"]
    assert res[0]["layout"] == "page" and len(res[0]["lines"]) == 7


def test_pages_picks_pages_and_a_bad_spec_is_a_usage_error(scan_pdf, capsys) -> None:
    code, res, _ = run_json(
        capsys, str(scan_pdf), "--model", "line", "--dpi", "150", "--pages", "2-"
    )
    assert code == 0 and [r["page"] for r in res] == [2]
    assert predict_main([str(scan_pdf), "--pages", "3-1"]) == 2
    assert "not a range" in capsys.readouterr().err
    assert parse_pages("1-3,5,9-", 10) == [1, 2, 3, 5, 9, 10]
    assert parse_pages("2,2,7-", 4) == [2] and parse_pages("", 3) == [1, 2, 3]
    with pytest.raises(ValueError, match="expected page numbers"):
        parse_pages("a", 3)


def test_a_broken_pdf_is_reported_and_the_rest_is_read(tmp_path, scan_pdf, capsys) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(scan_pdf.read_bytes()[:300])
    not_pdf = tmp_path / "notes.pdf"
    not_pdf.write_text("just some text")
    code, res, err = run_json(
        capsys, str(broken), str(not_pdf), str(REPO / "data/samples/word_01.png")
    )
    assert code == 1
    assert "broken.pdf is not a readable PDF" in err and "notes.pdf" in err
    assert [r.get("error", "") != "" for r in res] == [True, True, False]
    assert res[2]["text"] == "homeland"
    with pytest.raises(PdfError, match="no page 3"):
        render(scan_pdf, 3)


def test_a_page_too_large_to_render_says_to_lower_the_dpi(tmp_path) -> None:
    big = text_pdf(tmp_path / "poster.pdf", "BIG", size=(14400, 14400))  # 200 x 200 in
    with pytest.raises(ImageTooLargeError, match="lower --dpi"):
        render(big, 1, dpi=200)
    assert render(big, 1, dpi=36).size == (7200, 7200)


def test_the_text_layer_is_used_only_when_asked(tmp_path, capsys) -> None:
    pdf = text_pdf(tmp_path / "born_digital.pdf", "Hello layer 42")
    assert page_count(pdf) == 1 and split_ref(f"{pdf}#page=1") == (str(pdf), 1)
    code, res, _ = run_json(capsys, str(pdf), "--pdf-text")
    assert code == 0 and res[0]["layout"] == "text" and res[0]["text"] == "Hello layer 42"
    code, res, _ = run_json(capsys, str(pdf), "--model", "line")  # the pixels, by default
    assert code == 0 and res[0]["layout"] != "text"
    assert Levenshtein.distance(res[0]["text"], "Hello layer 42") <= 1, res[0]["text"]


def test_a_file_named_like_a_page_reference_is_itself(tmp_path) -> None:
    odd = tmp_path / "odd.pdf#page=2"
    Image.new("L", (10, 10)).save(odd, "PNG")
    assert split_ref(str(odd)) is None


_tiny_pdf = pdf_bytes

_CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
_PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>"


def test_a_page_tree_that_promises_more_pages_than_it_holds_costs_only_those_pages(
    tmp_path, capsys
):
    from crnn.cli.predict import main

    bad = tmp_path / "count5.pdf"
    bad.write_bytes(_tiny_pdf([_CATALOG, b"<< /Type /Pages /Kids [3 0 R] /Count 5 >>", _PAGE]))
    word = Path(__file__).resolve().parents[1] / "data" / "samples" / "word_01.png"
    assert main([str(bad), str(word)]) == 1
    out, err = capsys.readouterr()
    assert "homeland" in out and f"{bad}#page=1" in out
    assert err.count("cannot be loaded") == 4 and "page=3 cannot be loaded" in err


def test_a_pdf_without_pages_says_so(tmp_path):
    from crnn.data.pdf import PdfError, page_count

    empty = tmp_path / "zero.pdf"
    empty.write_bytes(_tiny_pdf([_CATALOG, b"<< /Type /Pages /Kids [] /Count 0 >>"]))
    with pytest.raises(PdfError, match="has no pages"):
        page_count(empty)


def test_a_page_whose_images_hold_too_many_pixels_is_refused_before_it_renders():
    """A 100 pt page drawing one big Flate image ten times passed every pixel limit (they
    saw only the page box) and took seconds and hundreds of MB to render (20,000 px a
    side: 7.7 s, 445 MB). The images' own sizes are now summed from their headers first."""
    from benchmarks.hostile_inputs import bomb_pdf
    from crnn.data.image import ImageTooLargeError
    from crnn.data.pdf import render

    bomb = bomb_pdf(4000, 10)  # 16 kB: 160,000,000 pixels drawn on a 100 pt page
    with pytest.raises(ImageTooLargeError, match=r"its images hold 160,000,000 pixels"):
        render(bomb, 1)
    assert render(bomb_pdf(1000, 10), 1).size == (278, 278)  # 10 MP drawn: read
    # The same images drawn from inside a form XObject (a nested drawing) count too.
    import zlib

    data = zlib.compress(bytes(4000 * 4000), 9)
    draws = b"q 100 0 0 100 0 0 cm /Im0 Do Q\n" * 10
    nested = _tiny_pdf(
        [
            _CATALOG,
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] "
            b"/Resources << /XObject << /Fm0 5 0 R >> >> /Contents 4 0 R >>",
            b"<< /Length 8 >>\nstream\n/Fm0 Do\n\nendstream",
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 100 100] "
            b"/Resources << /XObject << /Im0 6 0 R >> >> /Length %d >>\nstream\n"
            % len(draws)
            + draws
            + b"\nendstream",
            b"<< /Type /XObject /Subtype /Image /Width 4000 /Height 4000 /ColorSpace "
            b"/DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n"
            % len(data)
            + data
            + b"\nendstream",
        ]
    )
    with pytest.raises(ImageTooLargeError, match=r"its images hold 160,000,000 pixels"):
        render(nested, 1)


def test_a_page_is_drawn_stoppably_as_pdfium_draws_it(tmp_path, scan_pdf) -> None:
    """The progressive renderer (stoppable) draws what PdfPage.render draws, in grey and
    in colour, a text page and a scan."""
    import numpy as np
    import pypdfium2 as pdfium

    from crnn.data.pdf import draw_page

    text = text_pdf(tmp_path / "t.pdf", "Hello 123")
    for path in (text, scan_pdf):
        doc = pdfium.PdfDocument(str(path))
        try:
            for rgb in (False, True):
                ours = np.asarray(draw_page(doc[0], "p", 150 / 72, rgb).convert("RGB"))
                plain = doc[0].render(scale=150 / 72, grayscale=not rgb).to_pil()
                assert ours.shape == np.asarray(plain.convert("RGB")).shape
                assert np.array_equal(ours, np.asarray(plain.convert("RGB")))
        finally:
            doc.close()


def test_closing_a_pdf_stops_its_render_under_way_without_waiting_for_it(monkeypatch) -> None:
    """The server closes a timed-out request's PDFs from its event loop: the close must
    not wait for the PDFium lock that a slow page's render holds (a 0.7 MB vector page
    held it 3.5 s, and every other request with it); the render stops at its next pause
    and says why, and the document is closed by the render's thread."""
    import threading

    from benchmarks.hostile_inputs import vector_pdf
    from crnn.data import pdf as pdf_mod

    pdf = pdf_mod.OpenedPdf(vector_pdf(300_000))
    closer = threading.Thread(target=pdf.close)
    asked = []

    class FirstPauseCloses(threading.Event):
        """The render's stop flag: at the renderer's first question, close the PDF from
        another thread (as the event loop would) and wait for that close to return."""

        def is_set(self) -> bool:
            if not asked:
                closer.start()
                closer.join(timeout=20)
                asked.append(closer.is_alive())  # (raising here, PDFium would swallow it)
            return super().is_set()

    pdf._stop = FirstPauseCloses()
    with pytest.raises(PdfError, match="rendering stopped"):
        pdf.render(1, 72)
    assert asked == [False], "close() waited for the lock that the render holds"
    assert pdf._doc is None  # closed by the render's thread once it let go
    with pytest.raises(PdfError, match="was closed"):
        pdf.render(1, 72)
