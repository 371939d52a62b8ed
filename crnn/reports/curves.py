"""A run's training curves as one PNG (``tools/curves.py RUN_DIR``): the scalars the
trainer wrote to TensorBoard (loss, validation CER, ...) drawn as stacked panels, for
docs, model cards and issue threads, where a picture is read and a TensorBoard is not.

Drawn with Pillow (no plotting library): a panel per tag, steps on the x axis, the
values on a linear or log y axis, the last value printed in the panel's title.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw

# What a curves picture shows by default, in this order, when the run logged it.
DEFAULT_TAGS = ("train/loss", "val/cer", "val/accuracy", "val/empty_rate", "train/lr")
# Tags whose values span decades (CTC loss falls from ~100 to ~1): a log y axis.
LOG_TAGS = frozenset({"train/loss", "train/lr"})

Series = list[tuple[int, float]]


def read_scalars(tb_dir: str | Path, tags: Sequence[str] | None = None) -> dict[str, Series]:
    """``{tag: [(step, value), ...]}`` from the TensorBoard event files in ``tb_dir``
    (a run directory or its ``tb/``); a step logged twice (a resumed run) keeps its
    last value. Raises FileNotFoundError when there are no event files."""
    import logging

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its per-file chatter

    tb_dir = Path(tb_dir)
    if (tb_dir / "tb").is_dir():
        tb_dir = tb_dir / "tb"
    if not any(tb_dir.glob("events.out.tfevents.*")):
        raise FileNotFoundError(
            f"no TensorBoard event files in {tb_dir}: expected a run directory (with tb/) "
            "or its tb/ folder, as tools/train.py writes them"
        )
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    have = acc.Tags().get("scalars", [])
    out: dict[str, Series] = {}
    for tag in tags if tags is not None else have:
        if tag in have:
            by_step = {e.step: float(e.value) for e in acc.Scalars(tag)}
            out[tag] = sorted(by_step.items())
    return out


def _ticks(lo: float, hi: float, log: bool, n: int = 4) -> list[float]:
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        steps = (1,) if b - a > 2 else (1, 2, 5)  # few decades: 1, 2, 5 of each
        ticks = [m * 10.0**e for e in range(a, b + 1) for m in steps]
        return [t for t in ticks if lo <= t <= hi] or [lo, hi]
    step = (hi - lo) / n if hi > lo else 1.0
    mag = 10 ** math.floor(math.log10(step))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= step), default=step)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000 or abs(v) < 1e-3:
        return f"{v:.0e}"
    return f"{v:.3g}"


def draw_curves(
    series: dict[str, Series], title: str = "", width: int = 720, panel_h: int = 200
) -> Image.Image:
    """One panel per entry of ``series`` (``{tag: [(step, value), ...]}``), stacked,
    sharing the step axis. Raises ValueError when no series has a point."""
    from crnn.data.synth.labelfonts import LabelFonts

    series = {k: v for k, v in series.items() if v}
    if not series:
        raise ValueError("no scalars to draw: the run logged none of the requested tags")
    fonts = LabelFonts(13)
    left, right, top_pad, bottom = 64, 16, 26, 22
    head = 28 if title else 0
    img = Image.new("RGB", (width, head + panel_h * len(series) + bottom), "white")
    d = ImageDraw.Draw(img)
    if title:
        fonts.draw(d, (left, 6), title, (0, 0, 0))
    s_lo = min(p[0] for v in series.values() for p in v)
    s_hi = max(p[0] for v in series.values() for p in v)
    s_hi = s_hi if s_hi > s_lo else s_lo + 1
    x0, x1 = left, width - right

    def sx(s: float) -> float:
        return x0 + (s - s_lo) / (s_hi - s_lo) * (x1 - x0)

    for i, (tag, pts) in enumerate(series.items()):
        y0 = head + i * panel_h + top_pad
        y1 = head + (i + 1) * panel_h - 8
        vals = [v for _, v in pts if math.isfinite(v)]
        log = tag in LOG_TAGS and vals and min(vals) > 0
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
        if not log and tag.split("/")[-1] in ("cer", "ned", "accuracy", "empty_rate"):
            lo, hi = 0.0, max(1.0, hi)  # rates: always the whole 0-1 range
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5

        def f(v: float, log: bool = bool(log), lo: float = lo, hi: float = hi) -> float:
            if log:
                return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
            return (v - lo) / (hi - lo)

        def sy(v: float, f=f, y0: int = y0, y1: int = y1) -> float:
            return y1 - f(v) * (y1 - y0)

        d.rectangle([x0, y0, x1, y1], outline=(160, 160, 160))
        for t in _ticks(lo, hi, bool(log)):
            y = sy(t)
            d.line([x0, y, x1, y], fill=(232, 232, 232))
            fonts.draw(d, (4, int(y) - 8), _fmt(t), (90, 90, 90))
        last_step, last = pts[-1]
        fonts.draw(
            d,
            (x0, y0 - 20),
            f"{tag}   (step {last_step}: {_fmt(last)})" + ("   log scale" if log else ""),
            (0, 0, 0),
        )
        xy = [(sx(s), sy(v)) for s, v in pts if math.isfinite(v) and (not log or v > 0)]
        if len(xy) > 1:
            d.line(xy, fill=(31, 119, 180), width=2)
        for x, y in xy if len(xy) <= 40 else []:
            d.ellipse([x - 2.5, y - 2.5, x + 2.5, y + 2.5], fill=(31, 119, 180))
    base = head + panel_h * len(series)
    for t in _ticks(s_lo, s_hi, False, n=6):
        x = sx(t)
        d.line([x, base - 8, x, base - 4], fill=(90, 90, 90))
        label = f"{int(t):,}"
        lx = min(int(x) - fonts.length(label) // 2, width - fonts.length(label) - 2)
        fonts.draw(d, (lx, base - 2), label, (90, 90, 90))
    return img
