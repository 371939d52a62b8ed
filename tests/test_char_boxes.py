"""Where each character is (crnn/layout/chars.py): boxes from the CTC alignment and the
ink, on the image as given (crops at any scale, turned crops, lines of a tilted page),
in Recognizer.predict, read_page, predict --json and the server."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from crnn.cli.predict import main as predict_main
from crnn.data.synth.fonts import bundled_font_dir
from crnn.data.synth.labelfonts import label_font_dir
from crnn.layout.chars import Placement
from crnn.reading.recognizer import Recognizer

SERIF = bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"
SANS = bundled_font_dir() / "liberation" / "LiberationSans-Regular.ttf"
CJK = label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf"
WORDS = "reading page finding lines numbers and the of text model confidence 42 3.14 box".split()
HANZI = (
    "今天天气很好我们去公园散步北京市海淀区中关村大街号价格元优惠的一是在不了有和人这中大为上个国"
)


def drawn_line(
    text: str, font: ImageFont.FreeTypeFont, at: tuple[int, int] = (15, 0)
) -> tuple[Image.Image, list]:
    """``text`` drawn in black on white, and each character's ink box ``(x0, y0, x1, y1)``."""
    w, h = int(font.getlength(text)) + 2 * at[0], int(font.size * 1.5)
    img = Image.new("L", (w, h), 255)
    d = ImageDraw.Draw(img)
    y = at[1] + font.size * 0.2
    boxes = [
        d.textbbox((at[0] + font.getlength(text[:k]), y), c, font=font) for k, c in enumerate(text)
    ]
    d.text((at[0], y), text, font=font, fill=0)
    return img, boxes


def centred(found, truth, text: str, slack: float = 2.0) -> tuple[int, int]:
    """How many of the non-space characters' found boxes have their centre inside the
    true ink box (``slack`` px up and down: a thin mark), of how many."""
    ok = n = 0
    for b, t, c in zip(found, truth, text):
        if c.isspace():
            continue
        cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
        n += 1
        ok += t[0] <= cx <= t[2] and t[1] - slack <= cy <= t[3] + slack
    return ok, n


@pytest.mark.parametrize("kind", ["line", "zh"])
def test_character_boxes_are_centred_on_their_characters(kind) -> None:
    rec = Recognizer.bundled(kind)
    rng = random.Random(1)
    ok = n = exact = 0
    for _ in range(24):
        if kind == "zh":
            text, font = (
                "".join(rng.choice(HANZI) for _ in range(rng.randint(5, 12))),
                ImageFont.truetype(str(CJK), rng.choice([28, 40])),
            )
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4)))
            font = ImageFont.truetype(str(rng.choice([SERIF, SANS])), rng.choice([28, 40, 56]))
        img, truth = drawn_line(text, font)
        (p,) = rec.predict(img)
        if p.text != text:
            continue
        exact += 1
        assert len(p.char_boxes) == len(text)
        a, b = centred(p.char_boxes, truth, text)
        ok, n = ok + a, n + b
    assert exact >= 16, exact
    assert ok >= 0.95 * n, (ok, n)


def test_boxes_of_a_crop_read_upside_down_are_on_the_image_as_given() -> None:
    rec = Recognizer.bundled("line", rotate="auto")
    img, truth = drawn_line("finding 42 lines", ImageFont.truetype(str(SERIF), 40))
    turned = img.rotate(180)
    w, h = img.size
    truth = [(w - t[2], h - t[3], w - t[0], h - t[1]) for t in truth]
    (p,) = rec.predict(turned)
    assert p.text == "finding 42 lines" and p.rotation == 180
    ok, n = centred(p.char_boxes, truth, p.text)
    assert ok >= n - 1, (ok, n, p.char_boxes)


def test_boxes_of_a_tilted_page_follow_the_tilt() -> None:
    """A page turned 3 degrees is levelled to be read; its characters' boxes are mapped
    back onto the tilted page, where the drawn characters' centres are (turned the same way)."""
    rec = Recognizer.bundled("line")
    font = ImageFont.truetype(str(SERIF), 30)
    lines = [
        "Reading a page is finding its",
        "lines first, then reading each",
        "one at its own width, in order.",
    ]
    img = Image.new("L", (900, 330), 250)
    d = ImageDraw.Draw(img)
    centres = []
    for i, t in enumerate(lines):
        y = 60 + 60 * i
        for k, c in enumerate(t):
            b = d.textbbox((60 + font.getlength(t[:k]), y), c, font=font)
            centres.append(((b[0] + b[2]) / 2, (b[1] + b[3]) / 2, c))
        d.text((60, y), t, font=font, fill=20)
    tilted = img.rotate(3.0, Image.BICUBIC, fillcolor=250)  # counter-clockwise about the centre
    a, (cx, cy) = math.radians(3.0), (450, 165)
    moved = [
        (
            cx + (x - cx) * math.cos(a) + (y - cy) * math.sin(a),
            cy - (x - cx) * math.sin(a) + (y - cy) * math.cos(a),
            c,
        )
        for x, y, c in centres
    ]
    page = rec.read_page(tilted, layout="page")
    assert [ln.text for ln in page.lines] == lines
    boxes = [b for ln in page.lines for b in ln.char_boxes]
    inside = sum(
        b[0] <= x <= b[2] and b[1] <= y <= b[3] for b, (x, y, c) in zip(boxes, moved) if c != " "
    )
    assert inside >= 0.95 * sum(c != " " for _, _, c in moved), inside


def test_placement_maps_turned_regions_back() -> None:
    place = Placement((10.0, 20.0, 110.0, 60.0), (200, 100))  # a 100 x 40 region
    # Read as is at 50 x 20 (half size): a box at the read's left end is at the region's.
    assert place.box((0, 0, 10, 20), 50, 20) == [10, 20, 30, 60]
    # Turned 90 degrees clockwise (read 40 wide, 100 high at full size): the read's left
    # end is the region's bottom.
    assert place.box((0, 0, 10, 100), 40, 100, turn=90) == [10, 50, 110, 60]
    assert place.box((0, 0, 10, 100), 40, 100, turn=270) == [10, 20, 110, 30]
    assert place.box((0, 0, 10, 40), 100, 40, turn=180) == [100, 20, 110, 60]


def test_predict_json_and_beam_search_carry_the_boxes(tmp_path, capsys) -> None:
    img, truth = drawn_line("model 42", ImageFont.truetype(str(SANS), 40))
    img.save(tmp_path / "w.png")
    assert predict_main([str(tmp_path / "w.png"), "--model", "line", "--json", "--beam", "4"]) == 0
    (res,) = json.loads(capsys.readouterr().out)
    chars = res["lines"][0]["chars"]
    assert "".join(c["char"] for c in chars) == res["text"] == "model 42"
    assert all(len(c["box"]) == 4 and 0 <= c["confidence"] <= 1 for c in chars)
    ok, n = centred([c["box"] for c in chars], truth, res["text"])
    assert ok == n, chars


def test_boxes_are_where_the_ink_is_not_where_the_spikes_are() -> None:
    """The English line model's spikes fire early (the first at the line's start): boxes
    placed at the spikes alone miss their characters; the ink puts them back."""
    from crnn.layout.chars import char_boxes

    arr = np.full((1, 32, 120), 255, np.uint8)
    for x0 in (10, 40, 70, 100):  # four 12 px blobs, 30 px apart
        arr[0, 8:24, x0 : x0 + 12] = 0
    frames = [(0, 0), (10, 10), (18, 18), (25, 25)]  # stride 4: spikes 2-4 px early, the first at 0
    boxes = char_boxes(arr, 120, 30, frames)
    assert [(int(b[0]), int(b[2])) for b in boxes] == [(10, 22), (40, 52), (70, 82), (100, 112)]
