"""Training that warns before it wastes a day: non-finite steps, the all-blank plateau,
and early stopping.

* :class:`NonFiniteGuard`: a step whose loss or gradients are not finite never reaches
  the optimizer; the samples involved are named, and ``train.max_nonfinite_steps`` such
  steps in a row stop the run with a message.
* :class:`BlankWatch`: a model that has read nothing at all (only CTC blanks) for
  ``train.blank_patience`` validations is on CTC's all-blank plateau; the log says what
  usually causes it and what to change.
* :func:`early_stop`: no better ``train.best_metric`` for ``train.early_stop_patience``
  validations ends the run (derived from the saved state, so it survives a resume).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from crnn.config import SHORTCUT

log = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """Training cannot usefully go on; the message says why and what to change."""


class NonFiniteGuard:
    def __init__(self, limit: int, scaler_enabled: bool) -> None:
        self.limit = limit
        # With fp16 loss scaling, inf gradients are how the GradScaler finds its scale:
        # it skips those steps itself.
        self.scaler_enabled = scaler_enabled
        self.in_a_row = 0
        self.skipped = 0

    def allow(self, grad_norm: torch.Tensor, labels: list[str], step: int) -> bool:
        """Whether the optimizer may take this step. Reads one scalar from the device (a
        host sync per step): a NaN must be caught before it reaches the weights."""
        if self.scaler_enabled or bool(torch.isfinite(grad_norm)):
            self.in_a_row = 0
            return True
        self.in_a_row += 1
        self.skipped += 1
        shown = ", ".join(repr(t) for t in labels[:8]) + (", ..." if len(labels) > 8 else "")
        log.warning(
            "step %d: the loss or the gradients are not finite (norm %s); the step is skipped. "
            "Labels of its samples: %s",
            step + 1,
            float(grad_norm),
            shown,
        )
        if self.in_a_row >= self.limit:
            raise TrainingError(
                f"the loss or the gradients were not finite for {self.in_a_row} steps in a "
                f"row (up to step {step + 1}): training has diverged. Lower train.lr, keep "
                "train.grad_clip on (e.g. 5), or use train.amp=none to rule out mixed "
                "precision; then resume from the last good checkpoint with --resume "
                "(train.max_nonfinite_steps sets how many such steps are tolerated)"
            )
        return False


class BlankWatch:
    """Says once, loudly, when validation reads only blanks for ``patience`` times."""

    BLANK = 0.98  # share of empty predictions that counts as "reads nothing"

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.runs = 0
        self.said = False

    def after_validation(self, metrics: dict[str, float], step: int, cfg: Any, frames: int) -> None:
        self.runs = self.runs + 1 if metrics.get("empty_rate", 0.0) >= self.BLANK else 0
        if self.said or not self.patience or self.runs < self.patience:
            return
        self.said = True
        tc, d = cfg.train, cfg.data
        wide = ""
        classes = _classes(cfg)
        if classes > WIDE_CLASSES and cfg.model.arch not in SHORTCUT:
            wide = (
                f"With {classes:,} classes behind the LSTMs (model.arch={cfg.model.arch}) the "
                "classifier gets too little signal at first and this can last thousands of "
                "steps: train with model.arch=crnn_s8 (a shortcut from the CNN to the logits "
                "leaves the plateau within a few hundred steps; a time step every 8 px, for "
                "lines of square characters such as Chinese), or start from a trained model "
                "(train.init_from, e.g. an imported one). Other causes: "
            )
        log.warning(
            "the model has read nothing but blanks at %d validations in a row (step %d, "
            "%.0f %% empty predictions): CTC's all-blank plateau. %sthe "
            "learning rate (train.lr=%g) is too high (the loss stalls near its start) or too "
            "low; labels too long for the output (an image %d px wide gives %d frames; a "
            "label needs one per character, plus one between repeated ones: check "
            "data.max_width and data.max_label_length); a charset that does not fit the "
            "labels (see the skipped-label counts at start-up); or simply too few steps yet "
            "(a small model can sit on the plateau for hundreds of steps: compare "
            "train.warmup_steps=%d with your run). Try train.lr=%g, or a shorter warm-up.",
            self.runs,
            step,
            100 * metrics.get("empty_rate", 0.0),
            wide or "Usually one of: ",
            tc.lr,
            d.max_width,
            frames,
            tc.warmup_steps,
            tc.lr / 3,
        )


# Above this many classes the all-blank hint recommends the shortcut layout.
WIDE_CLASSES = 1000


def _classes(cfg: Any) -> int:
    try:
        from crnn.text.alphabet import Charset

        return Charset.from_spec(cfg.data.charset).num_classes
    except (ValueError, OSError):
        return 0


def early_stop(state: Any, val_every: int, patience: int) -> bool:
    """True when ``patience`` validations have passed without a better best metric."""
    if patience <= 0 or state.best.get("step") is None:
        return False
    return (state.step - state.best["step"]) // val_every >= patience


class RunGuards:
    """The trainer's watchers in one place: :meth:`allow` before each optimizer step,
    :meth:`after_validation` after each validation (True: stop early)."""

    def __init__(self, cfg: Any, scaler_enabled: bool, frames: int) -> None:
        tc = cfg.train
        self.cfg = cfg
        self.frames = frames  # output frames of a max_width image, for the plateau hint
        self.nonfinite = NonFiniteGuard(tc.max_nonfinite_steps, scaler_enabled)
        self.blank = BlankWatch(tc.blank_patience)

    def allow(self, grad_norm: torch.Tensor, labels: list[str], step: int) -> bool:
        return self.nonfinite.allow(grad_norm, labels, step)

    def after_validation(self, metrics: dict[str, float], state: Any, is_main: bool) -> bool:
        tc = self.cfg.train
        if is_main:
            self.blank.after_validation(metrics, state.step, self.cfg, self.frames)
        stop = early_stop(state, tc.val_every, tc.early_stop_patience)
        if stop and is_main:
            log.info(
                "early stop at step %d: no better %s for %d validations (best %.4f at step %d)",
                state.step,
                tc.best_metric,
                tc.early_stop_patience,
                state.best["value"],
                state.best["step"],
            )
        return stop
