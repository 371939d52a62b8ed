"""Alphabet files as other projects write them, read exactly: what every tool that takes
a charset (``--charset``, ``data.charset``) accepts besides the built-in names.

========================================  ==================================================
form                                      read as
========================================  ==================================================
one character per line                    line ``i`` (blank lines skipped) is class ``i + 1``;
(ours, PaddleOCR's ``ppocr_keys_v1.txt``) the CTC blank is class 0 and is not listed
a first line that is a word               that line is the blank's placeholder (class 0), so
(``char_std_5990.txt``: ``blank``)        line ``i`` is class ``i``: the Synthetic Chinese
                                          String Dataset's index file, Sierkinhane's layout
``FILE+space``                            PaddleOCR's ``use_space_char: true``: a space class
                                          after the file's characters
a Python file (``keys.py``)               the string assigned to ``alphabetChinese`` (or
                                          ``alphabet``, or ``FILE.py#NAME``), read with
                                          ``ast``, never executed: chineseocr's ``keys.py``,
                                          Sierkinhane's ``alphabets.py``
========================================  ==================================================

Text files are UTF-8 (a byte-order mark is allowed), or GB18030/GBK, Big5, Shift-JIS or
EUC-KR: the one in which the file reads as ordinary text is taken (``char_std_5990.txt``
is GBK), and a file no encoding reads plausibly is refused, naming a line. A character listed
twice keeps both classes (imported
models keep their shape; :class:`crnn.text.alphabet.Charset` warns). Every problem is one
:class:`CharsetFileError` line naming the file, the line and the fix.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

# Variable names a Python alphabet file is searched for, in this order, when the file
# assigns several strings and the spec names none (FILE.py#NAME).
PY_ALPHABET_NAMES = ("alphabetChinese", "alphabet", "alphabets", "characters", "keys")
SPACE_SUFFIX = "+space"


class CharsetFileError(ValueError):
    """An alphabet file that cannot be read; the message says where and how to fix it."""


@dataclass
class AlphabetFile:
    """What :func:`read_alphabet` found.

    ``chars`` are the characters in class order without the blank (class ``i + 1`` is
    ``chars[i]``); ``lines`` is every line of a text file as decoded, including a
    placeholder, so that ``lines[i]`` is what an index ``i`` of an index-list label file
    (``name idx idx ...``) stands for; ``notes`` say what was detected, for the log.
    """

    path: Path
    chars: str
    encoding: str = "utf-8"
    placeholder: str = ""
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def spec_path(spec: str) -> Path:
    """The file a charset spec names (``FILE``, ``FILE.py#NAME``, ``FILE+space``)."""
    return Path(_split(spec)[0])


def _split(spec: str) -> tuple[str, str, bool]:
    """``FILE[#NAME][+space]`` -> ``(FILE, NAME, space)``."""
    space = spec.endswith(SPACE_SUFFIX)
    if space:
        spec = spec[: -len(SPACE_SUFFIX)]
    path, _, name = spec.partition("#") if ".py#" in spec else (spec, "", "")
    return path, name, space


def read_alphabet(spec: str) -> AlphabetFile:
    """Read the alphabet file ``spec`` (``FILE``, ``FILE.py#NAME``, ``FILE+space``).

    Raises:
        CharsetFileError: missing file, undecodable bytes, a line that is not one
            character, a Python file without the alphabet; the message names the line.
    """
    path_s, name, space = _split(spec)
    path = Path(path_s)
    if not path.is_file():
        raise CharsetFileError(
            f"charset file {path_s!r} not found: expected a file with one character per line "
            "(UTF-8 or GBK; a first line such as 'blank' is read as the blank's placeholder), "
            "a Python file holding the alphabet as a string (chineseocr's keys.py), or a "
            "built-in name (alnum36, alnum62, ascii94, ascii95, zh5529)"
        )
    if path.suffix == ".py":
        out = _read_python(path, name)
    else:
        if name:
            raise CharsetFileError(f"{spec!r}: '#{name}' names a variable of a Python file only")
        out = _read_lines(path)
    if space:
        out.chars += " "
        out.notes.append("a space class added after the file's characters (+space)")
    if not out.chars:
        raise CharsetFileError(f"charset file {path_s!r} holds no character")
    return out


def _plausible(enc: str, c: str) -> bool:
    """Whether ``c`` is a character an alphabet in ``enc`` would hold: one of the
    encoding's common letters, ideographs or punctuation rather than the rare code points
    a file in another encoding decodes into (Big5 bytes read as GB18030 land in GBK's
    extension area and among GB2312's kana and Cyrillic rows)."""
    if c.isascii():
        return True
    try:
        b = c.encode(enc)
    except UnicodeEncodeError:
        return False
    if len(b) != 2:
        return False
    lead, code = b[0], int.from_bytes(b, "big")
    if enc == "gb18030":  # GB2312: punctuation/full-width rows, then the 6,763 hanzi
        return 0xA1 <= lead <= 0xA3 or 0xB0 <= lead <= 0xF7 and b[1] >= 0xA1
    if enc == "big5":  # symbols, then the common and less common hanzi
        return 0xA140 <= code <= 0xA3BF or 0xA440 <= code <= 0xC67E or 0xC940 <= code <= 0xF9D5
    if enc == "cp932":  # punctuation, kana, JIS level 1 and 2 kanji
        return 0x8140 <= code <= 0x839F or 0x889F <= code <= 0x9FFC or 0xE040 <= code <= 0xEAA4
    if enc == "cp949":  # symbols, Hangul syllables, hanja
        return 0xA1A1 <= code <= 0xA3FE or "\uac00" <= c <= "\ud7a3" or 0xCAA1 <= code <= 0xFDFE
    return False


_EAST_ASIAN = (
    ("gb18030", "GB18030/GBK"),
    ("big5", "Big5"),
    ("cp932", "Shift-JIS"),
    ("cp949", "EUC-KR"),
)


def _decode(path: Path) -> tuple[str, str]:
    """The file's text and encoding: UTF-8, else the one East Asian encoding (GB18030,
    Big5, Shift-JIS, EUC-KR) in which at least 95 % of its characters are plausible;
    anything else is refused, naming the first line that reads wrong."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        first_bad = e
    scores = []
    for enc, _ in _EAST_ASIAN:
        try:
            text = data.decode(enc)
        except UnicodeDecodeError:
            continue
        wide = [c for c in text if not c.isascii()]
        scores.append((sum(_plausible(enc, c) for c in wide) / max(len(wide), 1), enc, text))
    scores.sort(key=lambda t: -t[0])
    plausible = {enc: text for sc, enc, text in scores if sc >= 0.95}
    if len(plausible) > 1 and {"gb18030", "cp949"} <= set(plausible):
        # Every GB2312 byte pair is also a valid EUC-KR one: Hangul read as GB18030 lands
        # in GB2312's first 25 rows of hanzi, which hold the characters of pinyin a..r
        # only (the rows are in pinyin order), while a Chinese alphabet spans them all.
        korean = plausible["cp949"]
        hangul = sum("\uac00" <= c <= "\ud7a3" for c in korean)
        wide = sum(not c.isascii() for c in korean)
        beyond_r = any(
            not c.isascii() and len(b := c.encode("gb18030")) == 2 and b[0] > 0xC8
            for c in plausible["gb18030"]
        )
        if hangul >= 0.9 * wide and not beyond_r:
            if wide < 20:
                raise CharsetFileError(
                    f"{path}: too short to tell EUC-KR (Korean: {korean[:20]!r}) from GB18030 "
                    f"(Chinese: {plausible['gb18030'][:20]!r}); re-save it as UTF-8"
                )
            return korean, "cp949"
        plausible.pop("cp949")
    if plausible:
        enc = next(e for _, e, _ in scores if e in plausible)
        return plausible[enc], enc
    line = data[: first_bad.start].count(b"\n") + 1
    readings = []
    for sc, enc, text in scores[:2]:
        where = _first_implausible(enc, text)
        shown = f" (line {where[0]}: {where[1]!r})" if where else ""
        readings.append(f"as {dict(_EAST_ASIAN)[enc]} {sc:.0%} of it reads as ordinary text{shown}")
    tried = "; ".join(readings)
    raise CharsetFileError(
        f"{path}:{line}: not UTF-8 (bytes {data[first_bad.start : first_bad.start + 4]!r}), and "
        f"no East Asian encoding reads it plausibly{': ' + tried if tried else ''}. Re-save it as "
        f"UTF-8, e.g. iconv -f BIG5 -t UTF-8 {path.name} > {path.stem}.utf8{path.suffix} (or "
        "-f SHIFT-JIS, -f EUC-KR, -f GBK: whichever it was written in)"
    )


def _first_implausible(enc: str, text: str) -> tuple[int, str] | None:
    for i, ln in enumerate(text.split("\n"), start=1):
        if any(not _plausible(enc, c) for c in ln if not c.isspace()):
            return i, ln.strip()
    return None


def _read_lines(path: Path) -> AlphabetFile:
    text, encoding = _decode(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    out = AlphabetFile(path, "", encoding, lines=lines)
    if encoding != "utf-8":
        out.notes.append(f"read as {encoding.upper()} (not valid UTF-8)")
    body = [(i, ln) for i, ln in enumerate(lines) if ln != ""]
    rest = body[1:]
    singles = sum(len(ln.strip()) == 1 for _, ln in rest)
    # A word on the first line of an otherwise one-character-per-line file is the
    # blank's placeholder ('blank' in char_std_5990.txt); a bad line elsewhere is named.
    if rest and len(body[0][1].strip()) > 1 and singles >= 0.9 * len(rest):
        out.placeholder = body[0][1].strip()
        out.notes.append(
            f"line 1 ({out.placeholder!r}) is the CTC blank's placeholder (class 0): line N+1 "
            "is class N"
        )
        body = body[1:]
    chars = []
    for i, ln in body:
        if len(ln) != 1:
            # "a\t" or " a" mean "a"; a line holding only a space is the space character.
            inked = ln.strip()
            if len(inked) != 1:
                raise CharsetFileError(
                    f"{path}:{i + 1}: expected one character per line, got {ln!r}. Write each "
                    "character on its own line (only the first line may be a word, such as "
                    "'blank': the blank's placeholder)"
                )
            ln = inked
        chars.append(ln)
    out.chars = "".join(chars)
    return out


def _string_value(node: ast.AST) -> str | None:
    """A string literal, or a ``+`` of them (``'abc' + 'def'``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left), _string_value(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _read_python(path: Path, name: str) -> AlphabetFile:
    text, encoding = _decode(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise CharsetFileError(
            f"{path}:{e.lineno}: not Python that can be read ({e.msg}); expected a file such "
            "as chineseocr's keys.py: alphabetChinese = '...the characters...'"
        ) from None
    found: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            s = _string_value(value)
            if isinstance(t, ast.Name) and s is not None:
                found[t.id] = s
    if name:
        if name not in found:
            raise CharsetFileError(
                f"{path} assigns no string to {name!r}; it assigns {', '.join(found) or 'none'}"
            )
    elif len(found) == 1:
        name = next(iter(found))
    else:
        name = next((n for n in PY_ALPHABET_NAMES if n in found), "")
        if not name:
            listed = ", ".join(f"{n} ({len(s)} characters)" for n, s in found.items())
            raise CharsetFileError(
                f"{path}: "
                + (
                    f"several strings ({listed}); name the alphabet, e.g. "
                    f"--charset {path}#{next(iter(found))}"
                    if found
                    else "assigns no string "
                    "literal; expected e.g. alphabetChinese = '...the characters...'"
                )
            )
    out = AlphabetFile(path, found[name], encoding)
    out.notes.append(f"the alphabet is the string {name} ({len(found[name])} characters)")
    return out


def index_table(path: str | Path) -> AlphabetFile:
    """The lines of an index file such as ``char_std_5990.txt`` for an index-list label
    file: ``lines[i]`` is what index ``i`` stands for (line 0 is usually the blank's
    placeholder, which no label uses)."""
    out = read_alphabet(str(path))
    if not out.lines:
        raise CharsetFileError(
            f"{path}: index lists need a text file with one character per line (their "
            "numbers are its line numbers, from 0), not a Python file"
        )
    return out
