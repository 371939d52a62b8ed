"""Named font sets (data.synth.font_sets): faces found wherever they are installed, a
one-line error naming the install command when none is, and `crnn-fonts`."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from fontTools.ttLib import TTCollection, TTFont

from crnn.cli.fonts import main as fonts_main
from crnn.cli.train import main as train_main
from crnn.config import SynthConfig
from crnn.data.synth import FontError, SynthGenerator, bundled_font_dir, fontsets
from crnn.data.synth.fontsets import SetFace, configured_fonts, resolve_font_set
from crnn.text.alphabet import Charset

DEJAVU = bundled_font_dir() / "dejavu"


@pytest.fixture()
def test_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A font set "t" of three faces: a single-face file, a face of a .ttc collection
    (named by its full name), and one that is not installed; FONT_ROOTS is tmp_path."""
    root = tmp_path / "fonts"
    (root / "truetype" / "x").mkdir(parents=True)
    shutil.copy(DEJAVU / "DejaVuSans.ttf", root / "truetype" / "x" / "SansA.ttf")
    coll = TTCollection()
    coll.fonts = [
        TTFont(str(DEJAVU / "DejaVuSans.ttf")),
        TTFont(str(DEJAVU / "DejaVuSansMono-Bold.ttf")),
    ]
    coll.save(str(root / "Pair.ttc"))
    faces = (
        SetFace("SansA.ttf", "fonts-a", "hei"),
        SetFace("Pair.ttc", "fonts-pair", "song", "DejaVu Sans Mono Bold"),
        SetFace("Kai.ttf", "fonts-kai", "kai"),
    )
    monkeypatch.setitem(fontsets.FONT_SETS, "t", faces)
    monkeypatch.setattr(fontsets, "FONT_ROOTS", (str(root),))
    fontsets._files_by_name.cache_clear()
    yield root
    fontsets._files_by_name.cache_clear()


def test_faces_are_found_by_file_name_anywhere_under_the_roots(test_set: Path) -> None:
    found = resolve_font_set("t")
    assert [(f.file, p) for f, p in found.faces] == [
        ("SansA.ttf", str(test_set / "truetype" / "x" / "SansA.ttf")),
        ("Pair.ttc", f"{test_set / 'Pair.ttc'}#1"),  # the face named, not face 0
    ]
    assert [f.file for f in found.missing] == ["Kai.ttf"]
    assert found.missing_packages == ["fonts-kai"]
    assert found.install_command().endswith("apt-get install -y fonts-kai")


def test_a_partly_installed_set_trains_on_what_is_there_and_says_what_to_install(
    test_set: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = SynthConfig(font_sets=["t"], bundled_fonts=False)
    with caplog.at_level(logging.WARNING):
        paths = configured_fonts(cfg)
    assert len(paths) == 2
    assert "apt-get install -y fonts-kai" in caplog.text
    gen = SynthGenerator(Charset.from_spec("alnum36"), cfg, seed=0, height=32)
    assert {Path(f.path.split("#")[0]).name for f in gen.fonts} == {"SansA.ttf", "Pair.ttc"}


def test_exclude_fonts_removes_set_faces(test_set: Path) -> None:
    cfg = SynthConfig(font_sets=["t"], bundled_fonts=False, exclude_fonts=["Pair.ttc*"])
    assert [Path(p).name for p in configured_fonts(cfg)] == ["SansA.ttf"]


def test_a_set_with_no_face_installed_is_one_line_naming_the_install_command(
    test_set: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setattr(fontsets, "FONT_ROOTS", (str(empty),))
    with pytest.raises(FontError) as e:
        configured_fonts(SynthConfig(font_sets=["t"]))
    msg = str(e.value)
    assert "\n" not in msg
    assert (
        "crnn-fonts --install t" in msg and "apt-get install -y fonts-a fonts-pair fonts-kai" in msg
    )


def test_train_without_the_fonts_exits_2_with_that_line_and_no_traceback(
    test_set: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setattr(fontsets, "FONT_ROOTS", (str(empty),))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("data:\n  synth:\n    font_sets: [t]\n", encoding="utf-8")
    rc = train_main(["--config", str(cfg), "--dry-run", "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "crnn-fonts --install t" in err and "Traceback" not in err


def test_the_zh_set_lists_only_allowed_packages() -> None:
    allowed = {
        "fonts-noto-cjk",
        "fonts-noto-cjk-extra",
        "fonts-wqy-zenhei",
        "fonts-wqy-microhei",
        "fonts-lxgw-wenkai",
        "fonts-droid-fallback",
        "fonts-babelstone-han",
        "fonts-hanazono",
    }
    faces = fontsets.FONT_SETS["zh"]
    assert {f.package for f in faces} == allowed
    assert {f.style for f in faces} == {"hei", "song", "kai", "mincho"}


def test_crnn_fonts_lists_found_and_missing_and_exits_1(
    test_set: Path, capsys: pytest.CaptureFixture
) -> None:
    assert fonts_main(["t"]) == 1
    out = capsys.readouterr().out
    assert "2 of 3 faces installed" in out and "missing  kai" in out and "fonts-kai" in out
    assert fonts_main(["nope"]) == 2


def test_crnn_fonts_install_without_apt_says_what_to_install(
    test_set: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert fonts_main(["--install", "t"]) == 2
    assert "fonts-kai" in capsys.readouterr().err


def test_the_regional_set_is_the_other_regions_of_the_allowed_noto_collections() -> None:
    """zh_regional: the TC, HK, JP and KR faces of the Noto CJK collections (an allowed
    package), Sans and Serif, regular and bold; and where they are installed, each is a
    face of the same file as the SC face that draws the same character differently."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    faces = fontsets.FONT_SETS["zh_regional"]
    assert {f.package for f in faces} == {"fonts-noto-cjk"}
    assert {f.face.split()[3] for f in faces} == {"TC", "HK", "JP", "KR"}
    assert len(faces) == 16 and {f.style for f in faces} == {"hei", "song"}
    sc = resolve_font_set("zh").faces
    serif_sc = next((p for f, p in sc if f.face == "Noto Serif CJK SC"), None)
    found = dict((f.face, p) for f, p in resolve_font_set("zh_regional").faces)
    serif_tc = found.get("Noto Serif CJK TC")
    if serif_sc is None or serif_tc is None:
        pytest.skip("fonts-noto-cjk is not installed")
    assert serif_sc.split("#")[0] == serif_tc.split("#")[0] and serif_sc != serif_tc

    def glyph(path: str) -> np.ndarray:
        file, _, index = path.partition("#")
        font = ImageFont.truetype(file, 64, index=int(index))
        im = Image.new("L", (96, 96), 255)
        ImageDraw.Draw(im).text((16, 8), "骨", font=font, fill=0)
        ink = np.asarray(im) < 128
        ys, xs = np.nonzero(ink)
        return ink[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]

    a, b = glyph(serif_sc), glyph(serif_tc)
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    assert (a[:h, :w] != b[:h, :w]).mean() > 0.05  # the inner box turns the other way
