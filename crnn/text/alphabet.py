"""The alphabet: the one object that maps text to class ids and back.

Class id 0 is the CTC blank; character ``chars[i]`` has id ``i + 1``. The order of
``chars`` therefore *defines* the classifier's rows, which is why every checkpoint
stores the charset and refuses to load against a different one.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from crnn.text import bidi as _bidi

log = logging.getLogger(__name__)

BLANK = 0

BUILTIN_CHARSETS = ("alnum36", "alnum62", "ascii94", "ascii95", "zh5529")


class UnknownCharacterError(ValueError):
    """A label holds characters the charset cannot encode."""

    def __init__(self, text: str, unknown: Sequence[str], charset_name: str = "") -> None:
        self.text = text
        self.unknown = list(unknown)
        shown = ", ".join(repr(c) for c in self.unknown)
        where = f" {charset_name!r}" if charset_name else ""
        super().__init__(
            f"label {text!r} has characters outside the charset{where}: {shown}. "
            "Use a charset that holds them (--set data.charset=ascii94, or a .txt file with "
            "one character per line), or let training skip such labels "
            "(--set data.unknown_chars=skip)."
        )


# What was said about charsets with repeated characters or detected file layouts: once
# per process, not at every Charset built from a checkpoint.
_SAID: set[str] = set()


def _say_once(key: str, level: int, msg: str, *args: object) -> None:
    if key not in _SAID:
        _SAID.add(key)
        log.log(level, msg, *args)


def duplicates(chars: str) -> dict[str, list[int]]:
    """Characters listed more than once, with their class ids."""
    ids: dict[str, list[int]] = {}
    for i, c in enumerate(chars, start=1):
        ids.setdefault(c, []).append(i)
    return {c: v for c, v in ids.items() if len(v) > 1}


# How many CJK ideographs make an alphabet a Chinese model's (Charset.writes_chinese).
CHINESE_MIN = 100


@dataclass(frozen=True)
class Charset:
    """An ordered alphabet with the CTC blank at id 0.

    Args:
        chars: the characters in id order (id of ``chars[i]`` is ``i + 1``).
        case_fold: lower-case text before encoding. ``None`` means "auto": fold when the
            alphabet has lower-case letters and no upper-case ones (e.g. ``alnum36``).
        name: where the charset came from, for messages only.
        bidi: the model reads in visual order (left to right as drawn): labels are
            encoded in visual order and decoded back to logical order (see
            :mod:`crnn.text.bidi`). ``None`` means "auto": on when the alphabet has
            right-to-left letters (Arabic, Hebrew...) or Arabic-Indic digits.
    """

    chars: str
    case_fold: bool | None = None
    name: str = ""
    bidi: bool | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)
    _width_fold: dict[int, str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        chars = unicodedata.normalize("NFC", self.chars)
        if not chars:
            raise ValueError("a charset needs at least one character, got an empty one")
        dups = duplicates(chars)
        if dups:
            # Imported models keep their shape (chineseocr's alphabet lists '|' twice, which
            # is why it has 5,530 classes): every class stays, labels use the first id.
            shown = ", ".join(f"{c!r} (classes {', '.join(map(str, v))})" for c, v in dups.items())
            _say_once(
                f"dups:{self.name}:{shown}",
                logging.WARNING,
                "%s lists characters more than once: %s. Every class is kept (a model "
                "trained with this alphabet keeps its shape) and they all read as that "
                "character; labels are encoded with the first class.",
                f"charset {self.name!r}" if self.name else "the charset",
                shown,
            )
        object.__setattr__(self, "chars", chars)
        if self.case_fold is None:
            fold = any(c.islower() for c in chars) and not any(c.isupper() for c in chars)
            object.__setattr__(self, "case_fold", fold)
        if self.bidi is None:
            object.__setattr__(self, "bidi", _bidi.has_rtl(chars))
        index: dict[str, int] = {}
        for i, c in enumerate(chars, start=1):
            index.setdefault(c, i)
        object.__setattr__(self, "_index", index)
        # Full-width forms (U+FF01-FF5E, the ideographic space) the charset lacks read as
        # the ASCII they stand for when the charset has that: "２０２３年" is "2023年"
        # to a zh5529 model, as in every Chinese OCR dictionary. Forms the charset lists
        # itself (zh5529's "，" "（" "！") stay as they are.
        fold = {
            c: a
            for c, a in [(chr(0xFF01 + i), chr(0x21 + i)) for i in range(94)] + [("\u3000", " ")]
            if c not in index and (a in index or (self.case_fold and a.lower() in index))
        }
        object.__setattr__(self, "_width_fold", str.maketrans(fold) if fold else None)

    # ---- construction -------------------------------------------------------------

    @classmethod
    def from_spec(
        cls, spec: str, case_fold: bool | None = None, bidi: bool | None = None
    ) -> Charset:
        """Build from a built-in name (``alnum36``...), ``chars:<literal>``, or an alphabet
        file as other projects write them (see :mod:`crnn.text.alphabet_files`: one character
        per line in UTF-8 or GBK, a placeholder first line, ``FILE+space``, a Python
        ``keys.py``). Raises ``ValueError`` (a :class:`CharsetFileError` for files) in one
        line that names the file, the line and the fix."""
        from crnn.text.alphabet_files import CharsetFileError, read_alphabet, spec_path

        if spec in BUILTIN_CHARSETS:
            ref = resources.files("crnn") / "assets" / "charsets" / f"{spec}.txt"
            return cls(read_alphabet(str(ref)).chars, case_fold, spec, bidi)
        if spec.startswith("chars:"):
            return cls(spec[len("chars:") :], case_fold, "literal", bidi)
        try:
            found = read_alphabet(spec)
        except CharsetFileError as e:
            if spec_path(spec).exists() or "." in spec or "/" in spec:
                raise
            raise CharsetFileError(
                f"unknown charset {spec!r}: expected one of the built-in charsets "
                f"{', '.join(BUILTIN_CHARSETS)}, an alphabet file (one character per line, "
                "UTF-8 or GBK; or a Python keys.py), or 'chars:' followed by the characters "
                "(e.g. 'chars:0123456789')."
            ) from e
        for note in found.notes:
            _say_once(f"note:{spec}:{note}", logging.INFO, "charset %s: %s", spec, note)
        return cls(found.chars, case_fold, spec, bidi)

    def to_dict(self) -> dict[str, object]:
        """Plain types only, so checkpoints stay loadable with ``weights_only=True``."""
        return {
            "chars": self.chars,
            "case_fold": bool(self.case_fold),
            "name": self.name,
            "bidi": bool(self.bidi),
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Charset:
        # Files written before "bidi" existed were trained on labels in logical order.
        return cls(
            str(d["chars"]),
            bool(d["case_fold"]),
            str(d.get("name", "")),
            bool(d.get("bidi", False)),
        )

    # ---- coding -------------------------------------------------------------------

    @property
    def num_classes(self) -> int:
        """Classifier width: the characters plus the blank."""
        return len(self.chars) + 1

    def __len__(self) -> int:
        return len(self.chars)

    @property
    def writes_chinese(self) -> bool:
        """Whether this is a Chinese model's alphabet (:data:`CHINESE_MIN` CJK ideographs
        or more): the one test behind every Chinese default (the views a line is read at,
        vertical columns, the language prior)."""
        return sum("\u4e00" <= c <= "\u9fff" for c in self.chars) >= CHINESE_MIN

    def normalize(self, text: str) -> str:
        """The form a label is compared and encoded in: NFC, full-width forms the
        charset lacks as their ASCII, lower-cased if folding case."""
        text = unicodedata.normalize("NFC", text)
        if self._width_fold is not None:
            text = text.translate(self._width_fold)
        return text.lower() if self.case_fold else text

    def unknown_chars(self, text: str) -> list[str]:
        """Characters of ``text`` (after normalisation) that have no id, sorted, unique."""
        return sorted({c for c in self.normalize(text) if c not in self._index})

    def encode(self, text: str) -> list[int]:
        """Text -> ids (1..len), in the order the model reads (visual order when
        :attr:`bidi`). Raises :class:`UnknownCharacterError`; never drops a character."""
        text = self.normalize(text)
        # Visual order mirrors brackets in right-to-left runs: "(" is read as ")".
        seq = _bidi.visual_order(text) if self.bidi else text
        try:
            return [self._index[c] for c in seq]
        except KeyError:
            unknown = sorted({c for c in seq if c not in self._index})
            raise UnknownCharacterError(text, unknown, self.name) from None

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text (in logical order when :attr:`bidi`); blanks are skipped, repeats
        are kept (see ``crnn.ctc`` for collapsing)."""
        return self.decode_aligned([i for i in ids if i != BLANK])[0]

    def decode_aligned(self, ids: Sequence[int]) -> tuple[str, list[int]]:
        """:meth:`decode` of blank-free ``ids``, with for each character of the text the
        position in ``ids`` it came from (the identity unless :attr:`bidi` reorders)."""
        text = "".join(self.chars[i - 1] for i in ids)
        if self.bidi:
            return _bidi.logical_order_from(text)
        return text, list(range(len(text)))

    def index(self, char: str) -> int:
        """The class id of one character."""
        return self._index[char]

    def __contains__(self, char: object) -> bool:
        return char in self._index


@dataclass
class CharsetReport:
    """What :func:`build_charset` found: every character's count, the alphabet kept,
    and what ``min_count`` left out."""

    counts: dict[str, int]
    chars: str
    dropped_chars: str = ""
    dropped_labels: list[str] = field(default_factory=list)


def build_charset(
    labels: Iterable[str], min_count: int = 1, case_fold: bool = False
) -> CharsetReport:
    """The alphabet of ``labels`` as training will see them (NFC, optionally
    lower-cased), in code-point order, keeping characters seen ``min_count`` times or
    more. Control characters (tabs, newlines) are never part of an alphabet."""
    from collections import Counter

    counts: Counter[str] = Counter()
    normalised = []
    for label in labels:
        text = unicodedata.normalize("NFC", label)
        if case_fold:
            text = text.lower()
        normalised.append(text)
        counts.update(c for c in text if unicodedata.category(c) != "Cc")
    keep = "".join(sorted(c for c, n in counts.items() if n >= min_count))
    dropped = "".join(sorted(c for c, n in counts.items() if n < min_count))
    gone = set(dropped)
    return CharsetReport(
        dict(counts), keep, dropped, [t for t in normalised if gone.intersection(t)]
    )


def write_charset_file(chars: str, path: str | Path) -> None:
    """One character per line (a space is a line holding one space), UTF-8."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(f"{c}\n" for c in chars), encoding="utf-8")
