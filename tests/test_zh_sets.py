"""The Chinese frozen test set (benchmarks/zh_sets.py): a pure function of the installed
fortunes-zh and a fixed seed, never cut inside a Latin word, and a clear message where
the package is missing."""

from __future__ import annotations

import pytest

from benchmarks import zh_sets


def test_a_missing_fortunes_package_is_named_with_its_install_command(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(zh_sets, "FORTUNES", tmp_path)
    with pytest.raises(FileNotFoundError, match="apt-get install fortunes-zh"):
        zh_sets.fortune_text()


def test_the_frozen_lines_are_the_same_every_time_and_cut_between_words() -> None:
    if not all((zh_sets.FORTUNES / f).is_file() for f in zh_sets.FORTUNE_FILES):
        pytest.skip("fortunes-zh is not installed (apt-get install fortunes-zh)")
    text = zh_sets.fortune_text()
    drawable = {c for lines in text.values() for line in lines for c in line}
    a, b = zh_sets.frozen_lines(60, drawable), zh_sets.frozen_lines(60, drawable)
    assert a == b and len(a) == 60 and len(set(a)) == 60
    assert zh_sets.frozen_digest(a) == zh_sets.frozen_digest(b)
    assert all(4 <= len(t) <= 24 and "\x1b" not in t and "作者" not in t for t in a)
    # A piece never starts or ends inside a Latin word or a number.
    for t in a:
        for line in (ln for lines in text.values() for ln in lines if t in ln):
            i = line.index(t)
            assert zh_sets._cuttable(line, i) or t[0] == " ", (t, line)
            break
