"""CTC decoding beyond greedy: prefix beam search, exact sequence scores, forced
alignment and lexicons. References are computed here by enumerating every alignment."""

import itertools
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from rapidfuzz.distance import Levenshtein

from crnn.ctc import (
    Lexicon,
    alignment_confidences,
    decode,
    greedy_decode,
    prefix_beam_search,
    sequence_log_probs,
)
from crnn.text.alphabet import Charset

CS = Charset("0123456789abcdefghijklmnopqrstuvwxyz")


def _collapse(path):
    out, prev = [], 0
    for c in path:
        if c and c != prev:
            out.append(c)
        prev = c
    return tuple(out)


def _label_probs(log_probs):
    """Every label's probability by summing all K^T alignments: ``(T, K)`` -> dict."""
    t, k = log_probs.shape
    probs = {}
    for path in itertools.product(range(k), repeat=t):
        p = math.exp(sum(log_probs[i, c].item() for i, c in enumerate(path)))
        key = _collapse(path)
        probs[key] = probs.get(key, 0.0) + p
    return probs


def _peaked(frames, hi=8.0, seed=0):
    """Logits ``(1, T, K)`` with one dominant class per frame (p > 0.9) on random noise."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, len(frames), len(CS) + 1, generator=g)
    for t, c in enumerate(frames):
        x[0, t, c] += hi
    return x


@pytest.mark.parametrize("seed", range(6))
def test_beam_search_with_a_wide_beam_is_exact(seed):
    g = torch.Generator().manual_seed(seed)
    t, k = 6, 3
    lp = (torch.randn(1, t, k, generator=g) * 2).log_softmax(-1)
    truth = _label_probs(lp[0])
    best = max(truth, key=truth.get)
    results = prefix_beam_search(lp, beam_width=len(truth))[0]
    assert results[0][0] == best
    # Every prefix's score is its probability summed over all its alignments...
    for ids, score in results:
        assert math.exp(score) == pytest.approx(truth[ids], rel=1e-6, abs=1e-12)
    assert sum(math.exp(s) for _, s in results) == pytest.approx(1.0, rel=1e-5)
    # ...which is what torch's CTC loss says too.
    assert sequence_log_probs(lp[0], [best])[0] == pytest.approx(math.log(truth[best]), abs=1e-5)


def _textbook_beam(lp, w):
    """Prefix beam search over every class, one prefix at a time (Hannun et al. 2014),
    in log space: the reference for the batched, class-pruned implementation."""
    beams = {(): (0.0, -math.inf)}  # prefix -> (log p ending in blank, in non-blank)
    for x in lp.tolist():
        nxt = {}

        def add(pre, b=-math.inf, nb=-math.inf, nxt=nxt):
            ob, onb = nxt.get(pre, (-math.inf, -math.inf))
            nxt[pre] = (np.logaddexp(ob, b), np.logaddexp(onb, nb))

        for pre, (pb, pnb) in beams.items():
            total = np.logaddexp(pb, pnb)
            add(pre, b=total + x[0])
            for c in range(1, len(x)):
                if pre and c == pre[-1]:
                    add(pre, nb=pnb + x[c])
                    add(pre + (c,), nb=pb + x[c])
                else:
                    add(pre + (c,), nb=total + x[c])
        best = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))[:w]
        beams = dict(best)
    return sorted(((pre, float(np.logaddexp(*v))) for pre, v in beams.items()), key=lambda r: -r[1])


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_over_a_wide_charset_equals_the_textbook_search(seed):
    """With 60 classes and beams of 1-4, only the w + 2 best classes of each frame are
    extended: the result must be that of extending every class."""
    rng = np.random.default_rng(seed)
    w = 1 + seed
    logits = rng.normal(0, 3, (3, 10, 60))
    logits[:, :, 0] += rng.normal(1, 1, (3, 10))  # blanks as common as in a real model
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    got = prefix_beam_search(lp, w)
    for i in range(3):
        want = _textbook_beam(lp[i], w)
        assert [pre for pre, _ in got[i]] == [pre for pre, _ in want]
        assert np.allclose([s for _, s in got[i]], [s for _, s in want])


def test_beam_finds_the_label_greedy_misses():
    # Two frames, p(blank) = 0.6 and p(a) = 0.4 each: the best path is blank-blank (0.36),
    # but "a" has aa + a_ + _a = 0.64.
    cs = Charset("ab")
    probs = torch.tensor([[[0.6, 0.4, 0.0], [0.6, 0.4, 0.0]]]).clamp_min(1e-12)
    logits = probs.log()
    assert greedy_decode(logits, cs)[0].text == ""
    assert decode(logits, cs, beam_width=1)[0].text == ""  # a one-prefix beam follows greedy
    (p,) = decode(logits, cs, beam_width=2)
    assert p.text == "a"
    assert p.confidence == pytest.approx(1 - 0.6**2, rel=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_beam_width_1_equals_greedy(seed):
    """On confident frames (a trained model's output) a one-prefix beam is greedy
    decoding: blanks, repeats merged across frames, repeats separated by blanks."""
    g = torch.Generator().manual_seed(seed)
    b, t = 16, 40
    ids = torch.randint(1, 8, (b, t), generator=g)  # few classes: many repeats
    ids[torch.rand(b, t, generator=g) < 0.4] = 0
    logits = torch.randn(b, t, len(CS) + 1, generator=g) * 0.5
    logits.scatter_add_(2, ids[..., None], torch.full((b, t, 1), 8.0))
    lengths = torch.randint(t // 2, t + 1, (b,), generator=g)
    greedy = greedy_decode(logits, CS, lengths)
    beam = decode(logits, CS, lengths, beam_width=1)
    assert [p.text for p in beam] == [p.text for p in greedy]
    assert any(len(p.text) > 5 for p in greedy)
    for pg, pb in zip(greedy, beam):
        # Along the best alignment, character confidences are greedy's.
        assert pb.char_confidences == pytest.approx(pg.char_confidences, rel=1e-5)


def test_beam_respects_per_sample_lengths():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 20, 6, generator=g) * 2
    lengths = torch.tensor([20, 13, 7, 1])
    cs = Charset("abcde")
    batched = prefix_beam_search(logits.log_softmax(-1), 5, lengths)
    for i, n in enumerate(lengths.tolist()):
        alone = prefix_beam_search(logits[i : i + 1, :n].log_softmax(-1), 5)[0]
        assert [ids for ids, _ in batched[i]] == [ids for ids, _ in alone]
        assert [s for _, s in batched[i]] == pytest.approx([s for _, s in alone], abs=1e-9)
    assert len({p.text for p in decode(logits, cs, lengths, beam_width=5)}) > 1


def test_sequence_log_probs_match_enumeration_and_reject_impossible_labels():
    g = torch.Generator().manual_seed(1)
    lp = torch.randn(4, 3, generator=g).log_softmax(-1)
    truth = _label_probs(lp)
    seqs = [(), (1,), (1, 2), (2, 2), (1, 2, 1)]
    got = sequence_log_probs(lp, seqs)
    for s, v in zip(seqs, got):
        assert v == pytest.approx(math.log(truth[s]), abs=1e-5)
    assert sequence_log_probs(lp, [(1, 1, 1)])[0] == float("-inf")  # needs 5 frames


def test_alignment_confidences_follow_the_best_path():
    x = _peaked([0, 11, 11, 0, 11, 0, 12, 12])  # "aab" (a run, a blank, a again, then b)
    probs = x[0].softmax(-1)
    conf = alignment_confidences(x[0].log_softmax(-1), CS.encode("aab"))
    assert conf == pytest.approx(
        (max(probs[1, 11], probs[2, 11]).item(), probs[4, 11].item(), max(probs[6:, 12]).item())
    )
    assert alignment_confidences(x[0].log_softmax(-1), CS.encode("aaaaaaa")) == (0.0,) * 7


def _house_logits():
    """Frames for "house" whose "u" frame leans to "e" (0.55 vs 0.40): greedy reads "hoese"."""
    frames = [("h", 0.97), (None, 0.97), ("o", 0.97), (None, 0.97), ("u?", 0.0), (None, 0.97)]
    frames += [("s", 0.97), (None, 0.97), ("e", 0.97), (None, 0.97)]
    k = len(CS) + 1
    probs = torch.full((len(frames), k), 1e-4)
    for t, (ch, p) in enumerate(frames):
        if ch == "u?":
            probs[t, CS.index("e")] = 0.55
            probs[t, CS.index("u")] = 0.40
        else:
            probs[t, 0 if ch is None else CS.index(ch)] = p
    probs /= probs.sum(-1, keepdim=True)
    return probs.log()[None]


@pytest.mark.parametrize("beam_width", [0, 5])
def test_lexicon_fixes_a_one_character_error(beam_width):
    logits = _house_logits()
    assert greedy_decode(logits, CS)[0].text == "hoese"
    words = ["house", "horse", "mouse", "hoes", "hose", "dog"]
    lex = Lexicon(words, CS)
    (p,) = decode(logits, CS, beam_width=beam_width, lexicon=lex)
    assert p.text == "house"
    # The pick is the lexicon word of highest CTC probability (torch's own CTC loss).
    lp = logits[0].log_softmax(-1)
    nll = [
        F.ctc_loss(
            lp[:, None], torch.tensor([CS.encode(w)]), [lp.shape[0]], [len(w)], reduction="sum"
        ).item()
        for w in words
    ]
    assert words[min(range(len(words)), key=nll.__getitem__)] == "house"
    assert p.confidence == pytest.approx(math.exp(-min(nll)), rel=1e-4)
    assert len(p.char_confidences) == 5


def test_lexicon_keeps_words_it_has_and_texts_far_from_every_word():
    logits = _house_logits()
    assert decode(logits, CS, lexicon=Lexicon(["hoese", "house"], CS))[0].text == "hoese"
    assert decode(logits, CS, lexicon=Lexicon(["cat", "dog"], CS))[0].text == "hoese"
    assert decode(logits, CS, lexicon=Lexicon(["hou"], CS), max_edits=2)[0].text == "hoese"
    assert decode(logits, CS, lexicon=Lexicon(["hou"], CS), max_edits=3)[0].text == "hou"


def test_lexicon_normalises_words_and_reports_unwritable_ones(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("House\n\nCAFÉ\nmouse\n", encoding="utf-8")
    lex = Lexicon.from_file(path, CS)  # alnum36 folds case
    assert lex.words == {"house", "mouse"} and lex.skipped == ["CAFÉ"]
    assert lex.near("hoese", 1) == ["house"] and lex.near("hoese", 2) == ["house", "mouse"]
    with pytest.raises(ValueError, match="no word the charset"):
        Lexicon(["ÉÉ"], CS)
    with pytest.raises(FileNotFoundError, match="one word per line"):
        Lexicon.from_file(tmp_path / "missing.txt", CS)


def test_lexicon_near_equals_brute_force_edit_distance():
    rng = random.Random(0)
    alphabet = "abcdeor"  # few letters: many near misses and histogram collisions
    words = {"".join(rng.choices(alphabet, k=rng.randint(1, 8))) for _ in range(3000)}
    lex = Lexicon(words, CS)
    for _ in range(40):
        text = "".join(rng.choices(alphabet, k=rng.randint(1, 8)))
        for d in (0, 1, 2, 3):
            want = sorted(w for w in lex.words if Levenshtein.distance(text, w) <= d)
            assert lex.near(text, d) == want, (text, d)


def test_frames_sure_to_be_blank_skip_the_search_and_change_no_read(monkeypatch):
    """Frames whose blank every sample is sure of (p >= 0.9999) only carry each prefix
    on; the reads and their scores are those of the full search."""
    import importlib

    decode_module = importlib.import_module("crnn.ctc.decode")
    g = torch.Generator().manual_seed(5)
    b, t = 3, 48
    ids = torch.randint(1, 6, (b, t), generator=g)
    ids[torch.rand(b, t, generator=g) < 0.8] = 0  # mostly blank, as trained models read
    logits = torch.randn(b, t, len(CS) + 1, generator=g)
    logits.scatter_add_(2, ids[..., None], torch.full((b, t, 1), 16.0))
    lp = logits.log_softmax(-1).numpy()
    sure = (lp[:, :, 0] >= decode_module.SURE_BLANK).all(axis=0)
    assert 5 < sure.sum() < t  # some frames are skipped, not all
    skipped = prefix_beam_search(lp, 5)
    monkeypatch.setattr(decode_module, "SURE_BLANK", 1.0)  # never sure: the full search
    full = prefix_beam_search(lp, 5)
    assert [r[0][0] for r in skipped] == [r[0][0] for r in full]
    assert [r[0][1] for r in skipped] == pytest.approx([r[0][1] for r in full], abs=1e-4)
    assert any(len(r[0][0]) > 3 for r in full)


def test_a_read_never_depends_on_the_other_samples_of_its_batch():
    """A frame one sample is sure is blank is skipped for that sample alone, whatever the
    batch: with a prior that rewards a character there (the same line read 依址 alone and
    依旧址 in a batch), the read alone and in a batch are the same."""

    class Pull:  # a prior that wants "b" after "a" (ids 1 -> 2) very much
        def bonus(self, prev, nxt):
            prev, nxt = np.broadcast_arrays(np.asarray(prev), np.asarray(nxt))
            return np.where((prev == 1) & (nxt == 2), 30.0, 0.0)

    def frames(*rows):
        p = np.asarray(rows, np.float64)
        return np.log(p / p.sum(1, keepdims=True))

    # classes: blank, a, b, c; frame 2 is blank to 0.99995, "b" holds the rest
    one = frames([0.01, 0.98, 0.005, 0.005], [0.99995, 0, 5e-5, 0], [0.01, 0.005, 0, 0.985])
    one = np.where(np.isfinite(one), one, -40.0)
    other = frames([0.5, 0.2, 0.2, 0.1], [0.5, 0.2, 0.2, 0.1], [0.5, 0.2, 0.2, 0.1])
    alone = prefix_beam_search(one[None], 4, lm=Pull(), lm_weight=1.0)[0][0][0]
    batched = prefix_beam_search(np.stack([one, other]), 4, lm=Pull(), lm_weight=1.0)[0][0][0]
    assert alone == (1, 3)  # "ac": the sure-blank frame adds nothing
    assert batched == alone


def test_beam_search_holds_a_few_copies_of_the_logits_not_seven():
    """Beam decoding over a Chinese model's 5,531 classes held about 7 times the logits
    (float64 copies of the whole batch and a full argpartition): some 3 GB for 64 page
    lines. Frames are now cast one at a time and their best classes picked a few frames
    at once."""
    import tracemalloc

    from crnn.text.alphabet import Charset

    cs = Charset("".join(chr(0x4E00 + i) for i in range(5530)))
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(16, 60, cs.num_classes)).astype(np.float32)
    logits[..., 0] += 4
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        decode(logits, cs, None, beam_width=8)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 3 * logits.nbytes, peak / logits.nbytes


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 70, 11), (1, 200, 5531)])
def test_log_softmax_np_in_blocks_of_rows_equals_the_whole(shape) -> None:
    """log_softmax_np normalises the frames in blocks of rows (to stay in the cache):
    every row over all its classes, whatever the shape, in the input's float dtype."""
    from crnn.ctc.decode import log_softmax_np

    x = np.random.default_rng(0).normal(0, 5, shape).astype(np.float32)
    got = log_softmax_np(x)
    ref = x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum(-1, keepdims=True))
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, ref, atol=2e-5)
    np.testing.assert_allclose(log_softmax_np(x.astype(np.float64)), ref, atol=1e-12)
