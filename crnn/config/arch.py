"""The network layouts, as data: layer tables per ``model.arch`` and the time-step
arithmetic they imply.

They live with the config, not in ``crnn.model``, so that code which only needs
``output_length`` (the ONNX backend, which must not import torch) can read them.
"""

from __future__ import annotations

from typing import Any

# (kind, out_index or kernel, ...) per layer, in order; "conv" entries are
# (name index, kernel, padding, batchnorm, bias) and "pool" entries are (kernel, stride, padding).
_CRNN_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, False, True),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, True, True),
    ("conv", 3, 3, 1, False, True),
    ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 4, 3, 1, True, True),
    ("conv", 5, 3, 1, False, True),
    ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 6, 2, 0, True, True),
]
_VGG_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, False, True),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, False, True),
    ("conv", 3, 3, 1, False, True),
    ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 4, 3, 1, True, False),
    ("conv", 5, 3, 1, True, False),
    ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 6, 2, 0, False, True),
]
# The CRNN with its third pooling halving the width too: a time step every 8 px instead
# of 4. Characters of CJK lines are about as wide as the line is high (~28 px at height
# 32), so 3-4 steps per character are plenty for CTC, and the LSTMs, the classifier
# (5,530 classes for Chinese) and conv 4-6 do half the work: 1.9x the CPU training
# step of "crnn" on 32 x 256 lines (docs/benchmarks.md). BatchNorm after every conv
# (bias-free convs): a 200-character model reads at CER 0.71 after 800 CPU steps where
# BatchNorm at conv 2, 4 and 6 only gives 0.96 (docs/training/crnn_zh.md).
_CRNN_S8_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, True, False),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, True, False),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, True, False),
    ("conv", 3, 3, 1, True, False),
    ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 4, 3, 1, True, False),
    ("conv", 5, 3, 1, True, False),
    ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 6, 2, 0, True, False),
]
# crnn_s8's network with its third pooling keeping the width, as in "crnn": a time step
# every 4 px (about six per character of a 32 px Chinese line) for glyphs whose strokes
# fall between 8 px steps. It has exactly crnn_s8's weights (pooling has none), so a
# crnn_s8 checkpoint fine-tunes into it (train.init_from) as it is.
_CRNN_S4_LAYOUT: list[tuple[Any, ...]] = [
    *_CRNN_S8_LAYOUT[:6],
    ("pool", (2, 2), (2, 1), (0, 1)),
    *_CRNN_S8_LAYOUT[7:],
]
# Conv layouts per model.arch; "dense" is the "crnn" CNN with a linear classifier on its
# features and no LSTM (chineseocr's lstmFlag=False model).
LAYOUTS = {
    "crnn": _CRNN_LAYOUT,
    "vgg": _VGG_LAYOUT,
    "crnn_s8": _CRNN_S8_LAYOUT,
    "crnn_s4": _CRNN_S4_LAYOUT,
    "dense": _CRNN_LAYOUT,
}
# Archs whose recurrent part is two BiLSTMs (all but "dense").
RECURRENT = ("crnn", "vgg", "crnn_s8", "crnn_s4")
# Archs with a linear shortcut from the conv features to the logits beside the LSTMs.
SHORTCUT = ("crnn_s8", "crnn_s4")


def output_length(width: Any, arch: str = "crnn") -> Any:
    """Time steps ``T`` the ``arch`` network produces for an input (or real, unpadded)
    width: an int, or elementwise for a NumPy array or tensor of widths."""
    w = width
    for layer in LAYOUTS[arch]:
        if layer[0] == "conv":
            k, s, p = layer[2], 1, layer[3]
        else:
            k, s, p = layer[1][1], layer[2][1], layer[3][1]
        w = (w + 2 * p - k) // s + 1
    return w
