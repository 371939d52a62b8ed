"""The synthetic text image generator.

``SynthGenerator.render(index)`` is a pure function of ``(seed, index)`` (given the
config, charset and fonts): it seeds its own ``random.Random`` from those two numbers
and touches no global random state, so any process, in any order, draws the same
image for the same index. Data-parallel ranks and loader workers get different
streams simply by asking for different indices, and a resumed run continues exactly.

One image, start to end::

    text + font      TextSampler draws a text; a font that covers all of it is chosen
    ink mask         cached glyph bitmaps are placed on a canvas with room to spare
    geometry         rotation, perspective, curvature (canvas grows, ink never leaves)
    crop             union of the ink and the font's line box, plus random margins
    resize           to the output height (optionally stretched in width)
    colour           background (flat, gradient, noise, texture) and text tones with a
                     minimum contrast; optional drop shadow
    degradations     blur, noise, JPEG round trip
    legibility       optionally, a line that kept too little of its strokes is drawn
                     again from "geometry" on (same text and font; legibility.py)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from crnn.config import SynthConfig
from crnn.config.synth import parse_font_weights
from crnn.data.synth import effects as fx
from crnn.data.synth import geometry as geo
from crnn.data.synth import layout as synth_layout
from crnn.data.synth.fonts import (
    FontError,
    FontInfo,
    GlyphCache,
    font_weights,
    load_fonts,
)
from crnn.data.synth.fontsets import configured_fonts
from crnn.data.synth.layout import compose, compose_shaped, level_box
from crnn.data.synth.legibility import legibility
from crnn.data.synth.scripts import shaped_chars, warn_if_unshaped
from crnn.data.synth.text import BUNDLED_WORD_LISTS, TextSampler, drawable_alphabet
from crnn.text.alphabet import Charset

log = logging.getLogger(__name__)

# Every probability of SynthConfig that changes how an image looks (not what it says).
EFFECT_PROBABILITIES = tuple(
    """
    p_spacing p_stretch p_weight p_outline p_oldstyle p_slant p_char_jitter p_char_tilt p_char_pinch
    p_nib p_punct_style p_wide_tracking p_bleed p_uneven_light p_motion_blur p_defocus p_resample
    p_light_text p_color p_gradient_bg p_noise_bg p_texture_bg p_shadow p_extrude p_elastic p_rotate
    p_perspective p_curve p_blur p_noise p_jpeg p_tight_crop p_clip p_level_box
    """.split()
)

# Largest letter spacing (fraction of the font size) when the charset has a space.
_MAX_SPACING_WITH_SPACE = 0.12
# Font sizes are multiples of this (pixels).
_SIZE_STEP = 4
# Redraws of a line under the legibility floor (data.synth.min_legibility).
REDRAWS = 3
# Most glyphs SynthGenerator.warm_up() rasterises ahead (~100 us and ~1 KB each).
WARM_UP_LIMIT = 200_000


@dataclass(frozen=True)
class RenderMeta:
    """How one sample was made (for tests, debugging and contact sheets).

    Attributes:
        text: the string drawn on the image (may differ in case from the label).
        label: ``charset.normalize(text)``.
        font: path of the font file used.
        font_size: font size in pixels before the resize to the output height.
        effects: names of the effects applied, in order.
        legibility: the image's legibility score under a legibility floor
            (``data.synth.min_legibility``), else None.
    """

    text: str
    label: str
    font: str
    font_size: int
    effects: tuple[str, ...]
    legibility: float | None = None


def effects_off(cfg: SynthConfig) -> SynthConfig:
    """A copy of ``cfg`` that draws clean, horizontal, dark-on-light text on a flat
    background, with fixed spacing and no degradation (text sources are unchanged)."""
    return dataclasses.replace(
        cfg, font_dirs=list(cfg.font_dirs), **{name: 0.0 for name in EFFECT_PROBABILITIES}
    )


def validate_synth_config(cfg: SynthConfig) -> None:
    """Check ranges and probabilities (see :meth:`SynthConfig.validate`)."""
    cfg.validate()


@functools.cache
def _glyph_cache() -> GlyphCache:
    # One per process, shared by every generator in it (train and validation streams
    # draw the same glyphs). After a fork the child works on its own copy.
    return GlyphCache()


# The noise and texture tiles, made once per process.
_tiles = functools.cache(fx.Tiles)


class SynthGenerator:
    """Renders labelled text images on demand.

    Args:
        charset: labels only hold characters it encodes (after ``charset.normalize``).
        cfg: the generator's settings (``cfg.data.synth``); defaults when None.
        seed: with the index, determines every sample.
        height: output height in pixels; widths follow the text.
        rgb: return ``RGB`` images (coloured text and backgrounds) instead of ``L``.
        font_paths: font files to use instead of those named by ``cfg`` (bundled fonts
            plus ``cfg.font_dirs``); mostly for tests.

    Raises:
        FontError: a font folder is missing or empty, or no font draws the charset.
        ConfigError: a setting is out of range.
        FileNotFoundError: ``cfg.word_list`` names a missing file.

    Fonts are checked (glyph coverage) when the generator is built; ``FreeTypeFont``
    objects, glyph bitmaps, noise and textures are made lazily in each process, so the
    object pickles small into DataLoader workers.
    """

    def __init__(
        self,
        charset: Charset,
        cfg: SynthConfig | None = None,
        seed: int = 0,
        height: int = 32,
        rgb: bool = False,
        font_paths: Sequence[str | Path] | None = None,
    ) -> None:
        cfg = SynthConfig() if cfg is None else cfg
        validate_synth_config(cfg)
        if height < 8:
            raise ValueError(f"height={height}: expected at least 8 pixels")
        self.charset = charset
        # A copy: later edits to the caller's config must not change the stream.
        self.cfg = dataclasses.replace(
            cfg, font_dirs=list(cfg.font_dirs), font_sets=list(cfg.font_sets)
        )
        self.seed = int(seed)
        self.height = int(height)
        self.rgb = bool(rgb)

        if font_paths is None:
            font_paths = configured_fonts(cfg)
        candidates = drawable_alphabet(charset.chars, bool(charset.case_fold))
        if cfg.p_fullwidth > 0:
            # Full-width forms of the charset's ASCII, drawn under ASCII labels.
            candidates += [chr(ord(c) - 0x21 + 0xFF01) for c in charset.chars if "!" <= c <= "~"]
        fonts = load_fonts(font_paths, candidates)
        if not fonts:
            raise FontError(
                f"none of the {len(font_paths)} font files can draw charset {charset.name!r} "
                f"({charset.chars[:40]!r}...): add fonts that cover it (--fonts DIR)"
            )
        self.fonts: tuple[FontInfo, ...] = tuple(fonts)
        # data.synth.font_weights: None (each font equally often) unless set.
        self._weights = font_weights(self.fonts, parse_font_weights(cfg.font_weights))
        drawable = frozenset().union(*(f.chars for f in fonts))
        self.alphabet = "".join(c for c in candidates if c in drawable)
        # Charset characters no font can draw (never generated; warned about).
        self.undrawable = self._warn_undrawable(drawable)
        if not self.alphabet.replace(" ", ""):
            raise FontError(f"the fonts can draw no character of charset {charset.name!r}")
        # With a space in the charset, a letter gap wider than a space would read as one:
        # keep letter spacing under a typical space width (0.25-0.3 em).
        self._max_spacing = _MAX_SPACING_WITH_SPACE if " " in self.alphabet else math.inf
        # Characters every font draws: a text made of them needs no per-font check.
        self._common = frozenset.intersection(*(f.chars for f in fonts))

        bundled = BUNDLED_WORD_LISTS.get(cfg.word_list)
        word_list = str(bundled()) if bundled is not None else cfg.word_list
        if not Path(word_list).is_file():
            raise FileNotFoundError(
                f"data.synth.word_list={cfg.word_list!r} not found: expected a UTF-8 text file "
                "with one word per line, optionally word<TAB>count ('' or 'english' for the "
                "bundled English list, 'chinese' for the bundled Chinese one)"
            )
        self.text = TextSampler(self.alphabet, cfg, charset.normalize, word_list)
        warn_if_unshaped(self.alphabet, bool(charset.bidi))
        # Texts holding any of these are drawn whole, shaped (empty without RAQM).
        self._shaped = shaped_chars(self.alphabet)
        log.debug(
            "synthetic generator: %d fonts, %d drawable characters, seed %d, height %d",
            len(self.fonts),
            len(self.alphabet),
            self.seed,
            self.height,
        )

    def _warn_undrawable(self, drawable: frozenset[str]) -> str:
        missing = []
        for c in self.charset.chars:
            forms = drawable_alphabet(c, bool(self.charset.case_fold))
            if not any(f in drawable for f in forms):
                missing.append(c)
        if missing:
            log.warning(
                "no font can draw %d charset character(s) %s; synthetic texts will never "
                "hold them. Add a font that covers them (--fonts DIR).",
                len(missing),
                "".join(missing),
            )
        return "".join(missing)

    def font_sizes(self, font: FontInfo) -> list[int]:
        """Every pixel size :meth:`render` can pick for ``font`` under this config."""
        cfg = self.cfg
        ratio = _glyph_cache().line_ratio(font.path, font.chars)
        lo = (
            self.height
            * cfg.render_scale_min
            / (ratio * (1.0 + 2.0 * max(cfg.pad_max, cfg.pad_min)))
        )
        hi = self.height * cfg.render_scale_max / ratio
        first = max(8, _SIZE_STEP * round(lo / _SIZE_STEP))
        last = max(8, _SIZE_STEP * round(hi / _SIZE_STEP))
        return list(range(first, last + 1, _SIZE_STEP))

    def glyph_count(self) -> int:
        """How many (font, size, character) glyphs :meth:`render` can need."""
        return sum(
            len(self.font_sizes(f)) * sum(1 for c in self.alphabet if c in f.chars)
            for f in self.fonts
        )

    def warm_up(self, limit: int = WARM_UP_LIMIT) -> int:
        """Rasterise every glyph :meth:`render` can need, in this process.

        A fresh process renders several times slower until its cache is full. Call
        this in the parent before DataLoader workers fork (they inherit the cache);
        returns the number of glyphs cached. Above ``limit`` (5,000 CJK characters in 30
        faces need ~1.5 M: minutes, GBs) it does nothing and workers fill their own."""
        need = self.glyph_count()
        if need > limit:
            log.info(
                "glyph cache not warmed up: %s glyphs (%d fonts x sizes x characters) is more "
                "than %s; each data worker rasterises what it draws",
                f"{need:,}",
                len(self.fonts),
                f"{limit:,}",
            )
            return 0
        cache = _glyph_cache()
        total = 0
        for font in self.fonts:
            chars = "".join(c for c in self.alphabet if c in font.chars)
            for size in self.font_sizes(font):
                cache.line_box(font.path, size, font.chars)
                total += len(cache.glyphs(font.path, size, chars))
        return total

    def __repr__(self) -> str:
        return (
            f"SynthGenerator(charset={self.charset.name!r}, fonts={len(self.fonts)}, "
            f"seed={self.seed}, height={self.height}, rgb={self.rgb})"
        )

    # ---- public -----------------------------------------------------------------------

    def render(self, index: int) -> tuple[Image.Image, str]:
        """Sample ``index``: an image ``height`` pixels high (mode ``L``, or ``RGB``) and
        its label, 1..max_length characters the charset encodes."""
        img, label, _ = self.render_with_meta(index)
        return img, label

    def label(self, index: int) -> str:
        """Sample ``index``'s label alone, without drawing it (about 40 us): the text
        :meth:`render` draws, for batching lines of similar length together."""
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        text = self.text_and_font(random.Random(f"crnn-synth:{self.seed}:{index}"))[0]
        return self.charset.normalize(text)

    def render_with_meta(self, index: int) -> tuple[Image.Image, str, RenderMeta]:
        """Like :meth:`render`, plus how the sample was made (font, text, effects)."""
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        # A string seed is hashed with SHA-512 by random.Random: stable across processes
        # and Python versions, and distinct for every (seed, index), negative seeds too.
        r = random.Random(f"crnn-synth:{self.seed}:{index}")
        text, font = self.text_and_font(r)  # first from r: label() relies on it
        img, clean, size, applied = self._draw(r, text, font)
        floor, score = self.cfg.min_legibility, None
        if floor > 0 and (score := legibility(img, clean)) < floor:
            # The same text and font, the look drawn again from streams of its own.
            for k in range(1, REDRAWS + 1):
                r = random.Random(f"crnn-synth:{self.seed}:{index}:redraw{k}")
                again = self._draw(r, text, font)
                if (s := legibility(again[0], again[1])) > score:
                    score, (img, clean, size, applied) = s, again
                if score >= floor:
                    break
            applied = [*applied, "redrawn"]
        label = self.charset.normalize(text)
        return img, label, RenderMeta(text, label, font.path, size, tuple(applied), score)

    def _draw(
        self, r: random.Random, text: str, font: FontInfo
    ) -> tuple[Image.Image, Image.Image, int, list[str]]:
        """Draw ``text`` in ``font`` with effects from ``r``: the image, its ink mask as
        laid out (hollow when outlined; before stroke weight and bleed), the font size,
        the effects."""
        cfg = self.cfg
        out_h = self.height
        applied: list[str] = []

        # Margins first (fractions of the text height), since they fix the render size.
        tight = r.random() < cfg.p_tight_crop
        if tight:
            pads = [r.uniform(0.0, cfg.pad_min) for _ in range(4)]
        else:
            pads = [r.uniform(cfg.pad_min, cfg.pad_max) for _ in range(4)]
        if cfg.p_clip > 0 and r.random() < cfg.p_clip:  # drawn only when set (as p_oldstyle)
            pads[1], pads[3] = -r.uniform(0, cfg.max_clip), -r.uniform(0, cfg.max_clip)
        # Rasterise so the crop comes out about render_scale x the output height. Sizes
        # sit on a grid of _SIZE_STEP px: the final warp rescales anyway, and fewer sizes
        # keep the glyph cache small and warm.
        line_ratio = _glyph_cache().line_ratio(font.path, font.chars)
        scale = r.uniform(cfg.render_scale_min, cfg.render_scale_max)
        size = out_h * scale / (line_ratio * (1.0 + pads[1] + pads[3]))
        size = max(8, _SIZE_STEP * round(size / _SIZE_STEP))
        spacing, tracked = synth_layout.letter_spacing(r, cfg, text, size, self._max_spacing)
        applied += [tracked] * bool(tracked)
        sizes = shifts = None
        if cfg.p_char_jitter > 0 and r.random() < cfg.p_char_jitter:
            # Sizes stay on the glyph cache's grid: one or more steps either way.
            k = max(1, round(size * cfg.max_char_scale / _SIZE_STEP))
            sizes = [max(8, size + _SIZE_STEP * r.randint(-k, k)) for _ in text]
            shifts = [r.uniform(-1.0, 1.0) * cfg.max_char_shift * size for _ in text]
            applied.append("char_jitter")
        warps = synth_layout.glyph_warps(r, cfg, len(text), applied)  # tilts, pinches
        # Drawn only when set and the text has a mark, so other recipes keep their stream.
        if (
            cfg.p_punct_style > 0
            and not synth_layout.PUNCT_STYLE_MARKS.isdisjoint(text)
            and r.random() < cfg.p_punct_style
        ):
            sizes, shifts = synth_layout.punct_style(
                r, text, size, sizes, shifts, cfg.max_punct_scale, cfg.max_punct_rise, _SIZE_STEP
            )
            applied.append("punct_style")
        # Drawn only when set, so that recipes without it keep their random stream.
        oldstyle = (
            cfg.p_oldstyle > 0
            and r.random() < cfg.p_oldstyle
            and any("0" <= c <= "9" for c in text)
        )
        if oldstyle:
            applied.append("oldstyle")
        if self._shaped and not self._shaped.isdisjoint(text):
            lay = compose_shaped(_glyph_cache(), font, size, text, max(pads))
        else:
            lay = compose(
                _glyph_cache(),
                font,
                size,
                text,
                spacing,
                max(pads),
                sizes,
                shifts,
                oldstyle,
                *warps,
            )
        canvas, text_h = lay.canvas, lay.text_h
        canvas = fx.broad_pen(r, canvas, cfg, size, applied)

        # ---- geometry: curvature on the canvas, the rest as one matrix ----
        # Without geometry (about half the samples) the extents stay plain floats; with
        # it, the line box edges and every glyph's ink box are mapped as points.
        ink = lay.ink
        line = lay.line
        h = None
        bend = None
        if r.random() < cfg.p_curve:
            bend = geo.Curve(canvas.width, r.uniform(-1.0, 1.0) * cfg.max_curve * text_h)
            applied.append("curve")
        if cfg.p_slant > 0 and r.random() < cfg.p_slant:
            h = geo.shear(r.uniform(-cfg.max_slant, cfg.max_slant))
            applied.append("slant")
        if r.random() < cfg.p_rotate:
            rot = geo.rotation(r.uniform(-cfg.max_rotate, cfg.max_rotate))
            h = rot if h is None else rot @ h
            applied.append("rotate")
        # Drawn only when set, so that recipes without it keep their random stream.
        levelled = "rotate" in applied and cfg.p_level_box > 0 and r.random() < cfg.p_level_box
        perspective = r.random() < cfg.p_perspective
        if perspective:
            applied.append("perspective")
        if bend is not None or h is not None or perspective:
            pts, boxes = lay.points(), lay.boxes()
            if bend is not None:
                canvas, pts, boxes = bend(canvas), bend.points(pts), bend.boxes(boxes)
            if perspective:
                h = geo.line_perspective(r, pts, h, cfg.max_perspective * text_h)
            if h is not None:
                pts = geo.apply_h(h, pts)
                corners = geo.apply_h(h, boxes[:, [0, 1, 2, 1, 2, 3, 0, 3]].reshape(-1, 2))
                lo, hi = corners.min(0), corners.max(0)
            else:
                lo, hi = boxes[:, :2].min(0), boxes[:, 2:].max(0)
            # Bilinear sampling spreads ink up to a pixel past its exact extent.
            ink = (float(lo[0]) - 1.0, float(lo[1]) - 1.0, float(hi[0]) + 1.0, float(hi[1]) + 1.0)
            plo, phi = pts.min(0), pts.max(0)
            line = (float(plo[0]), float(plo[1]), float(phi[0]), float(phi[1]))
            if levelled:
                line = level_box(pts, line)
                ink = (ink[0], line[1], ink[2], line[3])
                applied.append("level_box")

        # ---- crop box (in warped canvas pixels) and output size ----
        if tight and pads[1] >= 0 and ink[3] - ink[1] >= 0.5 * text_h:
            box = ink
            applied.append("tight_crop")
        else:
            # Around the line box, so "ace" and "Apple" come out at one letter scale; a
            # glyph reaching past it (accents, brackets) widens the crop.
            box = (
                min(ink[0], line[0]),
                min(ink[1], line[1]),
                max(ink[2], line[2]),
                max(ink[3], line[3]),
            )
        if pads[1] < 0:
            applied.append("clip")
        left = box[0] - pads[0] * text_h
        top = box[1] - pads[1] * text_h
        right = box[2] + pads[2] * text_h
        bottom = box[3] + pads[3] * text_h
        stretch = 1.0
        if r.random() < cfg.p_stretch:
            stretch = 1.0 + r.uniform(-cfg.max_stretch, cfg.max_stretch)
            applied.append("stretch")
        out_w = max(1, round((right - left) * out_h / (bottom - top) * stretch))
        cw, ch = canvas.size
        if h is None and left >= 0 and top >= 0 and right <= cw and bottom <= ch:
            # Plain crop + resize: Pillow's resize filters properly when shrinking.
            alpha = canvas.resize((out_w, out_h), Image.BILINEAR, box=(left, top, right, bottom))
        else:
            sx, sy = out_w / (right - left), out_h / (bottom - top)
            to_out = np.array([[sx, 0.0, -left * sx], [0.0, sy, -top * sy], [0.0, 0.0, 1.0]])
            alpha = geo.warp(canvas, to_out if h is None else to_out @ h, (out_w, out_h))

        clean = alpha
        # Drawn only when set, so that recipes without it keep their random stream.
        if cfg.p_elastic > 0 and r.random() < cfg.p_elastic:
            alpha, clean = fx.elastic(
                r, (alpha, clean), text_h * out_h / (bottom - top), cfg.max_elastic
            )
            applied.append("elastic")
        # ---- stroke weight: a bolder or lighter face than the font's own ----
        if r.random() < cfg.p_weight:
            alpha = fx.stroke_weight(r, alpha)
            applied.append("weight")
        # Drawn only when asked for, so configs without them keep their images.
        if cfg.p_bleed > 0 and r.random() < cfg.p_bleed:
            alpha = fx.bleed(r, alpha, cfg.max_bleed)
            applied.append("bleed")
        if cfg.p_outline > 0 and r.random() < cfg.p_outline:
            ring = r.choice((3, 5))
            alpha, clean = fx.outline(alpha, ring), fx.outline(clean, ring)
            applied.append("outline")

        # ---- colour and background ----
        img = fx.paint(r, alpha, cfg, self.rgb, _tiles(), applied)
        if cfg.p_uneven_light > 0 and r.random() < cfg.p_uneven_light:
            img = fx.uneven_light(r, img, cfg.max_light_falloff)
            applied.append("uneven_light")

        # ---- degradations ----
        img = fx.degrade(r, img, cfg, _tiles(), self.rgb, applied)
        return img, clean, size, applied

    # ---- steps ------------------------------------------------------------------------

    def text_and_font(self, r: random.Random) -> tuple[str, FontInfo]:
        for _ in range(8):
            text = self.text.sample(r)
            need = set(text)
            if need <= self._common:
                return text, self._pick_font(r, range(len(self.fonts)))
            fits = [i for i, f in enumerate(self.fonts) if need <= f.chars]
            if fits:
                return text, self._pick_font(r, fits)
        # The texts keep mixing characters that no single font draws: fall back to a
        # random string from one font's characters, which always fits.
        font = self.fonts[r.randrange(len(self.fonts))]
        chars = "".join(c for c in self.alphabet if c in font.chars and c != " ")
        lo = max(1, self.cfg.min_length)
        n = r.randint(lo, max(lo, min(self.cfg.max_length, 12)))
        return "".join(r.choice(chars) for _ in range(n)), font

    def _pick_font(self, r: random.Random, indices: Sequence[int]) -> FontInfo:
        """One of ``self.fonts[i] for i in indices``, by ``data.synth.font_weights``."""
        if self._weights is None:
            return self.fonts[indices[r.randrange(len(indices))]]
        return self.fonts[r.choices(indices, [self._weights[i] for i in indices])[0]]
