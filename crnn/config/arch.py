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
    ("conv", 0, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, True, True), ("conv", 3, 3, 1, False, True), ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 4, 3, 1, True, True), ("conv", 5, 3, 1, False, True), ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 6, 2, 0, True, True),
]  # fmt: skip
_VGG_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, False, True), ("conv", 3, 3, 1, False, True), ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 4, 3, 1, True, False), ("conv", 5, 3, 1, True, False), ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 6, 2, 0, False, True),
]  # fmt: skip
LAYOUTS = {"crnn": _CRNN_LAYOUT, "vgg": _VGG_LAYOUT}


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
