"""Reading order for right-to-left text: logical order (how text is typed and stored in
labels) to visual order (left to right as it is drawn on a line), and back.

A CTC recognizer reads an image from left to right, so it writes characters in visual
order. For Latin or Chinese the two orders are the same; for Arabic or Hebrew the
visual order of ``"שלום 123"`` is ``"123 םולש"``. A charset with right-to-left letters
(:attr:`crnn.text.alphabet.Charset.bidi`) therefore encodes labels in visual order and
decodes predictions back to logical order, so that users see and give text the way they
store it.

This is the Unicode Bidirectional Algorithm (UAX #9) for one line without explicit
formatting: paragraph direction from the first strong character (P2-P3), weak types
(W1-W7), bracket pairs (N0), neutrals (N1-N2), implicit levels (I1-I2), trailing
whitespace (L1), reordering (L2) and mirrored brackets (L4), for the brackets and
mirrored characters that appear in text. Left out: explicit embeddings, overrides and
isolates (their control characters are kept in place and do not change levels).

Going back from visual to logical order is the same algorithm run on the visual text,
with the paragraph direction guessed from where the strong characters stand (see
:func:`visual_base`). That is exact for right-to-left lines with numbers and
left-to-right words in them, and for left-to-right lines with right-to-left words; a
visual line alone cannot always say which direction it was written in, and a few weak
rules (W2, W5, W7) look one way only, so some mixed lines come back reordered.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

_STRONG = ("L", "R", "AL")
_NEUTRAL = frozenset({"B", "S", "WS", "ON", "LRI", "RLI", "FSI", "PDI"})
# Removed by rule X9: no level of their own (they take their neighbour's).
_REMOVED = frozenset({"RLE", "LRE", "RLO", "LRO", "PDF", "BN"})
_ISOLATES = frozenset({"LRI", "RLI", "FSI", "PDI"})

# Bidi_Mirroring_Glyph for the pairs that appear in text (UAX #9 L4): a character at a
# right-to-left level is drawn as its mirror image, which is the character it pairs with.
_PAIRS = (
    "()[]{}<>«»‹›⁅⁆⁽⁾₍₎≤≥≦≧≪≫⟨⟩⟪⟫⟦⟧〈〉《》「」『』【】〔〕〖〗〘〙〚〛（）［］｛｝＜＞｢｣∈∋∉∌⊂⊃⊆⊇"
)
MIRROR = {a: b for a, b in zip(_PAIRS[::2], _PAIRS[1::2])}
MIRROR.update({b: a for a, b in MIRROR.items()})
# Bidi_Paired_Bracket pairs (BD14-BD16): opening -> closing.
_BRACKETS = "()[]{}⁅⁆⁽⁾₍₎⟨⟩⟪⟫⟦⟧〈〉《》「」『』【】〔〕〖〗〘〙〚〛（）［］｛｝｢｣"
OPENING = dict(zip(_BRACKETS[::2], _BRACKETS[1::2]))
CLOSING = {b: a for a, b in OPENING.items()}


def bidi_class(c: str) -> str:
    """The character's Bidi_Class (``"L"`` for unassigned code points)."""
    return unicodedata.bidirectional(c) or "L"


def has_rtl(chars: Iterable[str]) -> bool:
    """Whether any of ``chars`` is written right to left: a right-to-left letter or an
    Arabic-Indic digit (Bidi_Class R, AL or AN)."""
    return any(bidi_class(c) in ("R", "AL", "AN") for c in chars)


def first_strong_level(text: str) -> int:
    """Paragraph level by rules P2-P3: 1 if the first strong character is right-to-left,
    else 0 (also when there is none)."""
    for c in text:
        t = bidi_class(c)
        if t in _STRONG:
            return 0 if t == "L" else 1
    return 0


def visual_base(visual: str) -> int:
    """The paragraph level a visual line was most likely written with.

    In a left-to-right paragraph the first strong character keeps its place, so the
    leftmost strong character is left-to-right; in a right-to-left one the whole line is
    reversed, so the rightmost strong character is right-to-left. When the line fits
    both (a left-to-right word on the left, a right-to-left one on the right), the
    direction with more strong characters wins, right-to-left on a tie.
    """
    strong = [t for t in map(bidi_class, visual) if t in _STRONG]
    if not strong:
        return 0
    rtl_right, ltr_left = strong[-1] != "L", strong[0] == "L"
    if rtl_right != ltr_left:
        return int(rtl_right)
    n_rtl = sum(t != "L" for t in strong)
    return int(n_rtl >= len(strong) - n_rtl)


def levels(text: str, base: int | None = None) -> list[int]:
    """Each character's embedding level (even: left to right, odd: right to left)."""
    if base is None:
        base = first_strong_level(text)
    types = [bidi_class(c) for c in text]
    keep = [i for i, t in enumerate(types) if t not in _REMOVED]
    t = [types[i] for i in keep]
    e = "R" if base % 2 else "L"
    # W1: non-spacing marks take the type of what they follow.
    prev = e
    for k, x in enumerate(t):
        if x == "NSM":
            t[k] = "ON" if prev in _ISOLATES else prev
        prev = t[k]
    # W2: European digits after Arabic letters are Arabic numbers. W3: AL -> R.
    last = e
    for k, x in enumerate(t):
        if x in _STRONG:
            last = x
        elif x == "EN" and last == "AL":
            t[k] = "AN"
    t = ["R" if x == "AL" else x for x in t]
    # W4: a single separator between two numbers of one type joins them.
    for k in range(1, len(t) - 1):
        a, x, b = t[k - 1], t[k], t[k + 1]
        if x == "ES" and a == b == "EN" or x == "CS" and a == b and a in ("EN", "AN"):
            t[k] = a
    # W5: terminators (%, $, degree...) next to European digits are European digits.
    k = 0
    while k < len(t):
        if t[k] != "ET":
            k += 1
            continue
        j = k
        while j < len(t) and t[j] == "ET":
            j += 1
        if (k > 0 and t[k - 1] == "EN") or (j < len(t) and t[j] == "EN"):
            t[k:j] = ["EN"] * (j - k)
        k = j
    # W6: other separators and terminators are neutral.
    t = ["ON" if x in ("ES", "ET", "CS") else x for x in t]
    # W7: European digits in left-to-right context are left-to-right.
    last = e
    for k, x in enumerate(t):
        if x in ("L", "R"):
            last = x
        elif x == "EN" and last == "L":
            t[k] = "L"
    _resolve_brackets(t, [text[i] for i in keep], [types[i] for i in keep], e)
    # N1-N2: a run of neutrals between two strong sides of one direction (numbers count
    # as right-to-left) takes it; otherwise the paragraph's direction.
    k = 0
    while k < len(t):
        if t[k] not in _NEUTRAL:
            k += 1
            continue
        j = k
        while j < len(t) and t[j] in _NEUTRAL:
            j += 1
        before = e if k == 0 else ("L" if t[k - 1] == "L" else "R")
        after = e if j == len(t) else ("L" if t[j] == "L" else "R")
        t[k:j] = [before if before == after else e] * (j - k)
        k = j
    # I1-I2: implicit levels.
    out = [base] * len(text)
    for i, x in zip(keep, t):
        if base % 2 == 0:
            out[i] = base + {"L": 0, "R": 1}.get(x, 2)
        else:
            out[i] = base + (0 if x == "R" else 1)
    # Removed characters take the level of what they follow.
    for i, typ in enumerate(types):
        if typ in _REMOVED:
            out[i] = out[i - 1] if i else base
    # L1: separators, and whitespace before them or at the end of the line, go to the
    # paragraph level.
    trailing = True
    for i in range(len(text) - 1, -1, -1):
        typ = types[i]
        if typ in ("S", "B"):
            out[i] = base
            trailing = True
        elif trailing and (typ == "WS" or typ in _ISOLATES or typ in _REMOVED):
            out[i] = base
        else:
            trailing = False
    return out


def _bracket_pairs(chars: list[str], t: list[str]) -> list[tuple[int, int]]:
    """BD16: matching bracket pairs (both still neutral), sorted by the opening one."""
    stack: list[tuple[str, int]] = []
    pairs = []
    for k, c in enumerate(chars):
        if t[k] != "ON":
            continue
        if c in OPENING:
            if len(stack) == 63:
                break
            stack.append((c, k))
        elif c in CLOSING:
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth][0] == CLOSING[c]:
                    pairs.append((stack[depth][1], k))
                    del stack[depth:]
                    break
    return sorted(pairs)


def _resolve_brackets(t: list[str], chars: list[str], original: list[str], e: str) -> None:
    """N0: a bracket pair takes the embedding direction if the text inside has it, else
    the other direction if the text inside and the context before the pair have it;
    non-spacing marks after a bracket follow it. Numbers count as right-to-left."""

    def strong(x: str) -> str | None:
        return "L" if x == "L" else "R" if x in ("R", "EN", "AN") else None

    for a, b in _bracket_pairs(chars, t):
        inside = {strong(x) for x in t[a + 1 : b]} - {None}
        if not inside:
            continue
        # Inside holds the embedding direction, or only the other one: then the pair
        # takes the other direction if the strong text before it has it too.
        d = e if e in inside else next((s for x in reversed(t[:a]) if (s := strong(x))), e)
        for k in (a, b):
            t[k] = d
            j = k + 1
            while j < len(t) and original[j] == "NSM":
                t[j] = d
                j += 1


def _reorder(text: str, lv: list[int]) -> tuple[str, list[int]]:
    """Rule L2 (reverse runs from the highest level down to the lowest odd one) and L4
    (mirror brackets at odd levels): the reordered text, and for each of its characters
    the position in ``text`` it came from."""
    order = list(range(len(text)))
    if not text or max(lv) == 0:
        return text, order
    lvs = list(lv)
    n = len(text)
    for level in range(max(lvs), (min(lvs) | 1) - 1, -1):
        k = 0
        while k < n:
            if lvs[k] < level:
                k += 1
                continue
            j = k
            while j < n and lvs[j] >= level:
                j += 1
            order[k:j] = order[k:j][::-1]
            lvs[k:j] = lvs[k:j][::-1]
            k = j
    chars = (MIRROR.get(text[i], text[i]) if lv[i] % 2 else text[i] for i in order)
    return "".join(chars), order


def visual_order(text: str, base: int | None = None) -> str:
    """Logical -> visual order (left to right as drawn) of one line. ``base``: the
    paragraph level (0 left-to-right, 1 right-to-left); None: from the first strong
    character, as renderers do."""
    if not has_rtl(text) and (base or 0) % 2 == 0:
        return text
    return _reorder(text, levels(text, base))[0]


def logical_order(visual: str, base: int | None = None) -> str:
    """Visual -> logical order of one line: a text whose :func:`visual_order` is
    ``visual`` when one of the candidates tried is (see the module's notes). ``base``:
    the paragraph level; None guesses it with :func:`visual_base`, trying the other
    direction too when the guess does not reproduce ``visual``."""
    return logical_order_from(visual, base)[0]


def logical_order_from(visual: str, base: int | None = None) -> tuple[str, list[int]]:
    """:func:`logical_order`, with the position in ``visual`` of each character of the
    result (to carry per-character values, such as confidences, along)."""
    if not has_rtl(visual) and (base or 0) % 2 == 0:
        return visual, list(range(len(visual)))
    bases = [base] if base is not None else [visual_base(visual), 1 - visual_base(visual)]
    first: tuple[str, list[int]] | None = None
    for b in bases:
        # The weak rules look backwards, so they are also run on the reversed line,
        # which for a right-to-left paragraph is close to the logical order.
        for lv in (levels(visual, b), levels(visual[::-1], b)[::-1]):
            text, order = _reorder(visual, lv)
            if visual_order(text, base) == visual:
                return text, order
            first = first or (text, order)
    assert first is not None
    return first
