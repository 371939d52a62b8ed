"""Recognition metrics, kept as sums so they can be all-reduced across ranks.

* ``accuracy``: exact match of the prediction with the label as the charset normalises
  it (lower-cased for case-folding charsets).
* ``alnum_accuracy``: the field's convention for IIIT5K/SVT/IC13/IC15 tables: lower-case
  both sides, drop everything but ``0-9a-z``, exact match. Only present when at least
  half of the labels' characters are Latin letters or digits: on Chinese lines it means
  nothing, and is left out rather than shown.
* ``cer``: character error rate, total edit distance / total label characters.
* ``ned``: mean normalised edit distance, ``ed / max(len(pred), len(label))`` per sample
  (0 is perfect; ``1 - ned`` is the ICDAR-2019 "1-N.E.D." score).
* ``exact_accuracy``: the prediction equals the label as published, case and
  punctuation included (parseq's case-sensitive, full-charset mode).
* ``caseless_accuracy``: the same, ignoring case.
* ``empty_rate``: share of empty predictions (a model stuck on CTC's all-blank plateau
  reads nothing at all).
"""

from __future__ import annotations

import re

import torch
from rapidfuzz.distance import Levenshtein

_NON_ALNUM = re.compile(r"[^0-9a-z]")

# Order of the fields in the tensor used for all-reduce.
_FIELDS = (
    "count",
    "correct",
    "correct_alnum",
    "edits",
    "chars",
    "ned_sum",
    "empty",
    "correct_exact",
    "correct_caseless",
    "latin_chars",
)
_LATIN = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# alnum_accuracy is reported when at least this share of label characters is 0-9a-zA-Z.
LATIN_SHARE_FOR_ALNUM = 0.5


def alnum_normalize(text: str) -> str:
    """Lower-case, keep letters and digits only (the convention for reporting benchmark
    accuracy: ``0-9a-z`` for the English sets). Letters of other scripts are letters
    too, so a Chinese label is not emptied (which would count any read as correct)."""
    low = text.lower()
    if low.isascii():
        return _NON_ALNUM.sub("", low)
    return "".join(c for c in low if c.isalnum())


class TextMetrics:
    """Accumulates predictions against labels; :meth:`compute` gives the rates."""

    def __init__(self) -> None:
        self.sums = dict.fromkeys(_FIELDS, 0.0)

    def update(
        self, preds: list[str], labels: list[str], raw_labels: list[str] | None = None
    ) -> None:
        """Add a batch.

        Args:
            preds: decoded texts.
            labels: labels in the charset's normal form (what the model can output).
            raw_labels: labels as published, for ``alnum_accuracy``; defaults to ``labels``.
        """
        if len(preds) != len(labels):
            raise ValueError(f"{len(preds)} predictions for {len(labels)} labels")
        raw_labels = raw_labels if raw_labels is not None else labels
        s = self.sums
        for p, gt, raw in zip(preds, labels, raw_labels):
            ed = Levenshtein.distance(p, gt)
            s["count"] += 1
            s["correct"] += p == gt
            s["correct_alnum"] += alnum_normalize(p) == alnum_normalize(raw)
            s["edits"] += ed
            s["chars"] += len(gt)
            s["ned_sum"] += ed / max(len(p), len(gt), 1)
            s["empty"] += not p
            s["correct_exact"] += p == raw
            s["correct_caseless"] += p.lower() == raw.lower()
            s["latin_chars"] += sum(c in _LATIN for c in raw)

    def add(self, other: TextMetrics) -> None:
        """Pool another set of counts into this one."""
        for k in _FIELDS:
            self.sums[k] += other.sums[k]

    def to_tensor(self) -> torch.Tensor:
        return torch.tensor([self.sums[k] for k in _FIELDS], dtype=torch.float64)

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> TextMetrics:
        m = cls()
        m.sums = {k: float(v) for k, v in zip(_FIELDS, t.tolist())}
        return m

    def compute(self) -> dict[str, float]:
        """The rates; ``alnum_accuracy`` only when the labels are mostly Latin letters
        and digits (:data:`LATIN_SHARE_FOR_ALNUM`)."""
        s = self.sums
        n = max(s["count"], 1.0)
        alnum = {}
        if s["latin_chars"] >= LATIN_SHARE_FOR_ALNUM * s["chars"] and s["chars"] > 0:
            alnum = {"alnum_accuracy": s["correct_alnum"] / n}
        return {
            "count": s["count"],
            "accuracy": s["correct"] / n,
            **alnum,
            "cer": s["edits"] / max(s["chars"], 1.0),
            "ned": s["ned_sum"] / n,
            "empty_rate": s["empty"] / n,
            "exact_accuracy": s["correct_exact"] / n,
            "caseless_accuracy": s["correct_caseless"] / n,
        }


# For choosing the best checkpoint: True when larger is better.
HIGHER_IS_BETTER = {
    "accuracy": True,
    "alnum_accuracy": True,
    "cer": False,
    "ned": False,
    "hmean": True,
}


# Accuracy modes for reports: metric key and what it means (stated in table headers).
MODES = {
    "charset": ("accuracy", "exact match with the label as the model's charset writes it"),
    "alnum": (
        "alnum_accuracy",
        "case-insensitive, letters and digits only (the IIIT5K/SVT/IC13 convention)",
    ),
    "caseless": ("caseless_accuracy", "case-insensitive, punctuation and symbols kept"),
    "exact": ("exact_accuracy", "case-sensitive, punctuation and symbols kept"),
}
