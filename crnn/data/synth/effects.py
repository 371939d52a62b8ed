"""Appearance effects of the synthetic generator, as small pure functions.

Glyph-style effects act on the text's ink mask (one ``L`` image); photometric effects
act on the final image at the output size, where they are cheapest. The geometry (the
warps that move the ink and the line's reference points together) is in
:mod:`crnn.data.synth.geometry`.

Randomness comes only from the ``random.Random`` passed in. Noise and texture tiles are
made once per process from fixed seeds (:class:`Tiles`), and each image takes a window
at a random offset, which is far cheaper than drawing fresh noise per image and just as
deterministic.
"""

from __future__ import annotations

import io
import math
import random
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageFilter

# Tile shape of the precomputed noise and textures, in pixels. Windows wider or taller
# than a tile wrap around.
TILE_H = 128
TILE_W = 1024

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


class Tiles:
    """Noise and background textures, built once per process from fixed seeds.

    ``noise`` is standard normal; each texture is zero-mean and scaled to [-0.5, 0.5],
    so ``amp * texture`` varies by ``amp`` peak to peak.
    """

    def __init__(self) -> None:
        rng = np.random.default_rng(20240611)
        self.noise = rng.standard_normal((TILE_H, TILE_W)).astype(np.float32)
        self.textures = [
            _normalise(t)
            for t in (
                _clouds(rng),
                _fibres(rng),
                _stripes(rng),
                _speckle(rng),
                _ruled(rng),
                _clouds(rng) + 0.3 * _fibres(rng),
            )
        ]


def _resize_noise(rng: np.random.Generator, gh: int, gw: int) -> np.ndarray:
    grid = rng.random((gh, gw), dtype=np.float32)
    img = Image.fromarray(grid, mode="F").resize((TILE_W, TILE_H), Image.BICUBIC)
    return np.asarray(img, dtype=np.float32)


def _clouds(rng: np.random.Generator) -> np.ndarray:
    out = np.zeros((TILE_H, TILE_W), np.float32)
    for k, weight in ((4, 1.0), (8, 0.5), (16, 0.25), (32, 0.125)):
        out += weight * _resize_noise(rng, k, k * TILE_W // TILE_H)
    return out


def _fibres(rng: np.random.Generator) -> np.ndarray:
    # Streaks: noise much coarser along x than along y, plus fine grain.
    return _resize_noise(rng, TILE_H // 2, TILE_W // 24) + 0.3 * rng.random(
        (TILE_H, TILE_W), dtype=np.float32
    )


def _stripes(rng: np.random.Generator) -> np.ndarray:
    y, x = np.mgrid[0:TILE_H, 0:TILE_W].astype(np.float32)
    angle = rng.uniform(0, math.pi)
    period = rng.uniform(6, 24)
    phase = _resize_noise(rng, 4, 32) * 3.0
    return np.sin(2 * math.pi * (x * math.cos(angle) + y * math.sin(angle)) / period + phase)


def _speckle(rng: np.random.Generator) -> np.ndarray:
    dots = (rng.random((TILE_H, TILE_W)) < 0.015).astype(np.float32)
    img = Image.fromarray(dots * 255).convert("L").filter(ImageFilter.GaussianBlur(0.8))
    return np.asarray(img, dtype=np.float32) + 20 * _resize_noise(rng, 8, 64)


def _ruled(rng: np.random.Generator) -> np.ndarray:
    # Ruled paper / table lines: thin horizontal and vertical lines.
    out = np.zeros((TILE_H, TILE_W), np.float32)
    for y in range(int(rng.integers(3, 9)), TILE_H, int(rng.integers(14, 26))):
        out[y : y + 1] = 1.0
    for x in range(int(rng.integers(0, 60)), TILE_W, int(rng.integers(60, 200))):
        out[:, x : x + 1] = 1.0
    return out


def _normalise(t: np.ndarray) -> np.ndarray:
    t = t - t.mean()
    span = float(t.max() - t.min()) or 1.0
    return np.ascontiguousarray(t / span, dtype=np.float32)


def window(tile: np.ndarray, h: int, w: int, r: random.Random) -> np.ndarray:
    """An ``(h, w)`` view of ``tile`` at a random offset (wrapping when larger)."""
    th, tw = tile.shape
    if h > th or w > tw:
        tile = np.tile(tile, (-(-h // th), -(-w // tw)))
        th, tw = tile.shape
    y = r.randrange(th - h + 1)
    x = r.randrange(tw - w + 1)
    return tile[y : y + h, x : x + w]


# ---- colour ---------------------------------------------------------------------------


def pick_tones(
    r: random.Random, min_contrast: float, variation: float, light_text: bool
) -> tuple[float, float]:
    """Grey levels ``(paper, ink)`` in [0, 255] with ``|paper - ink| >= 255 * min_contrast``
    even at the background's extremes (it varies by ``variation`` peak to peak around
    ``paper``). Dark ink on light paper unless ``light_text``."""
    half = variation / 2
    lo = 255.0 * min_contrast + half
    hi = 255.0 - half
    # sqrt biases toward high contrast, as in most printed and painted text.
    gap = lo + (hi - lo) * math.sqrt(r.random()) if hi > lo else lo
    paper = r.uniform(min(gap, hi), hi) if hi > gap else hi
    paper = max(paper, half)
    ink = max(0.0, paper - gap)
    if light_text:
        return 255.0 - paper, 255.0 - ink
    return paper, ink


def colourise(r: random.Random, level: float, strength: float) -> np.ndarray:
    """An RGB colour whose luminance is about ``level``: grey plus a random chroma offset
    orthogonal to the luminance weights, of up to ``strength`` per channel."""
    d = np.array([r.gauss(0, 1) for _ in range(3)], dtype=np.float32)
    d -= _LUMA * float(d @ _LUMA) / float(_LUMA @ _LUMA)
    n = float(np.abs(d).max()) or 1.0
    rgb = level + d / n * strength * r.random()
    return np.clip(rgb, 0, 255).astype(np.float32)


def luminance(rgb: np.ndarray) -> float:
    return float(rgb @ _LUMA)


# ---- backgrounds ----------------------------------------------------------------------


def gradient(r: random.Random, h: int, w: int) -> np.ndarray:
    """A linear ramp in a random direction, zero-mean, [-0.5, 0.5] peak to peak."""
    angle = r.uniform(0, 2 * math.pi)
    # Weight the direction by the aspect so a wide image still ramps across its width.
    xs = (np.arange(w, dtype=np.float32) * (1.0 / max(w - 1, 1)) - 0.5) * math.cos(angle)
    ys = (np.arange(h, dtype=np.float32) * (1.0 / max(h - 1, 1)) - 0.5) * math.sin(angle)
    g = xs[None, :] + ys[:, None]
    span = float(g.max() - g.min()) or 1.0
    return g / span


# ---- degradations ---------------------------------------------------------------------


def jpeg(img: Image.Image, quality: int) -> Image.Image:
    """A JPEG round trip: blocking and ringing as in photos and scans."""
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    out = Image.open(buf)
    out.load()
    return out


def paint(
    r: random.Random, alpha: Image.Image, cfg: Any, rgb: bool, tiles: Tiles, applied: list[str]
) -> Image.Image:
    """Background and text tones composited through the ink mask ``alpha`` (``cfg`` a
    ``SynthConfig``; the effects used are appended to ``applied``)."""
    w, h = alpha.size
    light = r.random() < cfg.p_light_text
    if light:
        applied.append("light_text")
    u = r.random()
    pattern: np.ndarray | None = None
    if u < cfg.p_gradient_bg:
        pattern = gradient(r, h, w)
        applied.append("gradient_bg")
    elif u < cfg.p_gradient_bg + cfg.p_noise_bg:
        pattern = np.clip(window(tiles.noise, h, w, r) * 0.2, -0.5, 0.5)
        applied.append("noise_bg")
    elif u < cfg.p_gradient_bg + cfg.p_noise_bg + cfg.p_texture_bg:
        textures = tiles.textures
        pattern = window(textures[r.randrange(len(textures))], h, w, r)
        applied.append("texture_bg")
    variation = 0.0
    if pattern is not None:
        variation = r.uniform(0.3, 1.0) * cfg.max_bg_variation * 255.0
    paper, ink = pick_tones(r, cfg.min_contrast, variation, light)

    mode = "RGB" if rgb else "L"
    paper_c = np.full(3 if rgb else 1, paper, np.float32)
    ink_c = np.full(3 if rgb else 1, ink, np.float32)
    if rgb and r.random() < cfg.p_color:
        p2 = colourise(r, paper, min(paper, 255 - paper, 90.0))
        i2 = colourise(r, ink, min(ink, 255 - ink, 90.0))
        # Clipping can shift a colour's luminance: keep the pair only if the
        # contrast survived.
        gap = abs(luminance(p2) - luminance(i2))
        if gap >= 255 * cfg.min_contrast + variation / 2:
            paper_c, ink_c = p2, i2
            applied.append("color")

    if pattern is None:
        bg = Image.new(mode, (w, h), _pixel(paper_c))
    else:
        arr = (variation * pattern)[:, :, None] + paper_c if rgb else variation * pattern + paper
        bg = Image.fromarray(np.clip(arr + 0.5, 0, 255).astype(np.uint8), mode)
    if r.random() < cfg.p_shadow:
        dx, dy = r.randint(1, 3), r.randint(1, 3)
        shadow = _moved(alpha, dx, dy)
        shade = Image.new(mode, (w, h), _pixel(paper_c + (ink_c - paper_c) * 0.45))
        bg = Image.composite(shade, bg, shadow)
        applied.append("shadow")
    # Drawn only when set, so that recipes without it keep their random stream.
    if cfg.p_extrude > 0 and r.random() < cfg.p_extrude:
        side = extrusion(r, alpha, cfg.max_extrude * h)
        tone = paper_c + (ink_c - paper_c) * r.uniform(0.35, 0.7)
        bg = Image.composite(Image.new(mode, (w, h), _pixel(tone)), bg, side)
        applied.append("extrude")
    return Image.composite(Image.new(mode, (w, h), _pixel(ink_c)), bg, alpha)


def extrusion(r: random.Random, alpha: Image.Image, max_depth: float) -> Image.Image:
    """The sides of extruded letters: the ink mask ``alpha`` swept 1.5 to ``max_depth``
    pixels (at least 1.5) in a random direction, mostly downwards, one pixel at a time,
    as the maximum of the shifted copies (the face itself is composited on top later)."""
    depth = r.uniform(1.5, max(1.5, max_depth))
    angle = math.radians(r.uniform(20.0, 160.0) if r.random() < 0.8 else r.uniform(-160.0, -20.0))
    dx, dy = math.cos(angle), math.sin(angle)  # image y grows downwards
    steps = max(1, round(depth))
    ts = [depth * k / steps for k in range(1, steps + 1)]
    return _swept(alpha, [(round(t * dx), round(t * dy)) for t in ts])


def _swept(mask: Image.Image, shifts: list[tuple[int, int]]) -> Image.Image:
    """``mask`` swept along a path: the maximum of its copies moved by each ``(dx, dy)``
    of ``shifts`` (an extrusion's sides, a broad pen's stroke)."""
    a = np.asarray(mask, dtype=np.uint8)
    h, w = a.shape
    reach = max((max(abs(dx), abs(dy)) for dx, dy in shifts), default=0)
    padded = np.pad(a, reach)
    out = np.zeros_like(a)
    for dx, dy in shifts:  # out[y, x] = a[y - dy, x - dx]: the mask moved right and down
        y, x = reach - dy, reach - dx
        np.maximum(out, padded[y : y + h, x : x + w], out=out)
    return Image.fromarray(out, "L")


def _moved(mask: Image.Image, dx: int, dy: int) -> Image.Image:
    """``mask`` moved ``dx`` right and ``dy`` down in a frame of its size, 0 where nothing
    moved in (a drop shadow)."""
    out = Image.new("L", mask.size, 0)
    out.paste(mask, (dx, dy))
    return out


def stroke_weight(r: random.Random, alpha: Image.Image) -> Image.Image:
    """The ink mask grown (bolder) or shrunk (lighter) by up to a pixel, in a random
    measure: faces heavier or lighter than the font's own."""
    bolder = r.random() < 0.5
    thick = alpha.filter(ImageFilter.MaxFilter(3) if bolder else ImageFilter.MinFilter(3))
    return Image.blend(alpha, thick, r.uniform(0.3, 1.0))


def outline(alpha: Image.Image, size: int) -> Image.Image:
    """Hollow letters, as on shop signs: a ring of one (``size`` 3) or two (5) pixels
    around the ink, the letters' inside left to the background."""
    grown = alpha.filter(ImageFilter.MaxFilter(size))
    return ImageChops.subtract(grown, alpha)


def _pixel(c: np.ndarray) -> int | tuple[int, ...]:
    """A colour for ``Image.new``: an int for one channel, a tuple for RGB."""
    v = [min(255, max(0, int(x + 0.5))) for x in c]
    return v[0] if len(v) == 1 else tuple(v)


# ---- glyph style: faces the fonts do not have -----------------------------------------


def bleed(r: random.Random, alpha: Image.Image, max_sigma: float) -> Image.Image:
    """Ink bleed or erosion: the mask blurred by a sigma of up to ``max_sigma`` px and
    cut again at a random level. A low cut grows the strokes and rounds their ends (ink
    spread on paper, a rounded face); a high one thins them and eats their tips (a worn
    print, a light face)."""
    sigma = r.uniform(0.35, max(0.35, max_sigma))
    soft = np.asarray(alpha.filter(ImageFilter.GaussianBlur(sigma)), dtype=np.float32)
    level = r.uniform(0.2, 0.8) * float(soft.max() or 1.0)
    # A ramp of about a pixel around the cut keeps the edges anti-aliased.
    ramp = max(12.0, 0.25 * level)
    out = np.clip((soft - level) * (255.0 / ramp) + 127.5, 0, 255)
    return Image.fromarray(out.astype(np.uint8), "L")


def nib(r: random.Random, alpha: Image.Image, size: float, max_width: float) -> Image.Image:
    """Strokes drawn with a broad pen or brush: the ink swept along a short segment (the
    nib, 2 % to ``max_width`` of the font ``size`` long, held 10-40 degrees up to the
    right), so that strokes across the nib come out thick and strokes along it thin, with
    slanted ends, as calligraphy and Kai-like hands draw them. Works at twice the
    resolution so that nibs of a pixel or two still sweep smoothly."""
    length = 2.0 * r.uniform(0.02, max(0.02, max_width)) * size
    angle = math.radians(r.uniform(10.0, 40.0))
    w, h = alpha.size
    n = max(2, math.ceil(length))
    ts = [(k / n - 0.5) * length for k in range(n + 1)]
    shifts = [(round(t * math.cos(angle)), round(-t * math.sin(angle))) for t in ts]
    return _swept(alpha.resize((2 * w, 2 * h), Image.BILINEAR), shifts).reduce(2)


def broad_pen(
    r: random.Random, canvas: Image.Image, cfg: Any, size: float, applied: list[str]
) -> Image.Image:
    """``canvas`` drawn with a broad pen (:func:`nib`) in ``cfg.p_nib`` of the lines;
    nothing is drawn from ``r`` unless it is set, so other recipes keep their stream."""
    if cfg.p_nib > 0 and r.random() < cfg.p_nib:
        applied.append("nib")
        return nib(r, canvas, size, cfg.max_nib)
    return canvas


def elastic(
    r: random.Random, masks: tuple[Image.Image, ...], text_h: float, max_amplitude: float
) -> tuple[Image.Image, ...]:
    """Strokes bent as another hand or brush would draw them: each mask resampled
    through one smooth random displacement field (the same for all of ``masks``), up to
    ``max_amplitude`` of the text height ``text_h`` (px) in x and in y, varying over a
    cell of 1/8 to 1/4 of it (about a stroke's length), so that strokes wobble, thicken
    and thin while the character's layout stays (Simard et al.'s elastic distortion, at
    the output size)."""
    w, h = masks[0].size
    cell = max(2.0, text_h * r.uniform(0.125, 0.25))
    amp = r.uniform(0.35, 1.0) * max_amplitude * text_h
    gw, gh = max(2, math.ceil(w / cell) + 1), max(2, math.ceil(h / cell) + 1)
    rng = np.random.default_rng(r.getrandbits(64))
    field = []
    for _ in range(2):
        grid = rng.uniform(-1.0, 1.0, (gh, gw)).astype(np.float32)
        up = Image.fromarray(grid, mode="F").resize((w, h), Image.BICUBIC)
        field.append(np.asarray(up, dtype=np.float32) * amp)
    ys = np.clip(np.arange(h, dtype=np.float32)[:, None] + field[1], 0, h - 1)
    xs = np.clip(np.arange(w, dtype=np.float32)[None, :] + field[0], 0, w - 1)
    y0, x0 = np.floor(ys).astype(np.intp), np.floor(xs).astype(np.intp)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx_ = ys - y0, xs - x0
    out = []
    for mask in masks:
        a = np.asarray(mask, dtype=np.float32)
        top = a[y0, x0] * (1 - fx_) + a[y0, x1] * fx_
        bottom = a[y1, x0] * (1 - fx_) + a[y1, x1] * fx_
        v = top * (1 - fy) + bottom * fy
        out.append(Image.fromarray(np.clip(v + 0.5, 0, 255).astype(np.uint8), "L"))
    return tuple(out)


# ---- photograph effects ---------------------------------------------------------------


def uneven_light(r: random.Random, img: Image.Image, strength: float) -> Image.Image:
    """Light that falls off across the image (a lamp, a shadow, a phone's vignette):
    the image multiplied by a smooth field from ``1 - strength`` to 1, a linear ramp or a
    spot centred at a random point."""
    w, h = img.size
    ys = np.linspace(-0.5, 0.5, h, dtype=np.float32)[:, None] * (h / max(w, h))
    xs = np.linspace(-0.5, 0.5, w, dtype=np.float32)[None, :] * (w / max(w, h))
    if r.random() < 0.5:
        a = r.uniform(0, 2 * math.pi)
        f = xs * math.cos(a) + ys * math.sin(a)
    else:
        cx, cy = r.uniform(-0.6, 0.6), r.uniform(-0.6, 0.6)
        f = -np.sqrt((xs - cx * xs.max() * 2) ** 2 + (ys - cy * ys.max() * 2) ** 2)
    f = (f - f.min()) / (float(f.max() - f.min()) or 1.0)
    gain = 1.0 - strength * r.uniform(0.4, 1.0) * (1.0 - f)
    arr = np.asarray(img, dtype=np.float32)
    arr = arr * (gain[:, :, None] if arr.ndim == 3 else gain)
    return Image.fromarray(np.clip(arr + 0.5, 0, 255).astype(np.uint8), img.mode)


def motion_blur(r: random.Random, img: Image.Image, max_len: float) -> Image.Image:
    """A straight-line blur of 2..``max_len`` px in a random direction (a moving camera):
    the mean of the image shifted along the line."""
    length = r.uniform(2.0, max(2.0, max_len))
    a = r.uniform(0, math.pi)
    n = max(2, int(round(length)))
    arr = np.asarray(img, dtype=np.float32)
    pad = int(math.ceil(length / 2)) + 1
    padded = np.pad(
        arr, [(pad, pad), (pad, pad)] + ([(0, 0)] if arr.ndim == 3 else []), mode="edge"
    )
    h, w = arr.shape[:2]
    acc = np.zeros_like(arr)
    for t in np.linspace(-length / 2, length / 2, n):
        dx, dy = int(round(t * math.cos(a))), int(round(t * math.sin(a)))
        acc += padded[pad + dy : pad + dy + h, pad + dx : pad + dx + w]
    return Image.fromarray(np.clip(acc / n + 0.5, 0, 255).astype(np.uint8), img.mode)


_DISK = {}


def defocus(r: random.Random, img: Image.Image, max_radius: float) -> Image.Image:
    """An out-of-focus blur: a disc kernel of radius 1..``max_radius`` px (a lens's
    blur is a disc, flatter than a Gaussian: strokes smear into each other)."""
    radius = r.uniform(1.0, max(1.0, max_radius))
    k = 5 if radius <= 2.0 else None
    if k is not None:
        key = round(radius * 4)
        kern = _DISK.get(key)
        if kern is None:
            y, x = np.mgrid[-2:3, -2:3].astype(np.float32)
            d = np.clip(radius + 0.5 - np.sqrt(x * x + y * y), 0.0, 1.0)
            kern = _DISK[key] = tuple(float(v) for v in (d / d.sum()).ravel())
        return img.filter(ImageFilter.Kernel((5, 5), kern, scale=1.0))
    # Larger discs: a box blur of the same width is close enough and cheaper.
    return img.filter(ImageFilter.BoxBlur(radius * 0.8))


def resample(r: random.Random, img: Image.Image, min_scale: float) -> Image.Image:
    """Low resolution: the image shrunk to ``min_scale``..0.85 of its size and brought
    back (a far-away sign, a small crop of a photo), with a random filter each way."""
    w, h = img.size
    s = r.uniform(min_scale, 0.85)
    small = (max(1, round(w * s)), max(4, round(h * s)))
    down = r.choice((Image.BILINEAR, Image.BOX, Image.NEAREST, Image.LANCZOS))
    up = r.choice((Image.BILINEAR, Image.BICUBIC, Image.NEAREST))
    return img.resize(small, down).resize((w, h), up)


def degrade(
    r: random.Random, img: Image.Image, cfg: Any, tiles: Tiles, rgb: bool, applied: list[str]
) -> Image.Image:
    """The degradations of a painted line, in order (each drawn from ``r``, named in
    ``applied``): blur, defocus, motion blur, noise, down- and up-sampling, JPEG."""
    if r.random() < cfg.p_blur:
        sigma = r.uniform(0.3, max(0.3, cfg.max_blur))
        # One box-blur pass of the same variance: at these radii it looks like a
        # Gaussian and costs a third of Pillow's GaussianBlur (three passes).
        radius = (math.sqrt(12.0 * sigma * sigma + 1.0) - 1.0) / 2.0
        img = img.filter(ImageFilter.BoxBlur(radius))
        applied.append("blur")
    if cfg.p_defocus > 0 and r.random() < cfg.p_defocus:
        img = defocus(r, img, cfg.max_defocus)
        applied.append("defocus")
    if cfg.p_motion_blur > 0 and r.random() < cfg.p_motion_blur:
        img = motion_blur(r, img, cfg.max_motion_blur)
        applied.append("motion_blur")
    if r.random() < cfg.p_noise:
        std = r.uniform(0.2, 1.0) * cfg.max_noise * 255.0
        noise = window(tiles.noise, img.height, img.width, r) * std
        arr = np.asarray(img, dtype=np.float32)
        arr = arr + (noise[:, :, None] if rgb else noise)
        img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), img.mode)
        applied.append("noise")
    if cfg.p_resample > 0 and r.random() < cfg.p_resample:
        img = resample(r, img, cfg.resample_min)
        applied.append("resample")
    if r.random() < cfg.p_jpeg:
        img = jpeg(img, r.randint(cfg.jpeg_quality_min, cfg.jpeg_quality_max))
        applied.append("jpeg")
    return img
