"""Numbers read with a letter o: old-style figures (the default figures of book faces such
as Garamond and Georgia) draw 0 at x-height, as round as an o, and a line recognizer reads
``4,000`` as ``4,ooo`` and ``0800`` as ``o800``. Nothing in the pixels tells them apart;
the context does: an o inside a number is a zero.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from crnn.ctc.decode import Prediction

# A run of digits, o/O and the separators inside numbers (maximal: matched greedily from
# its first character); one touching a Latin letter ("No.5", "2nd", "CO2") is a word.
_RUN = re.compile(r"[0-9oO][0-9oO.,:/-]*")
_LETTER = re.compile(r"[A-Za-z\u00c0-\u024f]")
_ZEROS = str.maketrans("oO", "00")


def fixes_numerals(chars: Iterable[str], lexicon: object | None = None) -> bool:
    """Whether the fix applies to a model writing ``chars`` (a charset): it can read a
    number's 0 as an o, and no ``lexicon`` snaps whole words instead."""
    have = set(chars)
    return lexicon is None and "0" in have and not have.isdisjoint("oO")


def fix_prediction(p: Prediction) -> Prediction:
    """``p`` with :func:`fix_numerals` applied to its text (same length: the character
    confidences still line up)."""
    return dataclasses.replace(p, text=fix_numerals(p.text))


def fix_numerals(text: str) -> str:
    """``text`` with every o or O inside a number read as 0: a run of digits, o, O and
    ``.,:/-`` that holds a digit, touches no Latin letter and does not open with a capital
    O (``4,ooo`` -> ``4,000``, ``2o23年`` -> ``2023年``, ``1O5`` -> ``105``; ``No.5``,
    ``too``, ``4 o'clock``, ``O2O模式``, ``O2 sensor`` and ``O-1 visa`` stay)."""
    if "o" not in text and "O" not in text:
        return text

    def zero(m: re.Match[str]) -> str:
        s, a, b = m.group(0), m.start(), m.end()
        # A capital O that opens the run is a letter: O2O, O2 sensor, (O2), O-1 visa.
        if (
            not any(c.isdigit() for c in s)
            or s[0] == "O"
            or (a and _LETTER.match(text[a - 1]))
            or _LETTER.match(text[b : b + 1])
        ):
            return s
        return s.translate(_ZEROS)

    return _RUN.sub(zero, text)
