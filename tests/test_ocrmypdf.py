"""The OCRmyPDF plugin: a scanned PDF made searchable with crnn-ocr reading its pages
(Tesseract blocked, so it need not be installed), and a bad --crnn-model refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from crnn.data.synth.fonts import bundled_font_dir

pytest.importorskip("ocrmypdf", reason="the ocrmypdf extra: pip install 'crnn-ocr[ocrmypdf]'")
pdfium = pytest.importorskip("pypdfium2")

LINES = ["The quick brown fox jumps over", "Invoice number 4512 paid in full"]


def _scan(path: Path) -> Path:
    font = ImageFont.truetype(
        str(bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"), 40
    )
    im = Image.new("RGB", (1100, 700), "white")
    draw = ImageDraw.Draw(im)
    for i, text in enumerate(LINES):
        draw.text((120, 150 + 90 * i), text, font=font, fill="black")
    im.save(path, resolution=150)
    return path


def _ocrmypdf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ocrmypdf",
            "--plugin",
            "crnn.ocrmypdf",
            "--jobs",
            "1",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_scanned_pdf_is_made_searchable_with_the_text_where_it_is_printed(tmp_path) -> None:
    scan, out = _scan(tmp_path / "scan.pdf"), tmp_path / "searchable.pdf"
    r = _ocrmypdf("--output-type", "pdf", str(scan), str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    page = pdfium.PdfDocument(str(out))[0]
    text = page.get_textpage().get_text_range()
    assert [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()] == LINES
    # Each line's text is laid where the line is printed (PDF points: 72 per inch at 150 dpi).
    textpage = page.get_textpage()
    first = textpage.search("quick").get_next()
    assert first is not None
    left, bottom, right, top = textpage.get_charbox(first[0])
    height = page.get_height()
    y_px = (height - top) * 150 / 72
    assert 150 - 15 <= y_px <= 150 + 50 and left * 150 / 72 > 120
    # What a user's PDF tools read back (poppler's pdftotext, where it is installed).
    if shutil.which("pdftotext"):
        back = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True)
        assert [" ".join(ln.split()) for ln in back.stdout.splitlines() if ln.strip()] == LINES


@pytest.mark.slow
def test_a_chinese_scan_is_read_by_the_chinese_model(tmp_path) -> None:
    face = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")  # Debian's fonts-wqy-zenhei
    if not face.is_file():
        pytest.skip("fonts-wqy-zenhei is not installed (.ci/run installs it)")
    font = ImageFont.truetype(str(face), 44)
    im = Image.new("RGB", (1100, 500), "white")
    ImageDraw.Draw(im).text((100, 150), "本店商品一律八折欢迎选购", font=font, fill="black")
    im.save(tmp_path / "scan.pdf", resolution=150)
    out = tmp_path / "out.pdf"
    r = _ocrmypdf(
        "--crnn-model", "zh", "--output-type", "pdf", str(tmp_path / "scan.pdf"), str(out)
    )
    assert r.returncode == 0, r.stderr[-3000:]
    text = pdfium.PdfDocument(str(out))[0].get_textpage().get_text_range()
    assert "".join(text.split()) == "本店商品一律八折欢迎选购"


@pytest.mark.slow
def test_a_model_that_does_not_exist_is_refused_before_any_page_is_read(tmp_path) -> None:
    scan = _scan(tmp_path / "scan.pdf")
    r = _ocrmypdf("--crnn-model", "nosuch", str(scan), str(tmp_path / "o.pdf"))
    assert r.returncode != 0 and "--crnn-model 'nosuch'" in r.stderr
    assert "line" in r.stderr and "zh" in r.stderr and not (tmp_path / "o.pdf").exists()
