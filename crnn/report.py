"""Evaluation that shows its errors: every wrong read as a table row, breakdowns by label
length and by character, and a contact sheet of the worst ones, since people would
rather look than read (``tools/eval.py --errors DIR``).

Also the picture the trainer logs to TensorBoard (:func:`render_prediction_grid`).
"""

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

from crnn.calibration import expected_calibration_error

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
                (ed / max(len(label), len(text), 1), pred.confidence), src, label, text,
                pred.confidence, ed,
            )  # fmt: skip
            self.errors.append(rec)
            if self.keep_images:
                width = int(batch["widths"][k])
                rec.image = np.asarray(batch["images"][k, :, :, :width])
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
                w.writerow([r.source, r.label, r.prediction, f"{r.confidence:.4f}", r.edit_distance])
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
        lines = [f"# Errors: {title}", "", "## By label length", "",
                 "| characters | samples | wrong | accuracy |", "|---|---:|---:|---:|"]  # fmt: skip
        for lo, _ in LENGTH_BUCKETS:
            b = length_bucket(lo)
            n_ok, n_bad = self.by_length[(b, True)], self.by_length[(b, False)]
            if n_ok + n_bad:
                lines.append(f"| {b} | {n_ok + n_bad} | {n_bad} | {n_ok / (n_ok + n_bad):.2%} |")
        lines += ["", "## Most confused characters", "",
                  "| label | read as | times |", "|---|---|---:|"]  # fmt: skip
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


def _fonts(fonts: Any, size: int) -> Any:
    """``fonts``, or the default :class:`~crnn.data.synth.labelfonts.LabelFonts`."""
    from crnn.data.synth.labelfonts import LabelFonts

    return fonts if fonts is not None else LabelFonts(size)


def error_sheet(
    records: list[ErrorRecord], cols: int = 4, cell_w: int = 300, fonts: Any = None
) -> Image.Image:
    """A grid of wrong reads: each image with its label (black) and the prediction (red)
    and confidence under it, drawn with a font that has their glyphs (``fonts``, a
    ``LabelFonts``; by default the bundled fonts, then what fontconfig finds)."""
    fonts = _fonts(fonts, 13)
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


def render_prediction_grid(
    images: Any, widths: Any, labels: list[str], preds: list[str], fonts: Any = None
) -> Image.Image:
    """``(B, C, H, W)`` uint8 images -> one RGB picture, a row per sample with
    ``label -> prediction`` beside it (green when right, red when wrong), in a font that
    has their glyphs (``fonts``, a ``LabelFonts``)."""
    fonts = _fonts(fonts, 13)
    n = len(labels)
    h = images.shape[2]
    texts = [f"{labels[i]} -> {preds[i]}" for i in range(n)]
    text_w = max([260] + [fonts.length(t) + 8 for t in texts])
    row_h = max(h, 18) + 4
    max_w = int(max(int(w) for w in widths[:n]))
    canvas = Image.new("RGB", (max_w + text_w + 12, row_h * n + 4), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    for i in range(n):
        crop = images[i, :, :, : int(widths[i])]
        img = np.asarray(crop.cpu() if hasattr(crop, "cpu") else crop)
        img = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
        canvas.paste(Image.fromarray(img).convert("RGB"), (4, 4 + i * row_h))
        ok = labels[i] == preds[i]
        fonts.draw(
            draw, (max_w + 10, 4 + i * row_h + (row_h - 16) // 2), texts[i],
            (0, 120, 0) if ok else (200, 0, 0),
        )  # fmt: skip
    return canvas


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
        :func:`crnn.calibration.expected_calibration_error`)."""
        return expected_calibration_error([c for c, _ in self.pairs], [k for _, k in self.pairs], self.bins)

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


def draw_page(image: Image.Image, page: Any, fonts: Any = None) -> Image.Image:
    """A page and its reads side by side, for checking a page reader by looking: the
    image with each line's box (its quadrilateral where the detector found it; green, or
    orange below 0.5 confidence) and numbered,
    each character's box in thin blue (where the read has them), and beside it a white panel with each read written where its line is, in a font
    that has its glyphs (``fonts``: a ``LabelFonts``; the default finds one)."""
    from crnn.data.synth.labelfonts import LabelFonts

    img = image.convert("RGB")
    w, h = img.size
    out = Image.new("RGB", (2 * w + 8, h), (255, 255, 255))
    out.paste(img, (0, 0))
    draw = ImageDraw.Draw(out)
    draw.rectangle((w, 0, w + 7, h), fill=(200, 200, 200))
    sizes: dict[int, Any] = {}
    for i, line in enumerate(page.lines, start=1):
        x0, y0, x1, y1 = line.box
        colour = (0, 160, 0) if line.confidence >= 0.5 else (230, 120, 0)
        quad = getattr(line, "quad", ())
        if quad:  # the detector's quadrilateral (a rotated or slanted line) as found
            draw.polygon([tuple(map(float, pt)) for pt in quad], outline=colour, width=2)
        else:
            draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=colour, width=2)
        for c, b in zip(line.text, getattr(line, "char_boxes", ())):
            if not c.isspace():
                draw.rectangle((b[0], b[1], max(b[0], b[2] - 1), max(b[1], b[3] - 1)), outline=(40, 90, 220), width=1)
        size = max(10, min(48, int(0.7 * (y1 - y0))))
        if fonts is None:
            label = sizes.setdefault(size, LabelFonts(size))
        else:
            label = fonts
        label.draw(draw, (w + 8 + x0, y0), line.text, (20, 20, 20), max_width=max(10, w - x0))
        draw.text((max(0, x0 - 14), y0), str(i), fill=colour)
    return out


def draw_read(path: str, page: Any, folder: str | Path, dpi: int, password: str | None = None) -> Path:
    """``crnn-predict --draw``: the image (or a PDF's page) at ``path`` drawn with its read
    ``page`` (:func:`draw_page`) into ``folder/<name>.draw.png``, which is returned."""
    from crnn.data.image import load_image
    from crnn.data.pdf import open_source, split_ref

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    img = load_image(open_source(path, dpi, password, rgb=True), rgb=True)
    if page.layout == "line" and page.lines and not page.lines[0].box:
        page.lines[0].box = [0, 0, img.width, img.height]
    ref = split_ref(path)
    stem = f"{Path(ref[0]).stem}-p{ref[1]}" if ref else Path(path).stem
    target = out / f"{stem}.draw.png"
    draw_page(Image.Image.copy(img), page).save(target)
    return target
