"""Text layout for the synthetic generator: cached glyphs placed on a canvas, with the
line box and glyph boxes that geometric effects transform."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from crnn.config import SynthConfig
from crnn.data.synth.fonts import FontInfo, GlyphCache

# Points per edge of the line box that geometric effects track (curvature bends edges).
EDGE_POINTS = 9
EDGE_T = np.linspace(0.0, 1.0, EDGE_POINTS)
# Blank border around the composed ink, in pixels: bilinear warps read one pixel past
# an edge, so ink never touches the canvas border.
CANVAS_MARGIN = 2


def compose(
    cache: GlyphCache,
    font: FontInfo,
    size: int,
    text: str,
    spacing: float,
    pad: float,
    sizes: Sequence[int] | None = None,
    shifts: Sequence[float] | None = None,
    oldstyle: bool = False,
    tilts: Sequence[float] | None = None,
    pinches: Sequence[tuple[float, float, float, float]] | None = None,
) -> Layout:
    """Place the text's cached glyphs (from ``cache``) on a canvas.

    Args:
        spacing: extra advance after each character, in pixels.
        pad: the largest crop margin, as a fraction of the text height; the canvas
            gets that much room around the text, so a plain crop stays inside it.
        sizes: each character's own pixel size (per-character jitter); default ``size``.
            The line box stays that of ``size``.
        shifts: each character's baseline offset in pixels (down is positive).
        oldstyle: digits in the face's old-style figures where it has them.
        tilts: each character's rise to the right (:func:`tilt_glyph`); default none.
        pinches: each character's ``(kx, cx, ky, cy)`` for :func:`pinch_glyph`, applied
            before its tilt; default none.
    """
    lb = cache.line_box(font.path, size, font.chars)
    text_h = float(lb.bottom - lb.top)
    pen = 0.0
    placed: list[tuple[int, int, np.ndarray]] = []
    if sizes is None:
        glyphs = cache.glyphs(font.path, size, text, oldstyle)
    else:
        glyphs = [cache.glyph(font.path, s, c, oldstyle) for s, c in zip(sizes, text, strict=True)]
    for i, g in enumerate(glyphs):
        if g.mask is not None:
            dy = g.dy if shifts is None else g.dy + int(round(shifts[i]))
            mask = g.mask
            if pinches is not None:
                mask = pinch_glyph(mask, *pinches[i])
            if tilts is not None and tilts[i]:
                mask, up = tilt_glyph(mask, tilts[i])
                dy -= up
            placed.append((int(round(pen)) + g.dx, dy, mask))
        pen += g.advance + spacing
    end = max(pen - spacing, 1.0)
    # Plain Python min/max: faster than numpy on a handful of glyphs.
    boxes = [(x, y, x + m.shape[1], y + m.shape[0]) for x, y, m in placed]
    ix0, iy0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    ix1, iy1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
    x0, x1 = min(0, ix0), max(math.ceil(end), ix1)
    y0, y1 = min(lb.top, iy0), max(lb.bottom, iy1)
    mg = CANVAS_MARGIN + math.ceil(pad * text_h)
    canvas = np.zeros((y1 - y0 + 2 * mg, x1 - x0 + 2 * mg), dtype=np.uint8)
    for x, y, m in placed:
        ys, xs = y - y0 + mg, x - x0 + mg
        dst = canvas[ys : ys + m.shape[0], xs : xs + m.shape[1]]
        # max, not sum: overlapping glyphs (tight spacing, italics) stay in [0, 255].
        np.maximum(dst, m, out=dst)
    dx, dy = mg - x0, mg - y0
    return Layout(
        canvas=Image.fromarray(canvas, "L"),
        text_h=text_h,
        ink=(ix0 + dx, iy0 + dy, ix1 + dx, iy1 + dy),
        line=(dx, lb.top + dy, end + dx, lb.bottom + dy),
        glyph_boxes=[(a + dx, b + dy, c + dx, d + dy) for a, b, c, d in boxes],
    )


def tilt_glyph(mask: np.ndarray, slope: float) -> tuple[np.ndarray, int]:
    """``mask`` sheared vertically: each column raised by ``slope`` px per px from its left
    edge (a negative slope lowers it), so verticals stay upright and horizontals rise to the
    right. Returns the new mask, taller by the rise, and how far its top moved up (its left
    edge stays where it was)."""
    h, w = mask.shape
    rise = math.ceil(abs(slope) * w)
    up = rise if slope > 0 else 0
    out = Image.fromarray(mask).transform(
        (w, h + rise), Image.AFFINE, (1, 0, 0, slope, 1, -up), Image.BILINEAR
    )
    return np.asarray(out), up


def _pinch_axis(n: int, k: float, c: float) -> np.ndarray:
    """Where each of ``n`` output pixels along one axis reads from: ``u + k (1 - u^2)
    (u - c)`` on the axis scaled to [-1, 1], so both ends stay put and the part near ``c``
    is drawn ``1 + k (1 - c^2)`` times smaller (``k > 0``) or larger (``k < 0``)."""
    u = (np.arange(n, dtype=np.float64) + 0.5) / n * 2.0 - 1.0
    s = u + k * (1.0 - u * u) * (u - c)
    return np.clip((s + 1.0) * 0.5 * n - 0.5, 0.0, n - 1.0)


def pinch_glyph(mask: np.ndarray, kx: float, cx: float, ky: float, cy: float) -> np.ndarray:
    """``mask`` with its proportions moved inside its own box, each axis on its own
    (:func:`_pinch_axis`): with ``k > 0`` the part around ``c`` (-1 the left or top edge,
    1 the right or bottom one) shrinks and the strokes toward the edges widen, as faces
    that draw inner components small (AR PL UKai's 日 in 间 and 早) differ from faces that
    draw them full-size. The box and its edges stay where they were."""
    out = mask.astype(np.float32)
    for axis, k, c in ((1, kx, cx), (0, ky, cy)):
        n = out.shape[axis]
        if not k or n < 3:
            continue
        src = _pinch_axis(n, k, c)
        i0 = np.floor(src).astype(np.intp)
        i1 = np.minimum(i0 + 1, n - 1)
        f = (src - i0).astype(np.float32)
        if axis == 1:
            out = out[:, i0] * (1.0 - f) + out[:, i1] * f
        else:
            out = out[i0] * (1.0 - f)[:, None] + out[i1] * f[:, None]
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def compose_shaped(cache: GlyphCache, font: FontInfo, size: int, text: str, pad: float) -> Layout:
    """Draw the whole text at once through Pillow's RAQM layout (HarfBuzz shaping:
    conjuncts, reordered vowel signs, stacked marks), for scripts that glyph-by-glyph
    composition draws wrong. Slower than :func:`compose` (no glyph cache), and one ink
    box for the text instead of one per glyph."""
    f = cache.font(font.path, size, shaped=True)
    lb = cache.line_box(font.path, size, font.chars)
    text_h = float(lb.bottom - lb.top)
    x0, y0, x1, y1 = f.getbbox(text, anchor="ls")
    end = max(float(f.getlength(text)), 1.0)
    left, right = min(0, x0), max(math.ceil(end), x1)
    top, bottom = min(lb.top, y0), max(lb.bottom, y1)
    mg = CANVAS_MARGIN + math.ceil(pad * text_h)
    canvas = Image.new("L", (right - left + 2 * mg, bottom - top + 2 * mg), 0)
    dx, dy = mg - left, mg - top
    ImageDraw.Draw(canvas).text((dx, dy), text, font=f, fill=255, anchor="ls")
    ink = canvas.getbbox() or (dx, dy + lb.top, dx + 1, dy + lb.bottom)
    return Layout(
        canvas=canvas,
        text_h=text_h,
        ink=ink,
        line=(dx, lb.top + dy, end + dx, lb.bottom + dy),
        glyph_boxes=[ink],
    )


@dataclass
class Layout:
    """A composed text: its ink mask and extents, in canvas pixels.

    ``ink`` bounds all glyph ink; ``line`` is the line box (pen start to advance end,
    font ascender line to descender line); ``glyph_boxes`` are each glyph's ink box.
    """

    canvas: Image.Image
    text_h: float
    ink: tuple[float, float, float, float]
    line: tuple[float, float, float, float]
    glyph_boxes: list[tuple[int, int, int, int]]

    def points(self) -> np.ndarray:
        """Points along the top and bottom edges of the line box, ``(2 * 9, 2)``: several
        per edge so that curvature, which bends edges, is tracked too."""
        x0, y0, x1, y1 = self.line
        pts = np.empty((2 * EDGE_POINTS, 2), dtype=np.float64)
        pts[:EDGE_POINTS, 0] = pts[EDGE_POINTS:, 0] = x0 + EDGE_T * (x1 - x0)
        pts[:EDGE_POINTS, 1] = y0
        pts[EDGE_POINTS:, 1] = y1
        return pts

    def boxes(self) -> np.ndarray:
        return np.array(self.glyph_boxes, dtype=np.float64)


def level_box(
    pts: np.ndarray, line: tuple[float, float, float, float]
) -> tuple[float, float, float, float]:
    """``line`` (a tilted line's warped box, x0 y0 x1 y1) cut to the line's own height about
    its centre, between the middles of its warped top and bottom edges (``pts``); each end
    loses at most half that height, so its characters stay readable."""
    top, bottom = pts[EDGE_POINTS // 2], pts[EDGE_POINTS + EDGE_POINTS // 2]
    height = float(np.hypot(*(bottom - top)))
    cy = float(top[1] + bottom[1]) / 2.0
    y0 = min(cy - height / 2.0, line[1] + height / 2.0)
    y1 = max(cy + height / 2.0, line[3] - height / 2.0)
    return line[0], y0, line[2], y1


# The CJK marks whose size and height differ most between faces (p_punct_style).
PUNCT_STYLE_MARKS = frozenset("，。、；：！？")


def punct_style(
    r: random.Random,
    text: str,
    size: int,
    sizes: list[int] | None,
    shifts: list[float] | None,
    max_scale: float,
    max_rise: float,
    step: int,
) -> tuple[list[int], list[float]]:
    """Per-character sizes and baseline shifts with each of PUNCT_STYLE_MARKS drawn up to
    ``max_scale`` larger (on the glyph cache's size grid, ``step`` px) and raised by up to
    ``max_rise``
    of ``size``; one scale and rise for the whole line, as one face draws its marks alike."""
    sizes = list(sizes) if sizes is not None else [size] * len(text)
    shifts = list(shifts) if shifts is not None else [0.0] * len(text)
    grow = max(8, step * round(size * (1.0 + r.uniform(0.0, max_scale)) / step))
    rise = r.uniform(0.0, max_rise) * size
    for i, c in enumerate(text):
        if c in PUNCT_STYLE_MARKS:
            sizes[i] = max(sizes[i], grow)
            shifts[i] -= rise
    return sizes, shifts


# Wide tracking (p_wide_tracking) only on lines this short: signs space a few characters
# wide; a long line spaced so would outgrow the widest crop.
WIDE_TRACKING_MAX_CHARS = 12


def letter_spacing(
    r: random.Random, cfg: SynthConfig, text: str, size: int, cap: float
) -> tuple[float, str]:
    """The extra advance after each character, in pixels, and the effect's name ("" for
    none). Ordinary spacing stays under ``cap`` em (a gap wider than a space reads as
    one); wide tracking, 0.3 to ``cfg.max_wide_tracking`` em as signs space their
    characters, is drawn only on short lines without a space, where no gap is a word
    break. Off (drawing nothing from ``r``) unless ``cfg.p_wide_tracking`` is set."""
    short = " " not in text and len(text) <= WIDE_TRACKING_MAX_CHARS
    if cfg.p_wide_tracking > 0 and short and r.random() < cfg.p_wide_tracking:
        return size * r.uniform(0.3, max(0.3, cfg.max_wide_tracking)), "wide_tracking"
    if r.random() < cfg.p_spacing:
        hi = min(cfg.spacing_max, cap)
        return size * r.uniform(min(cfg.spacing_min, hi), hi), "spacing"
    return 0.0, ""


def glyph_warps(
    r: random.Random, cfg: SynthConfig, count: int, applied: list[str]
) -> tuple[list[float] | None, list[tuple[float, float, float, float]] | None]:
    """Each character's tilt (:func:`char_tilts`) and pinch (:func:`char_pinches`), in
    that order from ``r``; the effects drawn are added to ``applied``."""
    tilts = char_tilts(r, cfg, count)
    pinches = char_pinches(r, cfg, count)
    applied += ["char_tilt"] * (tilts is not None) + ["char_pinch"] * (pinches is not None)
    return tilts, pinches


def char_pinches(
    r: random.Random, cfg: SynthConfig, count: int
) -> list[tuple[float, float, float, float]] | None:
    """Each of ``count`` characters' ``(kx, cx, ky, cy)`` for :func:`pinch_glyph`, or None:
    a line's strength of 1/4 to all of ``cfg.max_char_pinch``, each character's and axis's
    -1/2 to 1 times it (mostly inner parts drawn smaller), about a point up to 0.3 of the
    half-box off centre. Off (drawing nothing from ``r``) unless ``cfg.p_char_pinch`` is set."""
    if cfg.p_char_pinch > 0 and r.random() < cfg.p_char_pinch:
        line = r.uniform(0.25, 1.0) * cfg.max_char_pinch
        u = r.uniform
        return [
            (line * u(-0.5, 1), u(-0.3, 0.3), line * u(-0.5, 1), u(-0.3, 0.3)) for _ in range(count)
        ]
    return None


def char_tilts(r: random.Random, cfg: SynthConfig, count: int) -> list[float] | None:
    """Each of ``count`` characters' rise to the right (:func:`tilt_glyph`), or None: a
    line's slope of 1/4 to all of ``cfg.max_char_tilt``, each character's 1/2 to all of
    the line's. Off (drawing nothing from ``r``) unless ``cfg.p_char_tilt`` is set."""
    if cfg.p_char_tilt > 0 and r.random() < cfg.p_char_tilt:
        line = r.uniform(0.25, 1.0) * cfg.max_char_tilt
        return [line * r.uniform(0.5, 1.0) for _ in range(count)]
    return None
