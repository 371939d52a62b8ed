"""Named font sets: the faces a recipe trains on, found wherever the system installed them.

A recipe says ``data.synth.font_sets: [zh]`` instead of naming folders: folders differ
between distributions (Debian puts Noto CJK in ``/usr/share/fonts/opentype/noto``,
Fedora in ``/usr/share/fonts/google-noto-cjk``), and a folder that is missing used to
stop a first run with a traceback. A set lists each face by the file name its package
installs, the package (what to install when it is missing) and its style (for the
benchmark's leave-one-style-out rows and the model card's font list).

    from crnn.data.synth.fontsets import resolve_font_set
    found = resolve_font_set("zh")
    found.paths      # ["/usr/share/fonts/.../NotoSansCJK-Regular.ttc#2", ...]
    found.missing    # packages with no face installed, e.g. ["fonts-lxgw-wenkai"]
    found.install_command()   # "sudo apt-get install -y fonts-lxgw-wenkai"
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crnn.data.synth.fonts import COLLECTION_SUFFIXES, FontError, bundled_font_dir, find_font_files

log = logging.getLogger(__name__)

# Where font packages and users put fonts (Linux, macOS); searched recursively by name.
FONT_ROOTS = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "/usr/share/fonts-droid-fallback",
    "~/.local/share/fonts",
    "~/.fonts",
    "/Library/Fonts",
    "~/Library/Fonts",
)

# Styles of Chinese type, as the benchmark's rows name them.
STYLES = ("hei", "song", "kai", "mincho")


@dataclass(frozen=True)
class SetFace:
    """One face of a font set.

    Attributes:
        file: the file name its package installs (found under any of :data:`FONT_ROOTS`).
        package: the Debian/Ubuntu package that installs it.
        style: ``hei`` (sans), ``song`` (Ming/serif), ``kai`` (brush), ``mincho``
            (Japanese Ming).
        face: for a collection (.ttc), the face's full name (e.g. ``Noto Sans CJK SC``);
            empty for a single-face file.
    """

    file: str
    package: str
    style: str
    face: str = ""

    @property
    def name(self) -> str:
        return self.face or Path(self.file).stem


def _noto(kind: str, weights: Sequence[str], package: str, region: str = "SC") -> list[SetFace]:
    style = "hei" if kind == "Sans" else "song"
    return [
        SetFace(
            f"Noto{kind}CJK-{w}.ttc",
            package,
            style,
            f"Noto {kind} CJK {region}{'' if w == 'Regular' else ' ' + w}",
        )
        for w in weights
    ]


# The Chinese set: every CJK face of the Debian packages the Chinese recipes may train on
# (the simplified-Chinese face of each Noto CJK collection; WenQuanYi's proportional
# faces; LXGW WenKai's proportional faces, whose Mono twins differ only in Latin).
FONT_SETS: dict[str, tuple[SetFace, ...]] = {
    "zh": (
        *_noto("Sans", ("Regular", "Bold"), "fonts-noto-cjk"),
        *_noto("Sans", ("Thin", "Light", "DemiLight", "Medium", "Black"), "fonts-noto-cjk-extra"),
        *_noto("Serif", ("Regular", "Bold"), "fonts-noto-cjk"),
        *_noto(
            "Serif", ("ExtraLight", "Light", "Medium", "SemiBold", "Black"), "fonts-noto-cjk-extra"
        ),
        SetFace("wqy-zenhei.ttc", "fonts-wqy-zenhei", "hei", "WenQuanYi Zen Hei"),
        SetFace("wqy-microhei.ttc", "fonts-wqy-microhei", "hei", "WenQuanYi Micro Hei"),
        SetFace("DroidSansFallbackFull.ttf", "fonts-droid-fallback", "hei"),
        SetFace("LXGWWenKai-Regular.ttf", "fonts-lxgw-wenkai", "kai"),
        SetFace("LXGWWenKai-Light.ttf", "fonts-lxgw-wenkai", "kai"),
        SetFace("LXGWWenKai-Bold.ttf", "fonts-lxgw-wenkai", "kai"),
        SetFace("BabelStoneHan.ttf", "fonts-babelstone-han", "song"),
        SetFace("HanaMinA.ttf", "fonts-hanazono", "mincho"),
    ),
    # The same characters in the regional glyph forms of the Noto CJK collections: the
    # Taiwan (TC), Hong Kong (HK), Japanese (JP) and Korean (KR) faces of the packages
    # above, which draw many a character differently from the SC face (关's top strokes,
    # 骨's inner box, 直's foot); printed Chinese text set in a face of another region
    # carries them. Add it beside ``zh`` (``font_sets: [zh, zh_regional]``).
    "zh_regional": tuple(
        face
        for region in ("TC", "HK", "JP", "KR")
        for kind in ("Sans", "Serif")
        for face in _noto(kind, ("Regular", "Bold"), "fonts-noto-cjk", region)
    ),
}


@dataclass
class FoundSet:
    """What :func:`resolve_font_set` found of one set.

    Attributes:
        name: the set's name.
        faces: each face found, with its path (``file.ttc#N`` for a collection's face).
        missing: the set's faces not installed.
    """

    name: str
    faces: list[tuple[SetFace, str]] = field(default_factory=list)
    missing: list[SetFace] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return [p for _, p in self.faces]

    @property
    def missing_packages(self) -> list[str]:
        return list(dict.fromkeys(f.package for f in self.missing))

    def install_command(self, packages: Iterable[str] | None = None) -> str:
        """The command that installs ``packages`` (default: the missing ones)."""
        pkgs = list(self.missing_packages if packages is None else packages)
        sudo = "" if hasattr(os, "geteuid") and os.geteuid() == 0 else "sudo "
        return f"{sudo}apt-get install -y {' '.join(pkgs)}"

    def all_packages(self) -> list[str]:
        return list(dict.fromkeys(f.package for f in FONT_SETS[self.name]))


def set_names() -> tuple[str, ...]:
    return tuple(FONT_SETS)


@functools.cache
def _files_by_name(roots: tuple[str, ...]) -> dict[str, str]:
    """File name -> first path found under ``roots`` (in root order, paths sorted)."""
    out: dict[str, str] = {}
    for root in roots:
        folder = Path(root).expanduser()
        if not folder.is_dir():
            continue
        for p in sorted(folder.rglob("*"), key=str):
            if p.suffix.lower() in (".ttf", ".otf", ".ttc", ".otc") and p.name not in out:
                out[p.name] = str(p)
    return out


@functools.cache
def _collection_face_names(path: str) -> tuple[str, ...]:
    """The full name of each face of a .ttc/.otc collection, in face order."""
    from fontTools.ttLib import TTCollection

    try:
        coll = TTCollection(path, lazy=True)
        return tuple(str(f["name"].getDebugName(4) or "") for f in coll.fonts)
    except Exception as e:  # noqa: BLE001 (fontTools raises many kinds on a bad file)
        raise FontError(f"cannot read font collection {path!r} ({e})") from None


def face_path(face: SetFace, file: str) -> str | None:
    """The path of ``face`` in the installed ``file`` (``file.ttc#N`` for a collection's
    face), or None when the collection has no face of that name."""
    if not file.lower().endswith(COLLECTION_SUFFIXES):
        return file
    names = _collection_face_names(file)
    for i, n in enumerate(names):
        if n == face.face:
            return f"{file}#{i}"
    return None


def locate(face: SetFace, roots: Sequence[str] | None = None) -> str | None:
    """Where ``face`` is installed under ``roots`` (default :data:`FONT_ROOTS`): its path,
    ``file.ttc#N`` for a collection's face; None when it is not installed."""
    file = _files_by_name(tuple(FONT_ROOTS if roots is None else roots)).get(face.file)
    return face_path(face, file) if file else None


def resolve_font_set(name: str, roots: Sequence[str] | None = None) -> FoundSet:
    """Find the faces of font set ``name`` under ``roots`` (default :data:`FONT_ROOTS`).

    Raises:
        FontError: ``name`` is not a known set.
    """
    if name not in FONT_SETS:
        raise FontError(
            f"unknown font set {name!r}: expected one of {', '.join(FONT_SETS)} "
            "(data.synth.font_sets), or name font folders with data.synth.font_dirs"
        )
    found = FoundSet(name)
    for face in FONT_SETS[name]:
        path = locate(face, roots)
        if path is None:
            found.missing.append(face)
        else:
            found.faces.append((face, path))
    return found


def style_of(path: str, set_name: str = "zh") -> str | None:
    """The style of a font set's face given its path (``file.ttc#N``), or None."""
    base = Path(re.sub(r"#\d+$", "", path)).name
    for face in FONT_SETS.get(set_name, ()):
        if face.file == base:
            if not face.face:
                return face.style
            file = re.sub(r"#\d+$", "", path)
            if face_path(face, file) == path:
                return face.style
    return None


def configured_fonts(cfg: Any) -> list[str]:
    """The font files (``file.ttc#N`` for a collection's face) that ``cfg`` names: the
    bundled fonts, ``font_dirs`` and ``font_sets``, less ``exclude_fonts``.

    Raises:
        FontError: no font at all, a folder that does not exist, or a font set none of
            whose faces is installed (one line naming the command that installs them).
    """
    dirs: list[str | Path] = [bundled_font_dir()] if cfg.bundled_fonts else []
    dirs += list(cfg.font_dirs)
    if not dirs and not cfg.font_sets:
        raise FontError(
            "no fonts: data.synth.bundled_fonts is false and data.synth.font_dirs and "
            "font_sets are empty. Name a font folder (--fonts DIR) or keep the bundled fonts."
        )
    paths = [str(p) for p in find_font_files(dirs)] if dirs else []
    for name in cfg.font_sets:
        found = resolve_font_set(name)
        if not found.faces:
            raise FontError(
                f"data.synth.font_sets: no face of font set {name!r} is installed. Install "
                f"them with `crnn-fonts --install {name}` (runs `"
                f"{found.install_command(found.all_packages())}`), or name a folder of "
                "fonts with data.synth.font_dirs"
            )
        if found.missing:
            _say_missing(name, found.install_command(), len(found.missing), len(found.faces))
        paths += found.paths
    if cfg.exclude_fonts:
        paths = [
            p for p in paths if not any(fnmatch.fnmatch(Path(p).name, g) for g in cfg.exclude_fonts)
        ]
    return list(dict.fromkeys(paths))


@functools.cache
def _say_missing(name: str, command: str, missing: int, found: int) -> None:
    # Once per process: every generator of a run (train, validation) would repeat it.
    log.warning(
        "font set %r: %d of its faces are not installed; training uses the other %d. "
        "Install them with: %s",
        name,
        missing,
        found,
        command,
    )
