"""Image preprocessing shared by training, evaluation, prediction and export.

The pipeline keeps images as ``uint8`` until they reach the device: ``preprocess``
returns a ``(C, H, W)`` uint8 tensor, the collate function pads and stacks those, and
the model's input module (``crnn.backends.torch.Uint8Model``) turns a batch into floats
in ``[-1, 1]`` on the device. That moves a quarter of the bytes through DataLoader
workers and host-to-device copies.

Decoding and resizing themselves live in :mod:`crnn.data.image` (NumPy and Pillow
only, for the PyTorch-free prediction path).
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFilter, ImageOps

from crnn.data.image import ImageSource, ImageSpec, preprocess_array, to_array


def to_tensor(img: Image.Image | np.ndarray) -> torch.Tensor:
    """PIL (or a ``(C, H, W)`` uint8 array, shared) -> ``(C, H, W)`` uint8 tensor."""
    return torch.from_numpy(img if isinstance(img, np.ndarray) else to_array(img))


def preprocess(source: ImageSource, spec: ImageSpec, min_width: int = 0) -> torch.Tensor:
    """:func:`crnn.data.image.preprocess_array` as a tensor: ``(C, H, W)`` uint8."""
    return torch.from_numpy(preprocess_array(source, spec, min_width))


def pad_batch(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ``(C, H, W_i)`` uint8 images into ``(B, C, H, max W)``.

    The right side is filled by repeating each image's last column (a black or grey
    bar would be read as a character by the backward LSTM). Returns the batch and the
    real widths ``(B,)``.
    """
    widths = [im.shape[-1] for im in images]
    c, h = images[0].shape[:2]
    out = np.empty((len(images), c, h, max(widths)), dtype=np.uint8)
    # Copies through NumPy views: tensor slicing costs ~4x more per image, which was a
    # tenth of the data pipeline's time for word-sized images.
    for i, (im, w) in enumerate(zip(images, widths)):
        a = im.numpy() if isinstance(im, torch.Tensor) else np.asarray(im)
        out[i, :, :, :w] = a
        if w < out.shape[-1]:
            out[i, :, :, w:] = a[:, :, w - 1 : w]
    return torch.from_numpy(out), torch.tensor(widths, dtype=torch.long)


class TrainAugment:
    """Mild photometric and geometric augmentations, applied to the resized image.

    Each effect is drawn with its own probability from ``AugmentConfig``, using the
    ``random.Random`` passed per call (the dataset seeds it per sample, so a resumed run
    sees the same augmentations). Geometric effects keep the canvas size and fill with
    the image's median grey; at these magnitudes text stays inside the frame.
    """

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    def __call__(self, img: Image.Image, r: random.Random) -> Image.Image:
        c = self.cfg
        if not c.enabled:
            return img
        # The fill is the *input's* median grey, computed only when a geometric effect
        # is drawn (a median sorts every pixel: ~10 % of this method's time otherwise).
        fill = None
        if r.random() < c.affine_p:
            fill = _median_fill(img)
            img = _affine(img, r, c, fill)
        if r.random() < c.perspective_p:
            if fill is None:
                fill = _median_fill(img)
            img = _perspective(img, r, c.perspective_distortion, fill)
        if r.random() < c.blur_p:
            img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.3, c.max_blur_sigma)))
        if r.random() < c.color_p:
            img = _color(img, r, c.brightness, c.contrast)
        if r.random() < c.invert_p:
            img = ImageOps.invert(img)
        if r.random() < c.noise_p:
            arr = np.asarray(img, dtype=np.float32)
            std = r.uniform(0.01, c.max_noise_std) * 255
            noise = np.random.default_rng(r.getrandbits(32)).normal(0, std, arr.shape)
            img = Image.fromarray(np.clip(arr + noise, 0, 255).astype(np.uint8))
        return img


def _median_fill(img: Image.Image) -> Any:
    arr = np.asarray(img)
    if arr.ndim == 2:
        return int(np.median(arr))
    return tuple(int(v) for v in np.median(arr.reshape(-1, arr.shape[-1]), axis=0))


def _affine(img: Image.Image, r: random.Random, c: Any, fill: Any) -> Image.Image:
    w, h = img.size
    angle = math.radians(r.uniform(-c.max_rotate, c.max_rotate))
    shear = math.radians(r.uniform(-c.max_shear, c.max_shear))
    scale = 1.0 + r.uniform(-c.max_scale, c.max_scale)
    # Inverse map (output -> input) about the centre: rotate, shear in x, scale.
    cos, sin, tan = math.cos(angle), math.sin(angle), math.tan(shear)
    a, b = cos / scale, (sin + tan * cos) / scale
    d, e = -sin / scale, (cos - tan * sin) / scale
    cx, cy = w / 2, h / 2
    coeffs = (a, b, cx - a * cx - b * cy, d, e, cy - d * cx - e * cy)
    return img.transform(img.size, Image.AFFINE, coeffs, Image.BILINEAR, fillcolor=fill)


def _perspective(img: Image.Image, r: random.Random, distortion: float, fill: Any) -> Image.Image:
    w, h = img.size
    dx, dy = distortion * w / 4, distortion * h / 2
    src = [
        (r.uniform(0, dx), r.uniform(0, dy)),
        (w - r.uniform(0, dx), r.uniform(0, dy)),
        (w - r.uniform(0, dx), h - r.uniform(0, dy)),
        (r.uniform(0, dx), h - r.uniform(0, dy)),
    ]
    dst = [(0, 0), (w, 0), (w, h), (0, h)]
    coeffs = _perspective_coeffs(dst, src)
    return img.transform(img.size, Image.PERSPECTIVE, coeffs, Image.BILINEAR, fillcolor=fill)


def _perspective_coeffs(
    dst: list[tuple[float, float]], src: list[tuple[float, float]]
) -> tuple[float, ...]:
    """Coefficients mapping output points ``dst`` to input points ``src`` (PIL's convention)."""
    rows = []
    rhs = []
    for (x, y), (u, v) in zip(dst, src):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        rhs += [u, v]
    sol = np.linalg.solve(np.asarray(rows, dtype=np.float64), np.asarray(rhs, dtype=np.float64))
    return tuple(float(v) for v in sol)


def _color(img: Image.Image, r: random.Random, brightness: float, contrast: float) -> Image.Image:
    arr = np.asarray(img, dtype=np.float32)
    mean = arr.mean()
    k = 1.0 + r.uniform(-contrast, contrast)
    b = r.uniform(-brightness, brightness) * 255 * 0.5
    arr = (arr - mean) * k + mean + b
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
