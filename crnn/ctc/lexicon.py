"""A word list for CTC decoding: membership and a fast shortlist of near words."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from rapidfuzz.distance import Levenshtein

from crnn.text.alphabet import Charset

_BUCKETS = 64


class Lexicon:
    """A word list that decoding may snap its output to.

    Words are normalised like labels (``Charset.normalize``: NFC, lower-cased for
    case-folding charsets). Words with characters the charset cannot write are left out
    and listed in ``skipped``.

    Decoding with a lexicon (see :func:`decode`) keeps the decoder's best text when it is
    a word of the lexicon; otherwise it takes the lexicon words within ``max_edits``
    character edits of that text and returns the one with the highest CTC probability
    given the image (rescoring, as in Shi et al.'s lexicon-based transcription). A text
    with no word that close is returned as read. Finding the close words filters by
    length and character counts (vectorised) before computing edit distances.
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
        # Per length: the words and their character histograms (ids folded into
        # _BUCKETS bins), for a vectorised lower bound on the edit distance.
        self._by_len = {n: (ws, self._histograms(ws)) for n, ws in by_len.items()}

    def _histograms(self, words: Sequence[str]) -> np.ndarray:
        """``(len(words), _BUCKETS)`` int16 character counts."""
        h = np.zeros((len(words), _BUCKETS), dtype=np.int16)
        for row, w in enumerate(words):
            for c in w:
                h[row, self.charset.index(c) % _BUCKETS] += 1
        return h

    @classmethod
    def from_file(cls, path: str | Path, charset: Charset) -> Lexicon:
        """One word per line, UTF-8; blank lines are ignored."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError):
            raise FileNotFoundError(
                f"lexicon {str(path)!r} not found (expected a file with one word per line)"
            ) from None
        return cls(text.splitlines(), charset)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.words

    def near(self, text: str, max_edits: int) -> list[str]:
        """Words within ``max_edits`` insertions, deletions or substitutions of ``text``,
        sorted. Words whose character counts already differ by more are skipped without
        computing their edit distance (each edit changes one count up and/or one down)."""
        q = np.zeros(_BUCKETS, dtype=np.int16)
        for c in text:
            if c in self.charset:
                q[self.charset.index(c) % _BUCKETS] += 1
        out = []
        n = len(text)
        for length in range(max(1, n - max_edits), n + max_edits + 1):
            if length not in self._by_len:
                continue
            words, hist = self._by_len[length]
            diff = hist - q
            bound = np.maximum(np.clip(diff, 0, None).sum(1), np.clip(-diff, 0, None).sum(1))
            for i in np.flatnonzero(bound <= max_edits).tolist():
                if Levenshtein.distance(text, words[i], score_cutoff=max_edits) <= max_edits:
                    out.append(words[i])
        return sorted(out)
