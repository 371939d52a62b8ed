"""Label files as other projects write them, read into the one form the rest uses
(:class:`crnn.data.gt.GtFile`: image path, label, line number; bad lines by number).

=============  ===========================================  ===============================
format         a line (or a file)                           from
=============  ===========================================  ===============================
``gt``         ``relative/path<TAB>label`` (or a space)     clovaai/DTRB, MMOCR, ours
``paddle``     ``relative/path<TAB>label``; the tab only,   PaddleOCR ``rec_gt_train.txt``
               so labels may hold spaces
``index``      ``name idx idx ...``: each ``idx`` a line    the Synthetic Chinese String
               number (from 0) of an alphabet file such as  Dataset (3.6 M lines),
               ``char_std_5990.txt`` (line 0 the blank's    Sierkinhane's ``train.txt``
               placeholder)
``per-image``  ``NAME.jpg`` beside ``NAME.txt`` holding its  chineseocr-style folders
               label
=============  ===========================================  ===============================

``auto`` tells ``index`` from ``gt`` by the lines themselves (a name then two or more
numbers on most lines), and ``per-image`` by the absence of a label file, so that an
index list given as a gt.txt is never stored with its numbers as labels. Labels that
look like UTF-8 text decoded as GBK (mojibake such as ``鎴戜滑`` for ``我们``) are reported
with their repaired form, never stored.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from PIL import Image

from crnn.data.errors import DataError
from crnn.data.gt import GT_NAME, GtFile, GtLine, read_gt
from crnn.data.image import ImageSpec, load_image, to_model_height

log = logging.getLogger(__name__)

LABEL_FORMATS = ("auto", "gt", "paddle", "index", "per-image")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif")
# A line of an index list: a name, then whitespace-separated numbers.
_INDEX_LINE = re.compile(r"^\S+(?:[ \t]+\d+){2,}[ \t]*$")
# Share of the sampled lines that must look like an index list for auto to say so.
_INDEX_SHARE = 0.9


class LabelFormatError(ValueError, DataError):
    """A label file that cannot be read as asked (or as detected); the message says
    what was found and the command that reads it. A ``DataError`` too, so training and
    evaluation stop with its message (exit code 2) rather than a traceback."""


def looks_like_index_list(path: str | Path, encoding: str = "utf-8", sample: int = 200) -> float:
    """Share of the first ``sample`` non-empty lines of ``path`` that read as
    ``name idx idx ...`` (two or more numbers after a name, no tab before them)."""
    n = hits = 0
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode(encoding, "replace").strip("\r\n\ufeff")
            if not line.strip():
                continue
            n += 1
            hits += bool(_INDEX_LINE.match(line)) and "\t" not in line.split(" ", 1)[0]
            if n >= sample:
                break
    return hits / n if n else 0.0


def repaired_mojibake(text: str) -> str | None:
    """The text ``text`` was before UTF-8 bytes were decoded as GBK (``鎴戜滑`` ->
    ``我们``), or None when it does not look like that. Real Chinese almost never turns
    into valid UTF-8 when encoded as GBK, so a label that does, and reads as CJK then,
    was mangled by a wrong conversion."""
    if all(ord(c) < 0x80 for c in text):
        return None
    try:
        fixed = text.encode("gb18030").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    if fixed == text or not any(
        "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" for c in fixed
    ):
        return None
    return fixed


def read_labels(
    root: str | Path,
    gt: str | Path | None,
    fmt: str = "auto",
    index_file: str | Path | None = None,
    encoding: str = "utf-8",
) -> tuple[GtFile, str]:
    """Read the labels of a dataset in any of :data:`LABEL_FORMATS`.

    Args:
        root: the folder image paths are relative to (the images themselves for
            ``per-image``).
        gt: the label file (``None`` for ``per-image``, or for ``auto`` to look in
            ``root``: ``gt.txt``, else one ``.txt`` per image).
        index_file: the alphabet file whose lines the numbers of an ``index`` list are
            (e.g. ``char_std_5990.txt``); required for that format.
    Returns:
        The parsed file (bad lines by number, each with why and what to do) and the
        format that was read.
    Raises:
        LabelFormatError: an unknown format, an index list without its alphabet file
            (auto-detected too), or a ``per-image`` folder without images.
    """
    root = Path(root)
    if fmt not in LABEL_FORMATS:
        raise LabelFormatError(
            f"unknown label format {fmt!r}; expected one of {', '.join(LABEL_FORMATS)}"
        )
    if fmt == "auto":
        fmt = _detect(root, gt, encoding)
    if fmt == "per-image":
        parsed = _read_per_image(root, encoding)
    elif fmt == "index":
        gt = Path(gt) if gt is not None else root / "gt.txt"
        if index_file is None:
            share = looks_like_index_list(gt, encoding)
            raise LabelFormatError(
                f"{gt} is an index list ('name idx idx ...'"
                + (f", {share:.0%} of its first lines" if share else "")
                + "): its numbers are line numbers of an alphabet file, not labels. Give that "
                "file, e.g. --charset char_std_5990.txt (create_lmdb), so they are turned into "
                "text; pass --format gt only if the numbers really are the labels"
            )
        parsed = _read_index(gt, index_file, encoding)
    else:
        gt = Path(gt) if gt is not None else root / "gt.txt"
        parsed = read_gt(gt, encoding, tab_only=fmt == "paddle")
    _flag_mojibake(parsed)
    return parsed, fmt


def _detect(root: Path, gt: str | Path | None, encoding: str) -> str:
    if gt is None:
        if (root / "gt.txt").is_file():
            gt = root / "gt.txt"
        elif root.is_dir() and any(p.suffix.lower() == ".txt" for p in root.iterdir()):
            return "per-image"
        else:
            raise FileNotFoundError(
                f"{root} has no gt.txt and no NAME.txt label files beside its images: give the "
                "label file with --gt (lines 'relative/path<TAB>label', PaddleOCR's "
                "'path<TAB>label' or an index list 'name idx idx ...')"
            )
    return "index" if looks_like_index_list(gt, encoding) >= _INDEX_SHARE else "gt"


def _read_index(gt: Path, index_file: str | Path, encoding: str) -> GtFile:
    from crnn.text.alphabet_files import index_table

    table = index_table(index_file)
    lines = table.lines
    out = GtFile(Path(gt))
    data = Path(gt).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for lineno, raw in enumerate(data.splitlines(), start=1):
        text = raw.decode(encoding, "replace").strip()
        if not text:
            continue
        name, *nums = text.split()
        if not nums:
            out.bad.append((lineno, f"no indices after {name!r}"))
            continue
        try:
            ids = [int(n) for n in nums]
        except ValueError:
            out.bad.append((lineno, f"{text[:60]!r} is not 'name idx idx ...' (not all numbers)"))
            continue
        outside = [i for i in ids if not 0 < i < len(lines) or not lines[i]]
        if outside:
            first = outside[0]
            why = (
                f"index {first} is the blank's placeholder line {lines[0]!r}, not a character"
                if first == 0 and table.placeholder
                else f"index {first} is outside {Path(index_file).name} ({len(lines)} lines, "
                f"0-{len(lines) - 1})"
                if not 0 <= first < len(lines)
                else f"index {first} is an empty line of {Path(index_file).name}"
            )
            out.bad.append(
                (lineno, why + ": is it the alphabet file these labels were written with?")
            )
            continue
        out.lines.append(GtLine(lineno, name, "".join(lines[i] for i in ids)))
    return out


def _read_per_image(root: Path, encoding: str) -> GtFile:
    images = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise LabelFormatError(
            f"{root}: no images ({', '.join(IMAGE_SUFFIXES)}) to pair with .txt labels"
        )
    out = GtFile(root / "*.txt")
    for n, img in enumerate(images, start=1):
        rel = img.relative_to(root).as_posix()
        txt = img.with_suffix(".txt")
        if not txt.is_file():
            out.bad.append((n, f"no label file {txt.relative_to(root).as_posix()!r} for {rel!r}"))
            continue
        raw = txt.read_bytes().removeprefix(b"\xef\xbb\xbf")
        try:
            label = raw.decode(encoding)
        except UnicodeDecodeError:
            try:
                label = raw.decode("gb18030")
            except UnicodeDecodeError:
                out.bad.append(
                    (n, f"{txt.name} is neither {encoding} nor GBK; re-save it as UTF-8")
                )
                continue
        label = label.strip("\r\n\ufeff")
        if "\n" in label:
            label = label.split("\n", 1)[0].rstrip("\r")
        if not label.strip():
            out.bad.append((n, f"{txt.name} holds no label"))
            continue
        out.lines.append(GtLine(n, rel, label))
    return out


def _flag_mojibake(parsed: GtFile) -> None:
    keep = []
    for line in parsed.lines:
        fixed = repaired_mojibake(line.label)
        if fixed is None:
            keep.append(line)
            continue
        parsed.bad.append(
            (
                line.lineno,
                (
                    f"label {line.label[:30]!r} looks like UTF-8 text decoded as GBK by some tool "
                    f"(it reads {fixed[:30]!r} when undone); repair the file with "
                    f"iconv -f UTF-8 -t GB18030 {parsed.path.name} > {parsed.path.stem}.fixed.txt "
                    "(that undoes the wrong conversion) and use the fixed file"
                ),
            )
        )
    parsed.lines = keep
    parsed.bad.sort()


class FolderSource:
    """Images under ``root`` and their labels: ``root/gt.txt`` (``relative/path<TAB>label``)
    or any label file :mod:`crnn.data.formats` reads (PaddleOCR's, an index list with its
    ``index_file``, one ``NAME.txt`` per image when ``gt_name`` is None).

    Lines without a label or whose image file is missing are reported by line number
    (``self.bad_lines``) and left out; the rest load normally.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        gt_name: str | None = GT_NAME,
        index_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        # A label file other than gt.txt names the source (train.txt, test.txt...).
        self.name = self.root.name if gt_name in (None, GT_NAME) else f"{self.root.name}/{gt_name}"
        gt = self.root / gt_name if gt_name is not None else None
        if gt is not None and not gt.is_file():
            raise FileNotFoundError(
                f"{str(self.root)!r} has no {gt_name}: expected lines 'relative/path<TAB>label'"
            )
        parsed, _ = read_labels(self.root, gt, "auto" if gt else "per-image", index_file)
        self.bad_lines: list[tuple[int, str]] = list(parsed.bad)
        self.paths: list[Path] = []
        self._labels: list[str] = []
        for line in parsed.lines:
            path = self.root / line.path
            if not path.is_file():
                self.bad_lines.append((line.lineno, f"image {line.path!r} not found"))
                continue
            self.paths.append(path)
            self._labels.append(line.label)
        self.bad_lines.sort()
        if self.bad_lines:
            shown = "; ".join(f"line {n}: {why}" for n, why in self.bad_lines[:5])
            log.warning(
                "%s: %d bad lines in %s left out (%s)",
                self.name,
                len(self.bad_lines),
                gt or self.root,
                shown,
            )

    def __len__(self) -> int:
        return len(self.paths)

    def image_bytes(self, index0: int) -> bytes:
        return self.paths[index0].read_bytes()

    def label(self, index0: int) -> str:
        return self._labels[index0]

    def labels(self) -> list[str]:
        return list(self._labels)

    def sizes(self) -> list[tuple[int, int]] | None:
        return None

    def describe(self, index0: int) -> str:
        return str(self.paths[index0])

    def at_model_height(self, index0: int, spec: ImageSpec) -> Image.Image:
        return to_model_height(load_image(self.image_bytes(index0), spec.rgb), spec)
