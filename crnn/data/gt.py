"""The one gt.txt parser: ``relative/path<TAB>label`` per line.

Used by image-folder datasets (``crnn.data.datasets.FolderSource``) and by LMDB
creation (``crnn.data.lmdb.create_lmdb``), so both accept and refuse the same lines.
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


def read_gt(path: str | os.PathLike[str]) -> GtFile:
    """Parse a gt.txt (UTF-8, a byte-order mark allowed).

    Raises ``FileNotFoundError`` saying what the file should hold."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"ground-truth file {str(path)!r} not found: expected lines 'relative/path<TAB>label'"
        )
    out = GtFile(path)
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        rel, sep, label = line.partition("\t")
        if not sep:  # some tools separate with a space
            rel, sep, label = line.partition(" ")
        if not sep or not label:
            out.bad.append((lineno, f"no label in {line[:80]!r}"))
            continue
        out.lines.append(GtLine(lineno, rel, label))
    return out
