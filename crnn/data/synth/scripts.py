"""Scripts that need shaping, and how the synthetic generator draws them.

Text is normally drawn glyph by glyph from a cache of rasterised glyphs, each character
in its isolated form, left to right: right for Latin, Greek, Cyrillic and CJK, wrong for
scripts that need shaping (conjuncts, reordered vowel signs, stacked marks) and for
right-to-left text. Texts holding such characters are drawn whole through Pillow's RAQM
layout (HarfBuzz shaping, FriBiDi reordering) when Pillow has it; the labels of
right-to-left texts stay in logical order, and the charset turns them into the visual
order the model reads (:mod:`crnn.text.bidi`). The generator names what it cannot draw right
in a warning (see docs/synth.md, "Scripts and shaping").
"""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter
from collections.abc import Iterable

from crnn.text.bidi import has_rtl

log = logging.getLogger(__name__)

# Scripts that glyph-by-glyph drawing renders wrong (no joining, reordering or mark
# stacking; right-to-left drawn left to right): Unicode block ranges -> name.
_SHAPED_SCRIPTS = (
    (0x0590, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0700, 0x074F, "Syriac"),
    (0x0750, 0x077F, "Arabic"),
    (0x0780, 0x07BF, "Thaana"),
    (0x07C0, 0x07FF, "N'Ko"),
    (0x08A0, 0x08FF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x0980, 0x09FF, "Bengali"),
    (0x0A00, 0x0A7F, "Gurmukhi"),
    (0x0A80, 0x0AFF, "Gujarati"),
    (0x0B00, 0x0B7F, "Oriya"),
    (0x0B80, 0x0BFF, "Tamil"),
    (0x0C00, 0x0C7F, "Telugu"),
    (0x0C80, 0x0CFF, "Kannada"),
    (0x0D00, 0x0D7F, "Malayalam"),
    (0x0D80, 0x0DFF, "Sinhala"),
    (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Lao"),
    (0x0F00, 0x0FFF, "Tibetan"),
    (0x1000, 0x109F, "Myanmar"),
    (0x1780, 0x17FF, "Khmer"),
    (0xFB1D, 0xFB4F, "Hebrew"),
    (0xFB50, 0xFDFF, "Arabic"),
    (0xFE70, 0xFEFF, "Arabic"),
)


RIGHT_TO_LEFT = frozenset({"Hebrew", "Arabic", "Syriac", "Thaana", "N'Ko"})


def raqm_available() -> bool:
    """Whether Pillow can shape text (its RAQM layout: libraqm, HarfBuzz, FriBiDi)."""
    from PIL import features

    return bool(features.check("raqm"))


def script_of(c: str) -> str | None:
    """The name of the script ``c`` belongs to if it needs shaping, else None."""
    o = ord(c) if len(c) == 1 else -1
    name = next((n for lo, hi, n in _SHAPED_SCRIPTS if lo <= o <= hi), None)
    if name is None and unicodedata.category(c[:1] or " ") in ("Mn", "Mc", "Me"):
        name = "combining marks"
    return name


def shaped_chars(chars: Iterable[str]) -> frozenset[str]:
    """The characters of ``chars`` whose texts are drawn whole with RAQM (scripts that
    need shaping, and anything written right to left: letters and Arabic-Indic digits),
    when RAQM is available; else none."""
    if not raqm_available():
        return frozenset()
    return frozenset(c for c in chars if script_of(c) or has_rtl(c))


def scripts_needing_shaping(chars: Iterable[str]) -> dict[str, int]:
    """Which scripts among ``chars`` need shaping to look right, with how many of their
    characters (combining marks of any script count as "combining marks")."""
    out: Counter[str] = Counter()
    for c in chars:
        name = script_of(c)
        if name:
            out[name] += 1
    return dict(out)


def warn_if_unshaped(chars: Iterable[str], visual_order: bool = True) -> None:
    """Log a warning naming the scripts of ``chars`` that will not be drawn right (when
    Pillow has no RAQM layout), or whose labels will not match their images
    (right-to-left scripts when the charset does not read in visual order)."""
    chars = list(chars)
    need = scripts_needing_shaping(chars)
    if need and not raqm_available():
        log.warning(
            "the synthetic generator cannot draw %s right: Pillow has no RAQM layout here "
            "(libraqm), so they are drawn glyph by glyph: unjoined, unordered, marks "
            "unstacked, right-to-left text left to right (see docs/synth.md, 'Scripts and "
            "shaping'). Install a Pillow with RAQM (its PyPI wheels have it), or train on "
            "rendered lines of your own for these scripts.",
            ", ".join(f"{name} ({n} characters)" for name, n in sorted(need.items())),
        )
    if not visual_order and has_rtl(chars):
        rtl = sorted(k for k in need if k in RIGHT_TO_LEFT)
        log.warning(
            "the charset holds right-to-left characters (%s) but data.bidi is false: the "
            "model is taught labels in logical order for images it reads left to right, "
            "and will not learn them. Leave data.bidi unset (auto) or set it to true.",
            ", ".join(rtl) or "Arabic-Indic digits",
        )
