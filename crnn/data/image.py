"""Decoding and resizing: the one preprocessing of every image, without PyTorch.

``preprocess_array`` turns a path, encoded bytes, a PIL image or an array into the
model's input pixels, ``(C, H, W)`` uint8 (NumPy). Training, evaluation and the
PyTorch recognizer wrap it in a tensor (``crnn.data.transforms.preprocess``); the ONNX
Runtime path of ``tools/predict.py`` uses it as it is, so answering from an exported
model never imports PyTorch (whose import alone takes 1.5-3 s on a small CPU).
"""

from __future__ import annotations

import io
import math
import os
import sys
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from crnn.config.image_spec import ImageSpec  # noqa: F401 (re-exported: crnn.data.image's API)

ImageSource = Any  # str | os.PathLike | bytes | PIL.Image.Image | np.ndarray | torch.Tensor

# The largest image (width x height) any tool decodes: 120 megapixels, an A3 page
# scanned at 600 dpi (7,016 x 9,921 = 70 MP) with room to spare. Larger files are
# reported and skipped before their pixels are decompressed: a 30,000 x 30,000 PNG of a
# few kilobytes would otherwise take 900 MB (grey) to 3.6 GB (RGBA) of memory.
MAX_PIXELS = 120_000_000
# The formats any tool decodes: raster formats Pillow reads itself. Never EPS/PostScript
# (Pillow hands those to Ghostscript, an interpreter, where it is installed: an uploaded
# file must not reach it) nor the other formats Pillow would guess from a file's bytes.
# (A phone's MPO photo opens through the JPEG reader.)
FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "GIF", "PPM", "JPEG2000", "TGA", "ICO")
# EXIF orientations that swap width and height (rotated by 90 or 270 degrees).
_TRANSPOSED = (5, 6, 7, 8)
_ORIENTATION = 0x0112


class ImageDecodeError(ValueError):
    """An input that is not a readable image."""


class ImageTooLargeError(ImageDecodeError):
    """A readable image with more pixels than a limit allows (a server answers 413)."""


class ImageTooWideError(ImageDecodeError):
    """A readable image too wide to read as one line (a server answers 422)."""


def open_image(source: str | os.PathLike[str] | bytes, name: str = "image") -> Image.Image:
    """Open an encoded image lazily (header only) and refuse one larger than
    :data:`MAX_PIXELS` before any pixel is decompressed. Raises
    :class:`ImageDecodeError`; the caller loads the pixels."""
    try:
        img = Image.open(
            io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source,
            formats=FORMATS,
        )
    except Image.DecompressionBombError as e:  # Pillow's own limit, checked at open
        raise ImageTooLargeError(f"{name}: {_too_large(e)}") from None
    except FileNotFoundError:
        raise ImageDecodeError(f"{name}: file not found") from None
    except UnidentifiedImageError:
        raise ImageDecodeError(
            f"{name}: not a readable image (read as {', '.join(FORMATS)}; convert "
            "other formats, PDF and PostScript included, to PNG first)"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageDecodeError(f"{name}: not a readable image ({e})") from None
    if img.width * img.height > MAX_PIXELS:
        img.close()
        raise ImageTooLargeError(
            f"{name}: {img.width} x {img.height} pixels, more than the {MAX_PIXELS:,} any tool "
            "decodes (crnn.data.image.MAX_PIXELS): a decompression bomb or a huge scan; "
            "downscale it first"
        )
    return img


def _too_large(e: Exception) -> str:
    return (
        f"too many pixels to decode safely ({e}); the limit of any tool is {MAX_PIXELS:,} "
        "pixels (crnn.data.image.MAX_PIXELS): a decompression bomb or a huge scan"
    )


def oriented_size(img: Image.Image) -> tuple[int, int]:
    """``(width, height)`` as the image is shown, after its EXIF orientation (a phone
    photo stored sideways with orientation 6 or 8 is taller than it is wide)."""
    try:
        turned = img.getexif().get(_ORIENTATION, 1) in _TRANSPOSED
    except Exception:  # noqa: BLE001 -- a broken EXIF block: the stored size
        turned = False
    return (img.height, img.width) if turned else img.size


def upright(img: Image.Image) -> Image.Image:
    """The image as it is meant to be seen: its EXIF orientation applied (phone photos
    are stored as the sensor saw them and tagged with how to turn them)."""
    try:
        if img.getexif().get(_ORIENTATION, 1) == 1:
            return img
        return ImageOps.exif_transpose(img)
    except Exception:  # noqa: BLE001 -- a broken EXIF block: the pixels as stored
        return img


# The widest input inference accepts (pixels after resizing to the model's height): a
# CTC model reads any width, but a 128:1 crop is a page, not a line.
INFERENCE_MAX_WIDTH = 4096


def resized_width(
    width: int,
    height: int,
    spec: ImageSpec,
    min_width: int = 0,
    max_width: int | None = None,
    scale: float | None = None,
) -> int:
    """Width after resizing to ``spec.height`` keeping the aspect ratio (times ``scale``,
    by default ``spec.width_scale``).

    Clamped to ``[max(spec.min_width, min_width), max_width]`` and rounded up to a
    multiple of ``spec.width_multiple``. ``max_width`` defaults to ``spec.max_width``,
    the training cap (a memory knob); inference passes :data:`INFERENCE_MAX_WIDTH`
    and so never squeezes a long line.
    """
    scale = spec.width_scale if scale is None else scale
    w = round(spec.height * width / max(height, 1) * scale)
    w = max(w, spec.min_width, min_width)
    m = spec.width_multiple
    w = int(math.ceil(w / m) * m)
    cap = (spec.max_width if max_width is None else max_width) // m * m
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
            img = upright(source)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            name = f"{len(source)} bytes"
            img = open_image(bytes(source), name)
            img.load()
            img = upright(img)
        elif isinstance(source, (str, os.PathLike)):
            name = repr(str(source))
            img = open_image(source, name)
            img.load()
            img = upright(img)
        elif isinstance(source, np.ndarray) or _is_tensor(source):
            arr = source if isinstance(source, np.ndarray) else source.detach().cpu().numpy()
            if arr.dtype != np.uint8:
                if not np.issubdtype(arr.dtype, np.floating):
                    raise ImageDecodeError(
                        f"array of dtype {arr.dtype}: expected uint8 or float in [0, 1]"
                    )
                arr = (np.clip(arr, 0, 1) * 255 + 0.5).astype(np.uint8)
            if arr.ndim == 3 and arr.shape[2] == 1:
                arr = arr[:, :, 0]
            if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (2, 3, 4)):
                raise ImageDecodeError(
                    f"array of shape {arr.shape}: expected (H, W) grey, (H, W, 2) grey and "
                    "alpha, (H, W, 3) RGB or (H, W, 4) RGBA"
                )
            img = (
                Image.fromarray(np.ascontiguousarray(arr), "LA")
                if arr.ndim == 3 and arr.shape[2] == 2
                else Image.fromarray(arr)
            )
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
    except Image.DecompressionBombError as e:
        raise ImageTooLargeError(f"{name}: {_too_large(e)}") from None
    except UnidentifiedImageError:
        raise ImageDecodeError(
            f"{name}: not a readable image (read as {', '.join(FORMATS)}; convert "
            "other formats, PDF and PostScript included, to PNG first)"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageDecodeError(f"{name}: not a readable image ({e})") from None
    if img.width < 1 or img.height < 1:
        raise ImageDecodeError(f"{name}: empty image ({img.width}x{img.height})")
    if img.mode != mode:
        try:
            if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
                img = flatten_alpha(img)
            if img.mode in ("I", "I;16", "I;16B", "I;16L", "F") and mode == "L":
                img = _wide_to_l(img)
            img = img.convert(mode)
        except (ValueError, OSError) as e:
            raise ImageDecodeError(
                f"{name}: pixel mode {img.mode!r} cannot be converted to {mode!r} ({e})"
            ) from None
    return img


def flatten_alpha(img: Image.Image) -> Image.Image:
    """An image with transparency composited onto a background its visible pixels stand
    out from: white under dark ink, black under light ink (white text on a transparent
    PNG, a logo's cut-out lettering), judged by the mean brightness of the pixels at
    least half opaque. Every reader's input goes through it (the recognizer's and the
    detector's)."""
    rgba = img.convert("RGBA")
    arr = np.asarray(rgba)
    seen = arr[:, :, 3] >= 128
    light = bool(seen.any()) and float(arr[:, :, :3][seen].mean()) > 160 and not seen.all()
    bg = Image.new("RGBA", img.size, (0, 0, 0, 255) if light else (255, 255, 255, 255))
    return Image.alpha_composite(bg, rgba)


def _wide_to_l(img: Image.Image) -> Image.Image:
    """16-bit and float greys (scans, TIFFs) scaled to 0-255 by their own range: Pillow's
    own conversion clips them to 255 and leaves a white image."""
    arr = np.asarray(img, dtype=np.float64)
    lo, hi = float(arr.min()), float(arr.max())
    scaled = (arr - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(arr)
    return Image.fromarray(np.clip(scaled + 0.5, 0, 255).astype(np.uint8), "L")


def resize(
    img: Image.Image, spec: ImageSpec, min_width: int = 0, max_width: int | None = None
) -> Image.Image:
    """Resize to ``spec.height`` keeping the aspect ratio (see :func:`resized_width`)."""
    w = resized_width(img.width, img.height, spec, min_width, max_width)
    if (w, spec.height) == img.size:
        return img
    return img.resize((w, spec.height), Image.BILINEAR)


def zoom_rows(height: int, zoom: float) -> tuple[int, int]:
    """A line read zoomed in ``zoom`` times (``Recognizer(zoom=...)``) is the central
    ``height`` rows of the line resized ``zoom`` times as tall: ``(that height, the first
    row kept)``."""
    tall = max(height, round(height * zoom))
    return tall, (tall - height) // 2


def stretch_line(
    pixels: np.ndarray, width: int, scale: float, spec: ImageSpec, zoom: float = 1.0
) -> tuple[np.ndarray, int]:
    """A preprocessed line ``(C, H, W)`` uint8 (its first ``width`` columns real, the rest
    padding, dropped) resampled (bicubic) to ``scale`` times its width, by the rules of
    :func:`resized_width` (a multiple of ``spec.width_multiple``, at most
    :data:`INFERENCE_MAX_WIDTH`) -> ``(pixels, their width)``; ``zoom``: enlarged that many
    times both ways, and the central ``H`` rows kept (:func:`zoom_rows`)."""
    height = pixels.shape[-2]
    tall, top = zoom_rows(height, zoom)
    w = resized_width(width, spec.height, spec, 0, INFERENCE_MAX_WIDTH, scale * tall / height)
    img = from_array(np.ascontiguousarray(pixels[..., :width]))
    return to_array(img.resize((w, tall), Image.BICUBIC))[:, top : top + height], w


def to_model_height(img: Image.Image, spec: ImageSpec) -> Image.Image:
    """Training's first resizing step: to ``spec.height``, the whole width kept (the
    ratio, ``spec.min_width`` and ``spec.width_multiple`` rules; at most
    :data:`INFERENCE_MAX_WIDTH`). Prepared LMDBs store this image."""
    return resize(img, spec, 0, INFERENCE_MAX_WIDTH)


def fit_width(
    img: Image.Image | np.ndarray, spec: ImageSpec, min_width: int, max_width: int
) -> Image.Image | np.ndarray:
    """Training's second step: an image already at ``spec.height`` (PIL, or ``(C, H, W)``
    uint8) widened to ``min_width`` or squeezed to ``max_width`` if it must be; returned
    as it is (same object) when its width already fits."""
    width = img.shape[2] if isinstance(img, np.ndarray) else img.width
    # The first step applied spec.width_scale already.
    w = resized_width(width, spec.height, spec, min_width, max_width, scale=1.0)
    if w == width:
        return img
    if isinstance(img, np.ndarray):
        img = from_array(img)
    return img.resize((w, spec.height), Image.BILINEAR)


def from_array(pixels: np.ndarray) -> Image.Image:
    """``(C, H, W)`` uint8 -> PIL ``L`` or ``RGB`` (the inverse of :func:`to_array`)."""
    if pixels.shape[0] == 1:
        return Image.fromarray(pixels[0], "L")
    return Image.fromarray(np.ascontiguousarray(pixels.transpose(1, 2, 0)), "RGB")


def to_array(img: Image.Image) -> np.ndarray:
    """PIL -> ``(C, H, W)`` uint8 array (a writable copy of the pixels)."""
    w, h = img.size
    # One copy through tobytes(); np.array(img) copies twice and costs ~50 % more on
    # word-sized images, where per-sample overhead is a fair part of the data pipeline.
    flat = np.frombuffer(bytearray(img.tobytes()), dtype=np.uint8)
    if img.mode == "L":
        return flat.reshape(1, h, w)
    return np.ascontiguousarray(flat.reshape(h, w, -1).transpose(2, 0, 1))


def preprocess_array(
    source: ImageSource, spec: ImageSpec, min_width: int = 0, inference: bool = True
) -> np.ndarray:
    """Decode, convert, resize to ``spec.height`` keeping the ratio -> ``(C, H, W)`` uint8.

    ``inference`` (the default) keeps the image's whole width, up to
    :data:`INFERENCE_MAX_WIDTH`; wider images are refused (split them into lines).
    ``inference=False`` caps the width at ``spec.max_width`` as training does.
    ``min_width`` widens narrow images (training uses it so a label fits the output).
    Raises :class:`ImageDecodeError` for input that is not a readable image.
    """
    img = load_image(source, spec.rgb)
    if not inference:
        return to_array(resize(img, spec, min_width))
    natural = round(spec.height * img.width / max(img.height, 1) * spec.width_scale)
    if natural > INFERENCE_MAX_WIDTH:
        raise ImageTooWideError(
            f"{img.width}x{img.height} image: {natural} px wide at the model's height of "
            f"{spec.height}, over the {INFERENCE_MAX_WIDTH} px limit. Crop it into lines or "
            "words first (a CTC recognizer reads one line)"
        )
    return to_array(resize(img, spec, min_width, INFERENCE_MAX_WIDTH))


def _is_tensor(x: Any) -> bool:
    # A tensor exists only once PyTorch is imported; never import it here for the check.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)
