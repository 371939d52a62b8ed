"""The page finder on the pages that were its cliffs: a screenshot of a thousand log lines
(the reading order recursed past Python's limit), a dusty scan (specks read as text, and
the marks and row-piece merges quadratic or worse in their number)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from crnn.data.synth.fonts import bundled_font_dir
from crnn.layout import find_lines
from crnn.layout.lines import LineBox, _stack, merge_row_pieces, reading_order

SERIF = bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"


def test_the_reading_order_of_a_thousand_stacked_lines_needs_no_deep_recursion() -> None:
    # 1,100 lines, evenly spaced: each XY cut takes one line off, 1,100 levels deep.
    boxes = [LineBox(20, 30 * i, 1100, 30 * i + 20) for i in range(1100)]
    shuffled = boxes[::-1]
    assert reading_order(shuffled, ch=18) == boxes


def test_a_dusty_scan_finds_its_lines_and_no_others() -> None:
    page = Image.new("L", (1240, 1400), 250)
    d = ImageDraw.Draw(page)
    font = ImageFont.truetype(str(SERIF), 40)
    for i in range(12):
        d.text((100, 150 + 80 * i), "The quick brown fox jumps over the dog", font=font, fill=20)
    clean = find_lines(np.asarray(page))
    arr = np.asarray(page).copy()
    rng = np.random.default_rng(0)
    for y, x in zip(rng.integers(0, 1398, 2000), rng.integers(0, 1238, 2000)):
        arr[y : y + 2, x : x + 2] = 30  # 2 x 2 px specks, 7 % of a character height
    dusty = find_lines(arr)
    assert len(clean.lines) == 12 and len(dusty.lines) == 12, dusty.lines
    # The specks near a line do not grow its box either.
    assert all(
        abs(a.height - b.height) <= 0.15 * clean.char_height
        for a, b in zip(clean.lines, dusty.lines)
    )


def test_thousands_of_marks_and_row_pieces_are_joined_as_before() -> None:
    """2,400 pieces in 200 rows (12 a row, each 4 px from the next) join into 200 lines,
    and 20,000 marks scattered down a tall page stay as they are: the old scans restarted
    after every join (2,400 pieces did not finish in 5 minutes) or compared every mark
    with every other."""
    pieces = [
        LineBox(10 + 50 * k, 40 * r + (k % 2), 56 + 50 * k, 40 * r + 20 + (k % 2))
        for r in range(200)
        for k in range(12)
    ]
    rows = merge_row_pieces(pieces[::-1], ch=20)
    assert sorted(rows, key=lambda b: b.y0) == [
        LineBox(10, 40 * r, 606, 40 * r + 21) for r in range(200)
    ]
    rng = np.random.default_rng(1)
    marks = sorted(
        (
            LineBox(int(x), int(y), int(x) + 3, int(y) + 3)
            for x, y in zip(rng.integers(0, 3000, 20_000), rng.integers(0, 400_000, 20_000))
        ),
        key=lambda b: b.y0,
    )
    stacked = _stack(marks, ch=20)
    assert 19_900 <= len(stacked) <= 20_000
    # Two marks one above the other, a quarter of a character height apart, still join.
    assert _stack([LineBox(0, 0, 10, 6), LineBox(2, 9, 12, 15)], ch=20) == [LineBox(0, 0, 12, 15)]


def test_a_dim_photo_of_paper_is_not_taken_for_light_text_on_dark() -> None:
    """Paper photographed in poor light is grey ~100 with darker text: the median alone
    (< 110) turned it over, and no line was found."""
    img = Image.new("L", (900, 300), 100)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(str(SERIF), 34)
    for i, t in enumerate(
        [
            "A dim photo of a printed page,",
            "taken in poor light, is grey",
            "but its text is darker still.",
        ]
    ):
        d.text((40, 40 + 70 * i), t, font=font, fill=30)
    found = find_lines(np.asarray(img))
    assert not found.inverted and len(found.lines) == 3, found.lines
    slide = Image.new("L", (900, 300), 30)
    ImageDraw.Draw(slide).text((40, 40), "Light text on a dark slide", font=font, fill=230)
    assert find_lines(np.asarray(slide)).inverted


def test_a_line_too_wide_for_the_recognizer_is_read_in_pieces_not_refused() -> None:
    """One line 5,000 px wide at the model's height (a log line in a wide screenshot) made
    its whole page fail ("Crop it into lines"); it is read in pieces, cut between words."""
    from crnn.reading.recognizer import Recognizer

    font = ImageFont.truetype(str(SERIF), 24)
    words = " ".join(["word"] * 190)
    img = Image.new("L", (font.getbbox(words)[2] + 80, 140), 250)
    d = ImageDraw.Draw(img)
    d.text((40, 20), "A short first line.", font=font, fill=20)
    d.text((40, 80), words, font=font, fill=20)
    page = Recognizer.bundled("line").read_page(img, layout="page")
    assert page.lines[0].text.strip() == "A short first line."
    pieces = page.lines[1:]
    assert len(pieces) >= 2 and all(ln.box[2] - ln.box[0] < img.width for ln in pieces)
    assert " ".join(ln.text.strip() for ln in pieces).split() == ["word"] * 190


@pytest.mark.slow
def test_a_long_log_screenshot_is_planned_as_a_page_of_all_its_lines() -> None:
    """A 1,200 x 33,000 px screenshot of 1,100 log lines, read with every default: it was
    turned on its side, taken for one 35,144 px line and refused as too wide (0 of 1,100
    lines). It is planned as a page of its 1,100 lines (read whole: 28 s, 0.16 % CER with
    the line model; docs/benchmarks.md, "Hostile inputs")."""
    import random

    from crnn.reading.recognizer import Recognizer

    mono = bundled_font_dir() / "dejavu" / "DejaVuSansMono-Bold.ttf"
    font = ImageFont.truetype(str(mono), 16)
    r = random.Random(0)
    words = "build test passed failed error warning module import request server".split()
    img = Image.new("L", (1200, 33000), 255)
    d = ImageDraw.Draw(img)
    for i in range(1100):
        text = f"{i:04d} " + " ".join(r.choice(words) for _ in range(r.randint(3, 9)))
        d.text((10, 10 + 30 * i), text, font=font, fill=0)
    page, jobs = Recognizer.bundled("word").plan_page(img)
    assert page.layout == "page" and page.rotation == 0 and len(jobs) == 1100
    assert all(10 + 30 * i - 8 <= box[1] <= 10 + 30 * i + 8 for i, (_, _, box) in enumerate(jobs))
