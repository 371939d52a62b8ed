"""Reading a page: its lines found in reading order and read one by one (crnn/layout).
Pages are drawn here with the bundled fonts and read with the bundled models."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from rapidfuzz.distance import Levenshtein

from crnn.data.synth.fonts import bundled_font_dir
from crnn.data.synth.labelfonts import label_font_dir
from crnn.layout import find_lines
from crnn.layout.lines import LineBox, reading_order
from crnn.reading.recognizer import Recognizer

REPO = Path(__file__).resolve().parents[1]
SERIF = bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"
SANS_BOLD = bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"
LEFT = [
    "Reading a page is finding its",
    "lines first, then reading each",
    "one at its own width, in order.",
]
RIGHT = [
    "The second column comes after",
    "the first, top to bottom, and",
    "its numbers 42 and 3.14 too.",
]


@pytest.fixture(scope="module")
def line_model() -> Recognizer:
    return Recognizer.bundled("line")


def cer(read: str, truth: str) -> float:
    return Levenshtein.distance(read, truth) / len(truth)


def two_column_page(
    bg=(250, 250, 247), ink=(20, 20, 20), picture: bool = False, rule: int = 3
) -> Image.Image:
    font, head = ImageFont.truetype(str(SERIF), 26), ImageFont.truetype(str(SANS_BOLD), 34)
    img = Image.new("RGB", (1100, 380 if not picture else 560), bg)
    d = ImageDraw.Draw(img)
    d.text((40, 20), "A Heading Over Two Columns", font=head, fill=ink)
    d.line((40, 72, 1060, 72), fill=ink, width=rule)  # a rule: not a line of text
    for i, t in enumerate(LEFT):
        d.text((40, 100 + 42 * i), t, font=font, fill=ink)
    for i, t in enumerate(RIGHT):
        d.text((580, 100 + 42 * i), t, font=font, fill=ink)
    if picture:  # a photo: textured, so it binarises into many pieces, not one block
        rng = np.random.default_rng(3)
        tex = Image.fromarray((rng.random((70, 85, 3)) * 255).astype(np.uint8)).resize((340, 280))
        img.paste(tex.filter(ImageFilter.GaussianBlur(2)), (120, 260))
        d.rectangle((640, 300, 980, 520), fill=(40, 140, 80))
    return img


TRUTH = "\n".join(["A Heading Over Two Columns", *LEFT, *RIGHT])


def test_two_columns_are_read_column_by_column_under_their_heading(line_model) -> None:
    page = line_model.read_page(two_column_page())
    assert page.layout == "page" and len(page.lines) == 7
    assert cer(page.text, TRUTH) < 0.01, page.text
    assert page.lines[1].text.startswith("Reading") and page.lines[4].text.startswith("The second")


def test_a_tilted_scan_is_levelled_and_read(line_model) -> None:
    img = two_column_page().convert("L").rotate(3.0, Image.BICUBIC, expand=True, fillcolor=250)
    img = img.filter(ImageFilter.GaussianBlur(0.6))
    arr = np.asarray(img, np.float32) + np.random.default_rng(0).normal(
        0, 6, (img.height, img.width)
    )
    scan = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    found = find_lines(np.asarray(scan))
    assert abs(found.angle - 3.0) <= 0.3, found.angle
    page = line_model.read_page(scan)
    assert cer(page.text, TRUTH) < 0.02, page.text
    # Boxes are on the input image: the heading's box holds the heading's ink as tilted
    # (drawn alone and turned the same way), and not much more: a box mapped back with
    # the wrong sign of the turn misses the ends of a 3-degree, 700 px heading by ~35 px.
    alone = Image.new("L", (1100, 380), 250)
    ImageDraw.Draw(alone).text(
        (40, 20), "A Heading Over Two Columns", font=ImageFont.truetype(str(SANS_BOLD), 34), fill=20
    )
    ink = np.asarray(alone.rotate(3.0, Image.BICUBIC, expand=True, fillcolor=250)) < 128
    x0, y0, x1, y1 = page.lines[0].box
    assert ink[y0:y1, x0:x1].sum() >= 0.97 * ink.sum(), (page.lines[0].box, ink.sum())
    ys, xs = np.nonzero(ink)
    assert (x1 - x0) * (y1 - y0) <= 1.8 * (np.ptp(xs) + 1) * (np.ptp(ys) + 1)


def test_a_screenshot_with_light_text_on_a_coloured_background(line_model) -> None:
    img = two_column_page(bg=(24, 60, 110), ink=(240, 240, 220))
    page = line_model.read_page(img)
    assert cer(page.text, TRUTH) < 0.02, page.text


def test_pictures_and_rules_are_not_read_as_text(line_model) -> None:
    page = line_model.read_page(two_column_page(picture=True))
    assert len(page.lines) == 7, page.text
    assert cer(page.text, TRUTH) < 0.02


def test_a_blurred_rule_across_both_columns_of_a_scan_is_no_line() -> None:
    # Blurred and binarised, a 5 px rule is a third of a character height thick: read as
    # a line ("~"), it spanned the gutter and the columns' rows came out interleaved.
    img = (
        two_column_page(rule=5).convert("L").rotate(0.7, Image.BICUBIC, expand=True, fillcolor=250)
    )
    found = find_lines(np.asarray(img.filter(ImageFilter.GaussianBlur(1.5))))
    assert len(found.lines) == 7, found.lines
    left, right = found.lines[1:4], found.lines[4:]
    assert max(b.x0 for b in left) < 100 < min(b.x0 for b in right), found.lines
    assert all(a.y0 < b.y0 for col in (left, right) for a, b in zip(col, col[1:])), found.lines


def test_a_textured_picture_on_a_dark_slide_is_not_read_as_text(line_model) -> None:
    # Light text on a dark page: the picture's grain, turned over, binarises into specks
    # that no block test sees; its density (off the paper almost everywhere) gives it away.
    img = two_column_page(bg=(30, 60, 70), ink=(235, 235, 225))
    rng = np.random.default_rng(5)
    tex = Image.fromarray((rng.random((40, 90, 3)) * 255).astype(np.uint8)).resize((420, 200))
    tall = Image.new("RGB", (img.width, img.height + 260), (30, 60, 70))
    tall.paste(img)
    tall.paste(tex.filter(ImageFilter.GaussianBlur(3)), (40, img.height + 20))
    page = line_model.read_page(tall)
    assert len(page.lines) == 7, page.text
    assert cer(page.text, TRUTH) < 0.02, page.text


def test_a_short_last_line_of_low_letters_and_a_split_character_keep_their_lines() -> None:
    # "a common sauce." has no ascender (lower than a mark's limit, but as wide as words);
    # 台 in this face is two pieces one above the other, each as low as a mark.
    serif = ImageFont.truetype(str(SERIF), 26)
    cjk = ImageFont.truetype(str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf"), 26)
    img = Image.new("L", (700, 240), 250)
    d = ImageDraw.Draw(img)
    d.text((30, 20), "The Long First Line of This Small Page", font=serif, fill=20)
    d.text((30, 62), "a common sauce.", font=serif, fill=20)
    d.text((30, 130), "请在下午三点之前把会议材料发给前", font=cjk, fill=20)
    d.text((30, 172), "台。", font=cjk, fill=20)
    found = find_lines(np.asarray(img))
    assert len(found.lines) == 4 and all(b.height < 1.5 * found.char_height for b in found.lines), (
        found.lines
    )


def test_a_single_word_is_still_read_as_a_word() -> None:
    rec = Recognizer.bundled("word")
    page = rec.read_page(REPO / "data" / "samples" / "word_01.png")
    assert page.layout == "line" and page.text == "homeland"
    # A large crop of one word (a phone photo of a label) is one line too, read whole.
    word = Image.open(REPO / "data" / "samples" / "word_01.png")
    big = word.resize((word.width * 4, word.height * 4), Image.BICUBIC)
    page = rec.read_page(big)
    assert (
        page.layout == "line" and page.text == "homeland" and page.lines[0].box == [0, 0, *big.size]
    )
    assert (
        rec.read_page(REPO / "data" / "samples" / "word_01.png", layout="line").text == "homeland"
    )


def test_an_image_that_is_neither_is_read_whole_with_a_warning(line_model, caplog) -> None:
    rng = np.random.default_rng(1)
    blobs = Image.fromarray((rng.random((300, 400)) * 255).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(12)
    )
    noise = Image.fromarray((rng.random((600, 600)) * 255).astype(np.uint8))
    for image in (blobs, noise):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="crnn"):
            page = line_model.read_page(image)
        assert page.layout == "line" and page.note
        assert "no text lines found: read as one line" in caplog.text


def test_a_chinese_page_with_the_chinese_model() -> None:
    font = ImageFont.truetype(str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf"), 30)
    lines = [
        "今天早上八点，市图书馆的新馆正式开放。",
        "请在下午三点之前把会议材料发给同事。",
        "这条高速公路全长约三百二十公里。",
    ]
    img = Image.new("L", (760, 200), 245)
    d = ImageDraw.Draw(img)
    for i, t in enumerate(lines):
        d.text((30, 24 + 54 * i), t, font=font, fill=25)
    page = Recognizer.bundled("zh").read_page(
        img.rotate(-1.5, Image.BICUBIC, expand=True, fillcolor=245)
    )
    assert cer(page.text, "\n".join(lines)) < 0.03, page.text


def test_reading_order_is_columns_then_rows_with_a_heading_first() -> None:
    head = LineBox(10, 0, 500, 20)
    left = [LineBox(10, 40 + 30 * i, 240, 60 + 30 * i) for i in range(3)]
    right = [LineBox(270, 40 + 30 * i, 500, 60 + 30 * i) for i in range(3)]
    shuffled = [*right, head, *left]
    random.Random(0).shuffle(shuffled)
    assert reading_order(shuffled, ch=20) == [head, *left, *right]


def test_the_pieces_of_one_tilted_line_are_read_left_to_right() -> None:
    # A heading split at a wide gap on a tilted scan: the right piece a pixel higher.
    right, left = LineBox(515, 86, 1011, 127), LineBox(85, 87, 495, 128)
    below = LineBox(62, 159, 680, 187)
    assert reading_order([right, below, left], ch=33) == [left, right, below]


def test_predict_prints_a_line_per_text_line_and_draws(tmp_path, capsys, line_model) -> None:
    from ckpt_helpers import run_main

    from crnn.cli import predict as predict_cli

    two_column_page().save(tmp_path / "page.png")
    rc, out, err = run_main(
        predict_cli.main,
        "--model",
        "line",
        tmp_path / "page.png",
        "--draw",
        tmp_path / "drawn",
        capsys=capsys,
    )
    rows = [r.split("\t") for r in out.strip().splitlines()]
    assert rc == 0 and len(rows) == 7 and all(r[0] == str(tmp_path / "page.png") for r in rows)
    assert cer("\n".join(r[1] for r in rows), TRUTH) < 0.02
    drawn = Image.open(tmp_path / "drawn" / "page.draw.png")
    assert drawn.width > 2 * 1100 and "drew 1 images" in err
    rc, out, _ = run_main(
        predict_cli.main, "--model", "line", "--json", tmp_path / "page.png", capsys=capsys
    )
    import json

    (result,) = json.loads(out)
    assert result["layout"] == "page" and len(result["lines"]) == 7
    assert set(result["lines"][0]) == {"text", "confidence", "box", "chars"}
    assert result["text"] == "\n".join(r[1] for r in rows)


def test_a_broken_opencv_says_how_to_mend_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two OpenCV wheels share the cv2 folder; removing one leaves ``import cv2`` broken.
    The page reader then names the fix, not only the ImportError."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 -> ImportError
    monkeypatch.delitem(sys.modules, "crnn.layout.lines")
    with pytest.raises(ImportError, match="pip install --force-reinstall opencv-python-headless"):
        importlib.import_module("crnn.layout.lines")
    monkeypatch.undo()  # the real modules back for the tests after this one
    assert importlib.import_module("crnn.layout.lines").find_lines is find_lines


def test_an_upside_down_page_is_turned_over_by_default(line_model) -> None:
    """By default (rotate="pages", as with "auto") a page's lines are read upright or
    turned over, as its widest lines read more probably; the boxes are on the image as
    given (upside down)."""
    turned = two_column_page().rotate(180)
    rec = line_model
    page = rec.read_page(turned, layout="page")
    assert page.rotation == 180 and page.to_dict()["rotation"] == 180
    assert cer(page.text, TRUTH) < 0.02, page.text
    x0, y0, x1, y1 = page.lines[0].box  # the heading: at the bottom of the turned image
    assert y0 > turned.height * 0.7 and x1 > turned.width * 0.5, page.lines[0].box
    upright = rec.read_page(two_column_page(), layout="page")
    assert upright.rotation == 0 and cer(upright.text, TRUTH) < 0.01
    as_given = Recognizer.bundled("line", rotate="none")
    assert as_given.read_page(turned, layout="page").rotation == 0


def test_two_columns_with_a_narrow_gutter_are_read_column_by_column() -> None:
    """A tilted two-column scan, levelled, kept a gutter of 26 px where characters were
    39 high: cut only at a character height, its columns were read across, line by line
    (page CER 65-70 % on two of five Chinese scans of pdf_pages' seed)."""
    heading = LineBox(60, 98, 1007, 142)
    left = [LineBox(57, 160 + 46 * i, 621 - 40 * (i % 2), 188 + 46 * i) for i in range(5)]
    right = [LineBox(647, 160 + 46 * i, 1182, 188 + 46 * i) for i in range(5)]
    order = reading_order([heading, *left, *right], ch=39.0)
    assert order == [heading, *left, *right]
    # A receipt's two short rows with a narrow gap stay rows, left to right.
    rows = [
        LineBox(40, 100, 300, 130),
        LineBox(326, 100, 400, 130),
        LineBox(40, 150, 300, 180),
        LineBox(326, 150, 400, 180),
    ]
    assert reading_order(rows, ch=39.0) == rows


def test_the_shaded_bottom_of_a_scan_is_no_picture(line_model) -> None:
    """A scan lit unevenly, paper 228 at the top and 175 from half-way down, grey ink (a
    benchmark PDF page): the solid-block finder judged dark against the raw page's Otsu
    threshold (190 there), took the shaded bottom for a picture and lost the lines under
    it; it now judges with the light evened out."""
    img = (
        two_column_page(bg=(228, 228, 228), ink=(80, 80, 80))
        .convert("L")
        .filter(ImageFilter.GaussianBlur(0.8))
    )
    arr = np.asarray(img, np.float32)
    shade = np.clip(1.0 - 0.23 * (np.arange(arr.shape[0]) / arr.shape[0] - 0.1) / 0.4, 0.77, 1.0)
    scan = Image.fromarray(np.clip(arr * shade[:, None], 0, 255).astype(np.uint8))
    page = line_model.read_page(scan)
    assert len(page.lines) == 7, page.text
    assert cer(page.text, TRUTH) < 0.02, page.text


@pytest.mark.parametrize("turn", [90, 270])
def test_a_page_on_its_side_is_read_upright_by_default(line_model, turn: int) -> None:
    """A page turned a quarter either way (fed sideways into a scanner) read as columns
    of letter fragments (page CER 96 % on the benchmark pages). By default its lines are
    found on the page turned back, read upright, and boxed on the image as given."""
    given = two_column_page().rotate(-turn, expand=True)  # PIL turns anticlockwise
    page = line_model.read_page(given)
    assert page.rotation == (360 - turn) % 360 and page.to_dict()["rotation"] == page.rotation
    assert cer(page.text, TRUTH) < 0.02, page.text
    # Each line's box, and each character's, on the image as given holds that line's ink:
    # the heading's box lies along the edge the page's top was turned to.
    ink = np.asarray(given.convert("L")) < 128
    x0, y0, x1, y1 = page.lines[0].box
    assert y1 - y0 > 5 * (x1 - x0)  # the heading runs up or down the image
    assert (x0 > given.width * 0.8) if turn == 90 else (x1 < given.width * 0.2), page.lines[0].box
    for ln in page.lines:
        bx0, by0, bx1, by1 = ln.box
        assert ink[by0:by1, bx0:bx1].mean() > 0.03, ln.box
        for cx0, cy0, cx1, cy1 in ln.char_boxes:  # each character's centre inside its line
            assert bx0 <= (cx0 + cx1) / 2 <= bx1 and by0 <= (cy0 + cy1) / 2 <= by1, (
                ln.box,
                ln.char_boxes,
            )
    assert Recognizer.bundled("line", rotate="none").read_page(given).rotation == 0


def test_a_two_line_screenshot_strip_is_read_as_its_two_lines(line_model) -> None:
    """A 1,167 x 54 px strip of two 16 px lines: each line is a third of the image's
    height, over the quarter a page's row may be, so it was read whole, as one line of
    garbage. A long row (some 30 characters or more, no sign's) may be half of it."""
    sans = bundled_font_dir() / "liberation" / "LiberationSans-Regular.ttf"
    font = ImageFont.truetype(str(sans), 17)
    lines = [
        "Build finished: 214 tests passed, 3 skipped, 0 failed in 6 min 12 s on runner",
        "Artifacts uploaded to storage; the release notes are attached to the tag v0.9.3",
    ]
    img = Image.new("RGB", (1167, 54), (255, 255, 255))
    d = ImageDraw.Draw(img)
    for i, t in enumerate(lines):
        d.text((8, 4 + 25 * i), t, font=font, fill=(30, 30, 30))
    page = line_model.read_page(img)
    assert page.layout == "page" and len(page.lines) == 2
    assert cer(page.text, "\n".join(lines)) < 0.03, page.text


def test_grey_percentiles_equal_numpys() -> None:
    """The light-on-dark check's percentiles come from the histogram of a uint8 image:
    the same values as np.percentile's, on noise, few grey levels and a flat image."""
    from crnn.layout.lines import grey_percentiles

    rng = np.random.default_rng(0)
    qs = (0.1, 50, 99.9, 80)
    for k in range(300):
        h, w = rng.integers(1, 120, 2)
        a = rng.integers(0, 256, (h, w), dtype=np.uint8)
        if k % 3 == 0:
            a = (a // 64 * 60).astype(np.uint8)
        if k % 5 == 0:
            a[:] = 7
        assert grey_percentiles(a, qs) == list(np.percentile(a, qs))
