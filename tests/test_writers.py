"""hOCR and ALTO from crnn-predict: well-formed, the structure readers expect, the page's
text at its CER, boxes inside the image."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from rapidfuzz.distance import Levenshtein

from tests.test_detected_reading import PAGE_LINES, printed_page

XHTML = "{http://www.w3.org/1999/xhtml}"
ALTO = "{http://www.loc.gov/standards/alto/ns-v4#}"


@pytest.fixture(scope="module")
def page_png(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "page.png"
    printed_page().save(path)
    return path


def _cer(read: str, truth: str) -> float:
    return Levenshtein.distance(read, truth) / len(truth)


def test_hocr_parses_and_holds_the_page(page_png, capsys) -> None:
    from crnn.cli.predict import main

    assert main(["--model", "line", "--format", "hocr", str(page_png)]) == 0
    root = ET.fromstring(capsys.readouterr().out)
    page = root.find(f".//{XHTML}div[@class='ocr_page']")
    assert page is not None and "bbox 0 0 620 340" in page.get("title")
    lines = root.findall(f".//{XHTML}span[@class='ocr_line']")
    assert len(lines) == len(PAGE_LINES)
    text = "\n".join(
        " ".join(w.text for w in ln.findall(f"{XHTML}span[@class='ocrx_word']")) for ln in lines
    )
    assert _cer(text, "\n".join(PAGE_LINES)) <= 0.02
    word = lines[0].find(f"{XHTML}span")
    x0, y0, x1, y1 = map(int, word.get("title").split(";")[0].split()[1:])
    assert 0 <= x0 < x1 <= 620 and 0 <= y0 < y1 <= 340
    assert 0 <= int(word.get("title").split("x_wconf")[1]) <= 100


def test_alto_parses_and_holds_the_page(page_png, tmp_path) -> None:
    from crnn.cli.predict import main

    out = tmp_path / "out"
    assert (
        main(
            [
                "--model",
                "line",
                "--format",
                "alto",
                "--output-dir",
                str(out),
                str(page_png),
                str(page_png),
            ]
        )
        == 0
    )
    root = ET.parse(out / "page.png.xml").getroot()
    assert root.tag == f"{ALTO}alto"
    pg = root.find(f".//{ALTO}Page")
    assert (pg.get("WIDTH"), pg.get("HEIGHT")) == ("620", "340")
    lines = root.findall(f".//{ALTO}TextLine")
    text = "\n".join(
        " ".join(s.get("CONTENT") for s in ln.findall(f"{ALTO}String")) for ln in lines
    )
    assert _cer(text, "\n".join(PAGE_LINES)) <= 0.02
    s = lines[0].find(f"{ALTO}String")
    assert 0 <= float(s.get("WC")) <= 1 and int(s.get("WIDTH")) > 0


def test_several_inputs_as_hocr_need_an_output_dir(page_png, capsys) -> None:
    from crnn.cli.predict import main

    assert main(["--model", "line", "--format", "hocr", str(page_png), str(page_png)]) == 2
    assert "--output-dir" in capsys.readouterr().err


def test_txt_prints_each_inputs_text(page_png, capsys) -> None:
    from crnn.cli.predict import main

    assert main(["--model", "line", "--format", "txt", str(page_png)]) == 0
    assert _cer(capsys.readouterr().out.strip(), "\n".join(PAGE_LINES)) <= 0.02
