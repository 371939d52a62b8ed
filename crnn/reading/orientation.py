"""Upright or upside down: a small classifier that tells a crop turned 180 degrees from
one as given, so that the reader turns only the crops that need it.

The recognizers give upside-down text plausible reads (``homeland`` upside down scores
only 3 nats below its upright read), so comparing the two reads' probabilities cannot
tell turned crops from upright ones without misreading some upright ones
(``docs/reading.md``). This classifier looks at the glyphs instead, as PaddleOCR's
angle classifier does: a crop it calls upside down is read both ways and the turn is
kept when the turned read is also the more probable one.

Runs on ONNX Runtime with NumPy (no PyTorch); trained by :mod:`crnn.engine.orientation`
(``tools/train_orientation.py``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from crnn.bundled import MODELS_DIR
from crnn.ctc.decode import log_softmax_np

# What the classifier sees: grayscale, this high, this wide (a wider crop is cut into
# windows of this width whose answers are averaged; a narrower one is padded).
HEIGHT = 32
WIDTH = 192
# Windows read from one wide crop (left, middle and right at most).
MAX_WINDOWS = 3
# A crop is also read turned when the classifier gives it at least this probability of
# being upside down (the turn is then kept only if its read is the more probable). 0.9
# until 2026-12-04; at 0.85 the development crops turned 180 degrees read back exactly
# IIIT5K 558 -> 582 of 2,000, IC15 829 -> 1,002 of 4,467, zh_real_dev 98 -> 113 of 420,
# while as given only one IC15 crop of 4,467 read otherwise (2 edits); 0.8 and 0.7 caught
# more of zh_real_dev (120, 130) and were not measured on the English crops.
UPSIDE_DOWN = 0.85
ASSETS = MODELS_DIR  # the package's bundled models (crnn/assets/models)


def windows(img: Image.Image) -> np.ndarray:
    """``(N, 1, HEIGHT, WIDTH)`` float32 windows of one crop, scaled to [-1, 1]: the crop
    at height ``HEIGHT`` (ratio kept), padded on the right with its median grey when
    narrower than ``WIDTH``, else cut into up to ``MAX_WINDOWS`` windows spread over it."""
    gray = img.convert("L")
    w = max(1, round(gray.width * HEIGHT / max(1, gray.height)))
    arr = np.asarray(gray.resize((w, HEIGHT), Image.Resampling.BILINEAR), dtype=np.float32)
    if w < WIDTH:
        pad = np.full((HEIGHT, WIDTH - w), np.median(arr), dtype=np.float32)
        cuts = [np.concatenate([arr, pad], axis=1)]
    else:
        n = min(MAX_WINDOWS, -(-w // WIDTH))
        starts = np.linspace(0, w - WIDTH, n).round().astype(int)
        cuts = [arr[:, s : s + WIDTH] for s in starts]
    return (np.stack(cuts)[:, None] / 127.5 - 1.0).astype(np.float32)


class OrientationClassifier:
    """``upside_down(image)``: the probability that a crop is turned 180 degrees."""

    def __init__(self, path: str | os.PathLike[str], threads: int | None = 1) -> None:
        from crnn.backends.onnx import require_onnx, session_options

        _, ort = require_onnx(runtime_only=True)
        self.path = Path(path)
        self.session = ort.InferenceSession(
            str(self.path), session_options(threads), providers=["CPUExecutionProvider"]
        )
        self.input = self.session.get_inputs()[0].name

    def upside_down(self, image: Image.Image) -> float:
        """Mean over the crop's windows of the probability that it is upside down."""
        return self.upside_down_many([image])[0]

    def upside_down_many(self, images: list[Image.Image]) -> list[float]:
        """:meth:`upside_down` of each crop, their windows classified in one run."""
        if not images:
            return []
        cuts = [windows(im) for im in images]
        logits = self.session.run(None, {self.input: np.concatenate(cuts)})[0]
        turned = np.exp(log_softmax_np(logits))[:, 1]
        ends = np.cumsum([len(c) for c in cuts])
        return [float(turned[e - len(c) : e].mean()) for c, e in zip(cuts, ends)]


def bundled_classifier_path() -> Path | None:
    """The bundled classifier (``crnn/assets/models/orient-*.onnx``), if any."""
    found = sorted(ASSETS.glob("orient-*.onnx"))
    return found[-1] if found else None


@functools.lru_cache(maxsize=1)
def bundled_classifier() -> Any:
    """The bundled :class:`OrientationClassifier` (loaded once), or None without one or
    without ONNX Runtime."""
    path = bundled_classifier_path()
    if path is None:
        return None
    try:
        return OrientationClassifier(path)
    except ImportError:
        return None
