"""A character bigram prior for CTC beam search, built from a word-frequency list.

Chinese has no spaces for a word list to snap to (``crnn.ctc.lexicon`` is for words), but
which character follows which is very predictable: after 时, 间 (时间) is common and 问 or 同
rare. :class:`CharBigram` turns a ``word<TAB>count`` list (the bundled
``crnn/assets/words/chinese.txt``, jieba's word counts) into a score for each pair of
characters, and :func:`crnn.ctc.decode.prefix_beam_search` adds ``weight`` times it to
each extension of a prefix (shallow fusion): the beam keeps a slightly less probable read
when its characters go together far better.

The score is how much more probable ``b`` is after ``a`` than anywhere (pointwise mutual
information), so characters the list does not hold (Latin, digits, punctuation) score 0
and frequent characters gain nothing for being frequent::

    P(b | a) = 0.99 * (n(ab inside a word) + n(words ending in a) * P_start(b)) / n(a)
               + 0.01 * P_start(b)
    bonus(a, b) = clip(log P(b | a) - log P(b), -CLIP, CLIP)

``n`` counts characters and pairs over the list, each word weighted by its count; a word
boundary follows ``a`` as often as words end in it, and the next word starts with ``b`` as
often as words do (``P_start``, add-half smoothed). Pairs never seen inside a word score
``row(a) + col(b)``, so only seen pairs are stored (about 96,000 for the bundled list).

NumPy only: it serves the ONNX prediction path without PyTorch.
"""

from __future__ import annotations

import functools
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from crnn.text.alphabet import BLANK, Charset

# Bonuses are clipped to this many nats either way: one pair never outvotes the image.
CLIP = 8.0
# What a model that writes Chinese decodes with by default: a prefix beam of LM_BEAM and
# the bundled prior weighted LM_WEIGHT nats of the prior to one of the image's. Chosen on
# the development rows (docs/reading.md, "A language prior (Chinese)").
LM_BEAM = 8
LM_WEIGHT = 0.8
# The bundled list; a model whose charset holds fewer of its characters gets no prior.
BUNDLED = Path(__file__).resolve().parent.parent / "assets" / "words" / "chinese.txt"
MIN_COVERED = 1000


def read_counts(path: str | os.PathLike[str]) -> list[tuple[str, float]]:
    """``word<TAB>count`` lines (UTF-8); a line without a count counts 1."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        word, _, count = line.strip().partition("\t")
        if not word:
            continue
        try:
            if not count and re.search(r"\s[\d.]+$", word):  # "word 123": a space, not a TAB
                raise ValueError
            out.append((word, float(count) if count else 1.0))
        except ValueError:
            raise ValueError(
                f"{path}, line {n}: {line!r}: expected 'word<TAB>count' (a number), one word "
                "per line, e.g. '时间\t12345'"
            ) from None
    return out


class CharBigram:
    """Scores for pairs of a charset's ids from word counts (see the module's doc).

    Args:
        counts: ``(word, count)`` pairs; characters the charset lacks end a word there
            (the pairs across them are not counted).
        charset: the model's alphabet (ids 1..len; the blank, id 0, scores 0).
    """

    def __init__(self, counts: Iterable[tuple[str, float]], charset: Charset) -> None:
        k = len(charset) + 1
        chars: dict[int, float] = defaultdict(float)
        starts: dict[int, float] = defaultdict(float)
        ends: dict[int, float] = defaultdict(float)
        pairs: dict[int, float] = defaultdict(float)
        index = {c: charset.index(c) for c in set(charset.chars)}  # a twice-listed one: its first
        for word, n in counts:
            for piece in _pieces(charset.normalize(word), index):
                for a, b in zip(piece, piece[1:]):
                    pairs[a * k + b] += n
                for a in piece:
                    chars[a] += n
                starts[piece[0]] += n
                ends[piece[-1]] += n
        uni, start, end = (_dense(d, k) for d in (chars, starts, ends))
        known = uni > 0
        known[BLANK] = False
        self.covered = int(known.sum())
        if not self.covered:
            raise ValueError(
                f"the word list has no word that the charset {charset.name!r} can write: no "
                "language prior can be built from it"
            )
        p_uni = uni / uni.sum()
        p_start = np.where(known, start + 0.5, 0.0)
        p_start /= p_start.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            self.row = np.where(known, np.log(0.99 * end / np.maximum(uni, 1e-300) + 0.01), 0.0)
            self.col = np.where(known, np.log(p_start / p_uni), 0.0)
        keys = np.fromiter(pairs.keys(), dtype=np.int64, count=len(pairs))
        a, b = keys // k, keys % k
        n_ab = np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs))
        p = 0.99 * (n_ab + end[a] * p_start[b]) / uni[a] + 0.01 * p_start[b]
        order = np.argsort(keys)
        # No word of two characters: one key that no pair matches.
        self.keys = keys[order] if len(keys) else np.array([-1], np.int64)
        self.values = (
            np.clip(np.log(p) - np.log(p_uni[b]), -CLIP, CLIP)[order] if len(keys) else np.zeros(1)
        )
        self.known = known
        self.k = k

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], charset: Charset) -> CharBigram:
        return cls(read_counts(path), charset)

    def bonus(self, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """The score of ``nxt`` following ``prev`` (id arrays that broadcast; an id of 0,
        the blank, stands for "no previous character" and scores 0)."""
        prev, nxt = np.asarray(prev, np.int64), np.asarray(nxt, np.int64)
        q = prev * self.k + nxt  # broadcast
        at = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
        seen = self.keys[at] == q
        base = np.clip(self.row[prev] + self.col[nxt], -CLIP, CLIP)
        out = np.where(seen, self.values[at], base)
        return np.where(self.known[prev] & self.known[nxt], out, 0.0)

    def score(self, ids: Iterable[int]) -> float:
        """The summed bonus of a whole sequence of ids."""
        ids = list(ids)
        return (
            float(self.bonus(np.array(ids[:-1]), np.array(ids[1:])).sum()) if len(ids) > 1 else 0.0
        )


def _dense(counts: dict[int, float], k: int) -> np.ndarray:
    out = np.zeros(k)
    out[np.fromiter(counts.keys(), np.int64, len(counts))] = np.fromiter(
        counts.values(), np.float64, len(counts)
    )
    return out


def _pieces(word: str, index: dict[str, int]) -> list[list[int]]:
    """``word``'s runs of characters the charset holds, as ids."""
    out: list[list[int]] = [[]]
    for c in word:
        i = index.get(c)
        if i is None:
            if out[-1]:
                out.append([])
        else:
            out[-1].append(i)
    return [p for p in out if p]


@functools.lru_cache(maxsize=4)
def _bundled(charset: Charset) -> CharBigram | None:
    lm = CharBigram.from_file(BUNDLED, charset)
    return lm if lm.covered >= MIN_COVERED else None


def bundled_prior(charset: Charset) -> CharBigram | None:
    """The prior from the bundled Chinese word counts for a Chinese model
    (``charset.writes_chinese``), when its charset holds at least :data:`MIN_COVERED` of
    their characters (fewer and the prior knows too little of what it writes), else None.
    Built once per charset per process (about half a second)."""
    if not charset.writes_chinese:
        return None
    return _bundled(charset)


# The largest --lm-weight accepted: at 10 a nat of the prior outweighs ten of the image's
# evidence (the chosen 0.8 reads best; 1.2 already reads worse, docs/reading.md).
MAX_LM_WEIGHT = 10.0


def resolve_prior(
    lm: CharBigram | str | os.PathLike[str] | bool | None, weight: float | None, charset: Charset
) -> tuple[CharBigram | None, float]:
    """What ``Recognizer(lm=..., lm_weight=...)``, ``--lm`` and ``--lm-weight`` ask for:
    None or True, the bundled prior for a Chinese model (:func:`bundled_prior`); False or
    ``"none"``, no prior; a prior as is; a path, the prior built from that
    ``word<TAB>count`` file. A weight of None is :data:`LM_WEIGHT`; it is checked."""
    weight = LM_WEIGHT if weight is None else weight
    if not 0 <= weight <= MAX_LM_WEIGHT:  # NaN and inf fail too
        raise ValueError(
            f"lm_weight must be between 0 (the prior is not used) and {MAX_LM_WEIGHT:g} "
            f"(the default is {LM_WEIGHT:g}), got {weight!r}: a weight that outweighs the "
            "image reads the prior's favourite characters, or nothing"
        )
    if lm is None or lm is True:
        lm = bundled_prior(charset)
    elif lm is False or (isinstance(lm, str) and lm.lower() == "none"):
        lm = None
    elif not isinstance(lm, CharBigram):
        if not os.path.isfile(lm):
            raise FileNotFoundError(f"{lm}: no such file; expected a word<TAB>count list or 'none'")
        lm = CharBigram.from_file(lm, charset)
    return lm, float(weight)


def default_beam(beam: int | None, lm: CharBigram | None, weight: float) -> int:
    """The beam to decode with: ``beam`` as given, else :data:`LM_BEAM` where a prior is
    used, else 0 (greedy)."""
    if beam is not None:
        return beam
    return LM_BEAM if lm is not None and weight > 0 else 0
