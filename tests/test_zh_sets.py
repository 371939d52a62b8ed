"""The Chinese frozen test set (benchmarks/zh_sets.py): a pure function of the installed
fortunes-zh and a fixed seed, never cut inside a Latin word, and a clear message where
the package is missing."""

from __future__ import annotations

import json

import pytest

from benchmarks import zh_sets


def test_a_missing_fortunes_package_is_named_with_its_install_command(
    tmp_path, monkeypatch
) -> None:
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


def _dev_json(path, reads: dict[str, list[str]], labels: dict[str, list[str]], digest="d1"):  # noqa: ANN001, ANN202
    rows = [{"reader": "m", "row": row, "reads": r} for row, r in reads.items()]
    meta = {"set": "dev", "labels_digest": digest, "labels": labels}
    path.write_text(json.dumps({"meta": meta, "rows": rows}, ensure_ascii=False), encoding="utf-8")
    return path


def test_compare_reads_tells_a_real_gain_from_the_rows_noise(tmp_path, capsys) -> None:
    """benchmarks/compare_reads.py: a model that reads 60 of 200 lines better than another
    is called better, the sign naming the right one; one line's difference is "cannot
    tell"; files of different rows are refused with exit 2 and the reason."""
    from benchmarks import compare_reads

    labels = [f"第{i}行文字测试" for i in range(200)]
    worse = [t[:-1] + "误" if i % 10 < 3 else t for i, t in enumerate(labels)]  # 60 lines wrong
    one_off = [t[:-1] + "误" if i == 7 else t for i, t in enumerate(labels)]
    a = _dev_json(tmp_path / "a.json", {"dev-kai": labels}, {"dev-kai": labels})
    b = _dev_json(tmp_path / "b.json", {"dev-kai": worse}, {"dev-kai": labels})
    c = _dev_json(tmp_path / "c.json", {"dev-kai": one_off}, {"dev-kai": labels})
    assert compare_reads.main([str(a), str(b), "--resamples", "2000"]) == 0
    assert "A better" in capsys.readouterr().out
    assert compare_reads.main([str(b), str(a), "--resamples", "2000"]) == 0
    assert "B better" in capsys.readouterr().out
    assert compare_reads.main([str(a), str(c), "--resamples", "2000"]) == 0
    assert "cannot tell" in capsys.readouterr().out
    # The paired draw: the interval of a difference of 60 edits in 1,400+ characters is
    # narrow, and holds the point estimate.
    ea, chars = compare_reads.line_edits(labels, labels)
    eb, _ = compare_reads.line_edits(labels, worse)
    diff, low, high = compare_reads.paired_bootstrap(ea, eb, chars, 2000, 0)
    assert low <= diff <= high < 0 and abs(diff + 60 / chars.sum()) < 1e-12
    other = _dev_json(tmp_path / "o.json", {"dev-kai": labels}, {"dev-kai": labels}, digest="d2")
    assert compare_reads.main([str(a), str(other)]) == 2
    assert "same --seed and --count" in capsys.readouterr().err


def test_compare_reads_finds_the_web_lines_labels_beside_their_crops(
    tmp_path, monkeypatch, capsys
) -> None:
    """The web lines' labels are not in a run's JSON (they stay with the crops, which no
    user's clone has): compare_reads reads them from data/zh_web/dev/gt.txt, as it reads
    the photographs' from zh_real_dev."""
    from benchmarks import compare_reads

    labels = [f"第{i}行网页文字" for i in range(100)]
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "gt.txt").write_text(
        "".join(f"images/{i:04d}.png\t{t}\n" for i, t in enumerate(labels)), encoding="utf-8"
    )
    monkeypatch.setattr(compare_reads, "WEB_LINES", tmp_path)
    worse = [t[:-1] + "误" if i % 4 == 0 else t for i, t in enumerate(labels)]
    a = _dev_json(tmp_path / "a.json", {"dev-web": labels}, {})
    b = _dev_json(tmp_path / "b.json", {"dev-web": worse}, {})
    assert compare_reads.main([str(a), str(b), "--resamples", "2000"]) == 0
    out = capsys.readouterr().out
    assert "dev-web" in out and "A better" in out


def test_a_model_given_with_options_keeps_a_quoted_path_with_spaces_whole() -> None:
    assert zh_sets.model_spec("zh --view-sure 1") == ("zh", ["--view-sure", "1"])
    assert zh_sets.model_spec("'my runs/best.pt' --beam 4") == ("my runs/best.pt", ["--beam", "4"])
    with pytest.raises(ValueError, match="empty --model"):
        zh_sets.model_spec("  ")
