"""Synthetic text images: fonts, text sources and the renderer.

    from crnn.data.synth import SynthGenerator
    gen = SynthGenerator(charset, cfg.data.synth, seed=42, height=32)
    img, label = gen.render(index)   # PIL image ("L", or "RGB" with rgb=True), str

``render(index)`` is a pure function of ``(seed, index)``; see :mod:`.render`.
"""

from crnn.data.synth.fonts import (
    FontError,
    FontInfo,
    bundled_font_dir,
    find_font_files,
    glyph_coverage,
    load_fonts,
)
from crnn.data.synth.render import (
    EFFECT_PROBABILITIES,
    RenderMeta,
    SynthGenerator,
    effects_off,
    validate_synth_config,
)
from crnn.data.synth.text import TextSampler, bundled_word_list, load_words

__all__ = [
    "EFFECT_PROBABILITIES",
    "FontError",
    "FontInfo",
    "RenderMeta",
    "SynthGenerator",
    "TextSampler",
    "bundled_font_dir",
    "bundled_word_list",
    "effects_off",
    "find_font_files",
    "glyph_coverage",
    "load_fonts",
    "load_words",
    "validate_synth_config",
]
