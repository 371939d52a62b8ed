import pytest

from crnn.text.alphabet import BLANK, Charset, UnknownCharacterError


def test_blank_is_zero_and_ids_follow_order():
    cs = Charset("abc")
    assert BLANK == 0
    assert cs.num_classes == 4
    assert cs.encode("cab") == [3, 1, 2]
    assert cs.decode([3, 0, 1, 2]) == "cab"


def test_round_trip_builtin_charsets():
    for name in ("alnum36", "alnum62", "ascii94", "ascii95"):
        cs = Charset.from_spec(name)
        text = "".join(cs.chars)
        assert cs.decode(cs.encode(text)) == cs.normalize(text)
    assert len(Charset.from_spec("alnum36")) == 36
    assert " " in Charset.from_spec("ascii95")


def test_unknown_character_is_an_error_naming_it():
    cs = Charset.from_spec("alnum36")
    with pytest.raises(UnknownCharacterError) as e:
        cs.encode("a-b!")
    assert e.value.unknown == ["!", "-"]
    assert "'-'" in str(e.value) and "data.unknown_chars" in str(e.value)
    assert cs.unknown_chars("ok") == []


def test_case_folding_auto_and_explicit():
    assert Charset.from_spec("alnum36").case_fold is True
    assert Charset.from_spec("alnum62").case_fold is False
    assert Charset.from_spec("alnum36").encode("AbC") == Charset.from_spec("alnum36").encode("abc")
    with pytest.raises(UnknownCharacterError):
        Charset("abc", case_fold=False).encode("A")


def test_from_file_and_literal(tmp_path):
    f = tmp_path / "cs.txt"
    f.write_text("x\ny\n \nz\n", encoding="utf-8")
    cs = Charset.from_spec(str(f))
    assert cs.chars == "xy z"
    assert Charset.from_spec("chars:0123").encode("30") == [4, 1]
    bad = tmp_path / "bad.txt"
    bad.write_text("ab\n")
    with pytest.raises(ValueError, match="one character per line"):
        Charset.from_spec(str(bad))


def test_bad_specs_are_explained():
    with pytest.raises(ValueError, match="unknown charset 'alnum63'.*alnum36"):
        Charset.from_spec("alnum63")


def test_a_character_listed_twice_keeps_both_classes_with_a_warning(caplog):
    """Imported alphabets keep their shape (chineseocr's lists '|' twice): both classes
    read as the character, labels use the first, and the log says so once."""
    with caplog.at_level("WARNING"):
        cs = Charset("abca", name="dup")
        Charset("abca", name="dup")
    assert cs.num_classes == 5 and cs.encode("a") == [1] and cs.decode([1, 4]) == "aa"
    assert caplog.text.count("lists characters more than once: 'a' (classes 1, 4)") == 1


def test_dict_round_trip():
    cs = Charset.from_spec("alnum36")
    assert Charset.from_dict(cs.to_dict()) == cs


def test_a_charset_built_from_the_labels_skips_none_of_them(word_lmdb, tmp_path, capsys):
    from ckpt_helpers import run_main

    from crnn.cli import charset as charset_cli
    from crnn.config.image_spec import ImageSpec
    from crnn.data.datasets import RecognitionDataset, open_sources
    from crnn.model import CRNN

    out = tmp_path / "mine.txt"
    rc, _, err = run_main(
        charset_cli.main, word_lmdb, "-o", out, "--counts", tmp_path / "c.tsv", capsys=capsys
    )
    assert rc == 0 and "64 labels" in err
    cs = Charset.from_spec(str(out))
    labels = open_sources([word_lmdb])[0].labels()
    assert set(cs.chars) == set("".join(labels))
    ds = RecognitionDataset(
        open_sources([word_lmdb]), cs, ImageSpec(), CRNN(cs.num_classes).output_length
    )
    assert len(ds) == 64 and not ds.skipped  # zero unknown-character skips
    counts = dict(line.split("\t") for line in (tmp_path / "c.tsv").read_text().splitlines())
    assert sum(int(n) for n in counts.values()) == sum(len(t) for t in labels)
    # --min-count leaves out rare characters and names the labels training would skip.
    rare = min(counts, key=lambda c: int(counts[c]))
    rc, _, err = run_main(
        charset_cli.main,
        word_lmdb,
        "-o",
        tmp_path / "common.txt",
        "--min-count",
        str(int(counts[rare]) + 1),
        capsys=capsys,
    )
    assert (
        rc == 0
        and "left out" in err
        and rare not in Charset.from_spec(str(tmp_path / "common.txt")).chars
    )
    rc, _, err = run_main(charset_cli.main, word_lmdb, "-o", out, capsys=capsys)
    assert rc == 2 and "exists" in err


def test_build_charset_normalises_like_training():
    from crnn.text.alphabet import build_charset

    r = build_charset(["Cafe\u0301", "CAFÉ\t"], case_fold=True)  # decomposed e + accent
    assert r.chars == "acfé" and r.counts["é"] == 2 and "\t" not in r.counts
