"""The synthetic text generator: determinism, labels, glyph coverage, crops, CLI.

Offline and CPU-only; fonts, word lists and LMDBs are made in tmp_path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import lmdb
import numpy as np
import pytest
from fontTools import subset
from fontTools.ttLib import TTFont
from PIL import Image, ImageDraw, ImageFont

from crnn.cli.synth import main
from crnn.config import ConfigError, SynthConfig
from crnn.data.lmdb import LmdbReader
from crnn.data.synth import (
    EFFECT_PROBABILITIES,
    FontError,
    SynthGenerator,
    bundled_font_dir,
    effects_off,
    find_font_files,
    glyph_coverage,
)
from crnn.data.synth import effects as fx
from crnn.data.synth import geometry as geo
from crnn.data.synth.fonts import GlyphCache
from crnn.data.synth.scripts import raqm_available
from crnn.text.alphabet import Charset

REPO = Path(__file__).resolve().parents[1]
DIGITS = "0123456789"
# Glyphs that reach far from the pen: descenders, overhangs, wide and tall shapes.
_TRICKY = "fjgpQWM@_()[]{}|%y/\\'`~^,$&"


def _digest(img: Image.Image) -> str:
    return hashlib.sha256(img.mode.encode() + repr(img.size).encode() + img.tobytes()).hexdigest()


@pytest.fixture(scope="module")
def alnum36() -> Charset:
    return Charset.from_spec("alnum36")


@pytest.fixture(scope="module")
def gen36(alnum36: Charset) -> SynthGenerator:
    return SynthGenerator(alnum36, SynthConfig(), seed=7, height=32)


@pytest.fixture(scope="module")
def partial_fonts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a digits-only font whose cmap also maps 'A' to the (empty) space
    glyph, and a file that is not a font at all."""
    folder = tmp_path_factory.mktemp("fonts")
    src = bundled_font_dir() / "dejavu" / "DejaVuSans.ttf"
    font = TTFont(str(src))
    opts = subset.Options()
    opts.notdef_outline = True
    sub = subset.Subsetter(opts)
    sub.populate(text=DIGITS + " ")
    sub.subset(font)
    space = font.getBestCmap()[ord(" ")]
    for table in font["cmap"].tables:
        if table.isUnicode():
            table.cmap[ord("A")] = space
    font.save(str(folder / "Digits.ttf"))
    (folder / "broken.ttf").write_bytes(b"this is not a font")
    return folder


# ---- determinism ---------------------------------------------------------------------


def test_render_is_a_pure_function_of_seed_and_index(
    alnum36: Charset, gen36: SynthGenerator
) -> None:
    forward = [_digest(gen36.render(i)[0]) for i in range(12)]
    again = SynthGenerator(alnum36, SynthConfig(), seed=7, height=32)
    backward = [_digest(again.render(i)[0]) for i in reversed(range(12))][::-1]
    assert forward == backward
    assert len(set(forward)) == len(forward), "different indices must give different images"
    other_seed = SynthGenerator(alnum36, SynthConfig(), seed=8, height=32)
    assert _digest(other_seed.render(0)[0]) != forward[0]


@pytest.mark.slow
def test_render_is_identical_in_a_fresh_process(gen36: SynthGenerator) -> None:
    # A different PYTHONHASHSEED catches any dependence on set/dict iteration order.
    code = (
        "import hashlib;from crnn.text.alphabet import Charset;from crnn.config import SynthConfig;"
        "from crnn.data.synth import SynthGenerator;"
        "g=SynthGenerator(Charset.from_spec('alnum36'),SynthConfig(),seed=7,height=32)\n"
        "for i in (40,3,17,99):\n"
        " im,l=g.render(i);print(hashlib.sha256(im.mode.encode()+repr(im.size).encode()"
        "+im.tobytes()).hexdigest(),l)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    expected = [f"{_digest(gen36.render(i)[0])} {gen36.render(i)[1]}" for i in (40, 3, 17, 99)]
    assert out[:4] == expected


def test_generator_pickles_small_and_renders_the_same(gen36: SynthGenerator) -> None:
    gen36.render(0)  # fill the per-process caches; they must not travel
    blob = pickle.dumps(gen36)
    assert len(blob) < 100_000
    clone = pickle.loads(blob)
    assert [_digest(clone.render(i)[0]) for i in range(5)] == [
        _digest(gen36.render(i)[0]) for i in range(5)
    ]


# ---- labels and glyphs ---------------------------------------------------------------


@pytest.mark.parametrize("spec", ["alnum36", "ascii94", "ascii95"])
def test_labels_hold_only_charset_characters(spec: str) -> None:
    charset = Charset.from_spec(spec)
    cfg = SynthConfig(max_length=12)
    gen = SynthGenerator(charset, cfg, seed=1, height=32)
    seen: set[str] = set()
    for i in range(400):
        img, label = gen.render(i)
        assert 1 <= len(label) <= cfg.max_length, label
        assert charset.unknown_chars(label) == [], label
        assert charset.normalize(label) == label
        assert label == label.strip() and "  " not in label, repr(label)
        assert img.height == 32 and img.mode == "L"
        seen.update(label)
    if spec == "alnum36":
        assert seen == set(charset.chars), "every character should show up in 400 samples"
    if spec == "ascii95":
        assert " " in seen, "the space charset should give multi-word lines"
    if spec == "ascii94":
        assert sum(not c.isalnum() for c in seen) >= 20, "punctuation should be drawn often"


def test_every_drawn_character_has_a_glyph_in_the_chosen_font() -> None:
    charset = Charset.from_spec("ascii94")
    gen = SynthGenerator(charset, SynthConfig(p_random=0.5), seed=3, height=32)
    cmaps: dict[str, dict[int, str]] = {}
    fonts_used = set()
    for i in range(400):
        _, label, meta = gen.render_with_meta(i)
        assert charset.normalize(meta.text) == label
        if meta.font not in cmaps:
            with TTFont(meta.font, lazy=True) as tt:
                cmaps[meta.font] = dict(tt.getBestCmap())
        cmap = cmaps[meta.font]
        for c in meta.text:
            assert cmap.get(ord(c), ".notdef") != ".notdef", (c, meta.font)
        fonts_used.add(meta.font)
    assert len(fonts_used) >= 20


def test_glyph_cache_never_clips_a_glyph() -> None:
    # Each cached glyph must hold exactly the ink Pillow draws for it on a huge canvas.
    cache = GlyphCache()
    size = 36
    for path in find_font_files([bundled_font_dir()]):
        font = ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)
        for ch in _TRICKY:
            ref = Image.new("L", (6 * size, 6 * size))
            ImageDraw.Draw(ref).text((2 * size, 3 * size), ch, font=font, fill=255, anchor="ls")
            g = cache.glyph(str(path), size, ch)
            total = 0 if g.mask is None else int(g.mask.astype(np.int64).sum())
            assert total == int(np.asarray(ref, dtype=np.int64).sum()), (path.name, ch)


def test_no_ink_is_clipped_by_geometry_or_crop() -> None:
    cfg = dataclasses.replace(
        effects_off(SynthConfig()),
        p_rotate=1.0,
        max_rotate=12.0,
        p_perspective=1.0,
        max_perspective=0.35,
        p_curve=1.0,
        max_curve=0.6,
        p_spacing=1.0,
        spacing_min=-0.1,
        p_stretch=1.0,
        pad_min=0.12,
        pad_max=0.3,
    )
    gen = SynthGenerator(Charset.from_spec("ascii94"), cfg, seed=5, height=32)
    for i in range(150):
        img, label, meta = gen.render_with_meta(i)
        arr = np.asarray(img, dtype=np.int16)
        paper = int(np.bincount(arr.ravel()).argmax())
        border = np.concatenate((arr[0], arr[-1], arr[:, 0], arr[:, -1]))
        assert np.abs(border - paper).max() <= 1, (i, label, meta)
        assert {"rotate", "perspective", "curve"} <= set(meta.effects)
        assert (np.abs(arr - paper) > 60).any(), "the text must be visible"


# p_oldstyle changes only digits, in faces that have old-style figures; p_level_box only
# rotated lines; p_punct_style only CJK marks; p_wide_tracking only short lines without a
# space: their own tests.
@pytest.mark.parametrize(
    "name",
    [
        p
        for p in EFFECT_PROBABILITIES
        if p not in ("p_color", "p_oldstyle", "p_level_box", "p_punct_style", "p_wide_tracking")
    ],
)
def test_each_effect_fires_at_probability_one(name: str, alnum36: Charset) -> None:
    clean = SynthGenerator(alnum36, effects_off(SynthConfig()), seed=2, height=32)
    noisy = SynthGenerator(
        alnum36, dataclasses.replace(effects_off(SynthConfig()), **{name: 1.0}), seed=2, height=32
    )
    changed = 0
    for i in range(12):
        img, _, meta = noisy.render_with_meta(i)
        assert clean.render_with_meta(i)[2].effects == ()
        if name != "p_tight_crop":  # tight crops are skipped for flat texts like "--"
            assert name[2:] in meta.effects, meta
        changed += _digest(img) != _digest(clean.render(i)[0])
    assert changed >= 10


def test_clipped_crops_cut_into_the_text_at_the_top_and_bottom(alnum36: Charset) -> None:
    base = dataclasses.replace(
        effects_off(SynthConfig()),
        p_word=1,
        p_number=0,
        p_date=0,
        p_price=0,
        p_code=0,
        p_random=0,
        p_line=0,
        pad_min=0.05,
    )
    clean = SynthGenerator(alnum36, base, seed=6, height=32)
    clipped = SynthGenerator(
        alnum36, dataclasses.replace(base, p_clip=1.0, max_clip=0.3), seed=6, height=32
    )

    def inked_edges(img: Image.Image) -> int:  # rows 0 and -1 that hold ink (dark pixels)
        arr = np.asarray(img, dtype=np.int16)
        return int((arr[0] < 128).any()) + int((arr[-1] < 128).any())

    cut = sum(inked_edges(clipped.render(i)[0]) for i in range(20))
    assert sum(inked_edges(clean.render(i)[0]) for i in range(20)) <= 4
    assert cut >= 20, "a clipped crop's top and bottom edges run through the letters"
    with pytest.raises(ConfigError, match="max_clip"):
        dataclasses.replace(base, max_clip=0.5).validate()


def test_level_box_cuts_the_ends_of_a_tilted_line_not_its_middle(alnum36: Charset) -> None:
    base = dataclasses.replace(
        effects_off(SynthConfig()),
        p_word=0,
        p_number=0,
        p_date=0,
        p_price=0,
        p_code=0,
        p_random=1,
        p_line=0,
        min_length=14,
        max_length=20,
        pad_min=0.05,
        pad_max=0.1,
        p_rotate=1.0,
        max_rotate=4.0,
    )
    tilted = SynthGenerator(alnum36, base, seed=3, height=32)
    level = SynthGenerator(alnum36, dataclasses.replace(base, p_level_box=1.0), seed=3, height=32)

    def cut_ends(
        img: Image.Image,
    ) -> tuple[int, int]:  # inked rows 0 / -1: in the end fifths, the middle
        ink = np.asarray(img, dtype=np.int16)[[0, -1]] < 128
        fifth = ink.shape[1] // 5
        ends = ink[:, :fifth].any() or ink[:, -fifth:].any()
        return int(ends), int(ink[:, 2 * fifth : 3 * fifth].any())

    plain = [cut_ends(tilted.render(i)[0]) for i in range(20)]
    cut = [
        cut_ends(img)
        for img, _, meta in map(level.render_with_meta, range(20))
        if "level_box" in meta.effects
    ]
    assert len(cut) == 20
    assert sum(e for e, _ in plain) <= 2, "a tilted line's crop holds all of it"
    assert sum(e for e, _ in cut) >= 8, "a level box cuts the tops or bottoms of the end characters"
    assert sum(m for _, m in cut) <= 2, "the middle of the line stays whole"


def test_legibility_scores_the_strokes_left_not_the_tones_or_the_light() -> None:
    from crnn.data.synth.legibility import legibility

    r = np.random.default_rng(0)
    mask = np.zeros((32, 200), np.uint8)
    for x in range(10, 190, 12):  # strokes
        mask[8:24, x : x + 3] = 255
    ink, m = Image.fromarray(mask), mask / 255.0
    paper = np.linspace(250, 70, 200)[None, :]  # light falling off across the line
    crisp = Image.fromarray((paper * (1 - 0.5 * m)).astype(np.uint8))
    assert legibility(crisp, ink) > 0.9
    assert legibility(Image.fromarray((40 + 150 * m).astype(np.uint8)), ink) > 0.99  # light on dark
    faint = 128 + 6 * m + r.normal(0, 25, mask.shape)  # 2 % contrast in noise
    assert legibility(Image.fromarray(np.clip(faint, 0, 255).astype(np.uint8)), ink) < 0.3
    specks = mask.copy()
    specks[::3] = 0  # strokes eroded to dots
    specks[:, ::2] = 0
    assert legibility(Image.fromarray(255 - specks), ink) < legibility(
        Image.fromarray(255 - mask), ink
    )
    assert legibility(crisp, Image.fromarray(np.zeros_like(mask))) == 0.0


def test_the_legibility_floor_redraws_the_look_of_illegible_lines_and_keeps_their_text(
    alnum36: Charset,
) -> None:
    # A recipe that often buries its text: low contrast, strong noise and blur.
    harsh = dataclasses.replace(
        SynthConfig(),
        min_contrast=0.05,
        max_bg_variation=0.1,
        p_noise=1.0,
        max_noise=0.3,
        p_blur=0.6,
        max_blur=2.0,
    )
    floor = 0.4
    plain = SynthGenerator(alnum36, harsh, seed=5, height=32)
    floored = SynthGenerator(
        alnum36, dataclasses.replace(harsh, min_legibility=floor), seed=5, height=32
    )
    redrawn = 0
    for i in range(60):
        img, label, meta = floored.render_with_meta(i)
        assert label == plain.render(i)[1] == floored.label(i), "the text is the first draw's"
        assert meta.legibility is not None and plain.render_with_meta(i)[2].legibility is None
        if "redrawn" in meta.effects:
            redrawn += 1
        else:
            assert meta.legibility >= floor
            assert img.tobytes() == plain.render(i)[0].tobytes(), "a legible line is left alone"
        assert img.tobytes() == floored.render(i)[0].tobytes(), (
            "redraws are a function of the index"
        )
    assert 3 <= redrawn <= 40, redrawn
    kept = [floored.render_with_meta(i)[2].legibility for i in range(60)]
    assert sum(k < floor for k in kept) <= 2, "the redraws clear the floor"


@pytest.mark.skipif(not raqm_available(), reason="old-style figures need Pillow's RAQM layout")
def test_old_style_figures_are_drawn_in_faces_that_have_them(alnum36: Charset) -> None:
    fonts = Path(__file__).resolve().parents[1] / "crnn" / "assets" / "fonts"
    cache = GlyphCache()
    book = str(fonts / "libertine" / "LinLibertine_R.otf")  # has OpenType onum
    lining, old = cache.glyphs(book, 40, "09", False), cache.glyphs(book, 40, "09", True)
    assert old[0].mask.shape[0] < 0.8 * lining[0].mask.shape[0], "an old-style 0 is x-height"
    assert old[1].dy + old[1].mask.shape[0] > 4, "an old-style 9 descends below the baseline"
    assert lining[1].dy + lining[1].mask.shape[0] <= 1
    plain = str(fonts / "dejavu" / "DejaVuSans.ttf")  # has none: its figures are drawn
    for a, b in zip(cache.glyphs(plain, 40, "09", False), cache.glyphs(plain, 40, "09", True)):
        assert (a.mask == b.mask).all() and abs(a.advance - b.advance) < 1

    cfg = dataclasses.replace(
        effects_off(SynthConfig()),
        p_oldstyle=1.0,
        bundled_fonts=False,
        font_dirs=[str(fonts / "libertine")],
        p_word=0.5,
        p_number=0.5,
        p_date=0,
        p_price=0,
        p_code=0,
        p_random=0,
        p_line=0,
    )
    gen = SynthGenerator(alnum36, cfg, seed=3, height=32)
    seen = {True: 0, False: 0}
    for i in range(30):
        _, label, meta = gen.render_with_meta(i)
        has_digit = any(c.isdigit() for c in label)
        assert ("oldstyle" in meta.effects) == has_digit, (label, meta.effects)
        seen[has_digit] += 1
    assert min(seen.values()) > 0


def test_outline_keeps_a_ring_around_the_ink_and_empties_its_inside() -> None:
    ink = np.zeros((32, 32), np.uint8)
    ink[10:22, 10:22] = 255
    ring = np.asarray(fx.outline(Image.fromarray(ink), 3))
    assert ring[16, 16] == 0 and ring[12:20, 12:20].max() == 0, "the letter's inside is emptied"
    assert ring[9, 16] == 255 and ring[16, 22] == 255, "a ring is drawn just outside the ink"
    assert ring[:5].max() == 0 and ring[:, 27:].max() == 0, "nothing far from the ink"


def test_rgb_output_and_colour(alnum36: Charset) -> None:
    gen = SynthGenerator(alnum36, SynthConfig(p_color=1.0), seed=4, height=48, rgb=True)
    coloured = 0
    for i in range(30):
        img, _, meta = gen.render_with_meta(i)
        assert img.mode == "RGB" and img.height == 48
        arr = np.asarray(img, dtype=np.int16)
        coloured += int(np.abs(arr[..., 0] - arr[..., 2]).max() > 20)
    assert coloured >= 10


# ---- fonts ---------------------------------------------------------------------------


def test_coverage_rejects_missing_and_empty_glyphs(partial_fonts: Path) -> None:
    # 'A' is in the cmap but maps to an empty glyph; 'B' is not in the cmap at all.
    assert glyph_coverage(partial_fonts / "Digits.ttf", DIGITS + "AB ") == frozenset(DIGITS + " ")


def test_glyph_coverage_is_kept_on_disk_for_the_next_process(
    partial_fonts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second process answers from the disk cache without reading the font (the check
    that costs ~20 s for the Chinese faces); a changed file, a corrupt cache file and
    CRNN_OCR_CACHE='' each make it check the font again, and get the right answer."""
    import shutil

    from crnn.data.synth import fonts

    font = tmp_path / "Digits.ttf"
    shutil.copy(partial_fonts / "Digits.ttf", font)
    monkeypatch.setenv("CRNN_OCR_CACHE", str(tmp_path / "cache"))
    want = DIGITS + "AB "
    assert glyph_coverage(font, want) == frozenset(DIGITS + " ")
    (cached,) = (tmp_path / "cache" / "glyph-coverage").glob("*.json")

    checked: list[int] = []
    real_check = fonts._check_glyphs

    def counting(path: str, chars: list[str]) -> dict[str, bool]:
        checked.append(len(chars))
        return real_check(path, chars)

    monkeypatch.setattr(fonts, "_check_glyphs", counting)

    def fresh_process() -> frozenset[str]:
        monkeypatch.setattr(fonts, "_COVERAGE_CACHE", {})
        return glyph_coverage(font, want)

    assert fresh_process() == frozenset(DIGITS + " ") and checked == []
    # a character not asked about before is checked, alone
    monkeypatch.setattr(fonts, "_COVERAGE_CACHE", {})
    assert glyph_coverage(font, want + "C") == frozenset(DIGITS + " ") and checked == [1]
    cached.write_text("{not json", encoding="utf-8")
    assert fresh_process() == frozenset(DIGITS + " ") and checked[-1] == len(want)
    os.utime(font, ns=(1, 1))  # the same file changed (here: its time): checked again
    assert fresh_process() == frozenset(DIGITS + " ") and checked[-1] == len(want)
    monkeypatch.setenv("CRNN_OCR_CACHE", "")
    shutil.rmtree(tmp_path / "cache")
    assert fresh_process() == frozenset(DIGITS + " ") and checked[-1] == len(want)
    assert not (tmp_path / "cache").exists()


def test_font_lacking_glyphs_is_only_used_for_texts_it_covers(
    alnum36: Charset, partial_fonts: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = SynthConfig(
        font_dirs=[str(partial_fonts)],
        p_word=0.5,
        p_number=0.5,
        p_date=0.0,
        p_price=0.0,
        p_code=0.0,
        p_random=0.0,
    )
    with caplog.at_level(logging.WARNING):
        gen = SynthGenerator(alnum36, cfg, seed=9, height=32)
    assert "broken.ttf" in caplog.text, "an unreadable font is skipped with a warning"
    digits_font = str(partial_fonts / "Digits.ttf")
    assert digits_font in [f.path for f in gen.fonts]
    used = 0
    for i in range(1000):
        _, label, meta = gen.render_with_meta(i)
        if meta.font == digits_font:
            used += 1
            assert set(meta.text) <= set(DIGITS), meta
    assert used > 0


def test_characters_no_font_draws_are_never_generated(
    alnum36: Charset, partial_fonts: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = SynthConfig(bundled_fonts=False, font_dirs=[str(partial_fonts)])
    with caplog.at_level(logging.WARNING):
        gen = SynthGenerator(alnum36, cfg, seed=9, height=32)
    assert "no font can draw 26 charset character(s) abcdefghijklmnopqrstuvwxyz" in caplog.text
    labels = [gen.render(i)[1] for i in range(200)]
    assert all(set(label) <= set(DIGITS) for label in labels)


def test_find_font_files_errors() -> None:
    with pytest.raises(FontError, match="does not exist"):
        find_font_files(["/nonexistent/fonts"])


# ---- config --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"p_blur": 1.5}, "p_blur"),
        ({"pad_min": 0.5, "pad_max": 0.1}, "pad_min"),
        ({"max_length": 0}, "max_length"),
        ({"p_gradient_bg": 0.6, "p_noise_bg": 0.6}, "sum must be <= 1"),
    ],
)
def test_bad_config_is_rejected(alnum36: Charset, change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SynthGenerator(alnum36, SynthConfig(**change))


def test_custom_word_list(alnum36: Charset, tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("alpha\nbeta\ngamma\nnaïve\n", encoding="utf-8")
    cfg = SynthConfig(
        word_list=str(words),
        p_word=1.0,
        p_number=0,
        p_date=0,
        p_price=0,
        p_code=0,
        p_random=0,
        p_punct=0,
    )
    gen = SynthGenerator(alnum36, cfg, seed=0)
    assert {gen.render(i)[1] for i in range(40)} == {"alpha", "beta", "gamma"}
    with pytest.raises(FileNotFoundError, match="one word per line"):
        SynthGenerator(alnum36, dataclasses.replace(cfg, word_list=str(tmp_path / "missing.txt")))


# ---- CLI and LMDB --------------------------------------------------------------------


def _lmdb_items(path: Path) -> list[tuple[bytes, bytes]]:
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        items = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    env.close()
    return items


def test_cli_writes_readable_lmdb_independent_of_workers(tmp_path: Path, alnum36: Charset) -> None:
    args = ["--count", "40", "--seed", "3", "--charset", "alnum36", "--no-progress"]
    assert main(["--out", str(tmp_path / "w1"), "--workers", "1", *args]) == 0
    assert main(["--out", str(tmp_path / "w2"), "--workers", "2", *args]) == 0
    assert _lmdb_items(tmp_path / "w1") == _lmdb_items(tmp_path / "w2")

    reader = LmdbReader(tmp_path / "w1")
    gen = SynthGenerator(alnum36, SynthConfig(), seed=3, height=32)
    assert len(reader) == 40
    sizes = reader.sizes()
    for i in range(40):
        img, label = gen.render(i)
        assert reader.label(i) == label
        stored = Image.open(io.BytesIO(reader.image_bytes(i)))
        assert stored.format == "PNG"
        assert stored.tobytes() == img.tobytes()
        assert sizes is not None and sizes[i] == img.size


def test_cli_fonts_flag_and_contact_sheet(tmp_path: Path, partial_fonts: Path) -> None:
    sheet = tmp_path / "sheet.png"
    rc = main(
        [
            "--out",
            str(tmp_path / "d"),
            "--count",
            "30",
            "--fonts",
            str(partial_fonts),
            "--no-bundled-fonts",
            "--charset",
            "alnum36",
            "--workers",
            "1",
            "--no-progress",
            "--contact-sheet",
            str(sheet),
        ]
    )
    assert rc == 0
    labels = LmdbReader(tmp_path / "d").labels()
    assert len(labels) == 30 and all(set(label) <= set(DIGITS) for label in labels)
    with Image.open(sheet) as im:
        assert im.width > 8 * 100 and im.height > 4 * 48  # 30 samples: 4 rows of 8


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fonts", "/nonexistent/fonts"], "font folder '/nonexistent/fonts' does not exist"),
        (["--charset", "klingon"], "unknown charset 'klingon'"),
        (["--set", "data.synth.p_blurr=0.5"], "did you mean data.synth.p_blur"),
        (["--set", "data.synth.p_blur=2"], "data.synth.p_blur=2.0 is not valid"),
        (["--count", "0"], "--count must be a positive number"),
    ],
)
def test_cli_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rc = main(["--out", str(tmp_path / "x"), "--count", "5", "--no-progress", *argv])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x" / "data.mdb").exists()


def test_cli_empty_font_dir_and_missing_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--out", str(tmp_path / "x"), "--count", "2", "--fonts", str(empty)]) == 2
    assert "holds no .ttf, .otf, .ttc or .otc file" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "x")]) == 2
    assert "--out needs --count" in capsys.readouterr().err
    assert main(["--count", "5"]) == 2
    assert "nothing to do" in capsys.readouterr().err
    assert (
        main(["--out", str(tmp_path / "y"), "--count", "3", "--workers", "1", "--no-progress"]) == 0
    )
    assert main(["--out", str(tmp_path / "y"), "--count", "3", "--workers", "1"]) == 2
    assert "already holds an LMDB" in capsys.readouterr().err


def test_warm_up_caches_every_glyph_render_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    from crnn.data.synth import render as render_module

    render_module._glyph_cache.cache_clear()  # a fresh process-wide cache
    fonts = [
        bundled_font_dir() / "go" / "Go-Italic.ttf",
        bundled_font_dir() / "dejavu" / "DejaVuSerif.ttf",
    ]
    charset = Charset.from_spec("chars:0123456789abcxyz")
    gen = SynthGenerator(charset, SynthConfig(), seed=11, height=32, font_paths=fonts)
    assert gen.warm_up() > 0

    def no_new_glyphs(self: GlyphCache, path: str, size: int, char: str) -> None:
        raise AssertionError(f"glyph {char!r} at {size}px of {path} was not warmed up")

    monkeypatch.setattr(GlyphCache, "_render", no_new_glyphs)
    for i in range(300):
        gen.render(i)


# ---- glyph style and photograph effects (each checked for what it does) ----------------


def _bar(h: int = 40, w: int = 40) -> Image.Image:
    ink = np.zeros((h, w), np.uint8)
    ink[5:35, 18:22] = 255  # a vertical stroke
    return Image.fromarray(ink)


def test_slant_leans_the_top_of_a_stroke_right_and_keeps_the_baseline() -> None:
    bar = _bar()
    out = np.asarray(geo.warp(bar, geo.shear(12.0), bar.size), dtype=np.float32)
    xs = np.arange(out.shape[1])
    top = (out[8] * xs).sum() / out[8].sum()
    bottom = (out[32] * xs).sum() / out[32].sum()
    assert top - bottom > 4.0, (top, bottom)  # tan(12 deg) * 24 px ~ 5 px
    left = np.asarray(geo.warp(bar, geo.shear(-12.0), bar.size), dtype=np.float32)
    assert (left[8] * xs).sum() / left[8].sum() < (left[32] * xs).sum() / left[32].sum() - 4.0


def test_bleed_grows_or_thins_strokes_and_never_erases_them() -> None:
    bar = _bar()
    area = int((np.asarray(bar) > 127).sum())
    areas = [int((np.asarray(fx.bleed(random.Random(s), bar, 1.0)) > 127).sum()) for s in range(30)]
    assert min(areas) > 0, "a stroke is never erased"
    assert max(areas) > area * 1.15 and min(areas) < area * 0.9, (area, min(areas), max(areas))


def test_uneven_light_darkens_part_of_the_image_smoothly() -> None:
    flat = Image.new("L", (120, 32), 200)
    out = np.asarray(fx.uneven_light(random.Random(3), flat, 0.6), dtype=np.float32)
    assert out.max() <= 200.5 and out.min() < 170, (out.min(), out.max())
    assert np.abs(np.diff(out, axis=1)).max() < 6, "a smooth fall-off, not noise"


def test_motion_blur_smears_a_dot_along_a_line_and_keeps_its_ink() -> None:
    dot = np.zeros((31, 31), np.uint8)
    dot[15, 15] = 255
    out = np.asarray(fx.motion_blur(random.Random(1), Image.fromarray(dot), 6.0), dtype=np.float32)
    lit = np.argwhere(out > 0)
    assert len(lit) >= 2 and out.max() < 255
    assert abs(out.sum() - 255) < 8, "the blur moves ink, it does not add or remove it"
    # All lit pixels lie on one line through the dot (rank-1 spread).
    centred = lit - lit.mean(0)
    s = np.linalg.svd(centred.astype(float), compute_uv=False)
    assert s[-1] < 0.35 * s[0] + 1e-6


def test_defocus_spreads_a_dot_into_a_disc() -> None:
    dot = np.zeros((21, 21), np.uint8)
    dot[10, 10] = 255
    out = np.asarray(fx.defocus(random.Random(0), Image.fromarray(dot), 2.0), dtype=np.float32)
    assert out[10, 10] < 255 and (out > 0).sum() >= 9
    assert abs(out.sum() - 255) < 12
    assert out[10, 11] == pytest.approx(out[11, 10], abs=2) == pytest.approx(out[10, 9], abs=2)


def test_resample_keeps_the_size_and_loses_fine_detail() -> None:
    stripes = np.zeros((32, 64), np.uint8)
    stripes[:, ::2] = 255  # one-pixel stripes: the finest detail there is
    out = np.asarray(fx.resample(random.Random(5), Image.fromarray(stripes), 0.35))
    assert out.shape == stripes.shape
    assert np.abs(np.diff(out.astype(int), axis=1)).mean() < 200


def test_char_jitter_moves_each_character_on_its_own() -> None:
    from crnn.data.synth.layout import compose

    charset = Charset.from_spec("alnum36")
    gen = SynthGenerator(charset, effects_off(SynthConfig()), seed=0, height=32)
    font = next(f for f in gen.fonts if set("abcd") <= f.chars)
    cache = GlyphCache()
    plain = compose(cache, font, 32, "aaaa", 0.0, 0.1)
    moved = compose(cache, font, 32, "aaaa", 0.0, 0.1, sizes=[28, 32, 36, 32], shifts=[-3, 0, 2, 4])
    tops = [b[1] for b in moved.glyph_boxes]
    heights = [b[3] - b[1] for b in moved.glyph_boxes]
    assert len({b[1] for b in plain.glyph_boxes}) == 1
    assert tops[3] - tops[1] == 4 and heights[0] < heights[1] < heights[2]


def test_punct_style_draws_cjk_marks_larger_and_higher_and_nothing_else() -> None:
    from crnn.data.synth.layout import punct_style

    text = "中文，测试。ab"
    sizes, shifts = punct_style(random.Random(1), text, 32, None, None, 0.6, 0.3, 4)
    marks = [i for i, c in enumerate(text) if c in "，。"]
    assert all(sizes[i] > 32 and shifts[i] < 0 for i in marks)
    assert sizes[marks[0]] == sizes[marks[1]] and shifts[marks[0]] == shifts[marks[1]]  # one face
    assert all(sizes[i] == 32 and shifts[i] == 0 for i in range(len(text)) if i not in marks)


def test_punct_style_changes_the_image_of_a_line_with_marks_not_its_label() -> None:
    """With the effect's size and rise at zero the same random stream draws the same
    images: what differs is the marks, and the labels stay."""
    from crnn.data.synth.layout import PUNCT_STYLE_MARKS

    charset = Charset.from_spec("zh5529")
    font = (
        Path(__file__).resolve().parents[1]
        / "crnn/assets/label_fonts/crnn-ocr-LabelCJK-Regular.otf"
    )
    base = dataclasses.replace(
        effects_off(SynthConfig()),
        p_sentence=1.0,
        p_word=0.0,
        p_number=0.0,
        p_date=0.0,
        p_price=0.0,
        p_code=0.0,
        p_random=0.0,
        p_phrase=0.0,
        p_punct_style=1.0,
        word_list="chinese",
    )
    flat = dataclasses.replace(base, max_punct_scale=0.0, max_punct_rise=0.0)
    styled = SynthGenerator(charset, base, seed=3, height=32, font_paths=[font])
    plain = SynthGenerator(charset, flat, seed=3, height=32, font_paths=[font])
    styled_lines = 0
    for i in range(24):
        img_a, label_a, meta_a = styled.render_with_meta(i)
        img_b, label_b, _ = plain.render_with_meta(i)
        assert label_a == label_b
        has_marks = not PUNCT_STYLE_MARKS.isdisjoint(meta_a.text)
        assert ("punct_style" in meta_a.effects) == has_marks, meta_a
        assert np.array_equal(np.asarray(img_a), np.asarray(img_b)) != has_marks, meta_a
        styled_lines += has_marks
    assert styled_lines >= 4


def test_wide_tracking_spaces_short_lines_as_signs_do_and_keeps_their_labels() -> None:
    """Short Chinese lines come out wider by at least 0.3 em per gap, with the same label;
    long lines (sentences) are never tracked."""
    from crnn.data.synth.layout import WIDE_TRACKING_MAX_CHARS

    charset = Charset.from_spec("zh5529")
    font = (
        Path(__file__).resolve().parents[1]
        / "crnn/assets/label_fonts/crnn-ocr-LabelCJK-Regular.otf"
    )
    base = dataclasses.replace(
        effects_off(SynthConfig()),
        p_sentence=0.5,
        p_word=0.5,
        p_number=0.0,
        p_date=0.0,
        p_price=0.0,
        p_code=0.0,
        p_random=0.0,
        p_phrase=0.0,
        word_list="chinese",
        pad_min=0.1,
        pad_max=0.1,
    )
    tracked = SynthGenerator(
        charset,
        dataclasses.replace(base, p_wide_tracking=1.0),
        seed=4,
        height=32,
        font_paths=[font],
    )
    plain = SynthGenerator(charset, base, seed=4, height=32, font_paths=[font])
    wide = long = 0
    for i in range(30):
        img_a, label_a, meta_a = tracked.render_with_meta(i)
        img_b, label_b, _ = plain.render_with_meta(i)
        assert label_a == label_b
        short = len(meta_a.text) <= WIDE_TRACKING_MAX_CHARS and " " not in meta_a.text
        assert ("wide_tracking" in meta_a.effects) == short, meta_a
        if short and len(meta_a.text) >= 3:
            # each of the n-1 gaps grows by >= 0.3 em; an em is about the line height here
            assert img_a.width >= img_b.width + 0.3 * 0.8 * 32 * (len(meta_a.text) - 1), meta_a
            wide += 1
        long += not short
    assert wide >= 5 and long >= 3


def test_wide_tracking_never_spaces_a_line_with_a_space() -> None:
    import random

    from crnn.data.synth.layout import letter_spacing

    cfg = dataclasses.replace(SynthConfig(), p_wide_tracking=1.0, p_spacing=0.0)
    assert letter_spacing(random.Random(0), cfg, "老掉牙三贤店", 40, 0.12)[1] == "wide_tracking"
    for seed in range(50):
        spacing, name = letter_spacing(random.Random(seed), cfg, "老掉 牙", 40, 0.12)
        assert (spacing, name) == (0.0, "")


def test_full_width_text_is_drawn_full_width_and_labelled_in_ascii(tmp_path: Path) -> None:
    # A font that maps the full-width digits to its digit glyphs, as CJK fonts draw them.
    font = TTFont(str(bundled_font_dir() / "dejavu" / "DejaVuSans.ttf"))
    for table in font["cmap"].tables:
        if table.isUnicode():
            for d in range(10):
                table.cmap[0xFF10 + d] = table.cmap[0x30 + d]
    font.save(str(tmp_path / "Wide.ttf"))
    charset = Charset.from_spec("alnum36")
    cfg = dataclasses.replace(
        effects_off(SynthConfig()),
        p_fullwidth=1.0,
        p_word=0.0,
        p_number=1.0,
        p_date=0.0,
        p_price=0.0,
        p_code=0.0,
        p_random=0.0,
        p_line=0.0,
    )
    gen = SynthGenerator(charset, cfg, seed=0, height=32, font_paths=[tmp_path / "Wide.ttf"])
    wide = 0
    for i in range(20):
        _, label, meta = gen.render_with_meta(i)
        assert label == charset.normalize(meta.text) and all(c in charset for c in label)
        wide += any("\uff10" <= c <= "\uff19" for c in meta.text)
    assert wide >= 15


def chinese_sampler(charset: Charset, **weights: float) -> object:
    """A TextSampler over the bundled Chinese words drawing only from the sources
    ``weights`` name (``p_sentence=1.0``...), lines of 1-30 characters."""
    from crnn.data.synth.text import TextSampler, bundled_chinese_words

    off = dict.fromkeys(("p_word", "p_number", "p_date", "p_price", "p_code", "p_random"), 0.0)
    cfg = SynthConfig(**{**off, "p_line": 0.0, "min_length": 1, "max_length": 30, **weights})
    return TextSampler(charset.chars, cfg, charset.normalize, bundled_chinese_words())


def test_sentences_read_like_printed_chinese() -> None:

    charset = Charset.from_spec("zh5529")
    sampler = chinese_sampler(charset, p_sentence=1.0)
    r = random.Random(0)
    texts = [sampler.sample(r) for _ in range(400)]
    assert all(1 <= len(t) <= 30 and not charset.unknown_chars(t) for t in texts)
    assert sum(len(t) > 20 for t in texts) > 80, "long lines, not only words"
    joined = "".join(texts)
    for marks in ("，", "。", "“”", "《》", "（）"):
        assert all(m in joined for m in marks), marks
    assert sum(any(c.isascii() and c.isalnum() for c in t) for t in texts) > 60, "digits and Latin"
    assert any("年" in t and any(c.isdigit() for c in t) for t in texts), "dates"
    # As in print, 。 ends most sentences and … few (it ended one in seven, and the model
    # read 。 as …); speech ends with its own mark inside its quotes (：“……。”).
    more = [sampler.sample(r) for _ in range(3000)]
    ends = [t[-1] for t in more if t[-1] in "。！？；…"]
    assert ends.count("。") > 0.5 * len(ends) and ends.count("…") < 0.1 * len(ends), (
        len(ends),
        ends.count("…"),
    )
    joined = "".join(more)
    assert sum(joined.count(m + "”") for m in "。！？") >= 30 and "：“" in joined


def test_zh_ellipsis_weighs_the_ellipsis_among_the_marks() -> None:
    """data.synth.zh_ellipsis: at 0.1 about a tenth as many … in the Chinese sentences,
    at 0 none; 。 and ， as before; at 1 the same texts as without the setting."""

    charset = Charset.from_spec("zh5529")

    def texts(**extra: float) -> list[str]:
        sampler = chinese_sampler(charset, p_sentence=1.0, **extra)
        r = random.Random(5)
        return [sampler.sample(r) for _ in range(3000)]

    plain, same, tenth, none = (
        texts(),
        texts(zh_ellipsis=1.0),
        texts(zh_ellipsis=0.1),
        texts(zh_ellipsis=0.0),
    )
    assert plain == same
    count = lambda ts: sum(t.count("…") for t in ts)  # noqa: E731
    assert count(plain) >= 150 and count(tenth) <= 0.2 * count(plain) and count(none) == 0
    assert "".join(none).count("。") >= "".join(plain).count("。")


def test_font_weights_draw_a_named_font_as_often_as_its_weight_says(alnum36: Charset) -> None:
    """data.synth.font_weights: a face weighted 20 among n faces of weight 1 is drawn about
    20 / (20 + n - 1) of the time; without weights each face about 1 / n; the stream
    without weights is the one before the option existed (indices drawn the same way)."""
    cfg = dataclasses.replace(effects_off(SynthConfig()), word_list="english")
    plain = SynthGenerator(alnum36, cfg, seed=3, height=32)
    weighted = SynthGenerator(
        alnum36, dataclasses.replace(cfg, font_weights=["DejaVuSans.ttf=20"]), seed=3, height=32
    )
    n = len(plain.fonts)
    assert n >= 10
    draws = 300
    share = {
        name: sum(
            Path(g.render_with_meta(i)[2].font).name == "DejaVuSans.ttf" for i in range(draws)
        )
        / draws
        for name, g in (("plain", plain), ("weighted", weighted))
    }
    expected = 20 / (20 + n - 1)
    assert abs(share["weighted"] - expected) < 0.12, (share, expected)
    assert share["plain"] < 0.15, share


@pytest.mark.parametrize(
    "entry", ["DejaVu*", "=3", "DejaVu*=0", "DejaVu*=-1", "DejaVu*=lots", "x=inf"]
)
def test_a_malformed_font_weight_says_what_is_expected(entry: str) -> None:
    with pytest.raises(ConfigError, match="pattern=weight"):
        SynthConfig(font_weights=[entry]).validate()


def _with_and_without(effect: str, **on: float) -> list[tuple[int, Image.Image, Image.Image]]:
    """Six clean English samples drawn with the effect ``on`` and without it: ``(index,
    with, without)``, after checking that both carry the same label and that the effect
    was applied."""
    charset = Charset.from_spec("alnum36")
    base = dataclasses.replace(effects_off(SynthConfig()), word_list="english")
    plain = SynthGenerator(charset, base, seed=2, height=32)
    styled = SynthGenerator(charset, dataclasses.replace(base, **on), seed=2, height=32)
    out = []
    for i in range(6):
        a, label_a, meta = styled.render_with_meta(i)
        b, label_b, _ = plain.render_with_meta(i)
        assert label_a == label_b and effect in meta.effects
        out.append((i, a, b))
    return out


def test_char_tilt_raises_horizontals_to_the_right_and_keeps_verticals_upright() -> None:
    """p_char_tilt: a glyph's horizontal bar comes out rising to the right by the slope,
    its vertical bar stays in its column and upright, its left edge where it was; in the
    generator, the same text and an image that differs from the plain one."""
    from crnn.data.synth.layout import tilt_glyph

    glyph = np.zeros((20, 30), np.uint8)
    glyph[9:11, :] = 255  # a horizontal bar
    glyph[:, 14:16] = 255  # a vertical bar
    out, up = tilt_glyph(glyph, 0.1)
    assert out.shape == (23, 30) and up == 3
    out = out.astype(np.float32)

    def centre_row(col: int) -> float:
        ink = out[:, col].copy()
        ink[ink < 128] = 0
        return float((ink * np.arange(len(ink))).sum() / ink.sum())

    # The bar's left end stays on rows 9-10 (row 9.5 + up in the taller mask) ...
    assert abs(centre_row(1) - (9.5 + up - 0.1)) < 0.6
    # ... and its right end sits 0.1 px higher per px of width.
    assert abs((centre_row(1) - centre_row(28)) - 0.1 * 27) < 0.6
    bar = np.zeros((20, 30), np.uint8)
    bar[:, 14:16] = 255
    upright = tilt_glyph(bar, 0.1)[0] >= 128
    assert set(np.nonzero(upright.any(axis=0))[0]) == {14, 15}  # the column kept, upright
    assert upright[:, 14].sum() >= 19
    assert tilt_glyph(glyph, -0.1)[1] == 0  # a falling slope keeps the top

    # In the generator: slopes of 0 draw the same random numbers, so only the tilt differs.
    flat = _with_and_without("char_tilt", p_char_tilt=1.0, max_char_tilt=0.0)
    for (i, a, _), (_, b, _) in zip(
        _with_and_without("char_tilt", p_char_tilt=1.0), flat, strict=True
    ):
        assert a.size != b.size or not np.array_equal(np.asarray(a), np.asarray(b)), i
    with pytest.raises(ConfigError, match="max_char_tilt"):
        SynthConfig(max_char_tilt=0.8).validate()


def test_char_pinch_shrinks_the_inner_part_and_keeps_the_box() -> None:
    """p_char_pinch: a positive strength draws a glyph's middle smaller (a centred square
    comes out narrower and shorter) while its outer frame stays at the box edges; a
    negative one draws the middle larger; in the generator, the same text in a different
    image; a strength past monotone is refused."""
    from crnn.data.synth.layout import pinch_glyph

    glyph = np.zeros((41, 41), np.uint8)
    glyph[0, :] = glyph[-1, :] = glyph[:, 0] = glyph[:, -1] = 255  # the frame
    glyph[12:29, 12:29] = 255  # an inner square, 17 px

    def inner(mask: np.ndarray) -> tuple[int, int]:
        core = mask[5:-5, 5:-5] >= 128
        return int(core.any(axis=0).sum()), int(core.any(axis=1).sum())

    small = pinch_glyph(glyph, 0.3, 0.0, 0.3, 0.0)
    assert small.shape == glyph.shape
    w, h = inner(small)
    assert w <= 14 and h <= 14  # 17 / 1.3 = 13
    assert (small[:, 0] >= 128).sum() >= 39 and (small[0, :] >= 128).sum() >= 39  # frame kept
    assert min(inner(pinch_glyph(glyph, -0.15, 0.0, -0.15, 0.0))) >= 19  # 17 * 1.15
    wide_only = pinch_glyph(glyph, 0.3, 0.0, 0.0, 0.0)
    assert inner(wide_only)[0] <= 14 and inner(wide_only)[1] == 17  # each axis on its own
    # Off centre: around cx = 0.3 (right of centre) the square shrinks toward the right.
    shifted = pinch_glyph(glyph, 0.3, 0.3, 0.0, 0.0)[20] >= 128
    assert shifted[5:-5].sum() < 17
    assert np.array_equal(pinch_glyph(glyph, 0.0, 0.0, 0.0, 0.0), glyph)

    for i, a, b in _with_and_without("char_pinch", p_char_pinch=1.0):
        assert a.size != b.size or not np.array_equal(np.asarray(a), np.asarray(b)), i
    with pytest.raises(ConfigError, match="max_char_pinch"):
        SynthConfig(max_char_pinch=0.5).validate()


def test_nib_thickens_strokes_across_it_more_than_along_it() -> None:
    """p_nib: a broad pen held 10-40 degrees up to the right widens a vertical bar (across
    the nib) more than a horizontal one (along it), and both more than the plain mask
    does; in the generator, the same text in a different image."""
    bars = np.zeros((40, 60), np.uint8)
    bars[19:21, 5:55] = 255  # a horizontal bar, 2 px
    bars[5:35, 29:31] = 255  # a vertical bar, 2 px
    soft = Image.fromarray(bars).resize((120, 80), Image.BILINEAR).reduce(2)  # nib's resampling
    plain = np.asarray(soft, np.float32)
    across = along = 0.0
    for seed in range(8):
        out = np.asarray(fx.nib(random.Random(seed), Image.fromarray(bars), 40.0, 0.08), np.float32)
        v = out[10].sum() / 255  # the vertical bar's width
        h = out[:, 10].sum() / 255  # the horizontal bar's
        assert v >= h > plain[:, 10].sum() / 255 - 1e-3, (seed, v, h)
        across, along = across + v, along + h
    assert across > along + 8 * 0.25  # a quarter of a pixel wider on average, at least
    for i, a, b in _with_and_without("nib", p_nib=1.0):
        assert a.size != b.size or not np.array_equal(np.asarray(a), np.asarray(b)), i
    with pytest.raises(ConfigError, match="max_nib"):
        SynthConfig(max_nib=0.5).validate()


def test_elastic_strokes_bend_the_ink_a_little_and_keep_the_label() -> None:
    """p_elastic: a vertical bar comes out bent (its column of ink moves by different
    amounts along its length) but by no more than max_elastic of the text height, with
    about as much ink; both masks move alike; in the generator, the same text and an
    image that differs from the plain one."""
    bar = np.zeros((32, 40), np.uint8)
    bar[4:28, 19:21] = 255
    bent = 0
    for seed in range(20):
        a, b = fx.elastic(
            random.Random(seed), (Image.fromarray(bar), Image.fromarray(bar)), 24.0, 0.06
        )
        out = np.asarray(a, np.float32)
        assert np.array_equal(out, np.asarray(b, np.float32))
        assert abs(out.sum() - bar.sum()) < 0.25 * bar.sum(), seed
        rows = [r for r in range(6, 26) if out[r].sum() > 0]
        centres = [float((out[r] * np.arange(40)).sum() / out[r].sum()) for r in rows]
        assert max(abs(c - 19.5) for c in centres) <= 0.06 * 24 + 0.01, seed
        bent += max(centres) - min(centres) > 0.2
    assert bent >= 15

    for i, a, b in _with_and_without("elastic", p_elastic=1.0):
        if a.size == b.size:
            assert not np.array_equal(np.asarray(a), np.asarray(b)), i
    with pytest.raises(ConfigError, match="max_elastic"):
        SynthConfig(max_elastic=-0.1).validate()


def test_extrusion_sweeps_the_ink_one_way_and_keeps_the_label() -> None:
    """p_extrude: a dot becomes a short straight streak beside it (one direction, at most
    max_extrude of the height long, the dot's own pixel left to the face); in the
    generator, the same text, with more pixels off the background."""
    dot = np.zeros((40, 40), np.uint8)
    dot[20, 20] = 255
    for seed in range(20):
        side = np.asarray(fx.extrusion(random.Random(seed), Image.fromarray(dot), 6.0))
        ys, xs = np.nonzero(side)
        assert 2 <= len(ys) <= 7 and side[20, 20] == 0, (seed, list(zip(ys, xs)))
        assert np.hypot(ys - 20, xs - 20).max() <= 6.5
        # one side of the dot only: every pixel in the same half-plane
        vy, vx = ys.mean() - 20, xs.mean() - 20
        assert (((ys - 20) * vy + (xs - 20) * vx) > 0).all(), (seed, list(zip(ys, xs)))

    for i, a, b in _with_and_without("extrude", p_extrude=1.0):

        def paper(im):
            return (np.abs(np.asarray(im, np.int16) - int(np.median(np.asarray(im)))) > 20).sum()

        assert paper(a) > paper(b), i


def test_technical_lines_hold_what_chinese_technical_text_prints() -> None:
    """data.synth.p_tech: Chinese words among command options, hex, calls, file names,
    URLs, versions, operators, Latin units, empty paired quotes, ASCII and full-width
    punctuation side by side and spaces around Latin tokens (the printed set's errors:
    -a read as 一a, + as 十, 0x as OX, *** as 米冰冰, I/O as 1/0, ‘’ as …)."""
    import re

    charset = Charset.from_spec("zh5529")
    sampler = chinese_sampler(charset, p_tech=1.0)
    r = random.Random(0)
    texts = [sampler.sample(r) for _ in range(600)]
    assert all(1 <= len(t) <= 30 and not charset.unknown_chars(t) for t in texts)
    assert all(t == t.strip() and "  " not in t for t in texts)
    chinese = sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts)
    assert chinese > 500, "Chinese lines, not code alone"
    joined = "\n".join(texts)
    for pattern in (
        r"(^|[^-\w])-[a-zA-Z]\b",  # -a
        r"--[a-z]",  # --help
        r"0[xX][0-9A-Fa-f]",  # hex
        r"\w\(\w*\)",  # calls
        r"\w\.(py|txt|json|yaml|md|pdf|png|c|h|log|csv|exe|sh)\b",  # file names
        r"(www\.|https?://|@)\w",  # URLs and mail
        r"\bv?\d+\.\d+(\.\d+)?\b",  # versions
        r"\*\*\*",
        r"\+",
        r"\b[A-Z]/[A-Z]\b",  # I/O
        r"\d\s?(GHz|MHz|GB|MB|mm|mAh|V|W|Hz)\b",  # Latin units
        r"‘’|“”",  # empty paired quotes
        r"[，：；（][,:;(]|[,:;)][，：；）]",  # ASCII and full-width side by side
        r"[\u4e00-\u9fff] [A-Za-z0-9]",  # a space between Chinese and Latin
    ):
        assert re.search(pattern, joined), pattern
    # Off by default: the recipes that do not ask for it draw what they drew.
    assert SynthConfig().p_tech == 0.0
