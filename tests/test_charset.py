import pytest

from crnn.charset import BLANK, Charset, UnknownCharacterError


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
    with pytest.raises(ValueError, match="twice"):
        Charset("abca")


def test_dict_round_trip():
    cs = Charset.from_spec("alnum36")
    assert Charset.from_dict(cs.to_dict()) == cs
