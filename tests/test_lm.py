"""The character bigram prior (crnn.ctc.lm) and the beam search it steers: its scores
against the formula computed here by hand, the read it changes and the one it must not,
and where it is on by default (a model that writes Chinese) and how it is turned off."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import run_main

from crnn.ctc import decode, prefix_beam_search, sequence_log_probs
from crnn.ctc.lm import CLIP, LM_BEAM, LM_WEIGHT, CharBigram, read_counts
from crnn.reading import recognizer as inference
from crnn.serve.app import Limits, options
from crnn.text.alphabet import Charset

CS = Charset("时间问同最早平安题A")
COUNTS = [
    ("时间", 100.0),
    ("最早", 50.0),
    ("问题", 30.0),
    ("同时", 20.0),
    ("平安", 10.0),
    ("时", 40.0),
]


def _reference(a: str, b: str) -> float:
    return _reference_of(COUNTS, a, b)


def _reference_of(counts: list[tuple[str, float]], a: str, b: str) -> float:
    """The module doc's formula, from the counts, with dicts."""
    uni, start, end, pair = {}, {}, {}, {}
    for w, n in counts:
        for c in w:
            uni[c] = uni.get(c, 0) + n
        start[w[0]] = start.get(w[0], 0) + n
        end[w[-1]] = end.get(w[-1], 0) + n
        for x, y in zip(w, w[1:]):
            pair[x + y] = pair.get(x + y, 0) + n
    known = sorted(uni)
    s_tot = sum(start.get(c, 0) + 0.5 for c in known)
    p_start = {c: (start.get(c, 0) + 0.5) / s_tot for c in known}
    p = 0.99 * (pair.get(a + b, 0) + end.get(a, 0) * p_start[b]) / uni[a] + 0.01 * p_start[b]
    return max(-CLIP, min(CLIP, math.log(p) - math.log(uni[b] / sum(uni.values()))))


def _ids(text: str) -> list[int]:
    return CS.encode(text)


def test_scores_follow_the_formula_and_leave_unlisted_characters_alone():
    lm = CharBigram(COUNTS, CS)
    for a, b in ["时间", "时问", "最早", "最平", "间时", "题安"]:
        (i, j) = _ids(a + b)
        assert lm.bonus(i, j) == pytest.approx(_reference(a, b), abs=1e-9), a + b
    assert lm.bonus(*_ids("时间")) > 0.5 > 0 > lm.bonus(*_ids("时问"))
    # A character the list does not hold, and the start of a text, score nothing.
    assert lm.bonus(*_ids("AA")) == lm.bonus(*_ids("时A")) == lm.bonus(0, _ids("间")[0]) == 0
    assert lm.score(_ids("最早时间")) == pytest.approx(
        sum(_reference(a, b) for a, b in ["最早", "早时", "时间"]), abs=1e-9
    )
    # Arrays broadcast: one previous character against several next ones.
    row = lm.bonus(np.array([[_ids("时")[0]]]), np.array([_ids("间问A")]))
    assert row.shape == (1, 3) and row[0, 0] > 0 > row[0, 1] and row[0, 2] == 0


def _frames(*columns: dict[str, float]) -> np.ndarray:
    """Log-probabilities ``(1, T, K)``: each frame's probabilities by character ('' the
    blank), the rest shared out evenly."""
    k = len(CS) + 1
    out = np.empty((1, len(columns), k))
    for t, col in enumerate(columns):
        rest = (1 - sum(col.values())) / (k - len(col))
        p = np.full(k, rest)
        for c, v in col.items():
            p[0 if c == "" else CS.index(c)] = v
        out[0, t] = np.log(p)
    return out


def test_the_prior_turns_a_close_call_and_never_a_clear_one():
    lm = CharBigram(COUNTS, CS)
    swing = 0.8 * (lm.bonus(*_ids("时间")) - lm.bonus(*_ids("时问")))  # nats the prior can move
    close = _frames({"时": 0.98}, {"": 0.98}, {"问": 0.52, "间": 0.46}, {"": 0.98})
    (plain,) = prefix_beam_search(close, 8)
    (fused,) = prefix_beam_search(close, 8, lm=lm, lm_weight=0.8)
    assert CS.decode(plain[0][0]) == "时问" and CS.decode(fused[0][0]) == "时间"
    # The score given back is the image's alone, not the fused one.
    assert fused[0][1] == pytest.approx(sequence_log_probs(close[0], [fused[0][0]])[0], abs=1e-6)
    # Evidence stronger than the prior's swing keeps the image's read.
    odds = math.exp(swing) * 3
    clear = _frames(
        {"时": 0.98},
        {"": 0.98},
        {"问": 0.97 * odds / (odds + 1), "间": 0.97 / (odds + 1)},
        {"": 0.98},
    )
    (kept,) = prefix_beam_search(clear, 8, lm=lm, lm_weight=0.8)
    assert CS.decode(kept[0][0]) == "时问"
    # decode() passes it on; greedy decoding and a weight of 0 ignore it.
    assert decode(close, CS, beam_width=8, lm=lm, lm_weight=0.8)[0].text == "时间"
    assert decode(close, CS, beam_width=0, lm=lm, lm_weight=0.8)[0].text == "时问"
    assert decode(close, CS, beam_width=8, lm=lm, lm_weight=0.0)[0].text == "时问"


def test_a_word_count_file_that_is_not_one_says_which_line(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("时间\t100\n最早\t50\n\n问题\n", encoding="utf-8")
    assert read_counts(good) == [("时间", 100.0), ("最早", 50.0), ("问题", 1.0)]
    bad = tmp_path / "bad.txt"
    bad.write_text("时间\t100\n最早\tmany\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: .*expected 'word<TAB>count'"):
        read_counts(bad)
    spaced = tmp_path / "spaced.txt"
    spaced.write_text("时间 100\n", encoding="utf-8")  # a space where the TAB belongs
    with pytest.raises(ValueError, match=r"spaced.txt, line 1: .*expected 'word<TAB>count'"):
        read_counts(spaced)
    with pytest.raises(ValueError, match="no word that the charset"):
        CharBigram([("hello", 3.0)], Charset("时间"))
    single = CharBigram([("时", 3.0), ("间", 1.0)], CS)  # no pair: every score from the rows
    assert single.bonus(*_ids("时间")) == pytest.approx(
        _reference_of([("时", 3.0), ("间", 1.0)], "时", "间")
    )


@pytest.mark.skipif(not inference.bundled_models(".pt", "zh"), reason="no Chinese model bundled")
def test_the_chinese_model_decodes_with_the_prior_by_default_and_others_do_not(tmp_path, capsys):
    from crnn.cli import predict

    zh = inference.Recognizer.bundled("zh")
    assert zh.lm is not None and zh.lm.covered > 5000
    assert (zh.beam_width, zh.lm_weight) == (LM_BEAM, LM_WEIGHT)
    assert inference.Recognizer.bundled("zh", lm=False).beam_width == 0
    assert inference.Recognizer.bundled("zh", beam_width=0).beam_width == 0  # greedy: unused
    word = inference.Recognizer.bundled("word")
    assert word.lm is None and word.beam_width == 0
    # The server's form without a beam leaves the reader's own.
    assert options({}, Limits())[0] is None and options({"beam": "3"}, Limits())[0] == 3

    line = Path(__file__).resolve().parent.parent / "data" / "zh_lines" / "line_03.png"
    rc, out, err = run_main(predict.main, "--model", "zh", "-v", str(line), capsys=capsys)
    assert rc == 0 and out.split("\t")[1] == "请先阅读使用说明书。"
    assert "decoding: beam 8, language prior over 5406 characters, weight 0.8" in err
    rc, _, err = run_main(
        predict.main, "--model", "zh", "--lm", "none", "-v", str(line), capsys=capsys
    )
    assert rc == 0 and "language prior" not in err
    rc, _, err = run_main(
        predict.main, "--model", "zh", "--lm", str(tmp_path / "none.txt"), str(line), capsys=capsys
    )
    assert rc == 2 and "no such file; expected a word<TAB>count list or 'none'" in err


@pytest.mark.skipif(not inference.bundled_models(".pt", "zh"), reason="no Chinese model bundled")
def test_eval_decodes_as_predict_does(tmp_path, capsys, monkeypatch):
    """crnn-eval --batched takes predict's decoding: the Chinese model's prior and beam by
    default, none with --lm none; a bad word-count file is a usage error naming its line
    (crnn-eval without --batched reads through predict's own reader: test_one_reader.py)."""
    from crnn.cli import eval as eval_cli
    from crnn.reading import decoder

    seen = []
    real = decoder.decode

    def spy(logits, charset, lengths, **kw):
        seen.append((kw["beam_width"], kw["lexicon"], kw["max_edits"], kw["lm"], kw["lm_weight"]))
        return real(logits, charset, lengths, **kw)

    monkeypatch.setattr(decoder, "decode", spy)
    zh, lines = (
        inference.default_checkpoint(model="zh"),
        Path(__file__).resolve().parent.parent / "data" / "zh_lines",
    )
    rc, table, _ = run_main(eval_cli.main, zh, lines, "--batched", "--workers", "0", capsys=capsys)
    assert rc == 0 and "zh_lines" in table
    beam, _, _, lm, weight = seen[-1]
    assert (beam, weight) == (LM_BEAM, LM_WEIGHT) and lm is not None and lm.covered > 5000
    rc, _, _ = run_main(
        eval_cli.main, zh, lines, "--batched", "--workers", "0", "--lm", "none", capsys=capsys
    )
    assert rc == 0 and seen[-1][0] == 0 and seen[-1][3] is None
    bad = tmp_path / "counts.txt"
    bad.write_text("时间\tmany\n", encoding="utf-8")
    rc, _, err = run_main(eval_cli.main, zh, lines, "--workers", "0", "--lm", bad, capsys=capsys)
    assert rc == 2 and "counts.txt, line 1" in err
