"""Synthetic detection scenes: the generator's text drawn with its boxes onto real images
whose labelled text is painted out, or onto plain and gradient grounds.

A scene is drawn from a seed alone (:meth:`SceneMaker.draw`), so a detector run that mixes
scenes into its real images (``det.synth_share``) resumes exactly. What a scene holds:

- **a ground**: a training image scaled to a long side of at most ``limit_side``, every
  labelled line (don't-care ones too) painted out by inpainting at a quarter of the size,
  the painted regions kept as don't care (a trace of text may remain); or, in
  ``PLAIN_P`` of scenes, a flat or gradient colour with grain;
- **blocks of lines**: 1 to ``MAX_BLOCKS`` blocks, each one line or, in ``STACK_P`` of
  them, 2 to 5 lines stacked in one face, size and colour (paragraphs and price lists, so
  the detector learns to part adjacent lines); character heights log-uniform from
  ``MIN_HEIGHT`` px to a quarter of the ground's short side (at most ``MAX_HEIGHT``); text
  and face from the recognizer's generator (``data.synth``: its words, sentences, numbers,
  fonts); a colour that stands off the ground, an outline in ``STROKE_P``; upright
  Chinese columns in ``COLUMN_P``; turned up to ``MAX_TURN`` degrees in ``TURN_P``;
- **boxes** as the real labels draw them: a quadrilateral around each line's ink, grown by
  ``PAD`` of its character height, clockwise from the top-left corner (turned with it).

Blocks never overlap each other or a painted region; one that finds no room after a few
tries is left out.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from PIL import Image, ImageDraw

from crnn.data.quads import LabelledImage

PLAIN_P = 0.2
MAX_BLOCKS = 8
STACK_P = 0.35
MIN_HEIGHT = 12
MAX_HEIGHT = 160
STROKE_P = 0.15
COLUMN_P = 0.08
TURN_P = 0.25
MAX_TURN = 30.0
MAX_CHARS = 24
PAD = 0.08
TRIES = 12


@dataclass
class Scene:
    """``image`` (H, W, 3) uint8 RGB; ``quads`` (N, 4, 2) float32; ``ignore`` (N,) bool."""

    image: np.ndarray
    quads: np.ndarray
    ignore: np.ndarray


class SceneMaker:
    """Draws :class:`Scene` s from seeds.

    Args:
        generator: a :class:`crnn.data.synth.SynthGenerator` (its text and fonts).
        grounds: the training images whose labelled lines are painted out.
        limit_side: the long side scenes are drawn at, at most (as reading scales).
    """

    def __init__(self, generator: Any, grounds: list[LabelledImage], limit_side: int = 960):
        self.generator = generator
        self.grounds = grounds
        self.limit_side = limit_side

    def draw(self, seed: int) -> Scene:
        from crnn.data.detection import read_rgb

        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        ignore: list[np.ndarray] = []
        if self.grounds and r.random() >= PLAIN_P:
            item = self.grounds[r.randrange(len(self.grounds))]
            try:
                image = read_rgb(str(item.image))
            except ValueError:
                image = plain_ground(rng, self.limit_side)
            else:
                image, painted = paint_out(image, item.quads, self.limit_side)
                ignore = list(painted)
        else:
            image = plain_ground(rng, self.limit_side)
        taken = [_bounds(q) for q in ignore]
        grey = float(image[::4, ::4].mean())
        quads: list[np.ndarray] = []
        for _ in range(r.randint(1, MAX_BLOCKS)):
            block = self._block(r, rng, image.shape[:2], grey)
            if block is None:
                continue
            canvas, alpha, boxes = block
            placed = _place(r, image.shape[:2], alpha.shape, taken)
            if placed is None:
                continue
            x, y = placed
            _blend(image, canvas, alpha, x, y)
            taken.append((x, y, x + alpha.shape[1], y + alpha.shape[0]))
            quads += [b + (x, y) for b in boxes]
        all_quads = quads + ignore
        return Scene(
            image=np.ascontiguousarray(image),
            quads=np.array(all_quads, np.float32).reshape(-1, 4, 2),
            ignore=np.array([False] * len(quads) + [True] * len(ignore), bool),
        )

    # ---- one block of lines -------------------------------------------------------

    def _block(
        self, r: random.Random, rng: np.random.Generator, ground: tuple[int, int], grey: float
    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]] | None:
        from crnn.data.synth.render import _glyph_cache

        gen = self.generator
        short = min(ground)
        top = min(MAX_HEIGHT, short / 4)
        if top <= MIN_HEIGHT:
            return None
        size = int(round(math.exp(r.uniform(math.log(MIN_HEIGHT), math.log(top)))))
        column = r.random() < COLUMN_P
        lines = 1 if r.random() >= STACK_P else r.randint(2, 5)
        text, face = gen.text_and_font(r)
        font = _glyph_cache().font(face.path, size)
        texts = [_cut(text, r)]
        for _ in range(lines - 1):
            more = ""
            for _try in range(4):
                more = _cut(gen.text.sample(r), r)
                if more and set(more) <= face.chars:
                    break
                more = ""
            if more:
                texts.append(more)
        texts = [t for t in texts if t.strip()]
        if not texts:
            return None
        if column:
            texts = [t.replace(" ", "") for t in texts[:2]]
        stroke = int(round(size * r.uniform(0.04, 0.1))) if r.random() < STROKE_P else 0
        gap = r.uniform(1.15, 1.7) * size
        mask, boxes = _draw_lines(texts, font, size, gap, column, stroke)
        if mask is None:
            return None
        if r.random() < TURN_P:
            mask, boxes = _turn(mask, boxes, r.uniform(-MAX_TURN, MAX_TURN))
        colour, outline = _colours(r, rng, grey)
        alpha = mask[..., 0].astype(np.float32) / 255.0
        if stroke:
            edge = mask[..., 1].astype(np.float32) / 255.0
            canvas = colour * alpha[..., None] + outline * (edge - alpha).clip(0)[..., None]
            canvas = canvas / np.maximum(edge, 1e-3)[..., None]
            alpha = edge
        else:
            canvas = colour
        alpha *= r.uniform(0.8, 1.0)
        return canvas, alpha, boxes


def _cut(text: str, r: random.Random) -> str:
    text = text.strip()
    if len(text) > MAX_CHARS:
        start = r.randrange(len(text) - MAX_CHARS + 1)
        text = text[start : start + MAX_CHARS].strip()
    return text


def _draw_lines(
    texts: list[str], font: Any, size: int, gap: float, column: bool, stroke: int
) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """The lines' ink (channel 0) and ink with outline (channel 1), and their boxes."""
    pad = int(size * 0.5) + stroke
    if column:
        step = int(round(size * 1.05))
        w = int(round(gap * (len(texts) - 1) + size)) + 2 * pad
        h = step * max(len(t) for t in texts) + 2 * pad
    else:
        widths = [font.getlength(t) for t in texts]
        w = int(max(widths)) + 2 * pad + 2
        h = int(round(gap * (len(texts) - 1) + size * 1.3)) + 2 * pad
    if w * h > 3000 * 3000 or w < 4 or h < 4:
        return None, []
    spots: list[list[tuple[float, float, str]]] = []
    for k, t in enumerate(texts):
        if column:
            x = pad + (len(texts) - 1 - k) * gap  # right to left
            spots.append([(x, pad + i * step, c) for i, c in enumerate(t)])
        else:
            spots.append([(pad, pad + k * gap, t)])
    ink = np.zeros((h, w), np.uint8)
    edge = ink if not stroke else np.zeros((h, w), np.uint8)
    boxes = []
    for line in spots:
        one = Image.new("L", (w, h))
        d1 = ImageDraw.Draw(one)
        for x, y, t in line:
            d1.text((x, y), t, font=font, fill=255)
        box = one.getbbox()
        if box is None:
            continue
        np.maximum(ink, np.asarray(one), out=ink)
        if stroke:
            rim = Image.new("L", (w, h))
            d2 = ImageDraw.Draw(rim)
            for x, y, t in line:
                d2.text((x, y), t, font=font, fill=255, stroke_width=stroke, stroke_fill=255)
            np.maximum(edge, np.asarray(rim), out=edge)
        x0, y0, x1, y1 = box
        grow = PAD * size + stroke
        x0, y0, x1, y1 = x0 - grow, y0 - grow, x1 + grow, y1 + grow
        boxes.append(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32))
    if not boxes:
        return None, []
    return np.stack([ink, edge], axis=2), boxes


def _turn(
    mask: np.ndarray, boxes: list[np.ndarray], angle: float
) -> tuple[np.ndarray, list[np.ndarray]]:
    h, w = mask.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    cos, sin = abs(m[0, 0]), abs(m[0, 1])
    nw, nh = int(h * sin + w * cos) + 1, int(h * cos + w * sin) + 1
    m[0, 2] += nw / 2 - w / 2
    m[1, 2] += nh / 2 - h / 2
    out = cv2.warpAffine(mask, m, (nw, nh), flags=cv2.INTER_LINEAR)
    moved = [(b @ m[:, :2].T + m[:, 2]).astype(np.float32) for b in boxes]
    # Clockwise from the top-left corner again: the box turned past 45 degrees is not.
    return out, [_clockwise(b) for b in moved]


def _clockwise(q: np.ndarray) -> np.ndarray:
    start = int(np.argmin(q[:, 0] + q[:, 1]))
    return np.roll(q, -start, axis=0)


def _colours(
    r: random.Random, rng: np.random.Generator, mean: float
) -> tuple[np.ndarray, np.ndarray]:
    """A text colour that stands off the ground's mean grey, and an outline colour."""
    for _ in range(8):
        c = rng.integers(0, 256, 3)
        if abs(float(c.mean()) - mean) >= 70:
            break
    else:
        c = np.array([0, 0, 0]) if mean > 127 else np.array([255, 255, 255])
        if r.random() < 0.5:
            c = (c * 0.7 + rng.integers(0, 256, 3) * 0.3).astype(np.int64)
    outline = 255 - c if r.random() < 0.7 else rng.integers(0, 256, 3)
    return c.astype(np.float32), outline.astype(np.float32)


def _place(
    r: random.Random,
    size: tuple[int, int],
    box: tuple[int, int],
    taken: list[tuple[float, float, float, float]],
) -> tuple[int, int] | None:
    (H, W), (h, w) = size, box
    if h >= H or w >= W:
        return None
    for _ in range(TRIES):
        x, y = r.randint(0, W - w), r.randint(0, H - h)
        if all(x + w <= a or x >= c or y + h <= b or y >= d for a, b, c, d in taken):
            return x, y
    return None


def _blend(image: np.ndarray, canvas: np.ndarray, alpha: np.ndarray, x: int, y: int) -> None:
    """``canvas``: (h, w, 3) colours, or one colour (3,)."""
    h, w = alpha.shape
    region = image[y : y + h, x : x + w].astype(np.float32)
    a = alpha[..., None]
    image[y : y + h, x : x + w] = (region * (1 - a) + canvas * a).astype(np.uint8)


def _bounds(q: np.ndarray) -> tuple[float, float, float, float]:
    return float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max())


def paint_out(
    image: np.ndarray, quads: np.ndarray, limit_side: int
) -> tuple[np.ndarray, np.ndarray]:
    """The image scaled to a long side of at most ``limit_side`` with every quad's region
    inpainted (at a quarter of the size, blended back softly), and the quads scaled."""
    h, w = image.shape[:2]
    s = min(1.0, limit_side / max(h, w))
    if s < 1:
        image = cv2.resize(image, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)
    quads = quads.reshape(-1, 4, 2).astype(np.float32) * s
    if not len(quads):
        return np.ascontiguousarray(image), quads
    h, w = image.shape[:2]
    mask = np.zeros((h, w), np.uint8)
    cv2.fillPoly(mask, [np.round(q).astype(np.int32) for q in quads], 255)
    grow = max(3, int(round(0.01 * max(h, w))))
    mask = cv2.dilate(mask, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8))
    sh, sw = max(h // 4, 1), max(w // 4, 1)
    small = cv2.resize(image, (sw, sh), interpolation=cv2.INTER_AREA)
    small_mask = cv2.resize(mask, (sw, sh), interpolation=cv2.INTER_NEAREST)
    filled = cv2.inpaint(small, small_mask, 3, cv2.INPAINT_TELEA)
    filled = cv2.GaussianBlur(cv2.resize(filled, (w, h), interpolation=cv2.INTER_LINEAR), (0, 0), 2)
    soft = cv2.GaussianBlur(mask, (0, 0), grow / 2).astype(np.float32)[..., None] / 255.0
    out = image.astype(np.float32) * (1 - soft) + filled.astype(np.float32) * soft
    return np.ascontiguousarray(out.astype(np.uint8)), quads


def plain_ground(rng: np.random.Generator, limit_side: int) -> np.ndarray:
    """A flat or two-colour gradient ground with grain, at most ``limit_side`` on a side."""
    w = int(rng.integers(limit_side // 2, limit_side + 1))
    h = int(rng.integers(limit_side // 2, limit_side + 1))
    a, b = rng.integers(0, 256, 3).astype(np.float32), rng.integers(0, 256, 3)
    if rng.random() < 0.5:
        t = np.linspace(0, 1, h if rng.random() < 0.5 else w, dtype=np.float32)
        ramp = t[:, None, None] if len(t) == h else t[None, :, None]
        out = a * (1 - ramp) + b.astype(np.float32) * ramp
        out = np.broadcast_to(out, (h, w, 3))
    else:
        out = np.broadcast_to(a, (h, w, 3))
    out = out + rng.normal(0, rng.uniform(0, 8), (h, w, 1)).astype(np.float32)
    return np.ascontiguousarray(out.clip(0, 255).astype(np.uint8))
