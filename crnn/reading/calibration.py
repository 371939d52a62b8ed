"""Confidence that means something: a temperature fitted on held-out data.

A CTC model's confidence (the product of its characters' best-frame probabilities for
greedy decoding) is usually over- or under-confident. Dividing the logits by a
temperature ``T`` changes no greedy text (the arg-max is the same), only how confident
each read says it is; :class:`TemperatureFit` picks the ``T`` whose confidences best
predict which reads are right (least binary cross-entropy), on a grid of ``T``.

The trainer fits it on the validation sets at the end of training and stores it in
``best.pt`` (``calibration``), release files and ONNX exports carry it, and every
backend applies it (``Backend.temperature``). NumPy (and torch, if already loaded).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from crnn.text.alphabet import BLANK

# Temperatures tried: log-spaced from 1/4 to 8 (1.0 among them).
GRID = np.exp(np.linspace(np.log(0.25), np.log(8.0), 61))


# An empty read's confidence is its least confident frame's blank: the frames tried.
EMPTY_FRAMES = 4


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _logp_argmax(frames: np.ndarray) -> np.ndarray:
    """``(U, K)`` logits -> ``(U, G)``: log softmax of each frame's arg-max at every
    temperature of :data:`GRID`. Through torch when the process has already imported it
    (8x faster than NumPy's float64 for 5,530 classes; the difference is below 1e-5);
    never imports it (the ONNX path runs without torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        f = frames.astype(np.float64)
        return f.max(-1)[:, None] / GRID[None, :] - _logsumexp(
            f[:, :, None] / GRID[None, None, :], 1
        )
    x = torch.from_numpy(np.ascontiguousarray(frames, np.float32))
    g = torch.from_numpy(GRID.astype(np.float32))
    out = x.max(-1).values[:, None] / g - torch.logsumexp(x[:, None, :] / g[None, :, None], 2)
    return out.double().numpy()


class TemperatureFit:
    """Collects, per validation sample, what its greedy confidence needs at every
    temperature of :data:`GRID` (a few numbers per frame, whatever the charset's size),
    and whether the read was right."""

    def __init__(self, max_samples: int = 4000) -> None:
        self.max_samples = max_samples
        # Per sample: log-probability of each emitted character's best frame, (C, G);
        # for an empty read, the least confident frame's blank, (1, G).
        self.samples: list[np.ndarray] = []
        self.correct: list[bool] = []
        self.empty: list[bool] = []

    def add(self, logits: Any, lengths: Any, correct: list[bool]) -> None:
        """A batch: ``(B, T, K)`` logits (array or tensor), valid frames, right or not."""
        if len(self.samples) >= self.max_samples:
            return
        x = (
            logits.detach().float().cpu().numpy()
            if hasattr(logits, "detach")
            else np.asarray(logits, np.float32)
        )
        lens = np.asarray(lengths.cpu() if hasattr(lengths, "cpu") else lengths).tolist()
        for b, (n, ok) in enumerate(zip(lens, correct)):
            frames = x[b, : int(n)]  # (T, K)
            if not len(frames):
                continue
            best = frames.argmax(-1)
            chars: list[list[int]] = []
            prev = BLANK
            for t, c in enumerate(best.tolist()):
                if c != BLANK and c != prev:
                    chars.append([t])
                elif c != BLANK:
                    chars[-1].append(t)
                prev = c
            # Only the frames that make the confidence: the emitted characters', or for
            # an empty read its least confident few (5,530 classes x 61 temperatures per
            # frame is costly).
            if chars:
                used = [t for idx in chars for t in idx]
            else:
                used = np.argsort(frames.max(-1) - _logsumexp(frames, 1))[:EMPTY_FRAMES].tolist()
            logp = _logp_argmax(frames[used])  # (U, G)
            if chars:
                at = {t: i for i, t in enumerate(used)}
                rows = [
                    logp[[at[t] for t in idx]].max(0) for idx in chars
                ]  # each char's best frame
                self.empty.append(False)
            else:
                rows = [logp.min(0)]
                self.empty.append(True)
            self.samples.append(np.stack(rows))
            self.correct.append(bool(ok))

    def confidences(self, temperature: float) -> np.ndarray:
        """Greedy confidence of every sample at the grid point nearest ``temperature``."""
        j = int(np.argmin(np.abs(np.log(GRID) - np.log(temperature))))
        return np.array([np.exp(s[:, j].sum()) for s in self.samples])

    def fit(self) -> float:
        """The grid temperature of least binary cross-entropy (1.0 without data)."""
        if len(self.samples) < 20 or all(self.correct) or not any(self.correct):
            return 1.0  # too few, or nothing to separate
        y = np.array(self.correct, dtype=np.float64)
        logc = np.stack([s.sum(0) for s in self.samples])  # (N, G) log confidence
        c = np.clip(np.exp(logc), 1e-7, 1 - 1e-7)
        bce = -(y[:, None] * np.log(c) + (1 - y[:, None]) * np.log(1 - c)).mean(0)
        return float(GRID[int(np.argmin(bce))])

    def ece(self, temperature: float = 1.0, bins: int = 15) -> float:
        """Expected calibration error of the confidences at ``temperature``."""
        return expected_calibration_error(self.confidences(temperature), self.correct, bins)


def expected_calibration_error(confidences: Any, correct: Any, bins: int = 15) -> float:
    """Sum over ``bins`` equal-width confidence bins of |accuracy - mean confidence|,
    weighted by each bin's share of the reads (0 without reads)."""
    conf = np.asarray(confidences, dtype=np.float64)
    ok = np.asarray(correct, dtype=np.float64)
    if conf.size == 0:
        return 0.0
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    return float(
        sum(
            (idx == b).mean() * abs(ok[idx == b].mean() - conf[idx == b].mean())
            for b in range(bins)
            if (idx == b).any()
        )
    )


def scale_logits(logits: Any, temperature: float) -> Any:
    """``logits / temperature`` (an array or a tensor; unchanged at 1)."""
    return logits if temperature == 1.0 else logits / temperature
