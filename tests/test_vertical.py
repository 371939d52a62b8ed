"""Vertical Chinese (crnn/layout/vertical.py): a column of characters read top to bottom
as one line, by default, with "direction": "ttb"; what is not a column is read as before."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from rapidfuzz.distance import Levenshtein

from crnn.cli.predict import main as predict_main
from crnn.data.synth.fonts import bundled_font_dir
from crnn.data.synth.labelfonts import label_font_dir
from crnn.layout.chars import ink_mask
from crnn.layout.vertical import column_cells
from crnn.reading.recognizer import Recognizer

CJK = str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf")
COLUMNS = [
    "床前明月光疑是地上霜",
    "十二点三十五分到达南京站",
    "我们应该尊重不同的意见，共同寻找解决办法。",
    "三百二十公里",
    "天气预报说明天有小雨",
]


def column(text: str, size: int = 36, gap: float = 0.15, seed: int = 0) -> Image.Image:
    """``text`` set top to bottom, one character centred in each cell, on grey paper."""
    r = random.Random(seed)
    font = ImageFont.truetype(CJK, size)
    step = size + int(gap * size)
    img = Image.new("L", (size + 20, len(text) * step + 20), r.randint(215, 245))
    d = ImageDraw.Draw(img)
    for k, c in enumerate(text):
        d.text(
            (10 + size / 2, 10 + k * step + size / 2),
            c,
            font=font,
            fill=r.randint(10, 60),
            anchor="mm",
        )
    return img


def test_cells_hold_one_character_each_however_many_strokes_it_has() -> None:
    """二 and 三 are strokes with gaps as wide as the gaps between characters; a comma is
    a speck of its own; each is one cell."""
    for text in ("十二点三十五分", "意见，共同", "三百二十"):
        cells = column_cells(ink_mask(np.asarray(column(text, gap=0.08))))
        assert len(cells) == len(text), (text, cells)
    # As AR PL UMing sets 点二十 at 36 px, 二 a little taller: its two strokes 19 px
    # apart, the gaps between characters 11-12 px: gaps alone cannot tell them apart,
    # heights can (a stroke is far shorter than the column's usual character).
    ink = np.zeros((175, 40), bool)
    for y0, y1 in ((11, 35), (37, 45), (56, 59), (78, 81), (92, 125), (133, 163)):
        ink[y0:y1, 4:36] = True
    assert column_cells(ink) == [(11, 45), (56, 81), (92, 125), (133, 163)]


def test_a_vertical_column_is_read_top_to_bottom_as_one_line() -> None:
    rec = Recognizer.bundled("zh")
    pages = rec.read_pages(
        [column(t, size=s, seed=i) for i, t in enumerate(COLUMNS) for s in (30, 44)]
    )
    assert all(p.direction == "ttb" and p.layout == "line" and len(p.lines) == 1 for p in pages)
    reads = [p.text for p in pages]
    truth = [t for t in COLUMNS for _ in (30, 44)]
    errors = sum(Levenshtein.distance(a, b) for a, b in zip(reads, truth))
    assert errors <= 0.03 * sum(map(len, truth)), list(zip(reads, truth))
    # Each character's box is its cell, top to bottom down the column.
    boxes = pages[0].lines[0].char_boxes
    assert len(boxes) == len(COLUMNS[0]) and all(a[3] <= b[1] + 2 for a, b in zip(boxes, boxes[1:]))


def test_punctuation_keeps_its_place_in_its_cell() -> None:
    """A column on a grid is cut at the grid, so each mark keeps its height in its cell:
    quote marks high, 。 low, as horizontal print sets them (cut at the ink, “ and 。
    alike were read as … or ,)."""
    import unicodedata

    rec = Recognizer.bundled("zh")
    texts = ["他说：“明天见。”", "山不在高，有仙则名。", "“你好！”她笑着问。"]
    pages = rec.read_pages([column(t, size=s) for t in texts for s in (30, 44)])
    reads = [unicodedata.normalize("NFKC", p.text) for p in pages]
    assert reads == [unicodedata.normalize("NFKC", t) for t in texts for _ in (30, 44)]


def test_predict_json_says_ttb(tmp_path, capsys) -> None:
    column(COLUMNS[0]).save(tmp_path / "spine.png")
    assert predict_main([str(tmp_path / "spine.png"), "--model", "zh", "--json"]) == 0
    (res,) = json.loads(capsys.readouterr().out)
    assert res["direction"] == "ttb" and res["text"] == COLUMNS[0]


def test_what_is_not_a_column_reads_as_before() -> None:
    """A horizontal line, a word turned on its side, a tall crop of one big character:
    none is read as a column (each reads exactly as with the column check off)."""
    rec = Recognizer.bundled("word")
    font = ImageFont.truetype(
        str(bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"), 40
    )
    word = Image.new("L", (200, 60), 240)
    ImageDraw.Draw(word).text((10, 5), "STUDIO", font=font, fill=20)
    big = Image.new("L", (60, 140), 240)
    ImageDraw.Draw(big).text(
        (5, 20),
        "A",
        font=ImageFont.truetype(
            str(bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"), 90
        ),
        fill=20,
    )
    images = [word, word.rotate(90, expand=True), word.rotate(270, expand=True), big]
    pages = rec.read_pages(images)
    assert [p.direction for p in pages] == ["ltr"] * 4
    zh = Recognizer.bundled("zh")
    line = Image.new("L", (420, 56), 240)
    ImageDraw.Draw(line).text(
        (10, 8), "床前明月光疑是地上霜", font=ImageFont.truetype(CJK, 38), fill=20
    )
    assert zh.read_page(line).direction == "ltr"


POEM = [
    "床前明月光疑是地上霜",
    "举头望明月低头思故乡",
    "春眠不觉晓处处闻啼鸟",
    "夜来风雨声花落知多少",
]


def vertical_page(columns: list[str], size: int = 32, gap: float = 0.6) -> Image.Image:
    """Columns set top to bottom, the first on the right, as classical print sets them."""
    font = ImageFont.truetype(CJK, size)
    step, cstep = int(size * 1.1), int(size * (1 + gap))
    img = Image.new("L", (len(columns) * cstep + 60, max(map(len, columns)) * step + 60), 245)
    d = ImageDraw.Draw(img)
    for k, col in enumerate(columns):
        x = img.width - 30 - (k + 1) * cstep + (cstep - size) // 2
        for j, c in enumerate(col):
            d.text((x + size / 2, 30 + j * step + size / 2), c, font=font, fill=20, anchor="mm")
    return img


def test_a_page_of_columns_is_read_right_to_left_each_top_to_bottom() -> None:
    """A grid of characters is a page both ways; the columns are kept because they read
    more probably than the rows (which read 床举春夜... across the columns)."""
    rec = Recognizer.bundled("zh")
    for gap in (0.3, 1.0):
        page = rec.read_page(vertical_page(POEM, gap=gap))
        assert page.direction == "ttb" and [ln.text for ln in page.lines] == POEM, page.text
        boxes = [ln.box for ln in page.lines]
        assert all(a[0] > b[0] for a, b in zip(boxes, boxes[1:]))  # right to left
        first = page.lines[0].char_boxes
        assert len(first) == 10 and all(
            a[1] < b[1] for a, b in zip(first, first[1:])
        )  # top to bottom


GRID_LINES = [
    "该网络协议采用三次握手的方式建立连接。",
    "每次提交代码之前，请运行全部单元测试。",
    "学而时习之，不亦说乎？有朋自远方来。",
    "山不在高，有仙则名；水不在深，有龙则灵。",
    "千里之行，始于足下；九层之台，起于累土。",
    "天行健，君子以自强不息。",
    "海内存知己，天涯若比邻。",
    "先天下之忧而忧，后天下之乐而乐。",
]


def grid_page(lines: list[str], size: int = 28, ink: int = 20, paper: int = 245) -> Image.Image:
    """Horizontal lines set on a grid, as CJK print sets them: each line's characters
    stand one under another, so the page also reads as columns."""
    font = ImageFont.truetype(CJK, size)
    advance, pitch = 1.1 * size, 1.6 * size
    size_px = (int(max(map(len, lines)) * advance) + 60, int(len(lines) * pitch) + 60)
    img = Image.new("L", size_px, paper)
    d = ImageDraw.Draw(img)
    for j, line in enumerate(lines):
        for k, c in enumerate(line):
            xy = (30 + k * advance + size / 2, 30 + j * pitch + size / 2)
            d.text(xy, c, font=font, fill=ink, anchor="mm")
    return img


def _edits(page, lines: list[str]) -> int:
    return Levenshtein.distance("".join(ln.text for ln in page.lines), "".join(lines))


@pytest.mark.parametrize("dark", [False, True])
def test_lines_set_on_a_grid_are_read_as_rows_not_columns(dark) -> None:
    """A development page of white lines on black read as 42 columns of each line's
    n-th characters (CER 95 %): its characters stand further apart down a column than
    the columns do, which rows cut across show and columns of print do not."""
    rec = Recognizer.bundled("zh")
    img = grid_page(GRID_LINES, ink=235 if dark else 20, paper=10 if dark else 245)
    page = rec.read_page(img)
    assert page.direction == "ltr" and len(page.lines) == len(GRID_LINES), page.text
    assert _edits(page, GRID_LINES) <= 2, page.text


@pytest.mark.parametrize("turn", [90, 270])
def test_a_page_of_lines_on_its_side_is_not_taken_for_columns(turn) -> None:
    """On its side, a page's lines are columns of characters lying down, which read more
    probably than the rows across them: it was read top to bottom (CER 95 %) when the
    line finder's rows did not open the sideways check."""
    rec = Recognizer.bundled("zh")
    lines = GRID_LINES * 2  # rows across it as wide as a page's: no sign that it lies on its side
    page = rec.read_page(grid_page(lines).rotate(turn, expand=True))  # anticlockwise
    assert (page.direction, page.rotation) == ("ltr", turn)  # turned back clockwise
    assert _edits(page, lines) <= 4, page.text


def test_a_wide_line_crop_is_not_looked_at_as_a_page_of_columns(monkeypatch) -> None:
    """An image the line finder reads as one line and LINE_CROP_ASPECT times as wide as
    high or more is read as the line it is, without the page-of-columns check (the
    photographed crops of zh_real_dev: 160 -> 90 ms a crop through read_pages, every
    read the same); a narrower one is still checked."""
    from crnn.reading import planner

    font = ImageFont.truetype(CJK, 30)
    text = "天气预报说明天有小雨"
    img = Image.new("L", (420, 100), 240)
    ImageDraw.Draw(img).text((210, 50), text, font=font, fill=20, anchor="mm")
    looked: list[tuple[int, int]] = []
    checked = planner.PagePlanner._vertical_page

    def spy(self, img, grey, *a, **k):
        looked.append(grey.shape)
        return checked(self, img, grey, *a, **k)

    monkeypatch.setattr(planner.PagePlanner, "_vertical_page", spy)
    rec = Recognizer.bundled("zh")
    page = rec.read_page(img)
    assert page.text == text and looked == []
    # The same line on a narrower image (under twice as wide as high): checked.
    narrow = img.crop((40, 0, 380, 100)).resize((180, 100))
    rec.read_page(narrow)
    assert looked == [(100, 180)]


def test_a_large_line_crop_is_looked_at_halved(monkeypatch) -> None:
    """The classical finder looks at a line crop (twice as wide as high or more, over
    96 px high) halved first, or smaller, at most 100 px high (LINE_LOOK_HEIGHT), as at a
    picture: where it finds one line of print there, the crop is read whole without a
    look at full size (zh_real_dev's photographed crops: 86 -> 61 ms planning a crop
    halved, 419 of 420 plans the same; 33.5 -> 27.6 ms at 100 px, all 420 the same); two
    rows of print so, a page candidate, are looked at whole as before."""
    import crnn.layout

    seen: list[tuple[int, int]] = []
    choose = crnn.layout.choose_layout

    def recorded(grey, *args, **kwargs):
        seen.append(grey.shape)
        return choose(grey, *args, **kwargs)

    monkeypatch.setattr(crnn.layout, "choose_layout", recorded)
    text = "天气预报说明天有小雨"
    img = Image.new("L", (1400, 240), 235)
    ImageDraw.Draw(img).text(
        (700, 120), text, font=ImageFont.truetype(CJK, 120), fill=25, anchor="mm"
    )
    rec = Recognizer.bundled("zh")
    assert rec.read_page(img).text == text
    assert seen == [(100, 583)]  # made 100 px high only
    seen.clear()
    two = Image.new("L", (1400, 240), 235)
    draw = ImageDraw.Draw(two)
    font = ImageFont.truetype(CJK, 40)
    for k, row in enumerate(("天气预报说明天有小雨，出门记得带伞", "明天上午多云转晴，下午有小雨")):
        draw.text((60, 50 + 90 * k), row, font=font, fill=25)
    page = rec.read_page(two)
    assert seen == [(100, 583), (240, 1400)] and len(page.lines) == 2
