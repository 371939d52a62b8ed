"""Evaluation that shows its errors: every wrong read as a table row, breakdowns by label
length and by character, a contact sheet of the worst ones (people would rather look
than read: ``crnn-eval --errors DIR``), and how far confidence is from accuracy."""

from __future__ import annotations

import csv
import heapq
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw
from rapidfuzz.distance import Levenshtein

from crnn.reading.calibration import expected_calibration_error
from crnn.reports.drawing import label_fonts

# Label-length buckets of the breakdown (characters).
LENGTH_BUCKETS = ((1, 3), (4, 6), (7, 10), (11, 20), (21, 10**9))


@dataclass(order=True)
class ErrorRecord:
    """One wrong read. Orders by how bad it is: normalised edit distance, then
    confidence (a confident wrong read is worse than a hesitant one)."""

    badness: tuple[float, float]
    source: str = field(compare=False)
    label: str = field(compare=False)
    prediction: str = field(compare=False)
    confidence: float = field(compare=False)
    edit_distance: int = field(compare=False)
    image: np.ndarray | None = field(default=None, compare=False, repr=False)


class ErrorCollector:
    """Collects every wrong prediction, the images of the ``keep_images`` worst, and the
    per-length and per-character counts behind the breakdown."""

    def __init__(self, keep_images: int = 48) -> None:
        self.keep_images = keep_images
        self.errors: list[ErrorRecord] = []
        self._worst: list[tuple[ErrorRecord, int]] = []  # min-heap of the worst
        self._tie = itertools.count()
        self.by_length: Counter[tuple[str, bool]] = Counter()
        self.confusions: Counter[tuple[str, str]] = Counter()  # (label char, read char)

    def add(
        self, batch: dict[str, Any], predictions: list[Any], labels: list[str], texts: list[str]
    ) -> None:
        """One batch: its predictions, and ``labels`` and predicted ``texts`` as the score
        compares them (normalised as the reporting mode says)."""
        sources = batch.get("sources") or [""] * len(labels)
        for k, (pred, label, text, src) in enumerate(zip(predictions, labels, texts, sources)):
            ok = text == label
            self.by_length[(length_bucket(len(label)), ok)] += 1
            if ok:
                continue
            ed = Levenshtein.distance(text, label)
            self._count_confusions(label, text)
            rec = ErrorRecord(
                (ed / max(len(label), len(text), 1), pred.confidence),
                src,
                label,
                text,
                pred.confidence,
                ed,
            )
            self.errors.append(rec)
            if self.keep_images:
                width, image = int(batch["widths"][k]), batch["images"][k]
                rec.image = None if image is None else np.asarray(image)[:, :, :width]
                heapq.heappush(self._worst, (rec, next(self._tie)))  # type: ignore[arg-type]
                if len(self._worst) > self.keep_images:
                    heapq.heappop(self._worst)[0].image = None

    def _count_confusions(self, label: str, text: str) -> None:
        # A minimal edit script (Levenshtein's): difflib's matching blocks imply more edits
        # than the distance on some pairs ("cbbbae" -> "abbae" lost the c->a confusion).
        for op in Levenshtein.editops(label, text):
            if op.tag == "replace":
                self.confusions[(label[op.src_pos], text[op.dest_pos])] += 1
            elif op.tag == "delete":
                self.confusions[(label[op.src_pos], "")] += 1
            else:
                self.confusions[("", text[op.dest_pos])] += 1

    def worst(self) -> list[ErrorRecord]:
        return sorted((r for r, _ in self._worst), reverse=True)

    def write(self, out: str | Path, title: str, fonts: Any = None) -> list[Path]:
        """``errors.tsv``, ``summary.md`` and ``worst_errors.png`` into ``out``;
        ``fonts`` (a ``LabelFonts``) draws the labels and reads."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        tsv = out / "errors.tsv"
        with open(tsv, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(["source", "label", "prediction", "confidence", "edit_distance"])
            for r in sorted(self.errors, reverse=True):
                w.writerow(
                    [r.source, r.label, r.prediction, f"{r.confidence:.4f}", r.edit_distance]
                )
        summary = out / "summary.md"
        summary.write_text(self.summary(title), encoding="utf-8")
        written = [tsv, summary]
        worst = self.worst()
        if worst:
            sheet = out / "worst_errors.png"
            error_sheet(worst, fonts=fonts).save(sheet)
            written.append(sheet)
        return written

    def summary(self, title: str) -> str:
        lines = [
            f"# Errors: {title}",
            "",
            "## By label length",
            "",
            "| characters | samples | wrong | accuracy |",
            "|---|---:|---:|---:|",
        ]
        for lo, _ in LENGTH_BUCKETS:
            b = length_bucket(lo)
            n_ok, n_bad = self.by_length[(b, True)], self.by_length[(b, False)]
            if n_ok + n_bad:
                lines.append(f"| {b} | {n_ok + n_bad} | {n_bad} | {n_ok / (n_ok + n_bad):.2%} |")
        lines += [
            "",
            "## Most confused characters",
            "",
            "| label | read as | times |",
            "|---|---|---:|",
        ]
        for (a, b), n in self.confusions.most_common(25):
            lines.append(f"| {_show(a)} | {_show(b)} | {n} |")
        return "\n".join(lines) + "\n"


def length_bucket(n: int, buckets: Sequence[tuple[int, int]] = LENGTH_BUCKETS) -> str:
    """The name of the ``(lo, hi)`` bucket holding length ``n``: ``"lo-hi"``, ``"lo+"``
    for the open last one, ``"0"`` for none."""
    for lo, hi in buckets:
        if lo <= n <= hi:
            return f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"
    return "0"


def _show(c: str) -> str:
    return "(missing)" if c == "" else ("(space)" if c == " " else f"`{c}`")


def error_sheet(
    records: list[ErrorRecord], cols: int = 4, cell_w: int = 300, fonts: Any = None
) -> Image.Image:
    """A grid of wrong reads: each image with its label (black) and the prediction (red)
    and confidence under it, drawn with a font that has their glyphs (``fonts``, a
    ``LabelFonts``; by default the bundled fonts, then what fontconfig finds)."""
    fonts = label_fonts(fonts, 13)
    img_h, pad, text_h = 48, 8, 34
    rows = -(-len(records) // cols)
    sheet = Image.new("RGB", (cols * cell_w + pad, rows * (img_h + text_h + pad) + pad), "white")
    draw = ImageDraw.Draw(sheet)
    for i, r in enumerate(records):
        x = pad + (i % cols) * cell_w
        y = pad + (i // cols) * (img_h + text_h + pad)
        if r.image is not None:
            a = r.image[0] if r.image.shape[0] == 1 else r.image.transpose(1, 2, 0)
            tile = Image.fromarray(a).convert("RGB")
            w = max(1, round(tile.width * img_h / tile.height))
            tile = tile.resize((min(w, cell_w - pad), img_h), Image.Resampling.BILINEAR)
            sheet.paste(tile, (x, y))
        for dy, text, color in (
            (2, f"label: {r.label}", (0, 0, 0)),
            (17, f"read:  {r.prediction} ({r.confidence:.2f})", (200, 0, 0)),
        ):
            fonts.draw(draw, (x, y + img_h + dy), text, color, cell_w - pad)
    return sheet


class Calibration:
    """How far confidence is from accuracy: the expected calibration error over
    ``bins`` equal-width confidence bins, and accuracy when only the most confident
    reads are kept (coverage)."""

    COVERAGES = (0.5, 0.8, 0.9, 1.0)

    def __init__(self, bins: int = 15) -> None:
        self.bins = bins
        self.pairs: list[tuple[float, bool]] = []

    def add(self, predictions: list[Any], correct: list[bool]) -> None:
        self.pairs.extend((float(p.confidence), bool(c)) for p, c in zip(predictions, correct))

    def ece(self) -> float:
        """The expected calibration error of the reads seen (see
        :func:`crnn.reading.calibration.expected_calibration_error`)."""
        pairs = sorted(self.pairs)  # one order however the reads were shared out
        return expected_calibration_error([c for c, _ in pairs], [k for _, k in pairs], self.bins)

    def accuracy_at_coverage(self) -> dict[str, float]:
        """``{"90%": accuracy of the 90 % most confident reads, ...}``."""
        if not self.pairs:
            return {}
        ranked = sorted(self.pairs, key=lambda p: -p[0])
        out = {}
        for cov in self.COVERAGES:
            k = max(1, round(cov * len(ranked)))
            out[f"{cov:.0%}"] = sum(ok for _, ok in ranked[:k]) / k
        return out
