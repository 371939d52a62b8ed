"""Image preprocessing shared by training, evaluation, prediction and export.

The pipeline keeps images as ``uint8`` until they reach the device: ``preprocess``
returns a ``(C, H, W)`` uint8 tensor, the collate function pads and stacks those, and
:func:`normalize` turns a batch into floats in ``[-1, 1]`` on the device. That moves a
quarter of the bytes through DataLoader workers and host-to-device copies.
"""

from __future__ import annotations

import io
import math
import os
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFilter, ImageOps, UnidentifiedImageError

ImageSource = Any  # str | os.PathLike | bytes | PIL.Image.Image | np.ndarray | torch.Tensor


class ImageDecodeError(ValueError):
    """An input that is not a readable image."""


@dataclass(frozen=True)
class ImageSpec:
    """How an image becomes a model input; stored in every checkpoint."""

    height: int = 32
    min_width: int = 16
    max_width: int = 128
    width_multiple: int = 4
    rgb: bool = False

    @property
    def channels(self) -> int:
        return 3 if self.rgb else 1

    @classmethod
    def from_config(cls, data_cfg: Any) -> ImageSpec:
        return cls(
            height=data_cfg.height,
            min_width=data_cfg.min_width,
            max_width=data_cfg.max_width,
            width_multiple=data_cfg.width_multiple,
            rgb=data_cfg.rgb,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "height": self.height,
            "min_width": self.min_width,
            "max_width": self.max_width,
            "width_multiple": self.width_multiple,
            "rgb": self.rgb,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ImageSpec:
        return cls(
            **{k: d[k] for k in ("height", "min_width", "max_width", "width_multiple", "rgb")}
        )


def resized_width(width: int, height: int, spec: ImageSpec, min_width: int = 0) -> int:
    """Width after resizing to ``spec.height`` keeping the aspect ratio.

    Clamped to ``[max(spec.min_width, min_width), spec.max_width]`` and rounded up to a
    multiple of ``spec.width_multiple``.
    """
    w = round(spec.height * width / max(height, 1))
    w = max(w, spec.min_width, min_width)
    m = spec.width_multiple
    w = int(math.ceil(w / m) * m)
    cap = spec.max_width // m * m
    return max(m, min(w, cap))


def load_image(source: ImageSource, rgb: bool = False) -> Image.Image:
    """Decode any supported input into a PIL image in ``L`` (or ``RGB``) mode.

    Accepts a path, encoded bytes, a PIL image, or an array/tensor ``(H, W)``,
    ``(H, W, C)`` (uint8, or float in [0, 1]). Raises :class:`ImageDecodeError`.
    """
    mode = "RGB" if rgb else "L"
    name = "image"
    try:
        if isinstance(source, Image.Image):
            img = source
        elif isinstance(source, (bytes, bytearray, memoryview)):
            name = f"{len(source)} bytes"
            img = Image.open(io.BytesIO(source))
            img.load()
        elif isinstance(source, (str, os.PathLike)):
            name = repr(str(source))
            img = Image.open(source)
            img.load()
        elif isinstance(source, (np.ndarray, torch.Tensor)):
            arr = source.detach().cpu().numpy() if isinstance(source, torch.Tensor) else source
            if arr.dtype != np.uint8:
                if not np.issubdtype(arr.dtype, np.floating):
                    raise ImageDecodeError(
                        f"array of dtype {arr.dtype}: expected uint8 or float in [0, 1]"
                    )
                arr = (np.clip(arr, 0, 1) * 255 + 0.5).astype(np.uint8)
            if arr.ndim == 3 and arr.shape[2] == 1:
                arr = arr[:, :, 0]
            if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
                raise ImageDecodeError(
                    f"array of shape {arr.shape}: expected (H, W) or (H, W, 3|4)"
                )
            img = Image.fromarray(arr)
        else:
            raise ImageDecodeError(
                f"cannot read an image from {type(source).__name__}: expected a path, bytes, "
                "a PIL image or a uint8 array"
            )
    except ImageDecodeError:
        raise
    except FileNotFoundError:
        raise ImageDecodeError(f"{name}: file not found") from None
    except IsADirectoryError:
        raise ImageDecodeError(f"{name}: is a directory, not an image") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ImageDecodeError(f"{name}: not a readable image ({e})") from None
    if img.width < 1 or img.height < 1:
        raise ImageDecodeError(f"{name}: empty image ({img.width}x{img.height})")
    if img.mode != mode:
        if img.mode in ("RGBA", "LA") or "transparency" in img.info:
            # Composite transparent text on white rather than on black.
            bg = Image.new("RGBA", img.size, (255, 255, 255, 255))
            img = Image.alpha_composite(bg, img.convert("RGBA"))
        img = img.convert(mode)
    return img


def resize(img: Image.Image, spec: ImageSpec, min_width: int = 0) -> Image.Image:
    w = resized_width(img.width, img.height, spec, min_width)
    if (w, spec.height) == img.size:
        return img
    return img.resize((w, spec.height), Image.BILINEAR)


def to_tensor(img: Image.Image) -> torch.Tensor:
    """PIL -> ``(C, H, W)`` uint8 tensor."""
    arr = np.array(img, dtype=np.uint8)  # a writable copy (PIL's buffer is read-only)
    if arr.ndim == 2:
        return torch.from_numpy(arr[None])
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def preprocess(source: ImageSource, spec: ImageSpec, min_width: int = 0) -> torch.Tensor:
    """Decode, convert, resize to ``spec.height`` keeping the ratio -> ``(C, H, W)`` uint8."""
    return to_tensor(resize(load_image(source, spec.rgb), spec, min_width))


def normalize(images: torch.Tensor) -> torch.Tensor:
    """``uint8`` ``(B, C, H, W)`` -> float in ``[-1, 1]`` (same device)."""
    return images.float().div_(127.5).sub_(1.0)


def pad_batch(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ``(C, H, W_i)`` uint8 images into ``(B, C, H, max W)``.

    The right side is filled by repeating each image's last column (a black or grey
    bar would be read as a character by the backward LSTM). Returns the batch and the
    real widths ``(B,)``.
    """
    widths = torch.tensor([im.shape[-1] for im in images], dtype=torch.long)
    c, h = images[0].shape[:2]
    out = torch.empty((len(images), c, h, int(widths.max())), dtype=images[0].dtype)
    for i, im in enumerate(images):
        w = im.shape[-1]
        out[i, :, :, :w] = im
        if w < out.shape[-1]:
            out[i, :, :, w:] = im[:, :, w - 1 : w]
    return out, widths


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
        fill = _median_fill(img)
        if r.random() < c.affine_p:
            img = _affine(img, r, c, fill)
        if r.random() < c.perspective_p:
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
