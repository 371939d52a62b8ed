"""The raw material of synthetic texts: word lists (plain, or with frequencies to draw
by) and corpora in any language, loaded once per process.

Bundled: ``english.txt`` (SCOWL via Debian's wamerican) and ``chinese.txt`` (100,000
words of jieba's dictionary with their frequencies); see ``crnn/assets/words``.
"""

from __future__ import annotations

import bisect
import os
import random
import unicodedata
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path


def bundled_word_list() -> Path:
    """The English word list that ships inside the package (SCOWL via Debian wamerican)."""
    return Path(str(resources.files("crnn") / "assets" / "words" / "english.txt"))


def bundled_chinese_words() -> Path:
    """The Chinese word list with frequencies that ships inside the package (jieba)."""
    return Path(str(resources.files("crnn") / "assets" / "words" / "chinese.txt"))


# Names of the bundled word lists (data.synth.word_list).
BUNDLED_WORD_LISTS = {
    "": bundled_word_list,
    "english": bundled_word_list,
    "chinese": bundled_chinese_words,
}


class WordList:
    """Words to draw and, when the file gives them, their weights (frequencies).

    A line is ``word`` or ``word<TAB>count``; with counts, words are drawn with
    probability proportional to ``count ** power`` (0.5 flattens a frequency list so
    rare words, and the rare characters only they hold, still come up)."""

    def __init__(self, words: list[str], weights: list[float] | None, power: float) -> None:
        self.words = words
        self.cum: list[float] | None = None
        if weights is not None and words:
            acc, cum = 0.0, []
            for w in weights:
                acc += max(w, 0.0) ** power
                cum.append(acc)
            self.cum = cum

    def __len__(self) -> int:
        return len(self.words)

    def __bool__(self) -> bool:
        return bool(self.words)

    def draw(self, r: random.Random) -> str:
        if self.cum is None:
            return self.words[r.randrange(len(self.words))]
        k = bisect.bisect_right(self.cum, r.random() * self.cum[-1])
        return self.words[min(k, len(self.words) - 1)]


# (path, allowed characters, power) -> word list; one copy per process.
_WORDS_CACHE: dict[tuple[str, frozenset[str], float], WordList] = {}


def load_words(
    path: str | os.PathLike[str], allowed: frozenset[str], power: float = 0.5
) -> WordList:
    """Words of ``path`` (one per line, UTF-8, optionally ``word<TAB>count``) whose
    characters are all in ``allowed``.

    The file order is kept, so every process draws the same word for the same number.

    Raises:
        FileNotFoundError: with a message saying what was expected.
    """
    key = (str(path), allowed, power)
    words = _WORDS_CACHE.get(key)
    if words is None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(
                f"word list {str(path)!r} not found: expected a UTF-8 text file with one word "
                "per line, optionally word<TAB>count (leave data.synth.word_list empty for the "
                "bundled English list, or 'chinese' for the bundled Chinese one)"
            )
        kept, weights, weighted = [], [], True
        for line in p.read_text(encoding="utf-8").split("\n"):
            word, _, count = line.strip().partition("\t")
            word = word.strip()
            if not word or not all(c in allowed for c in word):
                continue
            kept.append(word)
            try:
                weights.append(float(count))
            except ValueError:
                weighted = False
        words = _WORDS_CACHE[key] = WordList(kept, weights if weighted else None, power)
    return words


class CorpusError(ValueError):
    """A corpus file that cannot be read as UTF-8 text."""


class Corpus:
    """The drawable pieces of one or more text files.

    Each line is NFC-normalised, its whitespace collapsed to single spaces (or, without
    a space in the alphabet, split there), and cut into runs of characters of
    ``allowed`` at least ``min_length`` long; a piece is then a run, or a stretch of
    one, drawn with probability proportional to its length (so long lines count for
    what they hold). ``dropped`` counts the characters left out and why.
    """

    def __init__(
        self, paths: Sequence[str | os.PathLike[str]], allowed: frozenset[str], min_length: int
    ) -> None:
        self.paths = [str(p) for p in paths]
        self.runs: list[str] = []
        self.ends: list[int] = []  # cumulative lengths, for drawing by length
        self.dropped: Counter[str] = Counter()
        self.total = 0
        space = " " in allowed
        for path in self.paths:
            for line in _read_corpus(path):
                line = unicodedata.normalize("NFC", line)
                parts = [" ".join(line.split())] if space else line.split()
                for part in parts:
                    self.total += len(part)
                    run: list[str] = []
                    for c in part + "\0":
                        if c in allowed:
                            run.append(c)
                            continue
                        if c != "\0":
                            self.dropped[c] += 1
                        text = "".join(run).strip()
                        run = []
                        if len(text) >= min_length:
                            self.runs.append(text)
                            self.ends.append((self.ends[-1] if self.ends else 0) + len(text))

    def __len__(self) -> int:
        return len(self.runs)

    def sample(self, r: random.Random, lo: int, hi: int) -> str:
        """A piece of ``lo..hi`` characters (shorter when its run is)."""
        k = bisect.bisect_right(self.ends, r.randrange(self.ends[-1]))
        run = self.runs[k]
        n = r.randint(lo, hi)
        if len(run) <= n:
            return run
        start = r.randrange(len(run) - n + 1)
        return run[start : start + n].strip()

    def report(self) -> str:
        """What was left out, for the log."""
        kept = self.ends[-1] if self.ends else 0
        msg = (
            f"corpus {', '.join(self.paths)}: {len(self.runs):,} pieces, {kept:,} of "
            f"{self.total:,} characters usable"
        )
        if self.dropped:
            top = ", ".join(f"{c!r} x{n}" for c, n in self.dropped.most_common(8))
            msg += (
                f"; {sum(self.dropped.values()):,} characters outside the charset or drawn by "
                f"no font were cut out (most often {top})"
            )
        return msg


def _read_corpus(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"corpus file {path!r} not found: expected a UTF-8 text file (data.synth.corpus)"
        )
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise CorpusError(
            f"corpus file {path!r}, line {line}: not UTF-8 ({e.reason}, byte "
            f"{data[e.start : e.start + 1]!r} at offset {e.start}). Re-save it as UTF-8, e.g. "
            f"iconv -f GB18030 -t UTF-8 {p.name} > {p.stem}.utf8.txt"
        ) from None
    return text.lstrip("\ufeff").splitlines()


# (paths, allowed characters, min length) -> corpus; one copy per process.
_CORPUS_CACHE: dict[tuple[tuple[str, ...], frozenset[str], int], Corpus] = {}


def load_corpus(
    paths: Sequence[str | os.PathLike[str]], allowed: frozenset[str], min_length: int
) -> Corpus:
    key = (tuple(str(p) for p in paths), allowed, min_length)
    corpus = _CORPUS_CACHE.get(key)
    if corpus is None:
        corpus = _CORPUS_CACHE[key] = Corpus(paths, allowed, min_length)
    return corpus
