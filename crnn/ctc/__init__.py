"""CTC: the loss (``loss``, the only place that sees time-first tensors), decoding
(``decode``: greedy and prefix beam search) and word lists (``lexicon``).

``crnn.ctc.loss`` imports PyTorch and is imported from there; this package's own names
(``decode`` and ``lexicon``) do not, so it serves the PyTorch-free ONNX prediction path.
"""

from __future__ import annotations

from crnn.ctc.decode import (
    Prediction,
    alignment_confidences,
    decode,
    greedy_decode,
    log_softmax_np,
    prefix_beam_search,
    sequence_log_probs,
)
from crnn.ctc.lexicon import Lexicon

__all__ = [
    "Lexicon",
    "Prediction",
    "alignment_confidences",
    "decode",
    "greedy_decode",
    "log_softmax_np",
    "prefix_beam_search",
    "sequence_log_probs",
]
