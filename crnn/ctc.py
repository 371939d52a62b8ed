"""CTC: the loss from batch-first logits, and decoding.

The model returns ``(B, T, K)``; this module is the only place that transposes to
the ``(T, B, K)`` layout ``torch.nn.functional.ctc_loss`` wants, so nothing wrapped
by DataParallel/DDP ever sees a time-first tensor.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import editdistance
import numpy as np
import torch
import torch.nn.functional as F

from crnn.charset import BLANK, Charset


def ctc_loss_per_sample(
    logits: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """Negative log-likelihood of each label, ``(B,)``, in float32.

    Args:
        logits: ``(B, T, K)`` raw scores, any float dtype (computed in fp32 here:
            CTC's forward-backward sums underflow in half precision).
        targets: ``(B, S)`` class ids padded with anything past each target length.
        input_lengths: ``(B,)`` valid time steps per sample (from its unpadded width).
        target_lengths: ``(B,)`` label lengths.

    Impossible alignments (label too long for the input) give 0 rather than ``inf``
    (``zero_infinity``) so one bad sample cannot poison a batch; the data pipeline
    filters or widens such samples beforehand, so this is a safety net.
    """
    log_probs = logits.float().log_softmax(dim=-1).transpose(0, 1)  # (T, B, K)
    return F.ctc_loss(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        blank=BLANK,
        reduction="none",
        zero_infinity=True,
    )


def ctc_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """Mean over the batch of :func:`ctc_loss_per_sample` (a scalar)."""
    return ctc_loss_per_sample(logits, targets, input_lengths, target_lengths).mean()


@dataclass(frozen=True)
class Prediction:
    """A decoded text line.

    ``confidence`` depends on the decoder. Greedy: the product of the character
    confidences (the probability of the best path's characters); for an empty
    prediction, the least confident frame's blank probability. Beam search and lexicon:
    the probability of the text summed over all its CTC alignments.
    ``char_confidences[i]`` is the highest probability of character ``i`` over the frames
    that emitted it (for beam/lexicon output, along the text's most likely alignment).

    Unpacks as ``text, confidence = prediction``.
    """

    text: str
    confidence: float
    char_confidences: tuple[float, ...] = ()

    def __iter__(self) -> Iterator[str | float]:
        return iter((self.text, self.confidence))


def greedy_decode(
    logits: torch.Tensor,
    charset: Charset,
    lengths: torch.Tensor | None = None,
) -> list[Prediction]:
    """Best-path decoding: arg-max per frame, merge repeats, drop blanks.

    Args:
        logits: ``(B, T, K)``.
        lengths: ``(B,)`` valid frames per sample; frames beyond are ignored.
    """
    probs = logits.detach().float().softmax(dim=-1)
    best_p, best = probs.max(dim=-1)  # (B, T)
    best_p, best = best_p.cpu().tolist(), best.cpu().tolist()
    lens = lengths.cpu().tolist() if lengths is not None else [len(b) for b in best]
    out = []
    for ids, ps, n in zip(best, best_p, lens):
        chars: list[int] = []
        confs: list[float] = []
        prev = BLANK
        for c, p in zip(ids[:n], ps[:n]):
            if c != BLANK:
                if c != prev:
                    chars.append(c)
                    confs.append(p)
                elif p > confs[-1]:
                    confs[-1] = p
            prev = c
        if confs:
            conf = 1.0
            for p in confs:
                conf *= p
        else:
            conf = min(ps[:n]) if n else 0.0
        out.append(Prediction(charset.decode(chars), conf, tuple(confs)))
    return out


# ---- beam search ---------------------------------------------------------------------

_NEG_INF = float("-inf")


def prefix_beam_search(
    log_probs: torch.Tensor,
    beam_width: int,
    lengths: torch.Tensor | None = None,
) -> list[list[tuple[tuple[int, ...], float]]]:
    """CTC prefix beam search in log space, for a whole batch at once.

    Each prefix (a label sequence, blanks removed and repeats merged) carries two
    log-probabilities, of the alignments so far that end in a blank and of those that
    end in its last character; a prefix's score is the log of their sum, i.e. the
    probability of the label summed over all its alignments, not one path's. Per frame
    the ``beam_width`` best prefixes are kept among the old ones and all their
    one-character extensions, computed as ``(B, W, K)`` arrays; only the bookkeeping of
    which prefix is which runs in Python (``O(B * W)`` per frame).

    With ``beam_width`` >= the number of prefixes that ever have non-zero probability the
    search is exact. With ``beam_width == 1`` it equals greedy decoding whenever every
    frame's best class has a probability above ~0.71 (a trained model's usual output);
    on flat distributions it may differ, because it sums alignments where greedy
    follows one path.

    Args:
        log_probs: ``(B, T, K)`` log-probabilities (``log_softmax`` over ``K``), blank = 0.
        beam_width: prefixes kept per frame (>= 1).
        lengths: ``(B,)`` valid frames per sample; frames past it are ignored.

    Returns:
        Per sample, up to ``beam_width`` ``(ids, log_prob)`` pairs, most probable first.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    lp = log_probs.detach().double().cpu().numpy().copy()
    b, t_max, k = lp.shape
    if lengths is not None:
        # Frames past a sample's length become "certainly blank": that leaves every
        # prefix's total probability (and so the ranking) unchanged.
        lens = lengths.detach().cpu().numpy()
        pad = np.arange(t_max)[None, :] >= lens[:, None]
        lp[pad] = _NEG_INF
        lp[pad, BLANK] = 0.0
        t_max = min(t_max, int(lens.max(initial=0)))
    w = beam_width
    p_b = np.full((b, w), _NEG_INF)
    p_nb = np.full((b, w), _NEG_INF)
    p_b[:, 0] = 0.0
    last = np.zeros((b, w), dtype=np.int64)  # last id of each prefix (0: empty or dead)
    parent = np.full((b, w), -1, dtype=np.int64)  # beam holding prefix[:-1], if any
    prefixes: list[list[tuple[int, ...] | None]] = [[()] + [None] * (w - 1) for _ in range(b)]
    rows = np.arange(b)[:, None]
    cols = np.arange(w)[None, :]
    for t in range(t_max):
        x = lp[:, t, :]  # (B, K)
        total = np.logaddexp(p_b, p_nb)
        x_last = np.take_along_axis(x, last, axis=1)
        has_last = last > 0
        stay_b = total + x[:, BLANK : BLANK + 1]
        stay_nb = np.where(has_last, p_nb + x_last, _NEG_INF)
        ext = total[:, :, None] + x[:, None, :]  # (B, W, K)
        ext[:, :, BLANK] = _NEG_INF
        # Repeating the last character extends the prefix only across a blank.
        ext[rows, cols, last] = np.where(has_last, p_b + x_last, _NEG_INF)
        # An extension equal to a prefix already in the beam merges into it.
        bi, wi = np.nonzero(parent >= 0)
        if len(bi):
            pi, ci = parent[bi, wi], last[bi, wi]
            stay_nb[bi, wi] = np.logaddexp(stay_nb[bi, wi], ext[bi, pi, ci])
            ext[bi, pi, ci] = _NEG_INF
        cand = np.concatenate([np.logaddexp(stay_b, stay_nb), ext.reshape(b, w * k)], axis=1)
        top = np.argpartition(-cand, w - 1, axis=1)[:, :w]  # the w best, in no order
        alive = np.isfinite(np.take_along_axis(cand, top, axis=1))  # fewer may be possible
        is_stay = top < w
        src = np.where(is_stay, top, (top - w) // k)  # the old beam each one comes from
        char = np.where(is_stay, 0, (top - w) % k)
        ext_score = np.take_along_axis(ext.reshape(b, w * k), np.maximum(top - w, 0), axis=1)
        new_b = np.where(alive & is_stay, np.take_along_axis(stay_b, src, axis=1), _NEG_INF)
        new_nb = np.where(
            alive,
            np.where(is_stay, np.take_along_axis(stay_nb, src, axis=1), ext_score),
            _NEG_INF,
        )
        new_last = np.where(
            alive, np.where(is_stay, np.take_along_axis(last, src, axis=1), char), 0
        )
        new_parent = np.full((b, w), -1, dtype=np.int64)
        for i, (a_i, s_i, src_i, c_i) in enumerate(
            zip(alive.tolist(), is_stay.tolist(), src.tolist(), char.tolist())
        ):
            old = prefixes[i]
            new: list[tuple[int, ...] | None] = [
                (old[o] if st else old[o] + (c,)) if a else None  # type: ignore[operator]
                for a, st, o, c in zip(a_i, s_i, src_i, c_i)
            ]
            index = {pre: j for j, pre in enumerate(new) if pre is not None}
            for j, pre in enumerate(new):
                if pre:
                    new_parent[i, j] = index.get(pre[:-1], -1)
            prefixes[i] = new
        p_b, p_nb, last, parent = new_b, new_nb, new_last, new_parent
    total = np.logaddexp(p_b, p_nb)
    out = []
    for i in range(b):
        live = [
            (prefixes[i][j], float(total[i, j])) for j in range(w) if prefixes[i][j] is not None
        ]
        live.sort(key=lambda r: -r[1])
        out.append(live)  # type: ignore[arg-type]
    return out


def sequence_log_probs(log_probs: torch.Tensor, sequences: Sequence[Sequence[int]]) -> list[float]:
    """Exact CTC log-probability of each label sequence under one sample's frames.

    Args:
        log_probs: ``(T, K)`` log-probabilities of one sample (valid frames only).
        sequences: label id sequences (no blanks); may be empty.

    Returns:
        ``log p(sequence | frames)`` per sequence, ``-inf`` when it cannot fit in ``T``.
    """
    if not sequences:
        return []
    n, t = len(sequences), log_probs.shape[0]
    lp = log_probs.detach().float().cpu()[:, None, :].expand(t, n, log_probs.shape[1])
    flat = [c for seq in sequences for c in seq]
    loss = F.ctc_loss(
        lp,
        torch.tensor(flat, dtype=torch.long),
        torch.full((n,), t, dtype=torch.long),
        torch.tensor([len(s) for s in sequences], dtype=torch.long),
        blank=BLANK,
        reduction="none",
        zero_infinity=False,
    )
    return [-v for v in loss.tolist()]


def alignment_confidences(log_probs: torch.Tensor, ids: Sequence[int]) -> tuple[float, ...]:
    """Per-character confidences along the most likely alignment of a given text.

    Viterbi over the CTC topology (blank, c1, blank, c2, ..., blank); character ``i``'s
    confidence is its highest probability over the frames the alignment gives it.

    Args:
        log_probs: ``(T, K)`` log-probabilities of one sample (valid frames only).
        ids: the text's label ids.
    """
    n = len(ids)
    if n == 0:
        return ()
    lp = log_probs.detach().double().cpu().numpy()
    t_max = lp.shape[0]
    labels = np.zeros(2 * n + 1, dtype=np.int64)
    labels[1::2] = ids
    s = len(labels)
    # A character state may be entered from two states back unless it repeats that character.
    skip = np.zeros(s, dtype=bool)
    skip[3::2] = labels[3::2] != labels[1:-2:2]
    emit = lp[:, labels]  # (T, S)
    delta = np.full(s, _NEG_INF)
    delta[:2] = emit[0, :2]
    back = np.zeros((t_max, s), dtype=np.int8)
    for t in range(1, t_max):
        prev = np.full((3, s), _NEG_INF)
        prev[0] = delta
        prev[1, 1:] = delta[:-1]
        prev[2, 2:] = np.where(skip[2:], delta[:-2], _NEG_INF)
        back[t] = prev.argmax(axis=0)
        delta = prev.max(axis=0) + emit[t]
    end = s - 1 if s == 1 or delta[s - 1] >= delta[s - 2] else s - 2
    if not np.isfinite(delta[end]):
        return tuple(0.0 for _ in ids)  # the text cannot be aligned to so few frames
    best = [0.0] * n
    state = end
    for t in range(t_max - 1, -1, -1):
        if state % 2:
            i = state // 2
            best[i] = max(best[i], float(np.exp(emit[t, state])))
        state -= int(back[t, state])
    return tuple(best)


class Lexicon:
    """A word list that decoding may snap its output to.

    Words are normalised like labels (``Charset.normalize``: NFC, lower-cased for
    case-folding charsets). Words with characters the charset cannot write are left out
    and listed in ``skipped``.

    Decoding with a lexicon (see :func:`decode`) keeps the decoder's best text when it is
    a word of the lexicon; otherwise it takes the lexicon words within ``max_edits``
    character edits of that text and returns the one with the highest CTC probability
    given the image (rescoring, as in Shi et al.'s lexicon-based transcription). A text
    with no word that close is returned as read. The search is brute force over words of
    similar length: ~0.05 s per image for 50 000 words.
    """

    def __init__(self, words: Iterable[str], charset: Charset) -> None:
        self.charset = charset
        self.skipped: list[str] = []
        kept: set[str] = set()
        for word in words:
            w = charset.normalize(word.strip())
            if not w:
                continue
            if charset.unknown_chars(w):
                self.skipped.append(word)
            else:
                kept.add(w)
        if not kept:
            raise ValueError(
                f"the lexicon has no word the charset {charset.name!r} can write "
                f"({len(self.skipped)} words left out, e.g. {self.skipped[:3]}); use a charset "
                "that holds its characters or a word list in this alphabet"
            )
        self.words = frozenset(kept)
        by_len: dict[int, list[str]] = defaultdict(list)
        for w in sorted(kept):
            by_len[len(w)].append(w)
        self._by_len = dict(by_len)

    @classmethod
    def from_file(cls, path: str | Path, charset: Charset) -> Lexicon:
        """One word per line, UTF-8; blank lines are ignored."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"lexicon {str(path)!r} not found (expected one word per line)")
        return cls(path.read_text(encoding="utf-8").splitlines(), charset)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.words

    def near(self, text: str, max_edits: int) -> list[str]:
        """Words within ``max_edits`` insertions, deletions or substitutions of ``text``."""
        out = []
        n = len(text)
        for length in range(max(1, n - max_edits), n + max_edits + 1):
            for w in self._by_len.get(length, ()):
                if editdistance.eval(text, w) <= max_edits:
                    out.append(w)
        return out


def _best_path_ids(log_probs: torch.Tensor, lengths: list[int]) -> list[list[int]]:
    best = log_probs.argmax(dim=-1).tolist()
    out = []
    for ids, n in zip(best, lengths):
        seq, prev = [], BLANK
        for c in ids[:n]:
            if c != BLANK and c != prev:
                seq.append(c)
            prev = c
        out.append(seq)
    return out


def decode(
    logits: torch.Tensor,
    charset: Charset,
    lengths: torch.Tensor | None = None,
    beam_width: int = 0,
    lexicon: Lexicon | None = None,
    max_edits: int = 2,
) -> list[Prediction]:
    """Decode a batch: greedy (``beam_width=0``, the default), prefix beam search, and
    optionally a lexicon on top of either.

    Args:
        logits: ``(B, T, K)`` raw scores.
        lengths: ``(B,)`` valid frames per sample (default: all ``T``).
        beam_width: 0 for greedy decoding, else the beam of :func:`prefix_beam_search`.
        lexicon: snap each text to the most probable word within ``max_edits`` edits
            (see :class:`Lexicon`).
        max_edits: how far a lexicon word may be from the decoded text.
    """
    if beam_width <= 0 and lexicon is None:
        return greedy_decode(logits, charset, lengths)
    log_probs = logits.detach().float().log_softmax(dim=-1).cpu()
    b, t = log_probs.shape[:2]
    lens = lengths.cpu().tolist() if lengths is not None else [t] * b
    if beam_width > 0:
        beams = prefix_beam_search(log_probs, beam_width, lengths)
    else:
        beams = [[(tuple(ids), _NEG_INF)] for ids in _best_path_ids(log_probs, lens)]
    out = []
    for i in range(b):
        lp = log_probs[i, : lens[i]]
        ids, score = beams[i][0]
        if lexicon is not None:
            texts = [charset.decode(c) for c, _ in beams[i]]
            if texts[0] not in lexicon:
                shortlist = {x for x in texts if x in lexicon}
                shortlist.update(lexicon.near(texts[0], max_edits))
                if shortlist:
                    words = sorted(shortlist)
                    seqs = [charset.encode(w) for w in words]
                    scores = sequence_log_probs(lp, seqs)
                    j = max(range(len(words)), key=scores.__getitem__)
                    ids, score = tuple(seqs[j]), scores[j]
        if score == _NEG_INF:  # greedy candidate: score its text exactly
            score = sequence_log_probs(lp, [ids])[0]
        out.append(
            Prediction(charset.decode(ids), float(np.exp(score)), alignment_confidences(lp, ids))
        )
    return out
