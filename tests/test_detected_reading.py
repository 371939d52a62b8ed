"""The detector in the reader: which finder an image gets, detected lines cut and read in
reading order with their quadrilaterals, a crop still read as a crop. The detector here
is a stand-in that returns given quadrilaterals, so the reader's side is tested whatever
the trained detector finds."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from rapidfuzz.distance import Levenshtein

from crnn.data.synth.fonts import bundled_font_dir
from crnn.detect.postprocess import Detection
from crnn.reading.recognizer import Recognizer

SANS = bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"


class FixedDetector:
    """Finds the quadrilaterals it was given; counts its calls."""

    def __init__(self, quads: list[np.ndarray]) -> None:
        self.quads = quads
        self.calls = 0

    def find(self, image: np.ndarray) -> list[Detection]:
        from crnn.detect.order import reading_order

        self.calls += 1
        return reading_order([Detection(np.asarray(q, np.float32), 0.9) for q in self.quads])


def quad(x0, y0, x1, y1):
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


def poster() -> tuple[Image.Image, list[np.ndarray], list[str]]:
    """A picture-like image (a gradient and a photo-ish block) with two lines of text,
    the second drawn tilted by 8 degrees."""
    rng = np.random.default_rng(0)
    base = np.linspace(60, 200, 640)[None, :, None] * np.ones((440, 1, 3))
    base += rng.normal(0, 12, base.shape)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(str(SANS), 34)
    d.text((30, 30), "SUMMER SALE", font=font, fill=(255, 255, 255))
    layer = Image.new("L", (420, 60), 0)
    ImageDraw.Draw(layer).text((5, 5), "free delivery", font=font, fill=255)
    layer = layer.rotate(8, Image.BICUBIC, expand=True)
    img.paste((20, 20, 20), (40, 160), layer)
    w0, h0 = 420, 60
    c, s = np.cos(np.radians(8)), np.sin(np.radians(8))
    # The tilted layer's text box: its unrotated (0..330, 0..50) box, turned and placed.
    pts = np.array([[0, 0], [330, 0], [330, 52], [0, 52]], float) - (w0 / 2, h0 / 2)
    rot = np.stack([pts[:, 0] * c + pts[:, 1] * s, -pts[:, 0] * s + pts[:, 1] * c], axis=1)
    tilted = (rot + (layer.width / 2 + 40, layer.height / 2 + 160)).astype(np.float32)
    return img, [quad(22, 28, 290, 76), tilted], ["SUMMER SALE", "free delivery"]


@pytest.fixture(scope="module")
def line_model() -> Recognizer:
    return Recognizer.bundled("line", detector=None)


def test_detected_lines_are_cut_straight_and_read_in_order_with_their_quads(line_model) -> None:
    img, quads, truth = poster()
    det = FixedDetector(quads[::-1])  # found in any order: the reading order sorts them
    line_model.detector, line_model.finder = det, "auto"
    try:
        page = line_model.read_page(img)
    finally:
        line_model.detector = None
    assert det.calls == 1
    assert [ln.text for ln in page.lines] == truth or Levenshtein.distance(
        page.text, "\n".join(truth)
    ) <= 3
    assert len(page.lines) == 2
    assert page.lines[1].quad and page.to_dict()["lines"][1]["quad"][0] == pytest.approx(
        quads[1][0].tolist(), abs=0.1
    )
    assert page.lines[1].box == [
        int(quads[1][:, 0].min()),
        int(quads[1][:, 1].min()),
        int(np.ceil(quads[1][:, 0].max())),
        int(np.ceil(quads[1][:, 1].max())),
    ]


PAGE_LINES = [
    "A page of print keeps the classical",
    "line finder: it finds every line of",
    "a clean page at its full resolution,",
    "where the detector would shrink it.",
    "Six stacked rows or more make a page",
    "(drawn pages have seven to seventeen,",
    "real web images five at the most).",
]


def printed_page() -> Image.Image:
    font = ImageFont.truetype(
        str(bundled_font_dir() / "liberation" / "LiberationSerif-Regular.ttf"), 26
    )
    img = Image.new("RGB", (620, 60 + 40 * len(PAGE_LINES)), (250, 250, 247))
    d = ImageDraw.Draw(img)
    for i, t in enumerate(PAGE_LINES):
        d.text((30, 30 + 40 * i), t, font=font, fill=(20, 20, 20))
    return img


def test_the_classical_finder_keeps_printed_pages_and_crops_skip_the_detector(line_model) -> None:
    det = FixedDetector([quad(0, 0, 10, 10)])
    line_model.detector = det
    truth = "\n".join(PAGE_LINES)
    try:
        page = line_model.read_page(printed_page())  # 7 stacked rows of print
        assert det.calls == 0
        assert Levenshtein.distance(page.text, truth) / len(truth) < 0.05
        word = Image.new("L", (120, 40), 255)
        ImageDraw.Draw(word).text((5, 2), "word", font=ImageFont.truetype(str(SANS), 28), fill=0)
        line_model.read_page(word)  # a crop under 48 px: nothing to find
        assert det.calls == 0
        line_model.finder = "detector"  # asked for by hand, a page too
        line_model.read_page(printed_page())
        assert det.calls == 1
    finally:
        line_model.detector, line_model.finder = None, "auto"


def test_one_line_that_fills_the_image_is_read_whole_as_before(line_model) -> None:
    img = Image.new("RGB", (400, 90), (240, 230, 200))
    ImageDraw.Draw(img).text(
        (10, 20), "one line crop", font=ImageFont.truetype(str(SANS), 40), fill=(10, 10, 10)
    )
    before = line_model.read_page(img)
    line_model.detector = FixedDetector([quad(5, 15, 320, 70)])
    try:
        after = line_model.read_page(img)
    finally:
        line_model.detector = None
    assert after.layout == before.layout == "line"
    assert after.text == before.text


def test_predict_takes_the_finder_and_a_detector_file(tmp_path, capsys) -> None:
    from crnn.cli.predict import main

    img, _, _ = poster()
    img.save(tmp_path / "poster.png")
    assert (
        main(
            [
                "--model",
                "line",
                "--detector",
                str(tmp_path / "missing.onnx"),
                str(tmp_path / "poster.png"),
            ]
        )
        != 0
    )
    assert "no detector" in capsys.readouterr().err
    assert main(["--model", "line", "--finder", "classical", str(tmp_path / "poster.png")]) == 0


def test_a_detected_line_read_as_noise_is_no_line() -> None:
    """The detector's boxes on patterns and picture edges read as junk characters (char
    precision 68 % on the validation web images); a detected line whose characters are
    read at a mean confidence of 0.5 or less is left out, as PaddleOCR's drop_score does."""
    from crnn.layout import Line
    from crnn.reading.planner import reads_as_text

    assert reads_as_text(Line("价格", 0.8, [0, 0, 9, 9], (0.9, 0.85)))
    assert not reads_as_text(Line("十一", 0.1, [0, 0, 9, 9], (0.4, 0.5)))
    assert not reads_as_text(Line(" ", 1.0, [0, 0, 9, 9], (0.99,)))
    assert not reads_as_text(Line("", 1.0, [0, 0, 9, 9], ()))


SHORT_PAGE = ["Three lines of print", "stacked as a page:", "the classical finder's own."]


def short_page() -> tuple[Image.Image, list[np.ndarray]]:
    """A picture-shaped image with three rows of print (a page candidate of the classical
    finder's, under six rows) and the quadrilaterals of its lines."""
    font = ImageFont.truetype(str(SANS), 30)
    img = Image.new("RGB", (640, 440), (250, 250, 247))
    d = ImageDraw.Draw(img)
    quads = []
    for i, t in enumerate(SHORT_PAGE):
        d.text((30, 40 + 50 * i), t, font=font, fill=(20, 20, 20))
        x0, y0, x1, y1 = d.textbbox((30, 40 + 50 * i), t, font=font)
        quads.append(quad(x0 - 3, y0 - 3, x1 + 3, y1 + 3))
    return img, quads


def test_a_page_candidate_is_the_detectors_only_where_it_finds_text_left_out(line_model) -> None:
    """Under six stacked rows, the classical finder's page candidate is asked of the
    detector: kept where the detector finds the same lines (split at word gaps, as it
    splits wide-spaced print), the detector's where it finds lines the classical finder
    missed (text on a web image's pictures: char F1 59.5 % -> 64.6 % on the development
    web images)."""
    img, quads = short_page()
    halves = []
    for q in quads:
        (x0, y0), (x1, y1) = q[0], q[2]
        mid = (x0 + x1) / 2
        halves += [quad(x0, y0, mid, y1), quad(mid, y0, x1, y1)]
    missed = [quad(40, 300, 300, 340), quad(340, 300, 600, 340), quad(40, 360, 300, 400)]
    try:
        line_model.detector = det = FixedDetector(halves)
        page = line_model.read_page(img)
        assert det.calls == 1 and page.finder != "detector"
        assert [ln.text for ln in page.lines] == SHORT_PAGE
        line_model.detector = det = FixedDetector(quads + missed)
        page = line_model.read_page(img)
        assert det.calls == 1 and page.finder == "detector"
    finally:
        line_model.detector = None


def test_a_page_of_detected_columns_reads_top_to_bottom() -> None:
    """Every line the detector finds upright and reads as a column of Chinese: the page
    says ``"direction": "ttb"``, as the classical finder's column pages do; a row among
    them makes it a page of rows again."""
    from crnn.data.synth.labelfonts import label_font_dir

    font = ImageFont.truetype(str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf"), 40)
    columns = ["床前明月光疑是", "举头望明月低头"]
    img = Image.new("RGB", (420, 440), (245, 240, 230))
    d = ImageDraw.Draw(img)
    quads = []
    for k, col in enumerate(columns):
        x = 300 - 120 * k
        for j, c in enumerate(col):
            d.text((x + 20, 60 + 46 * j + 20), c, font=font, fill=(20, 20, 20), anchor="mm")
        quads.append(quad(x - 6, 34, x + 46, 60 + 46 * len(col) - 2))
    zh = Recognizer.bundled("zh", detector=FixedDetector(quads), finder="detector")
    page = zh.read_page(img)
    assert page.finder == "detector" and page.direction == "ttb", page.to_dict()
    assert Levenshtein.distance(page.text, "\n".join(columns)) <= 2, page.text
    zh.detector = FixedDetector([*quads, quad(20, 400, 200, 430)])
    assert zh.read_page(img).direction == "ltr"


def test_a_small_picture_is_read_as_its_detected_lines_where_they_read_better() -> None:
    """A picture-shaped image too small for the detector's first look (short side under
    400 px) that the classical finder would read whole is read both ways: the poster at
    0.6 times its size (384 x 264), noisy, comes back as its two detected lines (read
    whole, as before, it was one line of fragments)."""
    img, quads, texts = poster()
    small = np.asarray(img.resize((384, 264), Image.BICUBIC)).astype(float)
    small += np.random.default_rng(1).normal(0, 20, (264, 384, 1))  # the classical finds none
    det = FixedDetector([q * 0.6 for q in quads])
    page = Recognizer.bundled("line", detector=det).read_page(
        Image.fromarray(np.clip(small, 0, 255).astype(np.uint8))
    )
    assert det.calls == 1 and page.layout == "page" and len(page.lines) == 2
    assert all(Levenshtein.distance(ln.text, t) <= 2 for ln, t in zip(page.lines, texts))


def test_the_detector_is_asked_once_an_image_whatever_the_finder_decision_tries() -> None:
    """A picture whose detector finds nothing was given to it twice: by the first look,
    then again when the classical finder had nothing better."""
    img, _, _ = poster()
    det = FixedDetector([])
    Recognizer.bundled("line", detector=det).read_page(img)
    assert det.calls == 1


def scribbled_poster() -> tuple[Image.Image, list[np.ndarray], list[str]]:
    """A picture of seven stacked rows, the classical finder's page: five of scribbled
    strokes (a poster's patterns, a picture's edges) and two of text, which the detector
    finds alone."""
    rng = np.random.default_rng(3)
    img = Image.new("RGB", (640, 480), (235, 225, 240))
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(str(SANS), 30)
    texts = {2: "SUMMER SALE", 5: "free delivery"}
    quads = []
    for k in range(7):
        y = 30 + 62 * k
        if k in texts:
            d.text((40, y), texts[k], font=font, fill=(30, 20, 60))
            x0, y0, x1, y1 = d.textbbox((40, y), texts[k], font=font)
            quads.append(quad(x0 - 4, y0 - 4, x1 + 4, y1 + 4))
            continue
        x = 40
        while x < 560:
            w = int(rng.integers(10, 26))
            for _ in range(3):
                a, b = rng.integers(0, w, 2), rng.integers(0, 28, 2)
                d.line(
                    [x + a[0], y + b[0], x + a[1], y + b[1]],
                    fill=(40, 30, 70),
                    width=int(rng.integers(2, 5)),
                )
            x += w + int(rng.integers(2, 8))
    return img, quads, list(texts.values())


def test_a_picture_whose_page_candidate_reads_poorly_is_read_as_its_detected_lines(
    line_model,
) -> None:
    """Six stacked rows or more make the classical finder's page, and the detector is not
    asked first; but where that page's widest lines read poorly (a mean log confidence
    under -0.5 a character: a poster cut into rows across its text blocks, RapidOCR's
    ch_en_num.jpg read as 8 lines of garbage), the detector's lines are read too and
    kept where they read more probably. The printed page above never asks (its lines
    read well)."""
    img, quads, truth = scribbled_poster()
    asked: list = []  # the pixels each check read (kept: their ids stay theirs)
    predict = line_model.predict_preprocessed

    def counted(images, *args, **kwargs):
        if kwargs.get("stretch") == (1.0,):  # a check's read, not the page's own
            asked.extend(images)
        return predict(images, *args, **kwargs)

    try:
        line_model.detector = det = FixedDetector(quads)
        line_model.predict_preprocessed = counted
        page = line_model.read_page(img)
        assert det.calls == 1 and page.finder == "detector"
        assert [ln.text for ln in page.lines] == truth
        # Three checks asked of the rows' widest lines (a page? poorly read? the detector's
        # better?), each line read once.
        assert len(asked) > 4 and len({id(a) for a in asked}) == len(asked)
    finally:
        line_model.detector = None
        del line_model.predict_preprocessed
    assert len(line_model.read_page(img).lines) == 7  # without a detector: the rows


def test_lines_the_detector_found_are_read_at_their_natural_width_unless_widths_are_given(
    line_model,
) -> None:
    """A Chinese reader reads a crop at two widths and two zooms, but a line the detector
    found on a whole image at its natural width alone, both zooms kept (on the 82
    validation web images the second width bought 0.3 points of character F1 for a third
    of the image's time); widths a user gives are kept for every line."""
    zh = Recognizer.bundled("zh", detector=None)
    assert {v[0] for v in zh.views} == {1.0, 1.1}
    assert {v[0] for v in zh.detected_views} == {1.0}
    assert {v[1] for v in zh.detected_views} == {v[1] for v in zh.views} == {1.0, 1.2}
    given = Recognizer.bundled("zh", detector=None, stretch=(1.0, 1.1))
    assert given.detected_views == given.views
    # The page's lines are read at those views, a crop at the reader's.
    img, quads, truth = poster()
    asked = []
    predict = line_model.predict_preprocessed

    def recorded(images, *args, **kwargs):
        asked.append(kwargs.get("views"))
        return predict(images, *args, **kwargs)

    one = ((1.0, 1.0, 0.0),)
    line_model.detector, line_model.finder = FixedDetector(quads), "detector"
    line_model.detected_views, line_model.predict_preprocessed = one, recorded
    try:
        page = line_model.read_page(img)
        assert len(page.lines) == len(truth) and asked == [one]
        asked.clear()
        line_model.read_page(img.crop((0, 0, 400, 40)))
        assert asked == [None]
    finally:
        line_model.detector, line_model.finder = None, "auto"
        line_model.detected_views = line_model.views
        del line_model.predict_preprocessed


class SaysTurned:
    """An orientation classifier that gives every line the same odds of being turned."""

    def __init__(self, odds: float) -> None:
        self.odds = odds
        self.asked = 0

    def upside_down(self, image) -> float:
        return self.odds

    def upside_down_many(self, images) -> list[float]:
        self.asked += len(images)
        return [self.odds] * len(images)


def test_a_detected_line_written_upside_down_is_turned_over_where_it_reads_better(
    line_model,
) -> None:
    """A label printed upside down (as on a photographed package) is cut as it lies; the
    orientation classifier's suspicion has it read both ways and turned where that reads
    more probably. An upright line suspected too stays as it is: the read decides."""
    img, quads, truth = poster()
    box = (22, 28, 290, 76)
    img.paste(img.crop(box).rotate(180), box[:2])  # the first line, upside down
    saved = line_model.orientation
    line_model.detector, line_model.finder = FixedDetector(quads), "detector"
    try:
        line_model.orientation = SaysTurned(0.0)  # never suspected: read as it lies
        as_it_lies = line_model.read_page(img)
        assert Levenshtein.distance(as_it_lies.lines[0].text, truth[0]) > 3
        both = SaysTurned(0.95)  # both suspected: each read both ways
        line_model.orientation = both
        page = line_model.read_page(img)
        assert both.asked == 2
        assert Levenshtein.distance(page.lines[0].text, truth[0]) <= 1
        assert Levenshtein.distance(page.lines[1].text, truth[1]) <= 2
        # The turned line's quad starts at its text's top left: the cut's bottom right.
        assert page.lines[0].quad[0] == pytest.approx(quads[0][2].tolist(), abs=0.1)
        assert page.lines[1].quad[0] == pytest.approx(quads[1][0].tolist(), abs=0.1)
    finally:
        line_model.detector, line_model.finder = None, "auto"
        line_model.orientation = saved


def test_a_picture_the_classical_finder_sees_no_page_in_halved_skips_its_whole_look(
    line_model, monkeypatch
) -> None:
    """The classical finder's first look at a picture is at half its size where its print
    stays large enough there to judge: a picture with no page of print in it goes to the
    detector without a look at full size (20 against 73 ms an image on the validation
    web pictures); a printed page, a candidate halved too, is looked at whole as before."""
    import crnn.layout

    seen = []
    choose = crnn.layout.choose_layout

    def recorded(grey, *args, **kwargs):
        seen.append(grey.shape)
        return choose(grey, *args, **kwargs)

    monkeypatch.setattr(crnn.layout, "choose_layout", recorded)
    img, quads, truth = poster()
    line_model.detector, line_model.finder = FixedDetector(quads), "auto"
    try:
        page = line_model.read_page(img)
        assert len(page.lines) == len(truth) and page.finder == "detector"
        assert seen == [(220, 320)]  # halved only
        # A printed page: its page candidate halved is looked at whole too, and kept.
        seen.clear()
        text = Image.new("RGB", (640, 800), "white")
        d = ImageDraw.Draw(text)
        font = ImageFont.truetype(str(SANS), 26)
        for k in range(12):
            d.text(
                (40, 40 + 60 * k),
                f"line {k} of a printed page, read as print",
                font=font,
                fill="black",
            )
        page = line_model.read_page(text)
        assert seen[:2] == [(400, 320), (800, 640)] and page.finder != "detector"
        assert len(page.lines) == 12
    finally:
        line_model.detector, line_model.finder = None, "auto"


def italic_poster() -> tuple[Image.Image, list[np.ndarray]]:
    """A light picture with an italic line (the tops of its letters 16 degrees to the
    right, as a poster's display face leans) above an upright one."""
    rng = np.random.default_rng(0)
    base = np.full((300, 640, 3), 215.0) + rng.normal(0, 12, (300, 640, 3))
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    font = ImageFont.truetype(str(SANS), 40)
    layer = Image.new("L", (600, 70), 0)
    ImageDraw.Draw(layer).text((60, 8), "free delivery today", font=font, fill=255)
    shear = 0.3  # the output's (x, y) is the input's (x + 0.3 (y - 35), y)
    layer = layer.transform(layer.size, Image.AFFINE, (1, shear, -shear * 35, 0, 1, 0))
    img.paste((20, 20, 20), (10, 40), layer)
    ImageDraw.Draw(img).text((30, 200), "SUMMER SALE", font=font, fill=(30, 30, 30))
    return img, [quad(40, 40, 600, 110), quad(22, 195, 310, 252)]


def test_a_detected_line_whose_writing_leans_is_also_read_sheared_upright(line_model) -> None:
    """A detected line that leans deslant degrees or more (a poster's italic headline: the
    peer suite's 正品促销, read 品促销 as cut) is read as cut and sheared upright, as a
    leaning crop is, the more confident read kept; an upright line is read as before, and
    with deslant 0 no line is sheared, nor is small print at any deslant."""
    from crnn.reading.views import Turns

    img, quads = italic_poster()
    seen: list[list] = []
    predict = line_model.predict_preprocessed

    def recorded(images, *args, **kwargs):
        seen.append(list(images))
        return predict(images, *args, **kwargs)

    line_model.detector, line_model.finder = FixedDetector(quads), "detector"
    line_model.predict_preprocessed = recorded
    try:
        for deslant in (8.0, 0.0):
            line_model.deslant = deslant
            seen.clear()
            page = line_model.read_page(img)
            assert len(page.lines) == 2
            leaning, upright = seen[-1]
            assert isinstance(upright, np.ndarray)
            if deslant:
                assert isinstance(leaning, Turns)
                leans = {v[2] for v in leaning.views}
                assert leans == {0.0, 16.0}, leans
                # the lean read's characters are placed on the picture, inside the line
                x0, y0, x1, y1 = page.lines[0].box
                assert page.lines[0].char_boxes
                for b in page.lines[0].char_boxes:
                    assert x0 - 30 <= b[0] <= b[2] <= x1 + 30 and y0 - 10 <= b[1] <= b[3] <= y1 + 10
            else:
                assert isinstance(leaning, np.ndarray)
        # Small print (cut under DETECTED_LEAN_MIN_HEIGHT px) is not measured: read as cut.
        line_model.deslant = 8.0
        small = img.resize((img.width * 3 // 10, img.height * 3 // 10))
        line_model.detector = FixedDetector([q * 0.3 for q in quads])
        seen.clear()
        line_model.read_page(small)
        assert seen and all(isinstance(item, np.ndarray) for item in seen[-1])
    finally:
        line_model.detector, line_model.finder, line_model.deslant = None, "auto", 0.0
        del line_model.predict_preprocessed
