"""Deterministic weights and images for the foreign-weights reference fixtures
(``tests/fixtures/foreign``): the same numbers from the key names and shapes alone, in
this repository and in the script that ran the other projects' code."""

from __future__ import annotations

import zlib

import numpy as np

# Classes of the fixture networks: small, so the stored outputs stay a few KB (the conv
# widths are fixed by the projects' code). The 5,530-class case is tests' own fixture.
NCLASS = 23


def deterministic_weights(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Float32 values for every key, from NumPy's frozen ``RandomState`` stream seeded by
    the key's CRC-32: uniform in +-1/sqrt(fan-in) for weights and biases, BatchNorm
    scales near 1, running variances in [0.5, 1.5], and a zero batch counter."""
    out = {}
    for key, shape in shapes.items():
        r = np.random.RandomState(zlib.crc32(key.encode()))
        if key.endswith("num_batches_tracked"):
            out[key] = np.zeros(shape, dtype=np.int64)
            continue
        if key.endswith("running_var"):
            v = r.uniform(0.5, 1.5, shape)
        elif key.endswith("running_mean"):
            v = r.uniform(-0.2, 0.2, shape)
        elif ".batchnorm" in key and key.endswith("weight"):
            v = r.uniform(0.8, 1.2, shape)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            bound = 1.0 / np.sqrt(max(fan_in, 1))
            v = r.uniform(-bound, bound, shape)
        out[key] = v.astype(np.float32)
    return out


def line_images(width: int = 96) -> np.ndarray:
    """Two deterministic grayscale "line" images, ``(2, 1, 32, width)`` uint8: light
    background with dark vertical strokes of varying thickness and position."""
    r = np.random.RandomState(7)
    imgs = np.full((2, 1, 32, width), 235, dtype=np.uint8)
    for b in range(2):
        for _ in range(14):
            x, w = r.randint(2, width - 6), r.randint(1, 4)
            y0, y1 = r.randint(3, 12), r.randint(20, 29)
            imgs[b, 0, y0:y1, x : x + w] = r.randint(10, 80)
        imgs[b] = np.clip(imgs[b].astype(int) + r.randint(-12, 12, imgs[b].shape), 0, 255)
    return imgs
