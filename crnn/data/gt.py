"""The one gt.txt parser: ``relative/path<TAB>label`` per line.

Used by image-folder datasets (``crnn.data.formats.FolderSource``) and by LMDB
creation (``crnn.data.create.create_lmdb``), so both accept and refuse the same lines.
Some tools separate path and label with a space; that is accepted too. Blank lines are
skipped; a line without a label is reported by number, never silently dropped (a
label of only spaces is kept: datasets count it as an empty label).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

GT_NAME = "gt.txt"


@dataclass(frozen=True)
class GtLine:
    lineno: int  # 1-based, for messages
    path: str  # as written, relative to the folder
    label: str


@dataclass
class GtFile:
    """The usable lines of a gt.txt, and the bad ones as ``(line number, why)``."""

    path: Path
    lines: list[GtLine] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)


def read_gt(
    path: str | os.PathLike[str], encoding: str = "utf-8", tab_only: bool = False
) -> GtFile:
    """Parse a gt.txt in ``encoding`` (UTF-8 by default; a byte-order mark is allowed).

    A line that does not decode is reported by number with the offending byte, never
    stored with replacement characters (a silently corrupted label); when it reads as
    GBK, the message says so. ``tab_only`` (PaddleOCR's files) splits path and label at
    a tab only, so labels may hold spaces. Raises ``FileNotFoundError`` saying what the
    file should hold."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"ground-truth file {str(path)!r} not found: expected lines 'relative/path<TAB>label'"
        )
    out = GtFile(path)
    data = path.read_bytes()
    if encoding.lower().replace("-", "") in ("utf8", "utf8sig") and data.startswith(
        b"\xef\xbb\xbf"
    ):
        data = data[3:]
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as e:
            hint = "create_lmdb --encoding latin-1"
            try:
                raw.decode("gb18030")
                hint = "it reads as GBK: create_lmdb --encoding gbk"
            except UnicodeDecodeError:
                pass
            out.bad.append(
                (
                    lineno,
                    (
                        f"not valid {encoding} (byte 0x{raw[e.start]:02x} at column "
                        f"{e.start + 1} of "
                        f"{raw[:60]!r}); re-save the file as UTF-8, or give its encoding ({hint})"
                    ),
                )
            )
            continue
        if not line.strip():
            continue
        rel, sep, label = line.partition("\t")
        if not sep and not tab_only:  # some tools separate with a space
            rel, sep, label = line.partition(" ")
        if not sep or not label:
            out.bad.append((lineno, f"no label in {line[:80]!r}"))
            continue
        out.lines.append(GtLine(lineno, rel, label))
    return out
