"""``--layout auto`` (the default of predict, read_pages and the server): a crop of one
word or line, of any size, is read whole; only an image that clearly holds several lines
of print small against it is read as a page (crnn/layout/page.py, and the read-both-ways
check in Recognizer.plan_page)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import shared_data
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from crnn.data.synth.fonts import bundled_font_dir
from crnn.data.synth.labelfonts import label_font_dir
from crnn.layout import choose_layout, reads_better_as_page
from crnn.reading.recognizer import Recognizer

REPO = Path(__file__).resolve().parents[1]
SAMPLES = sorted((REPO / "data" / "samples").glob("word_*.png"))
BOLD = bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"
SERIF = bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"
CJK = label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf"


@pytest.fixture(scope="module")
def readers() -> dict[str, Recognizer]:
    return {m: Recognizer.bundled(m) for m in ("word", "zh", "line")}


def enlarged(path: Path, k: int) -> Image.Image:
    img = Image.open(path).convert("RGB")
    return img.resize((img.width * k, img.height * k), Image.BICUBIC)


def drawn(
    text: str,
    font: Path,
    size: int,
    pad=(30, 20),
    bg=250,
    ink=20,
    outline=0,
    cut_line_above: str = "",
) -> Image.Image:
    """``text`` in ``font`` at ``size`` px; ``outline``: hollow letters of that stroke;
    ``cut_line_above``: the lower half of a line above, cut by the top edge."""
    f = ImageFont.truetype(str(font), size)
    left, top, right, bottom = f.getbbox(text)
    img = Image.new("L", (right - left + 2 * pad[0], bottom - top + 2 * pad[1]), bg)
    d = ImageDraw.Draw(img)
    if cut_line_above:
        d.text((pad[0] - left, -int(0.55 * (bottom - top)) - top), cut_line_above, font=f, fill=ink)
    style = {"fill": bg, "stroke_width": outline, "stroke_fill": ink} if outline else {"fill": ink}
    d.text((pad[0] - left, pad[1] - top), text, font=f, **style)
    return img


def photographed(img: Image.Image, noise: float, blur: float) -> Image.Image:
    arr = np.asarray(img.filter(ImageFilter.GaussianBlur(blur)), np.float32)
    arr = arr + np.random.default_rng(0).normal(0, noise, arr.shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def test_word_crops_enlarged_as_photos_come_are_read_whole(readers) -> None:
    """The bundled sample words at 3x and 4x (96-128 px high): three of them were cut into
    "lines" of letter fragments before (word_02, word_03, word_12)."""
    word = readers["word"]
    for path in SAMPLES:
        for k in (3, 4):
            img = enlarged(path, k)
            page = word.read_page(img)
            assert page.layout == "line", (path.name, k, page.text)
            assert page.text == word.predict([img])[0].text


HARD = {
    # hollow letters: their inner edges binarise as thin strokes, stacked in rows
    "outline": ("word", lambda: drawn("EXPRESS", BOLD, 150, outline=5)),
    # the lower half of the neighbouring line, cut by the crop's top edge
    "cut line above": (
        "word",
        lambda: drawn("Harbour Street", SERIF, 70, pad=(20, 30), cut_line_above="Mill Lane North"),
    ),
    # one big character of three strokes: rows of ink with gaps between them
    "big 三": ("zh", lambda: drawn("三轮车", CJK, 220)),
    # a dark, noisy photo of a light sign
    "dark photo": (
        "zh",
        lambda: photographed(drawn("二十四载", CJK, 160, bg=30, ink=220), 12, 1.5),
    ),
}


@pytest.mark.parametrize("case", list(HARD))
def test_hard_crops_are_read_whole(readers, case) -> None:
    model, make = HARD[case]
    img = make()
    page = readers[model].read_page(img)
    assert page.layout == "line", page.text
    assert page.text == readers[model].predict([img])[0].text


def test_a_note_of_two_short_lines_on_a_larger_image_is_still_a_page(readers) -> None:
    """Two lines of print small against the image: a page of two lines, read line by line."""
    font = ImageFont.truetype(str(SERIF), 26)
    img = Image.new("L", (640, 200), 250)
    d = ImageDraw.Draw(img)
    d.text((30, 50), "Meeting moved to Friday at noon.", font=font, fill=20)
    d.text((30, 100), "Bring the signed forms and your badge.", font=font, fill=20)
    assert choose_layout(np.asarray(img))[0] == "page"
    page = readers["line"].read_page(img)
    assert page.layout == "page"
    assert [ln.text.strip() for ln in page.lines] == [
        "Meeting moved to Friday at noon.",
        "Bring the signed forms and your badge.",
    ]


def test_a_page_candidate_is_kept_only_when_its_lines_read_more_probably() -> None:
    # a word taken for three rows of fragments: each fragment read with low confidence
    assert not reads_better_as_page([0.99, 0.98, 0.97, 0.99], [[0.2, 0.4], [0.3], [0.1, 0.5]])
    # a page read whole gives a character or two, unsure; its lines read surely
    assert reads_better_as_page([0.3, 0.1], [[0.99] * 20, [0.98] * 18])
    # nothing read as lines is never better
    assert not reads_better_as_page([0.5], [[], []])
    assert reads_better_as_page([], [[0.9]])
    # Lines of a character or none each (a sign cut into strokes) lose when asked to hold
    # two each, however probable.
    fragments = [[], [0.9, 0.8], [0.95], []]
    assert reads_better_as_page([0.3, 0.2, 0.3], fragments)
    assert not reads_better_as_page([0.3, 0.2, 0.3], fragments, min_chars_per_line=2)
    assert reads_better_as_page([0.3, 0.2, 0.3], [[0.9] * 12, [0.9] * 3], min_chars_per_line=2)


def test_the_server_and_the_command_take_the_same_decision(readers) -> None:
    """plan_page is what crnn-predict (read_pages) and the server (app._plan) both call."""
    import inspect

    from crnn.serve import app

    assert "plan_page" in inspect.getsource(app)
    img = enlarged(SAMPLES[1], 4)
    assert readers["word"].plan_page(img)[0].layout == "line"


def _share_taken_for_pages(rec: Recognizer, files: list[Path], scale: int) -> float:
    pages = 0
    for path in files:
        img = Image.open(path).convert("RGB")
        if scale != 1:
            img = img.resize((img.width * scale, img.height * scale), Image.BICUBIC)
        pages += rec.plan_page(img)[0].layout == "page"
    return pages / len(files)


def _gt_files(folder: Path) -> list[Path]:
    lines = (folder / "gt.txt").read_text(encoding="utf-8").splitlines()
    return [folder / ln.split("\t", 1)[0] for ln in lines if ln.strip()]


@pytest.mark.slow
def test_real_word_crops_are_not_taken_for_pages(readers) -> None:
    """Every fourth of the 7,972 real crops of ../shared/data/real as stored (at most 64 px
    high), and every twelfth enlarged 2x: at most 0.5 % taken for pages (before: 9-26 % at
    1x, 26-41 % at 2x; benchmarks/page_decision.py runs all of them at 1-4x)."""
    real = shared_data("real")
    files = [
        f
        for name in ("iiit5k_train", "ic15_train", "ic13_857", "svt_647")
        for f in _gt_files(real / name)
    ]
    assert _share_taken_for_pages(readers["word"], files[::4], 1) <= 0.005
    assert _share_taken_for_pages(readers["word"], files[1::12], 2) <= 0.005


@pytest.mark.slow
def test_real_photographed_chinese_lines_are_not_taken_for_pages(readers) -> None:
    """Every third of the 420 lines of ../shared/data/zh_real_dev at their own sizes
    (34-1,124 px high; 55 % were taken for pages before): none of 140 (0.5 % of them is
    0.7 of a line)."""
    files = _gt_files(shared_data("zh_real_dev"))[::3]
    assert _share_taken_for_pages(readers["zh"], files, 1) <= 0.005


@pytest.mark.parametrize("size", [(1100, 500), (900, 700), (1600, 300)])
def test_one_line_on_a_larger_canvas_is_cut_out_and_read(readers, size) -> None:
    """A page, screenshot or caption with one line of print small against it: the line is
    cut out and read (read whole, it came out a few pixels high: a 1,100 x 500 scan of
    12 characters read as "一一。", found by the OCRmyPDF plugin's test)."""
    text = "本店商品一律八折欢迎选购"
    font = ImageFont.truetype(str(CJK), 44)
    img = Image.new("RGB", size, "white")
    ImageDraw.Draw(img).text((100, 150), text, font=font, fill="black")
    page = readers["zh"].read_page(img)
    assert page.layout == "page" and page.text == text
    assert 140 <= page.lines[0].box[1] and page.lines[0].box[3] <= 215


@pytest.mark.parametrize("ink, paper", [("black", "white"), ("white", (40, 40, 40))])
def test_a_word_on_a_wide_flat_canvas_is_read_trimmed_to_its_ink(readers, ink, paper) -> None:
    """A short line large in the middle of a flat canvas (a transparent PNG flattened, a
    screenshot of a label) is read whole, as a crop; it is first cut to its ink with a
    margin. Read at the canvas's size it came out 14 px of 32 high: '‘我是中国人',
    '『我是中国人', '「黄康中国人。' (a peer's test images). Its characters' boxes are
    still on the image as given; a textured border is left as it is."""
    from crnn.layout.page import flat_margins_trimmed

    img = Image.new("RGB", (1890, 503), paper)
    ImageDraw.Draw(img).text(
        (420, 150), "我是中国人", font=ImageFont.truetype(str(CJK), 200), fill=ink
    )
    page = readers["zh"].read_page(img)
    assert page.layout == "line" and page.text == "我是中国人"
    first = page.lines[0].char_boxes[0]
    assert 380 <= first[0] <= 460 and 120 <= first[1] <= 230
    grey = np.asarray(img.convert("L"))
    noisy = grey.astype(np.int16) + np.random.default_rng(0).integers(-30, 30, grey.shape)
    assert flat_margins_trimmed(grey) is not None
    assert flat_margins_trimmed(np.clip(noisy, 0, 255).astype(np.uint8)) is None
