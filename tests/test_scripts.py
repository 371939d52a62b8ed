"""Other scripts: fonts from .ttc collections, synthetic text from a corpus in any
language, the built-in 5,530-class Chinese charset, and Chinese rendered with the CJK
font fixture (tests/fixtures/fonts/cjk, a 200-character subset of Droid Sans Fallback),
and Devanagari shaped through RAQM (tests/fixtures/fonts/devanagari, Lohit Devanagari)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from crnn.config import SynthConfig
from crnn.data.synth import SynthGenerator
from crnn.data.synth.fonts import FontError, find_font_files, load_fonts, split_face
from crnn.data.synth.text import Corpus, CorpusError
from crnn.text.alphabet import Charset

FIXTURES = Path(__file__).parent / "fixtures"
CJK_FONT = FIXTURES / "fonts" / "cjk" / "droid_sans_fallback_cjk200.ttf"
DEVANAGARI_FONT = FIXTURES / "fonts" / "devanagari" / "Lohit-Devanagari.ttf"
CJK_CHARS = (FIXTURES / "cjk200_chars.txt").read_text(encoding="utf-8").split()


@pytest.fixture(scope="module")
def cjk() -> Charset:
    return Charset("".join(CJK_CHARS))


def _cjk_cfg(corpus: Path, font_dir: Path = CJK_FONT.parent, **kw) -> SynthConfig:
    return SynthConfig(
        corpus=[str(corpus)],
        bundled_fonts=False,
        font_dirs=[str(font_dir)],
        p_word=0,
        p_number=0,
        p_date=0,
        p_price=0,
        p_code=0,
        p_random=0,
        p_line=0,
        **kw,
    )


def _corpus(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


# ---- fonts ------------------------------------------------------------------------------


def test_every_face_of_a_ttc_collection_is_a_font(tmp_path, cjk):
    from fontTools.ttLib import TTFont
    from fontTools.ttLib.ttCollection import TTCollection

    folder = tmp_path / "fonts"
    folder.mkdir()
    ttc = TTCollection()
    ttc.fonts = [TTFont(str(CJK_FONT)), TTFont(str(CJK_FONT))]
    ttc.save(str(folder / "pair.ttc"))
    (folder / "broken.ttc").write_bytes(b"not a collection")
    files = find_font_files([folder])
    assert [p.name for p in files] == ["pair.ttc#0", "pair.ttc#1"]  # broken one skipped
    assert split_face(files[1]) == (str(folder / "pair.ttc"), 1)
    fonts = load_fonts(files, CJK_CHARS)
    assert len(fonts) == 2 and all(f.chars == frozenset(CJK_CHARS) for f in fonts)
    assert fonts[1].name == "pair#1"
    gen = SynthGenerator(
        cjk, _cjk_cfg(_corpus(tmp_path, ["我们的国家"]), folder), seed=0, height=32
    )
    used = {gen.render_with_meta(i)[2].font for i in range(12)}
    assert used == {str(folder / "pair.ttc#0"), str(folder / "pair.ttc#1")}


def test_a_folder_of_broken_collections_says_what_it_found(tmp_path, cjk):
    (tmp_path / "broken.ttc").write_bytes(b"ttcf\x00\x01\x00\x00\x00\x00\x00\x01garbage")
    with pytest.raises(FontError, match="none of the 1 font files can draw"):
        SynthGenerator(cjk, _cjk_cfg(_corpus(tmp_path, ["我们"]), tmp_path), seed=0)


# ---- corpus -----------------------------------------------------------------------------


def test_corpus_pieces_hold_only_drawable_text_of_the_asked_lengths(tmp_path, cjk, caplog):
    corpus = _corpus(
        tmp_path, ["我们的国家是一个大国，人民生活在这里。", "他说：“这是中国的时代！”ABC 123", ""]
    )
    with caplog.at_level(logging.INFO):
        gen = SynthGenerator(cjk, _cjk_cfg(corpus, min_length=2, max_length=5), seed=3, height=32)
    assert "characters outside the charset or drawn by no font were cut out" in caplog.text
    assert "'，' x1" in caplog.text
    allowed = set(CJK_CHARS)
    texts = [gen.render(i)[1] for i in range(40)]
    assert all(set(t) <= allowed and 2 <= len(t) <= 5 for t in texts), texts
    # Pieces come from the corpus: every text is a stretch of one of its lines.
    lines = corpus.read_text(encoding="utf-8")
    assert all(t in lines for t in texts)
    again = SynthGenerator(cjk, _cjk_cfg(corpus, min_length=2, max_length=5), seed=3, height=32)
    assert [again.render(i)[1] for i in range(40)] == texts


def test_corpus_draws_long_lines_in_proportion_to_their_length():
    c = Corpus.__new__(Corpus)
    c.runs, c.ends = ["ab", "c" * 98], [2, 100]
    r = random.Random(0)
    picks = [c.sample(r, 1, 2) for _ in range(2000)]
    share = sum(p in ("a", "b", "ab") for p in picks) / len(picks)
    assert 0.005 < share < 0.05  # 2 % of the characters


def test_a_corpus_in_another_encoding_names_the_file_and_line(tmp_path, cjk):
    p = tmp_path / "gbk.txt"
    p.write_bytes("我们\n".encode() + "中国人民\n".encode("gb18030"))
    with pytest.raises(CorpusError, match=r"gbk.txt', line 2: not UTF-8.*iconv"):
        SynthGenerator(cjk, _cjk_cfg(p), seed=0)
    with pytest.raises(FileNotFoundError, match="corpus file .*missing.txt"):
        SynthGenerator(cjk, _cjk_cfg(tmp_path / "missing.txt"), seed=0)


def test_a_corpus_with_nothing_drawable_is_refused(tmp_path, cjk):
    with pytest.raises(CorpusError, match="no text of corpus"):
        SynthGenerator(cjk, _cjk_cfg(_corpus(tmp_path, ["hello world", "ÄÖÜ"])), seed=0)


# ---- the Chinese charset ----------------------------------------------------------------


def test_the_chinese_charset_has_the_5530_classes_of_a_real_line_recognizer():
    cs = Charset.from_spec("zh5529")
    assert cs.num_classes == 5530 and not cs.case_fold
    assert set("0123456789 ，。") <= set(cs.chars)
    assert all(c in cs.chars for c in CJK_CHARS)  # the fixture's characters are the commonest
    assert cs.decode(cs.encode("中国 2026年")) == "中国 2026年"


# ---- learning ---------------------------------------------------------------------------
# A model learning Chinese from the corpus source and the CJK font fixture is
# tests/test_wide_charset.py's (200 characters); a 10-character copy of it was removed
# (78 s of the suite for nothing the 200-character one does not show).


def test_scripts_that_glyph_by_glyph_drawing_gets_wrong_are_named():
    from crnn.data.synth.scripts import scripts_needing_shaping

    assert scripts_needing_shaping("abc中国ひら한") == {}
    assert scripts_needing_shaping("سلامשלוםनमस्तेไทย\u0301") == {
        "Arabic": 4,
        "Hebrew": 4,
        "Devanagari": 6,
        "Thai": 3,
        "combining marks": 1,
    }


# ---- shaping ----------------------------------------------------------------------------

HINDI = "नमस्ते दुनिया क्षमा किताब"


def _hindi_generator(tmp_path, caplog):
    chars = sorted(set(HINDI))
    cs = Charset("".join(chars))
    corpus = _corpus(tmp_path, [HINDI])
    cfg = _cjk_cfg(
        corpus,
        DEVANAGARI_FONT.parent,
        min_length=3,
        max_length=12,
        **{k: 0.0 for k in ("p_rotate", "p_perspective", "p_curve", "p_spacing", "p_stretch")},
    )
    with caplog.at_level(logging.WARNING):
        return SynthGenerator(cs, cfg, seed=0, height=32)


@pytest.mark.skipif(
    not __import__("crnn.data.synth.scripts", fromlist=["x"]).raqm_available(),
    reason="Pillow without RAQM",
)
def test_devanagari_is_drawn_shaped_through_raqm(tmp_path, caplog):
    """ "क्ष" is one conjunct glyph when shaped, three side by side glyph by glyph; "कि"
    puts its vowel sign before the consonant. The generator draws such texts whole."""
    from PIL import ImageFont

    from crnn.data.synth import render as render_module
    from crnn.data.synth.fonts import FontInfo, GlyphCache
    from crnn.data.synth.layout import compose, compose_shaped

    gen = _hindi_generator(tmp_path, caplog)
    assert "Devanagari" not in caplog.text  # drawn right, so no warning
    font = FontInfo(str(DEVANAGARI_FONT), frozenset(HINDI))
    cache = GlyphCache()
    shaped = compose_shaped(cache, font, 48, "क्षमा", 0.0).canvas
    loose = compose(cache, font, 48, "क्षमा", 0.0, 0.0).canvas
    reference = ImageFont.truetype(str(DEVANAGARI_FONT), 48, layout_engine=ImageFont.Layout.RAQM)
    assert abs(shaped.getbbox()[2] - shaped.getbbox()[0] - reference.getlength("क्षमा")) < 6
    assert loose.getbbox()[2] - loose.getbbox()[0] > shaped.getbbox()[2] - shaped.getbbox()[0] + 10
    calls = []
    real = render_module.compose_shaped
    render_module.compose_shaped = lambda *a: calls.append(a[3]) or real(*a)
    try:
        texts = [gen.render(i)[1] for i in range(10)]
    finally:
        render_module.compose_shaped = real
    assert calls == texts and all(t in HINDI for t in texts)


def test_without_raqm_the_generator_names_the_scripts_it_draws_wrong(tmp_path, caplog, monkeypatch):
    from crnn.data.synth import scripts

    monkeypatch.setattr(scripts, "raqm_available", lambda: False)
    gen = _hindi_generator(tmp_path, caplog)
    assert "cannot draw Devanagari" in caplog.text and "no RAQM layout" in caplog.text
    assert not gen._shaped


# ---- Chinese text from word frequencies ---------------------------------------------------


def test_the_bundled_chinese_word_list_covers_the_charset_and_draws_by_frequency():
    from crnn.data.synth.words import bundled_chinese_words, load_words

    zh = Charset.from_spec("zh5529")
    words = load_words(bundled_chinese_words(), frozenset(zh.chars), power=1.0)
    assert len(words) == 100_000
    han = {c for c in zh.chars if "\u4e00" <= c <= "\u9fff"}
    assert han <= {c for w in words.words for c in w}  # every character in some word
    r = random.Random(0)
    drawn = [words.draw(r) for _ in range(20_000)]
    top = set(words.words[:50])
    # By frequency: the 50 commonest of 100,000 words make up a large share of draws.
    assert sum(w in top for w in drawn) / len(drawn) > 0.15
    flat = load_words(bundled_chinese_words(), frozenset(zh.chars), power=0.0)
    r = random.Random(0)
    assert sum(flat.draw(r) in top for _ in range(20_000)) < 100  # power 0: uniform


def test_phrases_run_words_together_without_spaces_at_the_asked_lengths(tmp_path, cjk):
    cfg = _cjk_cfg(
        _corpus(tmp_path, ["我们的国家"]),
        word_list="chinese",
        p_corpus=0.0,
        p_phrase=1.0,
        min_length=4,
        max_length=10,
    )
    gen = SynthGenerator(cjk, cfg, seed=0, height=32)
    texts = [gen.text.sample(random.Random(i)) for i in range(200)]
    assert all(4 <= len(t) <= 10 and " " not in t for t in texts), texts[:10]
    assert all(set(t) <= set(CJK_CHARS) for t in texts)  # what the fixture font draws


def test_fonts_can_be_held_out_by_name(tmp_path, cjk):
    from crnn.data.synth.fonts import find_font_files

    kept = find_font_files([CJK_FONT.parent])
    assert kept
    cfg = _cjk_cfg(_corpus(tmp_path, ["我们的国家"]), exclude_fonts=["droid*"])
    with pytest.raises(FontError):
        SynthGenerator(cjk, cfg, seed=0, height=32)
