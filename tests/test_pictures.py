"""Pictures speak the labels' script: contact sheets, the eval error sheet and the
TensorBoard prediction grid draw Chinese labels and reads with a font that has their
glyphs, never boxes of missing glyphs; metrics that mean nothing for a script (alnum
accuracy on Chinese) are left out, not shown as 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

import crnn.data.synth.labelfonts as fonts_mod
from crnn.data.synth.fonts import glyph_coverage
from crnn.data.synth.labelfonts import LabelFonts
from crnn.text.metrics import TextMetrics

CJK_DIR = Path(__file__).parent / "fixtures" / "fonts" / "cjk"


@pytest.fixture
def no_system_fonts(monkeypatch):
    """Only the fonts a test names (and the bundled ones): the machine's fonts vary."""
    monkeypatch.setattr(fonts_mod, "system_fonts_for", lambda chars: [])


def _tofu(monkeypatch) -> LabelFonts:
    """Label fonts without any CJK face: Chinese comes out as boxes of missing glyphs."""
    monkeypatch.setattr(fonts_mod, "_LABEL_CJK", "no-such-font.otf")
    return LabelFonts(13, [])


def _ink(draw_with: LabelFonts, text: str) -> np.ndarray:
    img = Image.new("L", (400, 24), 255)
    draw_with.draw(ImageDraw.Draw(img), (2, 2), text, 0)
    return np.asarray(img)


def test_each_piece_of_a_label_is_drawn_with_a_font_that_has_its_glyphs(
    no_system_fonts, monkeypatch
):
    fonts = LabelFonts(13, [CJK_DIR])
    runs = fonts.runs("label: 我们的 ok")
    assert "".join(p for p, _ in runs) == "label: 我们的 ok"
    for piece, path in runs:
        ink = {c for c in piece if not c.isspace()}
        assert glyph_coverage(path, ink) == ink, (piece, path)
    # Without a CJK font the same label is boxes: the pictures differ.
    tofu = _tofu(monkeypatch)
    assert not np.array_equal(_ink(fonts, "我们的"), _ink(tofu, "我们的"))


def test_a_machine_without_cjk_fonts_still_draws_the_bundled_models_script(no_system_fonts):
    """A fresh pip install has no CJK font (fontconfig finds none): the package's own
    label face draws every character of the bundled Chinese model's charset."""
    from crnn.text.alphabet import Charset

    fonts = LabelFonts(13, [])
    path = fonts.path_for("识别结果：我们的")
    assert path is not None and path.endswith("crnn-ocr-LabelCJK-Regular.otf")
    zh = Charset.from_spec("zh5529").chars.replace(" ", "")
    assert glyph_coverage(path, zh) == frozenset(zh)
    # Real glyphs, not boxes: each character's picture is its own.
    inks = [_ink(fonts, c).tobytes() for c in "我们的识别"]
    assert len(set(inks)) == 5


def test_fontconfig_finds_a_system_font_for_a_script_the_bundled_ones_lack():
    # Kana: the bundled label faces (Latin, and the zh5529 characters) have none.
    found = fonts_mod.system_fonts_for("ひらがな")
    if not found:
        pytest.skip("no Japanese font installed on this machine (apt install fonts-noto-cjk)")
    assert glyph_coverage(found[0], "ひらがな") == frozenset("ひらがな")
    assert LabelFonts(13).path_for("label: ひらがな") in found


def test_the_error_sheet_and_the_prediction_grid_draw_chinese(no_system_fonts, monkeypatch):
    from crnn.reports.errors import ErrorRecord, error_sheet
    from crnn.reports.training import render_prediction_grid

    images = np.full((2, 1, 32, 96), 220, dtype=np.uint8)
    rec = ErrorRecord((1.0, 0.5), "x", "我们的", "我的", 0.5, 1, images[0])
    cjk, tofu = LabelFonts(13, [CJK_DIR]), _tofu(monkeypatch)
    assert not np.array_equal(
        np.asarray(error_sheet([rec], fonts=cjk)), np.asarray(error_sheet([rec], fonts=tofu))
    )
    args = (images, [96, 96], ["我们", "的"], ["我们", "他"])
    grid = render_prediction_grid(*args, fonts=cjk)
    assert not np.array_equal(
        np.asarray(grid), np.asarray(render_prediction_grid(*args, fonts=tofu))
    )


def test_the_training_grid_uses_the_runs_fonts(no_system_fonts):
    from crnn.engine.logging import RunLogger

    logger = RunLogger("unused", enabled=False, font_dirs=[str(CJK_DIR)])
    assert logger.fonts.path_for("我们").endswith("droid_sans_fallback_cjk200.ttf")


def test_alnum_accuracy_is_left_out_for_chinese_labels():
    zh, en = TextMetrics(), TextMetrics()
    zh.update(["我们", ""], ["我们", "中国人"])
    en.update(["hello", "w0rld"], ["hello", "world"])
    assert "alnum_accuracy" not in zh.compute() and zh.compute()["accuracy"] == 0.5
    assert en.compute()["alnum_accuracy"] == 0.5
    from crnn.cli.eval import format_table

    row = {"dataset": "zh", "count": 2, **zh.compute(), "images_per_s": 1.0, "bad_images": 0}
    table = format_table([row])
    header, row_line = table.splitlines()[1], table.splitlines()[3]
    assert header.split()[:5] == ["dataset", "n", "acc", "CER", "NED"]
    assert row_line.split()[2:4] == ["50.00%", "0.6000"]


def test_curves_draw_a_panel_per_logged_tag_with_its_line(tmp_path):
    """tools/curves.py: the run's TensorBoard scalars as one PNG, a panel per tag it
    logged (tags it did not log are left out), each with its curve drawn."""
    from torch.utils.tensorboard import SummaryWriter

    from crnn.cli.curves import main

    run = tmp_path / "run"
    w = SummaryWriter(str(run / "tb"))
    for step in range(0, 1001, 50):
        w.add_scalar("train/loss", 80.0 * 0.995**step + 1.0, step)
    for step in (500, 1000):
        w.add_scalar("val/cer", 1.0 - step / 1200, step)
    w.close()
    assert main([str(run), "--tags", "train/loss", "val/cer", "val/accuracy"]) == 0
    img = np.asarray(Image.open(run / "curves.png").convert("RGB")).astype(int)
    blue = abs(img - np.array([31, 119, 180])).sum(axis=2) < 40
    rows = np.flatnonzero(blue.any(axis=1))
    h = img.shape[0]
    assert 400 < h < 500  # two panels of 200 px and the title: val/accuracy was not logged
    # Each panel has its curve: blue pixels in the upper and in the lower panel.
    assert rows.min() < h / 2 < rows.max()
    # The loss falls: its line starts high on the left and ends low on the right.
    top = blue[: h // 2]
    cols = np.flatnonzero(top.any(axis=0))
    left_y = np.flatnonzero(top[:, cols[0]]).mean()
    right_y = np.flatnonzero(top[:, cols[-1]]).mean()
    assert left_y < right_y - 50


def test_curves_say_what_was_wrong_and_write_nothing(tmp_path, capsys):
    from crnn.cli.curves import main

    assert main([str(tmp_path)]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err
    assert not (tmp_path / "curves.png").exists()
