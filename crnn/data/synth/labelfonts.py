"""Fonts for pictures: labels and reads drawn in the script they are in (contact sheets,
error sheets, TensorBoard grids, drawn pages), never for training.

:class:`LabelFonts` picks, for each text, a font that has its glyphs: preferred fonts
(a model's training fonts), the bundled DejaVu faces, the bundled CJK label face (the
zh5529 characters, ``crnn/assets/label_fonts``), then what fontconfig finds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from PIL import ImageDraw, ImageFont

from crnn.data.synth.fonts import (
    _FACE_SEP,
    COLLECTION_SUFFIXES,
    FONT_SUFFIXES,
    FontError,
    bundled_font_dir,
    find_font_files,
    glyph_coverage,
    split_face,
)

# Bundled fonts tried for labels after the preferred ones: wide Latin, Greek, Cyrillic,
# Arabic and Hebrew coverage.
_LABEL_FALLBACKS = ("dejavu/DejaVuSans.ttf", "dejavu/DejaVuSansMono-Bold.ttf")
# Then the bundled models' scripts that DejaVu lacks: Chinese (a subset of Noto Sans CJK
# SC to the zh5529 charset, crnn/assets/label_fonts; never used for training).
_LABEL_CJK = "crnn-ocr-LabelCJK-Regular.otf"


def label_font_dir() -> Path:
    """Fonts that draw labels in pictures only (``crnn/assets/label_fonts``)."""
    return Path(str(resources.files("crnn") / "assets" / "label_fonts"))


# At most this many characters go into one fontconfig query (its command line).
_FC_CHARS = 40


def system_fonts_for(chars: Iterable[str]) -> list[str]:
    """Font files (``file.ttc#N`` for collection faces) that fontconfig says cover
    every one of ``chars`` (``fc-list :charset=...``), sorted; empty when fontconfig
    is not installed or knows none. CJK, Thai, Devanagari... found this way on any
    desktop or server with the distribution's fonts (e.g. fonts-noto-cjk)."""
    import shutil
    import subprocess

    codes = sorted({ord(c) for c in chars if not c.isspace()})[:_FC_CHARS]
    fc = shutil.which("fc-list")
    if not codes or fc is None:
        return []
    query = ":charset=" + " ".join(f"{c:x}" for c in codes)
    try:
        res = subprocess.run(
            [fc, query, "file", "index"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return []
    out = []
    for line in res.stdout.splitlines():
        # "/usr/share/fonts/x.ttc: :index=2" or "/path/f.ttf: "
        file, _, rest = line.partition(":")
        index = rest.rpartition("index=")[2].strip() if "index=" in rest else "0"
        if Path(file).suffix.lower() not in FONT_SUFFIXES:
            continue
        out.append(
            f"{file}{_FACE_SEP}{index}" if file.lower().endswith(COLLECTION_SUFFIXES) else file
        )
    # Regular weights before bold ones, then by name: the same choice on every run.
    return sorted(set(out), key=lambda f: ("bold" in f.lower(), f))


class LabelFonts:
    """Chooses, for each text to draw in a picture (a contact sheet's labels, a
    TensorBoard grid's reads), a font that has its glyphs, so labels in Chinese, Arabic
    or Hindi never come out as boxes of missing glyphs.

    Fonts are tried in this order: ``preferred`` (a configured font, the model's
    training fonts), the bundled DejaVu faces, the bundled CJK label face (the zh5529
    characters), then the system fonts fontconfig finds for the characters still
    missing. A text no font covers completely gets the one
    that covers most of it.

    Args:
        size: pixel size of the text.
        preferred: font files or folders (``file.ttc#N`` faces included), first tried first.
    """

    def __init__(self, size: int, preferred: Sequence[str | os.PathLike[str]] = ()) -> None:
        self.size = size
        files: list[str] = []
        for p in preferred:
            path = Path(split_face(p)[0])
            if path.is_dir():
                try:
                    files.extend(str(f) for f in find_font_files([path]))
                except FontError:
                    continue
            elif path.is_file():
                files.append(str(p))
        files += [str(bundled_font_dir() / f) for f in _LABEL_FALLBACKS]
        files.append(str(label_font_dir() / _LABEL_CJK))
        self._candidates = list(dict.fromkeys(files))
        self._system_asked: set[str] = set()
        self._loaded: dict[str, ImageFont.FreeTypeFont] = {}
        self._choice: dict[frozenset[str], str | None] = {}

    def _covered(self, path: str, chars: frozenset[str]) -> int:
        try:
            return len(glyph_coverage(path, chars))
        except FontError:
            return -1

    def path_for(self, text: str) -> str | None:
        """The font file (or ``file.ttc#N``) :meth:`font` draws ``text`` with."""
        chars = frozenset(c for c in text if not c.isspace())
        if chars in self._choice:
            return self._choice[chars]
        best, best_n = None, -1
        for path in self._candidates:
            n = self._covered(path, chars)
            if n == len(chars):
                best, best_n = path, n
                break
            if n > best_n:
                best, best_n = path, n
        if best_n < len(chars):
            missing = chars - (glyph_coverage(best, chars) if best and best_n >= 0 else frozenset())
            key = "".join(sorted(missing))
            if key not in self._system_asked:
                self._system_asked.add(key)
                found = [f for f in system_fonts_for(missing) if f not in self._candidates]
                self._candidates += found
                if found:
                    return self.path_for(text)
        self._choice[chars] = best
        return best

    def runs(self, text: str) -> list[tuple[str, str | None]]:
        """``text`` cut into ``(piece, font path)`` runs: the whole text in one font
        when one has all its glyphs, else each piece in a font that has its own (Latin
        words beside Chinese ones when no font at hand has both)."""
        whole = self.path_for(text)
        chars = frozenset(c for c in text if not c.isspace())
        if whole is None or len(glyph_coverage(whole, chars)) == len(chars):
            return [(text, whole)]
        out: list[tuple[str, str | None]] = []
        for c in text:
            path = (
                out[-1][1]
                if out and (c.isspace() or self._has(out[-1][1], c))
                else self.path_for(c)
            )
            if out and out[-1][1] == path:
                out[-1] = (out[-1][0] + c, path)
            else:
                out.append((c, path))
        return out

    def _has(self, path: str | None, c: str) -> bool:
        return path is not None and bool(glyph_coverage(path, c))

    def draw(
        self,
        draw: ImageDraw.ImageDraw,
        xy: tuple[int, int],
        text: str,
        fill: Any,
        max_width: int | None = None,
    ) -> None:
        """Draw ``text`` at ``xy`` (its runs in fonts that have their glyphs), cut with an
        ellipsis at ``max_width`` pixels."""
        x, y = xy
        limit = None if max_width is None else x + max_width
        for piece, path in self.runs(text):
            font = self._load(path)
            if limit is not None and x + font.getlength(piece) > limit:
                draw.text((x, y), fit_text(piece, font, max(0, limit - x)), font=font, fill=fill)
                return
            draw.text((x, y), piece, font=font, fill=fill)
            x += int(round(font.getlength(piece)))

    def length(self, text: str) -> int:
        """Pixel width of ``text`` as :meth:`draw` draws it."""
        return int(sum(self._load(p).getlength(piece) for piece, p in self.runs(text)))

    def font(self, text: str) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
        """A Pillow font at :attr:`size` with glyphs for ``text`` (Pillow's built-in
        bitmap font only when no font file can be read at all)."""
        return self._load(self.path_for(text))

    def _load(self, path: str | None) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
        if path is None:
            return ImageFont.load_default()
        if path not in self._loaded:
            file, index = split_face(path)
            try:
                self._loaded[path] = ImageFont.truetype(file, self.size, index=index)
            except OSError:
                return ImageFont.load_default()
        return self._loaded[path]


def fit_text(text: str, font: ImageFont.FreeTypeFont | ImageFont.ImageFont, max_width: int) -> str:
    """``text``, cut with an ellipsis so that it is at most ``max_width`` pixels wide."""
    if font.getlength(text) <= max_width:
        return text
    while text and font.getlength(text + "…") > max_width:
        text = text[:-1]
    return text + "…"
