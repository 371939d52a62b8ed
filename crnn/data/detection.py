"""Training data for the detector: labelled images, augmented and cut to square crops,
with DBNet's target maps (``crnn.detect.targets``).

Every sample is drawn from a key ``(index, seed)``: which image and the seed of its
augmentation. :class:`StepSampler` derives the keys from the global step alone (an
epoch's permutation of the images, one seed per global sample), so a resumed run draws
the same crops as one that never stopped, on any number of processes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from crnn.data.quads import LabelledImage
from crnn.detect.detector import read_scale


def read_rgb(path: str) -> np.ndarray:
    """An image file as ``(H, W, 3)`` uint8 RGB, decoded as every reader decodes it
    (``crnn.data.image.load_image``: EXIF turns, transparency flattened); ValueError
    naming the file when it is not readable."""
    from crnn.data.image import ImageDecodeError, load_image

    try:
        return np.asarray(load_image(path, rgb=True))
    except ImageDecodeError as e:
        raise ValueError(str(e)) from None


@dataclass(frozen=True)
class DetAugment:
    """How a training crop is drawn (see :func:`augment`)."""

    crop: int = 384
    # The image is first scaled as reading scales it (long side brought to limit_side,
    # a smaller image enlarged by at most ``enlarge``; 1: never), then by 2**u, u uniform
    # in [min_log2_scale, max_log2_scale].
    limit_side: int = 960
    enlarge: float = 1.0
    min_log2_scale: float = -1.0
    max_log2_scale: float = 0.5
    rotate_p: float = 0.3
    max_rotate: float = 10.0
    # Share of crops centred on a labelled line (the rest anywhere).
    text_crop_p: float = 0.8
    color_p: float = 0.5
    gray_p: float = 0.1
    invert_p: float = 0.05
    blur_p: float = 0.1


def augment(
    image: np.ndarray, quads: np.ndarray, rng: np.random.Generator, aug: DetAugment
) -> tuple[np.ndarray, np.ndarray]:
    """A ``crop x crop`` RGB training crop and the quadrilaterals moved with it."""
    h, w = image.shape[:2]
    s = read_scale(h, w, aug.limit_side, aug.enlarge) * 2.0 ** rng.uniform(
        aug.min_log2_scale, aug.max_log2_scale
    )
    m = np.array([[s, 0, 0], [0, s, 0]], np.float64)
    out_w, out_h = max(int(round(w * s)), 1), max(int(round(h * s)), 1)
    if rng.random() < aug.rotate_p:
        angle = rng.uniform(-aug.max_rotate, aug.max_rotate)
        rot = cv2.getRotationMatrix2D((out_w / 2, out_h / 2), angle, 1.0)
        cos, sin = abs(rot[0, 0]), abs(rot[0, 1])
        new_w, new_h = int(out_h * sin + out_w * cos), int(out_h * cos + out_w * sin)
        rot[0, 2] += new_w / 2 - out_w / 2
        rot[1, 2] += new_h / 2 - out_h / 2
        m = rot @ np.vstack([m, [0, 0, 1]])
        out_w, out_h = new_w, new_h
    # The crop's origin, then one warp from the source image straight into the crop.
    c = aug.crop
    moved = _apply(m, quads)
    if len(moved) and rng.random() < aug.text_crop_p:
        centre = moved[rng.integers(len(moved))].mean(axis=0) + rng.uniform(-c / 3, c / 3, 2)
        x0, y0 = centre - c / 2
    else:
        x0, y0 = rng.uniform(0, max(out_w - c, 0)), rng.uniform(0, max(out_h - c, 0))
    x0 = float(np.clip(x0, min(0, out_w - c), max(out_w - c, 0)))
    y0 = float(np.clip(y0, min(0, out_h - c), max(out_h - c, 0)))
    m[:, 2] -= (x0, y0)
    interp = cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR
    crop = cv2.warpAffine(
        image, m, (c, c), flags=interp, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0)
    )
    return _colour(crop, rng, aug), _apply(m, quads)


def _apply(m: np.ndarray, quads: np.ndarray) -> np.ndarray:
    if not len(quads):
        return quads.reshape(0, 4, 2).astype(np.float32)
    pts = quads.reshape(-1, 2).astype(np.float64)
    return (pts @ m[:, :2].T + m[:, 2]).reshape(-1, 4, 2).astype(np.float32)


def _colour(img: np.ndarray, rng: np.random.Generator, aug: DetAugment) -> np.ndarray:
    out = img
    if rng.random() < aug.color_p:
        f = out.astype(np.float32)
        f = f * rng.uniform(0.7, 1.3) + rng.uniform(-30, 30)  # contrast, brightness
        grey = f.mean(axis=2, keepdims=True)
        f = grey + (f - grey) * rng.uniform(0.6, 1.4)  # saturation
        out = np.clip(f, 0, 255).astype(np.uint8)
    if rng.random() < aug.gray_p:
        out = np.repeat(cv2.cvtColor(out, cv2.COLOR_RGB2GRAY)[:, :, None], 3, axis=2)
    if rng.random() < aug.invert_p:
        out = 255 - out
    if rng.random() < aug.blur_p:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.5, 1.5))
    return np.ascontiguousarray(out)


class DetectionDataset(Dataset):
    """Keys ``(index, seed)`` -> ``(image (3, c, c) uint8, targets (4, c, c) float32)``.

    An image that cannot be read gives an all-zero crop with its target mask zero (it
    teaches nothing) and is named in ``errors``, counted by the trainer; the run goes on.

    With ``scenes`` (a :class:`crnn.data.scenes.SceneMaker`), ``scene_share`` of the keys
    draw a synthetic scene from their seed instead of the indexed image (the choice is
    the seed's too, so a resumed run draws the same).
    """

    def __init__(
        self,
        items: list[LabelledImage],
        aug: DetAugment,
        scenes: Any = None,
        scene_share: float = 0.0,
    ) -> None:
        self.items = items
        self.aug = aug
        self.scenes = scenes
        self.scene_share = scene_share if scenes is not None else 0.0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, key: tuple[int, int]) -> dict:
        from crnn.detect.targets import make_targets

        index, seed = key
        item = self.items[index]
        rng = np.random.default_rng(seed)
        c = self.aug.crop
        if self.scene_share and np.random.default_rng([seed, 1]).random() < self.scene_share:
            scene = self.scenes.draw(seed)
            crop, quads = augment(scene.image, scene.quads, rng, self.aug)
            t = make_targets(quads, scene.ignore, (c, c)).stack()
            return {
                "image": torch.from_numpy(crop).permute(2, 0, 1).contiguous(),
                "targets": torch.from_numpy(t),
                "error": "",
            }
        try:
            image = read_rgb(str(item.image))
        except (OSError, ValueError) as e:
            zeros = np.zeros((4, c, c), np.float32)
            return {
                "image": torch.zeros(3, c, c, dtype=torch.uint8),
                "targets": torch.from_numpy(zeros),
                "error": f"{item.image}: {e}",
            }
        crop, quads = augment(image, item.quads, rng, self.aug)
        t = make_targets(quads, item.ignore, (c, c)).stack()
        return {
            "image": torch.from_numpy(crop).permute(2, 0, 1).contiguous(),
            "targets": torch.from_numpy(t),
            "error": "",
        }


def collate(samples: list[dict]) -> dict:
    return {
        "images": torch.stack([s["image"] for s in samples]),
        "targets": torch.stack([s["targets"] for s in samples]),
        "errors": [s["error"] for s in samples if s["error"]],
    }


def _seed(*parts: int) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big")


class StepSampler(Sampler):
    """Keys for this rank's micro-batches from ``start_step`` on, forever.

    Global sample ``g = step * batch + k`` is image ``perm(epoch)[g % n]`` with
    augmentation seed ``hash(seed, g)``; in step ``s``, micro-batch ``m`` of
    ``accum``, rank ``r`` takes ``k`` in ``[(m * world + r) * micro, ... + micro)``.
    """

    def __init__(
        self, n: int, batch: int, world: int, rank: int, accum: int, seed: int, start_step: int = 0
    ) -> None:
        if batch % (world * accum):
            raise ValueError(f"batch {batch} does not split over {world} ranks x {accum} steps")
        self.n, self.batch, self.world, self.rank, self.accum, self.seed = (
            n,
            batch,
            world,
            rank,
            accum,
            seed,
        )
        self.micro = batch // (world * accum)
        self.start_step = start_step

    @property
    def steps_per_epoch(self) -> int:
        return max(1, math.ceil(self.n / self.batch))

    def _perm(self, epoch: int) -> np.ndarray:
        return np.random.default_rng(_seed(self.seed, epoch, 0xE)).permutation(self.n)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        step = self.start_step
        perms: dict[int, np.ndarray] = {}
        while True:
            for m in range(self.accum):
                first = (m * self.world + self.rank) * self.micro
                for k in range(first, first + self.micro):
                    g = step * self.batch + k
                    epoch, pos = divmod(g, self.n)
                    if epoch not in perms:
                        perms = {epoch: self._perm(epoch)}
                    yield int(perms[epoch][pos]), _seed(self.seed, g)
            step += 1

    def __len__(self) -> int:  # endless; DataLoader only needs it for len()
        return 2**62
