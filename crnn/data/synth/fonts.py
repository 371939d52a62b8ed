"""Fonts for the synthetic generator: discovery, glyph coverage and a glyph cache.

Two facts decide whether a font may draw a character: its Unicode ``cmap`` maps the
character to a real glyph (not ``.notdef``), and that glyph leaves ink (some fonts map
characters to empty glyphs). A text is only ever rendered with a font that passes both
checks for every one of its characters, so a label never sits under a tofu box or a
blank.

Rasterising a word with Pillow costs 0.15-1 ms (FreeType re-renders, and re-hints,
every glyph on every call), which alone would cap the generator below 1,000 images/s.
:class:`GlyphCache` therefore rasterises each (font, pixel size, character) once per
process and words are composed from the cached bitmaps.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

log = logging.getLogger(__name__)

FONT_SUFFIXES = (".ttf", ".otf", ".ttc", ".otc")
# Collections (.ttc/.otc, how Noto CJK ships) hold several faces; each is used as its own
# font, named ``file.ttc#N`` (N the face index).
COLLECTION_SUFFIXES = (".ttc", ".otc")
_FACE_SEP = "#"

# Pixel size at which coverage is checked: large enough that a real glyph leaves ink.
_COVERAGE_SIZE = 48


class FontError(ValueError):
    """A font folder or file that cannot be used."""


@dataclass(frozen=True)
class FontInfo:
    """One usable font file and the characters it can draw.

    Attributes:
        path: the font file.
        chars: the characters (of those asked about) that the font maps to a glyph with
            ink; the space counts when the font maps it.
    """

    path: str
    chars: frozenset[str]

    @property
    def name(self) -> str:
        file, index = split_face(self.path)
        return Path(file).stem + (f"#{index}" if file != self.path else "")


def bundled_font_dir() -> Path:
    """The fonts that ship inside the package (``crnn/assets/fonts``)."""
    return Path(str(resources.files("crnn") / "assets" / "fonts"))


def split_face(font: str | os.PathLike[str]) -> tuple[str, int]:
    """``"a.ttc#2"`` -> ``("a.ttc", 2)``; a plain font file is face 0."""
    s = str(font)
    head, sep, tail = s.rpartition(_FACE_SEP)
    if sep and tail.isdigit() and head.lower().endswith(COLLECTION_SUFFIXES):
        return head, int(tail)
    return s, 0


def collection_faces(path: str | os.PathLike[str]) -> int:
    """How many faces a .ttc/.otc collection holds (from its header).

    Raises:
        FontError: the file is not a font collection.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as e:
        raise FontError(f"cannot read font collection {str(path)!r}: {e}") from None
    if len(head) < 12 or head[:4] != b"ttcf":
        raise FontError(f"{str(path)!r} is named like a font collection but has no 'ttcf' header")
    return int.from_bytes(head[8:12], "big")


def find_font_files(dirs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Every ``.ttf``/``.otf`` file below each folder of ``dirs``, recursively, and every
    face of each ``.ttc``/``.otc`` collection (as ``file.ttc#N``).

    Folders keep their order; files within a folder are sorted by path, so every
    process that lists the same folders gets the same list (and so the same font for
    the same random draw). A file reached twice is listed once; an unreadable
    collection is skipped with a warning.

    Raises:
        FontError: a folder is missing, is not a folder, or holds no font file.
    """
    out: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        folder = Path(d).expanduser()
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise FontError(
                f"font folder {str(d)!r} {what}. Expected a folder holding .ttf/.otf/.ttc files "
                "(searched recursively), e.g. --fonts /usr/share/fonts"
            )
        files = sorted(
            (p for p in folder.rglob("*") if p.suffix.lower() in FONT_SUFFIXES and p.is_file()),
            key=lambda p: str(p),
        )
        if not files:
            raise FontError(
                f"font folder {str(d)!r} holds no .ttf, .otf, .ttc or .otc file (searched "
                "recursively). Point --fonts at a folder of TrueType/OpenType fonts, e.g. "
                "/usr/share/fonts"
            )
        for p in files:
            real = p.resolve()
            if real in seen:
                continue
            seen.add(real)
            if p.suffix.lower() in COLLECTION_SUFFIXES:
                try:
                    n = collection_faces(p)
                except FontError as e:
                    log.warning("skipping font: %s", e)
                    continue
                out.extend(Path(f"{p}{_FACE_SEP}{i}") for i in range(n))
            else:
                out.append(p)
    return out


# (resolved path, size in bytes, mtime in ns) -> {char: drawable}. Filled on demand, per
# process, so building several generators over the same fonts checks each glyph once.
_COVERAGE_CACHE: dict[tuple[str, int, int], dict[str, bool]] = {}
# What a file of the coverage cache on disk was made by: a change to the check (its size,
# what counts as ink) must not be answered from files the old check wrote.
_COVERAGE_VERSION = 1


def coverage_cache_dir() -> Path | None:
    """Where checked glyph coverage is kept between processes: ``$CRNN_OCR_CACHE``, else
    ``$XDG_CACHE_HOME/crnn-ocr``, else ``~/.cache/crnn-ocr``, plus ``glyph-coverage``;
    None when ``CRNN_OCR_CACHE`` is set to the empty string (no cache on disk).

    Checking the 22 faces of the ``zh`` set against a 5,530-character charset takes about
    20 s (rasterising 90,000 glyphs); every training run and ``crnn-synth`` call would
    pay it again without this cache. An entry is keyed by the font file's path, size and
    modification time, so a changed font is checked again.
    """
    root = os.environ.get("CRNN_OCR_CACHE")
    if root == "":
        return None
    if root is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "crnn-ocr")
    return Path(root) / "glyph-coverage"


def _disk_file(key: tuple[str, int, int]) -> Path | None:
    folder = coverage_cache_dir()
    if folder is None:
        return None
    digest = hashlib.sha256(repr((key, _COVERAGE_SIZE, _COVERAGE_VERSION)).encode()).hexdigest()
    return folder / f"{digest[:32]}.json"


def _read_disk(key: tuple[str, int, int]) -> dict[str, bool]:
    """What an earlier process found for this font file; empty when nothing (or an
    unreadable file: the check then simply runs again)."""
    file = _disk_file(key)
    if file is None or not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if data.get("font") != list(key):
            return {}
        return {**dict.fromkeys(data["yes"], True), **dict.fromkeys(data["no"], False)}
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.debug("ignoring glyph coverage cache %s: %s", file, e)
        return {}


def _write_disk(key: tuple[str, int, int], known: dict[str, bool]) -> None:
    """Keep ``known`` for the next process: written whole to a temporary file and renamed,
    so a reader never sees half a file; a folder that cannot be written is passed over."""
    file = _disk_file(key)
    if file is None:
        return
    data = {
        "font": list(key),
        "yes": [c for c, ok in known.items() if ok],
        "no": [c for c, ok in known.items() if not ok],
    }
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(tmp, file)
    except OSError as e:
        log.debug("cannot keep glyph coverage in %s: %s", file.parent, e)


def glyph_coverage(path: str | os.PathLike[str], chars: Iterable[str]) -> frozenset[str]:
    """The characters of ``chars`` that the font at ``path`` can draw.

    A character counts when the font's Unicode cmap maps it to a glyph other than
    ``.notdef`` and, except for whitespace, that glyph leaves ink when rasterised.

    Raises:
        FontError: the file is not a readable font or has no Unicode cmap (e.g. a
            symbol font, whose letters would be drawn as pictures).
    """
    file, index = split_face(path)
    try:
        st = Path(file).stat()
    except OSError as e:
        raise FontError(f"cannot read font {str(path)!r}: {e}") from None
    key = (f"{Path(file).resolve()}{_FACE_SEP}{index}", st.st_size, st.st_mtime_ns)
    known = _COVERAGE_CACHE.get(key)
    if known is None:
        known = _COVERAGE_CACHE[key] = _read_disk(key)
    wanted = list(dict.fromkeys(chars))
    todo = [c for c in wanted if c not in known]
    if todo:
        known.update(_check_glyphs(str(path), todo))
        _write_disk(key, known)
    return frozenset(c for c in wanted if known[c])


def _check_glyphs(path: str, chars: list[str]) -> dict[str, bool]:
    # Imported here: only coverage checks need fontTools, and they run once per font.
    from fontTools.ttLib import TTFont, TTLibError

    file, index = split_face(path)
    try:
        with TTFont(file, lazy=True, fontNumber=index) as tt:
            cmap = tt.getBestCmap()
    except (TTLibError, OSError, KeyError, AssertionError, ValueError, TypeError) as e:
        raise FontError(f"{str(path)!r} is not a readable TrueType/OpenType font ({e})") from None
    if not cmap:
        raise FontError(
            f"{str(path)!r} has no Unicode cmap (a symbol or dingbat font?); its glyphs would "
            "not match the labels"
        )
    try:
        pil = ImageFont.truetype(
            file, _COVERAGE_SIZE, index=index, layout_engine=ImageFont.Layout.BASIC
        )
    except OSError as e:
        raise FontError(f"FreeType cannot load {str(path)!r} ({e})") from None
    out: dict[str, bool] = {}
    for c in chars:
        glyph = cmap.get(ord(c)) if len(c) == 1 else None
        if glyph is None or glyph == ".notdef":
            out[c] = False
        elif c.isspace():
            out[c] = c == " "
        else:
            out[c] = pil.getmask(c).getbbox() is not None
    return out


def load_fonts(paths: Sequence[str | os.PathLike[str]], chars: Iterable[str]) -> list[FontInfo]:
    """Check each font's coverage of ``chars``; unreadable fonts are skipped with a warning.

    Fonts that can draw none of ``chars`` (other than the space) are dropped too. The
    order of ``paths`` is kept.
    """
    wanted = list(dict.fromkeys(chars))
    fonts = []
    for p in paths:
        try:
            cov = glyph_coverage(p, wanted)
        except FontError as e:
            log.warning("skipping font: %s", e)
            continue
        if not cov - {" "}:
            log.warning("skipping font %s: it draws none of the charset's characters", p)
            continue
        fonts.append(FontInfo(str(p), cov))
    return fonts


class Glyph(NamedTuple):
    """A rasterised character.

    ``mask`` is the ink coverage (uint8, 255 = full ink) or None for a glyph without
    ink (the space); its top-left corner sits ``(dx, dy)`` pixels from the pen position
    on the baseline (``dy`` is negative above the baseline). ``advance`` is how far the
    pen moves, in pixels.
    """

    mask: np.ndarray | None
    dx: int
    dy: int
    advance: float


class LineBox(NamedTuple):
    """Vertical extent of a font's lower-case and capital letters, in pixels from the
    baseline (``top`` < 0 above it). Crops are made around this box, not around the
    ink of one word, so "ace" and "Apple" come out at the same letter scale."""

    top: int
    bottom: int


class GlyphCache:
    """Rasterised glyphs and ``FreeTypeFont`` objects, per (font file, pixel size).

    One instance lives in each process (it is dropped when a generator is pickled);
    it holds no state that changes what is drawn, only what it costs.
    """

    def __init__(self) -> None:
        self._fonts: dict[tuple[str, int, bool], ImageFont.FreeTypeFont] = {}
        # (font path, pixel size) -> {char: glyph}
        self._glyphs: dict[tuple[str, int], dict[str, Glyph]] = {}
        self._lines: dict[tuple[str, int], LineBox] = {}

    def font(self, path: str, size: int, shaped: bool = False) -> ImageFont.FreeTypeFont:
        """The font at ``size`` px; ``shaped``: with the RAQM layout (HarfBuzz), for
        scripts that need shaping, else BASIC: no ligatures or contextual forms, so
        every character of the label is drawn as its own glyph (and faster)."""
        key = (path, size, shaped)
        f = self._fonts.get(key)
        if f is None:
            file, index = split_face(path)
            engine = ImageFont.Layout.RAQM if shaped else ImageFont.Layout.BASIC
            f = ImageFont.truetype(file, size, index=index, layout_engine=engine)
            self._fonts[key] = f
        return f

    def glyph(self, path: str, size: int, char: str, oldstyle: bool = False) -> Glyph:
        return self.glyphs(path, size, char, oldstyle)[0]

    def glyphs(self, path: str, size: int, text: str, oldstyle: bool = False) -> list[Glyph]:
        """The glyphs of ``text``'s characters, rasterising the ones not seen yet;
        ``oldstyle``: digits in the face's old-style figures (OpenType ``onum``), where
        it has them and Pillow can shape (RAQM), else its usual ones."""
        key = (path, size)
        table = self._glyphs.get(key)
        if table is None:
            table = self._glyphs[key] = {}
        out = []
        for ch in text:
            onum = oldstyle and "0" <= ch <= "9" and _raqm()
            k = "onum:" + ch if onum else ch
            g = table.get(k)
            if g is None:
                g = table[k] = self._render(path, size, ch, onum)
            out.append(g)
        return out

    def _render(self, path: str, size: int, char: str, onum: bool = False) -> Glyph:
        font = self.font(path, size, shaped=onum)
        features = ["onum"] if onum else None
        advance = float(font.getlength(char, features=features))
        # A canvas of 3 em with the pen 1 em from the left and 1 em above the bottom
        # holds any glyph of a text font; the ink is then measured on the pixels
        # themselves (metric boxes can miss an anti-aliased pixel).
        ox, oy = size, 2 * size
        canvas = Image.new("L", (3 * size, 3 * size), 0)
        ImageDraw.Draw(canvas).text(
            (ox, oy), char, font=font, fill=255, anchor="ls", features=features
        )
        bbox = canvas.getbbox()
        if bbox is None:
            return Glyph(None, 0, 0, advance)
        mask = np.array(canvas.crop(bbox), dtype=np.uint8)
        return Glyph(mask, bbox[0] - ox, bbox[1] - oy, advance)

    def line_ratio(self, path: str, chars: frozenset[str]) -> float:
        """Line box height per pixel of font size (measured at 64 px)."""
        box = self.line_box(path, 64, chars)
        return (box.bottom - box.top) / 64.0

    def line_box(self, path: str, size: int, chars: frozenset[str]) -> LineBox:
        """Ascender-to-descender box from reference letters the font can draw."""
        key = (path, size)
        box = self._lines.get(key)
        if box is None:
            tops = [self.glyph(path, size, c) for c in "bdhklHT" if c in chars]
            bottoms = [self.glyph(path, size, c) for c in "gpqy" if c in chars]
            tops = [g for g in tops if g.mask is not None]
            bottoms = [g for g in bottoms if g.mask is not None]
            ascent, descent = self.font(path, size).getmetrics()
            top = min(g.dy for g in tops) if tops else -ascent
            bottom = max(g.dy + g.mask.shape[0] for g in bottoms) if bottoms else descent  # type: ignore[union-attr]
            box = LineBox(top, max(bottom, 1))
            self._lines[key] = box
        return box


@functools.cache
def _raqm() -> bool:
    """Whether Pillow can apply OpenType features (its RAQM layout)."""
    from PIL import features

    return bool(features.check("raqm"))


def font_weights(
    fonts: Sequence[FontInfo], rules: list[tuple[str, float]]
) -> tuple[float, ...] | None:
    """Each font's weight under ``rules`` (the first pattern matching its file name wins,
    1 when none does); None without rules. A rule that names no font is warned about."""
    if not rules:
        return None
    names = [Path(f.path).name for f in fonts]
    for pattern, _ in rules:
        if not any(fnmatch.fnmatch(n, pattern) for n in names):
            log.warning(
                "data.synth.font_weights: %r names none of the %d fonts", pattern, len(names)
            )
    return tuple(
        next((w for pattern, w in rules if fnmatch.fnmatch(n, pattern)), 1.0) for n in names
    )
