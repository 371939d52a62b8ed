"""Start the classifier at the training data's class frequencies.

A freshly initialised classifier gives every class about the same probability: 1 in
5,530 for a Chinese charset, where the data holds a blank in about three frames of four
and its commonest character thousands of times more often than its rarest. Before a
wide model can learn anything that depends on the image, it spends hundreds of steps
learning those frequencies through its bias (a Chinese line model from scratch: loss
per line 96 -> 45, then flat on CTC's all-blank plateau until about step 350;
docs/training/crnn_zh.md). Setting that bias to the log of the frequencies before the
first step (``train.prior_init``; "auto": charsets of more than 1,000 classes) starts
the model where those steps would have left it: Karpathy's "init well" for the last
layer, with CTC's blank counted as the share of frames that no character needs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from crnn.config import Config
from crnn.model import CRNN, classifier_name
from crnn.text.alphabet import BLANK

log = logging.getLogger(__name__)

# Samples drawn to estimate the frequencies (about 0.2 s from the generator).
SAMPLES = 4000
# Added to every class's count: a class the sample never drew still starts reachable.
SMOOTHING = 0.5
# The blank's share of frames is kept inside these bounds.
BLANK_SHARE = (0.3, 0.95)
# prior_init "auto" turns on above this many classes.
AUTO_MIN_CLASSES = 1000


def wanted(setting: bool | str, num_classes: int) -> bool:
    """Whether ``train.prior_init`` (true, false or "auto") applies to this charset."""
    if setting == "auto":
        return num_classes > AUTO_MIN_CLASSES
    return bool(setting)


def _parts(dataset: Any) -> list[tuple[Any, float]]:
    """``(dataset, share of each batch)`` for a mixed dataset, else the dataset alone."""
    parts = getattr(dataset, "parts", None)
    if parts is None:
        return [(dataset, 1.0)]
    return [(p, 1.0 / len(parts)) for p in parts]


def _sample(part: Any, count: int) -> tuple[list[list[int]], list[float]]:
    """Up to ``count`` targets of ``part`` (spread over it) and their widths."""
    n = min(len(part), count)
    idx = np.linspace(0, len(part) - 1, n).astype(np.int64) if n < len(part) else np.arange(n)
    if hasattr(part, "generator"):  # the synthetic stream: labels without drawing
        labels = [part.generator.label(part.offset + int(i)) for i in idx]
        targets = [part.charset.encode(t) for t in labels]
    else:
        targets = [part.target(int(i)) for i in idx]
    return targets, [part.width_hint(int(i)) for i in idx]


def log_prior(
    dataset: Any,
    num_classes: int,
    output_length: Callable[[int], int],
    ratios: list[float] | None = None,
) -> tuple[torch.Tensor, float]:
    """Log-frequency of every class in ``dataset``'s training samples (a
    ``MixedDataset`` weighted by ``ratios``) and the blank's share of frames."""
    counts = np.zeros(num_classes, np.float64)
    chars = frames = 0.0
    parts = _parts(dataset)
    shares = ratios if ratios and len(ratios) == len(parts) else [s for _, s in parts]
    total = float(sum(shares))
    for (part, _), share in zip(parts, shares):
        targets, widths = _sample(part, SAMPLES)
        if not targets:
            continue
        weight = share / total / len(targets)
        for t, w in zip(targets, widths):
            np.add.at(counts, np.asarray(t, np.int64), weight)
            chars += weight * len(t)
            frames += weight * max(int(output_length(max(int(w), 1))), len(t), 1)
    blank = 1.0 - chars / frames if frames else 0.75
    blank = min(max(blank, BLANK_SHARE[0]), BLANK_SHARE[1])
    counts[BLANK] = 0.0
    counts += SMOOTHING / max(SAMPLES, 1)
    counts[BLANK] = 0.0
    probs = (1.0 - blank) * counts / counts.sum()
    probs[BLANK] = blank
    return torch.from_numpy(np.log(probs)).float(), blank


@torch.no_grad()
def init_classifier(model: CRNN, prior: torch.Tensor) -> None:
    """Set the classifier's bias to ``prior`` (log-probabilities, one per class); the
    ``crnn_s8``/``crnn_s4`` shortcut's bias is zeroed so that the two add up to it."""
    layer = model.get_submodule(classifier_name(model.arch))
    layer.bias.copy_(prior.to(layer.bias.device, layer.bias.dtype))
    if model.skip is not None:
        model.skip.bias.zero_()


def apply(model: CRNN, dataset: Any, output_length: Callable[[int], int], cfg: Config) -> None:
    """For a new run where ``train.prior_init`` wants it: estimate the prior from
    ``dataset`` and start ``model``'s classifier at it."""
    if not wanted(cfg.train.prior_init, model.num_classes):
        return
    prior, blank = log_prior(dataset, model.num_classes, output_length, cfg.data.train_ratios)
    init_classifier(model, prior)
    top = prior[1:].max().item()
    log.info(
        "classifier started at the training data's class frequencies (train.prior_init): "
        "blank %.0f %% of frames, commonest character %.2g %%, unseen ones %.1g %%",
        100 * blank,
        100 * math.exp(top),
        100 * math.exp(prior[1:].min().item()),
    )
