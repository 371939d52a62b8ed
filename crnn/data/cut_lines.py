"""Labelled detection images cut into line crops for the recognizer, with the cut the
reader uses (``crnn.detect.order.cut_line``: perspective-corrected from each line's
quadrilateral), so one labelled set trains both halves of a reader.

Legible lines only (``###`` and empty texts left out); upright lines (columns) are left
out and counted, as the recognizer learns lines written across; crops are stored as PNG
no taller than :data:`MAX_HEIGHT` (the real word crops' convention), with a ``gt.txt``
that ``crnn-create-lmdb`` and training read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from crnn.data.quads import LabelledImage

MAX_HEIGHT = 64
MIN_HEIGHT = 6


@dataclass
class CutReport:
    written: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def cut_labelled(items: Iterable[LabelledImage], out: Path) -> CutReport:
    """Every legible line of ``items`` as ``out/images/<image>_<k>.png`` and a line of
    ``out/gt.txt``; returns what was written and what left out, by reason."""
    from crnn.data.detection import read_rgb
    from crnn.detect.order import cut_line, is_column

    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    report = CutReport()
    rows = []
    for item in items:
        legible = [k for k in range(len(item)) if not item.ignore[k]]
        if not legible:
            continue
        try:
            rgb = read_rgb(str(item.image))
        except (OSError, ValueError):
            report.skipped["unreadable image"] += len(legible)
            continue
        for k in legible:
            text = " ".join(item.texts[k].split())
            if "\t" in text or not text:
                report.skipped["empty text"] += 1
                continue
            quad = item.quads[k]
            if is_column(quad):
                report.skipped["vertical"] += 1
                continue
            crop = cut_line(rgb, quad)
            if crop.shape[0] < MIN_HEIGHT:
                report.skipped[f"under {MIN_HEIGHT} px high"] += 1
                continue
            im = Image.fromarray(np.ascontiguousarray(crop))
            if im.height > MAX_HEIGHT:
                im = im.resize(
                    (max(1, round(im.width * MAX_HEIGHT / im.height)), MAX_HEIGHT), Image.LANCZOS
                )
            name = f"images/{item.image.stem}_{k:03d}.png"
            im.save(out / name)
            rows.append(f"{name}\t{text}")
            report.written += 1
    (out / "gt.txt").write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return report
