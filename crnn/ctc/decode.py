"""CTC decoding: greedy, prefix beam search, and a lexicon on top of either.

Decoding takes logits as a PyTorch tensor or a NumPy array and runs in NumPy (greedy
decoding reduces a tensor on its own device first, so only ``(B, T)`` arg-maxes cross to
the host). Nothing here imports PyTorch: predicting with an ONNX model decodes without it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crnn.ctc.lexicon import Lexicon
from crnn.ctc.lm import CharBigram
from crnn.text.alphabet import BLANK, Charset

# A tensor or an array: decoding accepts either.
Array = Any


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "detach")


def _to_numpy(x: Array, dtype: Any = None) -> np.ndarray:
    """A host NumPy copy-or-view of a tensor or array (optionally cast)."""
    arr = x.detach().cpu().numpy() if _is_tensor(x) else np.asarray(x)
    return arr if dtype is None else arr.astype(dtype, copy=False)


# Rows (frames) of logits normalised at once by log_softmax_np: a block of 64 x 5,531
# classes stays in the cache through its passes (max, subtract, exp, sum, log). Over a
# batch of 16 lines of 250 frames of the Chinese model in float32 (random logits, 8 runs
# each, interleaved): whole 90-97 ms, in blocks of 64 or 256 rows 53-61 ms, the values
# the same (OpenCV's exp in the blocks: no faster, and off by 4e-6).
_SOFTMAX_ROWS = 64


def log_softmax_np(x: np.ndarray) -> np.ndarray:
    """``log_softmax`` over the last axis, in ``x``'s float dtype."""
    x = np.asarray(x)
    flat = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    out = np.empty(flat.shape, dtype=np.result_type(flat.dtype, np.float32))
    for i in range(0, len(flat), _SOFTMAX_ROWS):
        z = np.subtract(
            flat[i : i + _SOFTMAX_ROWS],
            flat[i : i + _SOFTMAX_ROWS].max(axis=-1, keepdims=True),
            out=out[i : i + _SOFTMAX_ROWS],
        )
        z -= np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return out.reshape(x.shape)


@dataclass(frozen=True)
class Prediction:
    """A decoded text line.

    ``confidence`` depends on the decoder. Greedy: the product of the character
    confidences (the probability of the best path's characters); for an empty
    prediction, the least confident frame's blank probability. Beam search and lexicon:
    the probability of the text summed over all its CTC alignments.
    ``char_confidences[i]`` is the highest probability of character ``i`` of ``text``
    over the frames that emitted it (for beam/lexicon output, along the text's most
    likely alignment); for a right-to-left charset, ``text`` is in logical order and
    the confidences follow it.

    Unpacks as ``text, confidence = prediction``.
    """

    text: str
    confidence: float
    char_confidences: tuple[float, ...] = ()
    # Degrees the image was turned (clockwise) to read it (``Recognizer(rotate="auto")``).
    rotation: int = 0
    # How many times its natural width the line was read (``Recognizer(stretch=...)``).
    stretch: float = 1.0
    # How many times zoomed in, its central rows only (``Recognizer(zoom=...)``).
    zoom: float = 1.0
    # The lean (degrees) of a crop read sheared upright (``Recognizer(deslant=...)``).
    lean: float = 0.0
    # For each character of ``text``, the first and last frame (of the model's output)
    # that emitted it: where the CTC alignment put it (see ``crnn.layout.char_boxes``).
    char_frames: tuple[tuple[int, int], ...] = ()
    # Each character's box ``[x0, y0, x1, y1]`` on the image read (``Recognizer`` fills
    # it in from ``char_frames``; empty where the image's geometry is not known).
    char_boxes: tuple[tuple[int, int, int, int], ...] = ()

    def __iter__(self) -> Iterator[str | float]:
        return iter((self.text, self.confidence))


def greedy_decode(
    logits: Array,
    charset: Charset,
    lengths: Array | None = None,
) -> list[Prediction]:
    """Best-path decoding: arg-max per frame, merge repeats, drop blanks.

    Args:
        logits: ``(B, T, K)`` tensor (reduced on its device) or NumPy array.
        lengths: ``(B,)`` valid frames per sample; frames beyond are ignored.
    """
    if _is_tensor(logits):
        probs = logits.detach().float().softmax(dim=-1)
        best_p_t, best_t = probs.max(dim=-1)  # (B, T)
        best_p, best = best_p_t.cpu().tolist(), best_t.cpu().tolist()
    else:
        x = np.asarray(logits, dtype=np.float32)
        best_np = x.argmax(axis=-1)
        # The arg-max's probability: exp(0) over the sum of exp(x - max).
        z = np.exp(x - np.take_along_axis(x, best_np[..., None], axis=-1))
        best_p, best = (1.0 / z.sum(axis=-1)).tolist(), best_np.tolist()
    lens = _to_numpy(lengths).tolist() if lengths is not None else [len(b) for b in best]
    out = []
    for ids, ps, n in zip(best, best_p, lens):
        chars: list[int] = []
        confs: list[float] = []
        frames: list[list[int]] = []
        prev = BLANK
        for t, (c, p) in enumerate(zip(ids[:n], ps[:n])):
            if c != BLANK:
                if c != prev:
                    chars.append(c)
                    confs.append(p)
                    frames.append([t, t])
                else:
                    frames[-1][1] = t
                    if p > confs[-1]:
                        confs[-1] = p
            prev = c
        if confs:
            conf = 1.0
            for p in confs:
                conf *= p
        else:
            conf = min(ps[:n]) if n else 0.0
        text, pos = charset.decode_aligned(chars)
        out.append(
            Prediction(
                text,
                conf,
                tuple(confs[k] for k in pos),
                char_frames=tuple((frames[k][0], frames[k][1]) for k in pos),
            )
        )
    return out


# ---- beam search ---------------------------------------------------------------------

_NEG_INF = float("-inf")
# A frame whose blank has at least this log-probability (0.9999) in a sample skips prefix
# beam search's extensions for that sample (see there). On 160 development lines of the
# bundled Chinese model (beam 8 with its language prior) every read was the same with and
# without the skip.
SURE_BLANK = math.log(0.9999)
# (sample, frame) pairs whose best classes are picked in one go (bounds that step's
# memory to this x K, whatever the batch and the line's length).
_PAIRS_AT_ONCE = 256


def _frame_at(
    xt: np.ndarray, pad_t: np.ndarray | None, certain: np.ndarray, r: Any, c: Any
) -> np.ndarray:
    """One frame's log-probabilities ``xt`` (B, K) at samples ``r``, classes ``c``, in
    float64: only these entries are cast, not the whole frame. Samples marked in
    ``pad_t`` (past their length) read as ``certain`` (surely blank)."""
    v = xt[r, c].astype(np.float64)
    return v if pad_t is None else np.where(pad_t[r], certain[c], v)


def prefix_beam_search(
    log_probs: Array,
    beam_width: int,
    lengths: Array | None = None,
    lm: CharBigram | None = None,
    lm_weight: float = 0.0,
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

    With a language prior ``lm`` (:class:`crnn.ctc.lm.CharBigram`), prefixes are ranked
    by their log-probability plus ``lm_weight`` times the prior's summed bonus for their
    characters (shallow fusion); the search is then no longer exact, as the extensions
    are still drawn from each frame's ``beam_width + 2`` best classes.

    Args:
        log_probs: ``(B, T, K)`` log-probabilities (``log_softmax`` over ``K``), blank = 0.
        beam_width: prefixes kept per frame (>= 1).
        lengths: ``(B,)`` valid frames per sample; frames past it are ignored.
        lm: a prior over which character follows which, or None.
        lm_weight: how many nats of image evidence one nat of the prior is worth.

    Returns:
        Per sample, up to ``beam_width`` ``(ids, log_prob)`` pairs, best first (by the
        fused score with a prior); ``log_prob`` is the image's alone, without the prior.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    # The log-probabilities stay as given (float32 from a model: no (B, T, K) float64
    # copy); each frame is cast as it is searched, and only its best classes are kept.
    lp = _to_numpy(log_probs)
    b, t_max, k = lp.shape
    # Frames past a sample's length become "certainly blank": that leaves every prefix's
    # total probability (and so the ranking) unchanged.
    lens = _to_numpy(lengths) if lengths is not None else np.full(b, t_max)
    t_max = min(t_max, int(lens.max(initial=0)))
    pad = np.arange(t_max)[None, :] >= lens[:, None]  # (B, T)
    certain = np.full(k, _NEG_INF)
    certain[BLANK] = 0.0
    w = beam_width
    p_b = np.full((b, w), _NEG_INF)
    p_nb = np.full((b, w), _NEG_INF)
    p_b[:, 0] = 0.0
    last = np.zeros((b, w), dtype=np.int64)  # last id of each prefix (0: empty or dead)
    parent = np.full((b, w), -1, dtype=np.int64)  # beam holding prefix[:-1], if any
    prior = np.zeros((b, w))  # lm_weight x each prefix's summed prior bonus
    fuse = lm is not None and lm_weight != 0
    prefixes: list[list[tuple[int, ...] | None]] = [[()] + [None] * (w - 1) for _ in range(b)]
    rows = np.arange(b)[:, None]
    # Only the classes that can enter the beam are extended: within one beam the
    # extension scores follow the frame's class scores, and the blank, the merged
    # extension and the weaker repeat of the last character are all that can drop out,
    # so each beam's w best extensions lie among the frame's w + 2 best non-blank
    # classes. Exact, and (B, W, w + 2) instead of (B, W, K) work: 5,531 classes.
    m = min(k - 1, w + 2)
    # Frames a sample is sure are blank (padding past its length is): no prefix gains a
    # character there worth keeping, so each of its prefixes only takes the frame (blank,
    # or its last character again) and the search over extensions is skipped, for that
    # sample alone: a read never depends on which others share its batch (with a prior,
    # an extension at such a frame could otherwise win in one batch and not in another).
    sure_bt = (lp[:, :t_max, BLANK] >= SURE_BLANK) | pad  # (B, T)
    sure = np.all(sure_bt, axis=0)
    if m < k - 1:  # the m best classes where a sample searches a frame: (B, T, M)
        # A sample that is sure of a frame only carries its prefixes on there (below), so
        # its classes there are never used: they are picked for the other pairs alone.
        open_b, open_t = np.nonzero(~sure_bt)
        best = np.zeros((b, t_max, m), dtype=np.int64)
        for c in range(0, len(open_b), _PAIRS_AT_ONCE):
            pb, pt = open_b[c : c + _PAIRS_AT_ONCE], open_t[c : c + _PAIRS_AT_ONCE]
            # The m largest, taken from the top end (no negated copy of the K classes).
            top_m = np.argpartition(lp[pb, pt, 1:], k - 1 - m, axis=1)[:, k - 1 - m :]
            best[pb, pt] = top_m + 1
    for t in range(t_max):
        # The frame (B, K) as given; only the entries used are cast (_frame_at).
        xt, pad_t = lp[:, t, :], (pad[:, t] if pad[:, t].any() else None)
        total = np.logaddexp(p_b, p_nb)
        x_blank = _frame_at(xt, pad_t, certain, rows, BLANK)  # (B, 1)
        x_last = _frame_at(xt, pad_t, certain, rows, last)  # (B, W)
        skip_nb = np.where(last > 0, p_nb + x_last, _NEG_INF)
        skip_b = total + x_blank
        if sure[t]:
            p_nb, p_b = skip_nb, skip_b
            continue
        held = np.flatnonzero(sure_bt[:, t])  # these samples only carry their prefixes on
        kept = (last[held], parent[held], prior[held], [prefixes[i] for i in held])
        cls = best[:, t] if m < k - 1 else np.broadcast_to(np.arange(1, k), (b, k - 1))
        xc = _frame_at(xt, pad_t, certain, rows, cls)  # (B, M)
        has_last = last > 0
        stay_b = skip_b
        stay_nb = np.where(has_last, p_nb + x_last, _NEG_INF)
        ext = total[:, :, None] + xc[:, None, :]  # (B, W, M)
        # Repeating the last character extends the prefix only across a blank.
        is_last = cls[:, None, :] == last[:, :, None]
        ext = np.where(is_last, (p_b + x_last)[:, :, None], ext)
        # An extension equal to a prefix already in the beam merges into it.
        bi, wi = np.nonzero(parent >= 0)
        if len(bi):
            pi, ci = parent[bi, wi], last[bi, wi]
            merged = np.where(ci == last[bi, pi], p_b[bi, pi], total[bi, pi]) + _frame_at(
                xt, pad_t, certain, bi, ci
            )
            stay_nb[bi, wi] = np.logaddexp(stay_nb[bi, wi], merged)
            # ...and leaves the candidates, where its class is among them.
            n, j = np.nonzero(cls[bi] == ci[:, None])
            ext[bi[n], pi[n], j] = _NEG_INF
        cand = np.concatenate([np.logaddexp(stay_b, stay_nb), ext.reshape(b, w * m)], axis=1)
        if fuse:
            gain = prior[:, :, None] + lm_weight * lm.bonus(last[:, :, None], cls[:, None, :])  # type: ignore[union-attr]
            ranked_prior = np.concatenate([prior, gain.reshape(b, w * m)], axis=1)
            ranked = cand + ranked_prior
        else:
            ranked = cand
        top = np.argpartition(-ranked, w - 1, axis=1)[:, :w]  # the w best, in no order
        alive = np.isfinite(cand[rows, top])  # fewer may be possible
        is_stay = top < w
        src = np.where(is_stay, top, (top - w) // m)  # the old beam each one comes from
        char = np.where(is_stay, 0, cls[rows, np.maximum(top - w, 0) % m])
        ext_score = ext.reshape(b, w * m)[rows, np.maximum(top - w, 0)]
        new_b = np.where(alive & is_stay, stay_b[rows, src], _NEG_INF)
        new_nb = np.where(
            alive,
            np.where(is_stay, stay_nb[rows, src], ext_score),
            _NEG_INF,
        )
        new_last = np.where(alive, np.where(is_stay, last[rows, src], char), 0)
        new_parent = np.full((b, w), -1, dtype=np.int64)
        # A sample whose beam kept every prefix where it was (each stays, in its own slot,
        # alive exactly where it was) has the same prefixes and parents: no bookkeeping.
        was_alive = np.isfinite(total)
        same = np.all(is_stay & (src == np.arange(w)) & (alive == was_alive), axis=1)
        new_parent[same] = parent[same]
        for i, (a_i, s_i, src_i, c_i) in enumerate(
            zip(alive.tolist(), is_stay.tolist(), src.tolist(), char.tolist())
        ):
            if same[i]:
                continue
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
        if fuse:
            prior = np.where(alive, ranked_prior[rows, top], 0.0)
        if len(held):
            new_b[held], new_nb[held] = skip_b[held], skip_nb[held]
            new_last[held], new_parent[held], prior[held] = kept[:3]
            for i, pre in zip(held, kept[3]):
                prefixes[i] = pre
        p_b, p_nb, last, parent = new_b, new_nb, new_last, new_parent
    total = np.logaddexp(p_b, p_nb)
    out = []
    for i in range(b):
        live = [
            (prefixes[i][j], float(total[i, j]), float(total[i, j] + prior[i, j]))
            for j in range(w)
            if prefixes[i][j] is not None
        ]
        live.sort(key=lambda r: -r[2])
        out.append([(pre, score) for pre, score, _ in live])  # type: ignore[misc]
    return out


def sequence_log_probs(log_probs: Array, sequences: Sequence[Sequence[int]]) -> list[float]:
    """Exact CTC log-probability of each label sequence under one sample's frames.

    The CTC forward algorithm in log space over the topology (blank, c1, blank, c2, ...,
    blank), vectorised over the sequences (NumPy, float64).

    Args:
        log_probs: ``(T, K)`` log-probabilities of one sample (valid frames only).
        sequences: label id sequences (no blanks); may be empty.

    Returns:
        ``log p(sequence | frames)`` per sequence, ``-inf`` when it cannot fit in ``T``.
    """
    if not sequences:
        return []
    lp = _to_numpy(log_probs)
    t_max = lp.shape[0]
    n = np.array([len(x) for x in sequences])
    if t_max == 0:
        return [0.0 if k == 0 else _NEG_INF for k in n.tolist()]
    b = len(sequences)
    s_max = 2 * int(n.max()) + 1
    labels = np.zeros((b, s_max), dtype=np.int64)
    for i, ids in enumerate(sequences):
        labels[i, 1 : 2 * len(ids) : 2] = ids
    n_states = 2 * n + 1
    valid = np.arange(s_max)[None, :] < n_states[:, None]
    skip = np.zeros((b, s_max), dtype=bool)
    skip[:, 3::2] = labels[:, 3::2] != labels[:, 1:-2:2]
    emit = lp[:, labels].astype(np.float64)  # (T, B, S): only these entries cast
    emit[:, ~valid] = _NEG_INF
    alpha = np.full((b, s_max), _NEG_INF)
    alpha[:, :2] = emit[0, :, :2]
    from_1 = np.full((b, s_max), _NEG_INF)
    from_2 = np.full((b, s_max), _NEG_INF)
    with np.errstate(invalid="ignore"):
        for t in range(1, t_max):
            from_1[:, 1:] = alpha[:, :-1]
            from_2[:, 2:] = np.where(skip[:, 2:], alpha[:, :-2], _NEG_INF)
            alpha = np.logaddexp(np.logaddexp(alpha, from_1), from_2) + emit[t]
    r = np.arange(b)
    last = n_states - 1
    end = np.where(
        n > 0, np.logaddexp(alpha[r, last], alpha[r, np.maximum(last - 1, 0)]), alpha[r, 0]
    )
    return [float(v) for v in end]


def alignment_confidences(log_probs: Array, ids: Sequence[int]) -> tuple[float, ...]:
    """Per-character confidences along the most likely alignment of a given text.

    Viterbi over the CTC topology (blank, c1, blank, c2, ..., blank); character ``i``'s
    confidence is its highest probability over the frames the alignment gives it. All
    zeros when the text cannot be aligned to so few frames.

    Args:
        log_probs: ``(T, K)`` log-probabilities of one sample (valid frames only).
        ids: the text's label ids.
    """
    lp = _to_numpy(log_probs, np.float64)[None]
    return _alignment(lp, [lp.shape[1]], [ids])[0][0]


def _alignment(
    lp: np.ndarray, lengths: Sequence[int], texts: Sequence[Sequence[int]]
) -> tuple[list[tuple[float, ...]], list[tuple[tuple[int, int], ...]]]:
    """:func:`alignment_confidences` for a batch, and each character's first and last
    frame on the best alignment (empty where the text cannot be aligned): ``lp``
    ``(B, T, K)``, one text per sample, frames past ``lengths[i]`` ignored. Vectorised
    over samples and states."""
    b, t_max, _ = lp.shape
    n = np.array([len(x) for x in texts])
    if b == 0 or n.max() == 0:
        return [() for _ in texts], [() for _ in texts]
    s_max = 2 * int(n.max()) + 1
    labels = np.zeros((b, s_max), dtype=np.int64)
    for i, ids in enumerate(texts):
        labels[i, 1 : 2 * len(ids) : 2] = ids
    n_states = 2 * n + 1
    valid = np.arange(s_max)[None, :] < n_states[:, None]
    # A character state may be entered from two states back unless it repeats that character.
    skip = np.zeros((b, s_max), dtype=bool)
    skip[:, 3::2] = labels[:, 3::2] != labels[:, 1:-2:2]
    rows = np.arange(b)[:, None]
    # (B, T, S), in float64 (lp may be float32: only these states are cast)
    emit = lp[rows[:, :, None], np.arange(t_max)[None, :, None], labels[:, None, :]]
    emit = emit.astype(np.float64)
    emit[~np.broadcast_to(valid[:, None, :], emit.shape)] = _NEG_INF
    lens = np.asarray(lengths)
    delta = np.full((b, s_max), _NEG_INF)
    delta[:, :2] = emit[:, 0, :2]
    back = np.zeros((b, t_max, s_max), dtype=np.int8)  # 0: stay, 1: from s-1, 2: from s-2
    prev = np.empty((3, b, s_max))
    for t in range(1, t_max):
        prev[0] = delta
        prev[1, :, 0] = _NEG_INF
        prev[1, :, 1:] = delta[:, :-1]
        prev[2, :, :2] = _NEG_INF
        prev[2, :, 2:] = np.where(skip[:, 2:], delta[:, :-2], _NEG_INF)
        active = (t < lens)[:, None]
        back[:, t] = np.where(active, prev.argmax(axis=0), 0)
        delta = np.where(active, prev.max(axis=0) + emit[:, t], delta)
    r = np.arange(b)
    last = np.maximum(n_states - 1, 1)
    end = np.where(delta[r, last] >= delta[r, last - 1], last, last - 1)
    aligned = np.isfinite(delta[r, end])
    best = np.zeros((b, s_max // 2))
    first = np.full((b, s_max // 2), t_max)
    last = np.full((b, s_max // 2), -1)
    state = end
    for t in range(t_max - 1, -1, -1):
        is_char = (state % 2 == 1) & (t < lens)
        ci = state // 2
        p = np.exp(emit[r, t, state])
        rc, cc = r[is_char], ci[is_char]
        best[rc, cc] = np.maximum(best[rc, cc], p[is_char])
        first[rc, cc] = np.minimum(first[rc, cc], t)
        last[rc, cc] = np.maximum(last[rc, cc], t)
        state = state - back[r, t, state]
    confs = [
        tuple(float(v) for v in best[i, : n[i]]) if aligned[i] else (0.0,) * int(n[i])
        for i in range(b)
    ]
    spans = [
        tuple((int(first[i, k]), int(last[i, k])) for k in range(n[i])) if aligned[i] else ()
        for i in range(b)
    ]
    return confs, spans


def _best_path_ids(log_probs: np.ndarray, lengths: list[int]) -> list[list[int]]:
    best = log_probs.argmax(axis=-1).tolist()
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
    logits: Array,
    charset: Charset,
    lengths: Array | None = None,
    beam_width: int = 0,
    lexicon: Lexicon | None = None,
    max_edits: int = 2,
    lm: CharBigram | None = None,
    lm_weight: float = 0.0,
    log_probs: np.ndarray | None = None,
) -> list[Prediction]:
    """Decode a batch: greedy (``beam_width=0``, the default), prefix beam search (with
    a language prior ``lm`` weighted ``lm_weight``: see :func:`prefix_beam_search`), and
    optionally a lexicon on top of either.

    Args:
        logits: ``(B, T, K)`` raw scores, a tensor or a NumPy array.
        lengths: ``(B,)`` valid frames per sample (default: all ``T``).
        beam_width: 0 for greedy decoding, else the beam of :func:`prefix_beam_search`.
        lexicon: snap each text to the most probable word within ``max_edits`` edits
            (see :class:`Lexicon`).
        max_edits: how far a lexicon word may be from the decoded text.
        lm, lm_weight: a language prior for the beam search (unused by greedy decoding).
        log_probs: ``log_softmax`` of ``logits`` (:func:`log_softmax_np`), where the
            caller has it already.
    """
    if beam_width <= 0 and lexicon is None:
        return greedy_decode(logits, charset, lengths)
    if log_probs is None:
        log_probs = (
            logits.detach().float().log_softmax(dim=-1).cpu().numpy()
            if _is_tensor(logits)
            else log_softmax_np(np.asarray(logits, dtype=np.float32))
        )
    b, t = log_probs.shape[:2]
    lens = _to_numpy(lengths).tolist() if lengths is not None else [t] * b
    if beam_width > 0:
        beams = prefix_beam_search(log_probs, beam_width, lengths, lm, lm_weight)
    else:
        beams = [[(tuple(ids), _NEG_INF)] for ids in _best_path_ids(log_probs, lens)]
    chosen: list[tuple[tuple[int, ...], float]] = []
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
        chosen.append((ids, score))
    confs, spans = _alignment(log_probs, lens, [ids for ids, _ in chosen])
    out = []
    for (ids, score), conf, span, n in zip(chosen, confs, spans, lens):
        text, pos = charset.decode_aligned(ids)
        # No frame, no evidence: confidence 0, as greedy decoding says (not exp(0) = 1).
        out.append(
            Prediction(
                text,
                float(np.exp(score)) if n > 0 else 0.0,
                tuple(conf[k] for k in pos),
                char_frames=tuple(span[k] for k in pos) if span else (),
            )
        )
    return out
