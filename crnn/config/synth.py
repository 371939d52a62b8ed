"""The synthetic text generator's settings (``data.synth``); see docs/synth.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from crnn.config.errors import ConfigError


@dataclass
class SynthConfig:
    """The synthetic text generator (used when ``data.train`` is empty).

    Probabilities are per image and 0 turns an effect off; lengths in pixels are
    measured at the output height unless said otherwise. See docs/synth.md.
    """

    # Fixed synthetic validation set size (rendered once, deterministic).
    val_size: int = 512
    # Extra folders of .ttf/.otf fonts and .ttc/.otc collections (searched recursively)
    # on top of the bundled ones.
    font_dirs: list[str] = field(default_factory=list)
    # Named font sets, found wherever the system installed them (crnn/data/synth/fontsets.py;
    # `crnn-fonts SET` lists what is installed and installs the rest): "zh" = the CJK faces
    # of Debian's fonts-noto-cjk(-extra), fonts-wqy-*, fonts-lxgw-wenkai,
    # fonts-droid-fallback, fonts-babelstone-han and fonts-hanazono.
    font_sets: list[str] = field(default_factory=list)
    # Use the fonts in crnn/assets/fonts; false = only font_dirs and font_sets.
    bundled_fonts: bool = True
    # Font files left out, as name patterns (e.g. ["wqy-microhei.ttc*"]: a face of a
    # collection is named file.ttc#N): fonts held out for a test.
    exclude_fonts: list[str] = field(default_factory=list)
    # How often a font is drawn, as "pattern=weight" (name patterns as in exclude_fonts;
    # a font no pattern names weighs 1, the first matching pattern wins): e.g.
    # ["LXGWWenKai-*=3"] draws the three Kai faces three times as often as each other face.
    font_weights: list[str] = field(default_factory=list)
    # One word per line (UTF-8), optionally "word<TAB>count" (drawn by count **
    # word_weight_power); "" or "english" = the bundled English list, "chinese" = the
    # bundled Chinese one (100,000 words with their frequencies, crnn/assets/words).
    word_list: str = ""
    word_weight_power: float = 0.5
    # Text files in any language (UTF-8): lines or pieces of lines are drawn from them,
    # min_length..max_length characters, cut where a character the charset or the fonts
    # lack would be. Weight p_corpus (only when corpus is given). See docs/synth.md.
    corpus: list[str] = field(default_factory=list)
    p_corpus: float = 1.0
    # Text sources, relative weights (need not sum to 1).
    p_word: float = 0.55
    p_number: float = 0.1
    p_date: float = 0.04
    p_price: float = 0.04
    p_code: float = 0.08
    p_random: float = 0.12
    # Lines of several words; only drawn when the charset has a space (ascii95).
    p_line: float = 0.07
    # Phrases: words run together without spaces, as Chinese is written, with CJK
    # punctuation between some and a number or date now and then (min..max_length).
    p_phrase: float = 0.0
    # Sentences as Chinese is printed: clauses of words with CJK punctuation, quotes and
    # brackets, numbers with units, dates, Latin words, min..max_length characters.
    p_sentence: float = 0.0
    # Technical and commercial Chinese: words among command options, hex, calls, file
    # names, URLs, versions and model numbers, operators, Latin units, empty paired quotes,
    # ASCII and full-width punctuation side by side, spaces around Latin tokens.
    p_tech: float = 0.0
    # Weight of … among the Chinese sentences' clause and end marks (1: a sixteenth of the
    # clause marks and a fourteenth of the ends, as since stage 9; 0.1: a tenth of that).
    zh_ellipsis: float = 1.0
    # Share of texts whose digits and Latin letters (or all ASCII) are drawn in full-width
    # forms (２０２３, ＡＢＣ); their labels are ASCII (the charset folds them).
    p_fullwidth: float = 0.0
    # A line holds 2..line_max_words words and numbers (and at most max_length characters).
    line_max_words: int = 5
    # Case of dictionary words (only matters for case-sensitive charsets).
    p_upper: float = 0.2
    p_title: float = 0.25
    # A word gets punctuation attached ("word," "(word)").
    p_punct: float = 0.1
    # Label length in characters (after the charset's normalisation).
    min_length: int = 1
    max_length: int = 20
    # Render resolution relative to the output: text is rasterised so that the crop is
    # render_scale x the output height, then warped down (or up) to it. Above 1 gives
    # smoother strokes, below 1 softer, upsampled ones; the letters' size in the output
    # is set by the crop margins (pad_*), as the output height is fixed.
    render_scale_min: float = 0.9
    render_scale_max: float = 1.4
    # Extra space between characters, as a fraction of the font size (at most 0.12 when
    # the charset has a space, so a letter gap never looks like a word gap).
    p_spacing: float = 0.15
    spacing_min: float = -0.04
    spacing_max: float = 0.4
    # Horizontal stretch (condensed/expanded look): width scaled by 1 +- max_stretch.
    p_stretch: float = 0.2
    max_stretch: float = 0.2
    # Stroke weight: the ink grown or shrunk by up to a pixel at the output height (a
    # bolder or lighter face than the font's own: fonts never seen in training differ
    # most in this).
    p_weight: float = 0.0
    # Outlined (hollow) letters, as on signs: only a ring around the ink is drawn.
    p_outline: float = 0.0
    # Old-style figures (the font's OpenType ``onum``: 0 like o, 1 like I, 2 like z, 3-5
    # and 7, 9 descending), the default figures of book faces such as EB Garamond and
    # Georgia: digits are drawn with them in faces that have them (needs Pillow's RAQM).
    p_oldstyle: float = 0.0
    # Glyph style: faces the fonts do not have (off unless set; docs/synth.md). Slant: a
    # shear of up to max_slant degrees either way (oblique and hand-slanted faces).
    p_slant: float = 0.0
    max_slant: float = 12.0
    # Per-character jitter: each character's size moves by up to max_char_scale (a
    # fraction) and its baseline by up to max_char_shift of the font size (hand-set or
    # handwritten-looking type, uneven printing).
    p_char_jitter: float = 0.0
    max_char_scale: float = 0.12
    max_char_shift: float = 0.06
    # Rising strokes: each character sheared vertically by its own slope (its verticals stay
    # upright, its horizontals rise to the right), a line's slopes up to max_char_tilt (a
    # tangent: 0.14 is 8 degrees), as Kai faces and hands draw them. Off unless set.
    p_char_tilt: float = 0.0
    max_char_tilt: float = 0.14
    # Pinched proportions: each character's parts around a point near its centre drawn up
    # to 1 + max_char_pinch times smaller (or half that larger) along each axis, its box
    # kept, as faces differ in how large they draw inner components. Off unless set.
    p_char_pinch: float = 0.0
    max_char_pinch: float = 0.25
    # Broad-pen strokes: the ink swept along a nib 2 % to max_nib of the font size long,
    # held 10-40 degrees up to the right, so strokes across it are thick and along it thin
    # (calligraphy, Kai-like and brush sign faces from the allowed Ming and Hei). Off unless set.
    p_nib: float = 0.0
    max_nib: float = 0.05
    # CJK punctuation as other faces draw it: in a line drawn with it, each mark of
    # PUNCT_STYLE_MARKS is up to max_punct_scale larger and raised by up to
    # max_punct_rise of the font size (AR PL UKai's comma reaches from mid-line to below
    # the baseline; the Noto SC comma sits in the bottom third). Off unless set.
    p_punct_style: float = 0.0
    max_punct_scale: float = 0.6
    max_punct_rise: float = 0.3
    # Wide tracking, as signs space their characters: 0.3 to max_wide_tracking of the
    # font size after each character, on lines of at most 12 characters without a space
    # (p_spacing stays under 0.12 em when the charset has a space, so a model trained
    # without this reads a sign's wide gaps as quotes and commas). Off unless set.
    p_wide_tracking: float = 0.0
    max_wide_tracking: float = 1.5
    # Ink bleed or erosion: the ink blurred (up to max_bleed px at the output height)
    # and cut again at a random level: strokes grown with rounded ends, or thinned and worn.
    p_bleed: float = 0.0
    max_bleed: float = 1.0
    # Colour and contrast: |text - background| >= min_contrast (fraction of 255).
    min_contrast: float = 0.3
    p_light_text: float = 0.25  # light text on a dark background
    p_color: float = 0.5  # coloured text/background (RGB output only)
    # Backgrounds: flat unless one of these is drawn.
    p_gradient_bg: float = 0.2
    p_noise_bg: float = 0.15
    p_texture_bg: float = 0.2
    # Background variation (peak to peak), fraction of 255.
    max_bg_variation: float = 0.3
    # Drop shadow 1-3 px down-right, between the text and background tones.
    p_shadow: float = 0.05
    # Extruded (3D) letters, as shop signs and metal lettering are made: the ink mask
    # swept 1.5 px to max_extrude of the image height in one direction, the sides in a
    # tone between the face's and the background's, the face on top. Off unless set.
    p_extrude: float = 0.0
    max_extrude: float = 0.15
    # Elastic strokes: the ink bent by a smooth random displacement of up to max_elastic
    # of the text height (1.3 px for a 22 px line), varying over a stroke's length, so
    # strokes wobble, thicken and thin as another hand or brush draws them. Off unless set.
    p_elastic: float = 0.0
    max_elastic: float = 0.06
    # Geometry: rotation (degrees), perspective (corner shift, fraction of text
    # height), curvature (bow height, fraction of text height).
    p_rotate: float = 0.3
    max_rotate: float = 4.0
    p_perspective: float = 0.2
    max_perspective: float = 0.2
    p_curve: float = 0.1
    max_curve: float = 0.35
    # Degradations: Gaussian blur (sigma, px), pixel noise (std, fraction of 255), JPEG.
    p_blur: float = 0.25
    max_blur: float = 1.0
    p_noise: float = 0.25
    max_noise: float = 0.06
    p_jpeg: float = 0.2
    jpeg_quality_min: int = 20
    jpeg_quality_max: int = 70
    # Photograph effects (off unless set): light falling off across the image (by up to
    # max_light_falloff of its brightness), motion blur (up to max_motion_blur px long),
    # defocus (a disc of up to max_defocus px radius), low resolution (shrunk to
    # resample_min..0.85 of its size and brought back).
    p_uneven_light: float = 0.0
    max_light_falloff: float = 0.6
    p_motion_blur: float = 0.0
    max_motion_blur: float = 4.0
    p_defocus: float = 0.0
    max_defocus: float = 2.0
    p_resample: float = 0.0
    resample_min: float = 0.35
    # Crop margin on each side, as a fraction of the text height; tight crops cut to
    # the ink with at most pad_min.
    pad_min: float = 0.02
    pad_max: float = 0.3
    p_tight_crop: float = 0.1
    # Clipped crops, as a detector's box cuts a tilted or tightly boxed line: the top and
    # bottom edges each cut up to max_clip of the text height into the line (off unless set).
    p_clip: float = 0.0
    max_clip: float = 0.12
    # Tilted lines in a level box, as a detector draws one along the image axes around a
    # photographed line: of the rotated lines, this share is cropped at the line's own
    # height about its centre, so the ends of a long line lose their tops or bottoms (by
    # at most half the line height, so the end characters stay readable; off unless set).
    p_level_box: float = 0.0
    # The legibility floor (crnn/data/synth/legibility.py): a line whose image keeps less
    # than this of its laid-out strokes (a correlation in [0, 1)) has its look drawn
    # again, the same text in the same font, up to three times (the most legible draw is
    # kept). 0 turns it off; 0.4 redraws about 7 % of the Chinese stage-5 recipe's lines.
    min_legibility: float = 0.0

    def validate(self) -> None:
        """Check ranges and probabilities; raise :class:`ConfigError` saying how to fix them."""
        cfg = self

        def bad(key: str, value: Any, expected: str) -> ConfigError:
            return ConfigError(f"data.synth.{key}={value!r} is not valid: expected {expected}")

        for f in dataclasses.fields(cfg):
            v = getattr(cfg, f.name)
            if f.name.startswith("p_") and not 0.0 <= v <= 1.0:
                raise bad(f.name, v, "a probability in [0, 1]")
        weights = (
            "p_word",
            "p_number",
            "p_date",
            "p_price",
            "p_code",
            "p_random",
            "p_phrase",
            "p_sentence",
            "p_tech",
            "p_line",
        )
        if sum(getattr(cfg, k) for k in weights[:-1]) + (cfg.p_corpus if cfg.corpus else 0) <= 0:
            raise ConfigError(
                "data.synth text weights p_word, p_number, p_date, p_price, p_code, p_random are "
                "all 0: at least one must be positive (p_line alone needs a space in the charset)"
            )
        bg = cfg.p_gradient_bg + cfg.p_noise_bg + cfg.p_texture_bg
        if bg > 1.0 + 1e-9:
            raise ConfigError(
                f"data.synth.p_gradient_bg + p_noise_bg + p_texture_bg = {bg:g}: they are shares "
                "of "
                "one choice (the rest is flat), so their sum must be <= 1"
            )
        parse_font_weights(cfg.font_weights)  # raises on a malformed entry
        if cfg.p_upper + cfg.p_title > 1.0 + 1e-9:
            raise bad("p_upper + p_title", cfg.p_upper + cfg.p_title, "a sum <= 1")
        if cfg.line_max_words < 2:
            raise bad(
                "line_max_words", cfg.line_max_words, "at least 2 (a line of one word is p_word)"
            )
        if cfg.min_length < 1 or cfg.max_length < cfg.min_length:
            raise ConfigError(
                f"data.synth lengths min_length={cfg.min_length}, max_length={cfg.max_length}: "
                "expected 1 <= min_length <= max_length"
            )
        for lo, hi in (
            ("render_scale_min", "render_scale_max"),
            ("spacing_min", "spacing_max"),
            ("pad_min", "pad_max"),
            ("jpeg_quality_min", "jpeg_quality_max"),
        ):
            if getattr(cfg, lo) > getattr(cfg, hi):
                raise ConfigError(
                    f"data.synth.{lo}={getattr(cfg, lo)!r} exceeds "
                    f"data.synth.{hi}={getattr(cfg, hi)!r}"
                )
        if cfg.render_scale_min <= 0:
            raise bad("render_scale_min", cfg.render_scale_min, "a ratio > 0")
        if not 0.0 <= cfg.min_contrast <= 0.9:
            raise bad("min_contrast", cfg.min_contrast, "a fraction of 255 in [0, 0.9]")
        if not 0.0 <= cfg.max_bg_variation <= 1.0 - cfg.min_contrast:
            raise bad(
                "max_bg_variation",
                cfg.max_bg_variation,
                f"a value in [0, 1 - min_contrast = {1 - cfg.min_contrast:g}]",
            )
        if not 1 <= cfg.jpeg_quality_min <= cfg.jpeg_quality_max <= 95:
            raise bad(
                "jpeg_quality_min/max",
                (cfg.jpeg_quality_min, cfg.jpeg_quality_max),
                "1 <= min <= max <= 95",
            )
        for key in (
            "max_rotate",
            "max_perspective",
            "max_curve",
            "max_blur",
            "max_noise",
            "max_stretch",
            "pad_min",
            "max_slant",
            "max_char_scale",
            "max_char_shift",
            "max_char_tilt",
            "max_char_pinch",
            "max_nib",
            "max_punct_scale",
            "max_punct_rise",
            "max_wide_tracking",
            "max_bleed",
            "max_extrude",
            "max_elastic",
            "zh_ellipsis",
            "max_motion_blur",
            "max_defocus",
        ):
            if getattr(cfg, key) < 0:
                raise bad(key, getattr(cfg, key), "a value >= 0")
        if cfg.max_stretch >= 1:
            raise bad("max_stretch", cfg.max_stretch, "a fraction < 1")
        if cfg.max_char_tilt > 0.5:
            raise bad("max_char_tilt", cfg.max_char_tilt, "a slope (tangent) <= 0.5")
        if cfg.max_char_pinch > 0.35:
            # Beyond that the map at a box edge folds back (it must stay monotone).
            raise bad("max_char_pinch", cfg.max_char_pinch, "a strength <= 0.35")
        if cfg.max_nib > 0.2:
            raise bad("max_nib", cfg.max_nib, "a fraction of the font size <= 0.2")
        if cfg.max_slant >= 45:
            raise bad("max_slant", cfg.max_slant, "degrees < 45")
        if not 0.0 <= cfg.max_light_falloff < 1.0:
            raise bad("max_light_falloff", cfg.max_light_falloff, "a fraction in [0, 1)")
        if not 0.05 <= cfg.resample_min <= 0.85:
            raise bad("resample_min", cfg.resample_min, "a scale in [0.05, 0.85]")
        if not 0.0 <= cfg.max_clip <= 0.3:
            raise bad("max_clip", cfg.max_clip, "a fraction of the text height in [0, 0.3]")
        if cfg.spacing_min <= -0.5:
            raise bad("spacing_min", cfg.spacing_min, "a fraction of the font size > -0.5")
        if not 0.0 <= cfg.min_legibility < 0.9:
            raise bad(
                "min_legibility", cfg.min_legibility, "a correlation in [0, 0.9), e.g. 0.4 (0: off)"
            )


def parse_font_weights(entries: list[str]) -> list[tuple[str, float]]:
    """``["LXGWWenKai-*=3"]`` -> ``[("LXGWWenKai-*", 3.0)]`` (``data.synth.font_weights``).

    Raises:
        ConfigError: an entry that is not ``pattern=weight`` with a weight > 0.
    """
    out = []
    for entry in entries:
        pattern, sep, raw = str(entry).rpartition("=")
        try:
            weight = float(raw)
        except ValueError:
            weight = -1.0
        if not sep or not pattern or not weight > 0 or weight == float("inf"):
            raise ConfigError(
                f"data.synth.font_weights entry {entry!r} is not valid: expected "
                "'pattern=weight' with a font file name pattern and a weight > 0, "
                "e.g. 'LXGWWenKai-*=3'"
            )
        out.append((pattern, weight))
    return out
