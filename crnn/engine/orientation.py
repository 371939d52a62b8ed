"""Training the orientation classifier (:mod:`crnn.reading.orientation`): a small CNN told crops
as given from the same crops turned 180 degrees, exported to ONNX.

Data: real crops from folders with a ``gt.txt`` (their labels are not used) and lines
drawn by the synthetic generator from recipes' ``data.synth`` sections, each seen both
ways. A share of each source is held out and reported (accuracy, and how many upright
crops would be called upside down at each threshold).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from crnn.data.gt import read_gt
from crnn.io import atomic_write, sha256_file
from crnn.reading.orientation import HEIGHT, WIDTH, windows

log = logging.getLogger(__name__)

# Thresholds reported for the held-out crops (share of upright ones called turned).
THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99)


class OrientationNet(nn.Module):
    """Five 3x3 convolutions (BatchNorm, ReLU; the first four halve the map), global
    average pooling, two classes: as given, turned 180 degrees. ~0.08 M parameters."""

    def __init__(self, channels: Sequence[int] = (8, 16, 32, 64, 96)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 1
        for i, c in enumerate(channels):
            layers += [
                nn.Conv2d(c_in, c, 3, padding=1, bias=False),
                nn.BatchNorm2d(c),
                nn.ReLU(inplace=True),
            ]
            if i < len(channels) - 1:
                layers.append(nn.MaxPool2d(2))
            c_in = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def real_crops(folder: str | Path, limit: int = 0) -> list[Image.Image]:
    """The crops a folder's ``gt.txt`` lists (grayscale; unreadable files skipped)."""
    folder = Path(folder)
    out = []
    for line in read_gt(folder / "gt.txt").lines[: limit or None]:
        try:
            with Image.open(folder / line.path) as im:
                out.append(im.convert("L"))
        except OSError as e:
            log.warning("skipped %s: %s", folder / line.path, e)
    return out


def synthetic_lines(config: str | Path, count: int, seed: int) -> list[Image.Image]:
    """``count`` images drawn by the generator of a recipe's ``data.synth`` section."""
    from crnn.config import load_config
    from crnn.data.synth.render import SynthGenerator
    from crnn.text.alphabet import Charset

    cfg = load_config(config, [])
    charset = Charset.from_spec(cfg.data.charset)
    gen = SynthGenerator(charset, cfg.data.synth, seed=seed, height=cfg.data.height)
    return [gen.render(i)[0].convert("L") for i in range(count)]


def both_ways(images: Sequence[Image.Image], rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """One window of each image as given (label 0) and of it turned (label 1), uint8."""
    xs, ys = [], []
    for im in images:
        for label, turned in ((0, im), (1, im.rotate(180))):
            w = windows(turned)
            xs.append(((w[rng.randrange(len(w)), 0] + 1.0) * 127.5).round().astype(np.uint8))
            ys.append(label)
    return np.stack(xs), np.asarray(ys, dtype=np.int64)


def train_classifier(
    train: tuple[np.ndarray, np.ndarray],
    epochs: int = 8,
    batch: int = 256,
    lr: float = 3e-3,
    seed: int = 0,
    minutes: float = 0.0,
    channels: Sequence[int] = (8, 16, 32, 64, 96),
) -> OrientationNet:
    """Fit :class:`OrientationNet` (AdamW, one-cycle cosine); ``minutes`` caps the time.
    Augmentation: a share of the windows inverted (light text on dark), and contrast
    and brightness moved."""
    torch.manual_seed(seed)
    x_all, y_all = torch.from_numpy(train[0]), torch.from_numpy(train[1])
    model = OrientationNet(channels)
    steps = epochs * math.ceil(len(x_all) / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)
    start, step = time.monotonic(), 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(x_all), generator=gen)
        seen = correct = 0
        for k in range(0, len(order), batch):
            idx = order[k : k + batch]
            x = x_all[idx].float()[:, None] / 127.5 - 1.0
            flip = torch.rand(len(idx), 1, 1, 1, generator=gen) < 0.25
            x = torch.where(flip, -x, x)
            x = x * (0.6 + 0.8 * torch.rand(len(idx), 1, 1, 1, generator=gen))
            x = x + 0.3 * (torch.rand(len(idx), 1, 1, 1, generator=gen) - 0.5)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y_all[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            seen += len(idx)
            correct += int((logits.argmax(1) == y_all[idx]).sum())
        log.info(
            "orientation epoch %d/%d: train accuracy %.4f",
            epoch + 1,
            epochs,
            correct / max(1, seen),
        )
        if minutes and time.monotonic() - start > minutes * 60:
            log.info("stopped after %.1f minutes (the time cap)", (time.monotonic() - start) / 60)
            break
    return model.eval()


def report(classifier: Any, held_out: dict[str, Sequence[Image.Image]]) -> dict[str, Any]:
    """Per held-out source, as ``classifier`` (an exported
    :class:`crnn.reading.orientation.OrientationClassifier`, what the reader runs) scores it: crops,
    accuracy at 0.5 over both ways, and at each of THRESHOLDS the share of upright crops
    called turned and of turned crops caught."""
    out: dict[str, Any] = {}
    for name, images in held_out.items():
        if not images:
            continue
        up = np.asarray([classifier.upside_down(im) for im in images])
        down = np.asarray([classifier.upside_down(im.rotate(180)) for im in images])
        out[name] = {
            "crops": len(images),
            "accuracy": round(
                float(((up < 0.5).sum() + (down >= 0.5).sum()) / (2 * len(images))), 4
            ),
            "upright_called_turned": {str(t): int((up >= t).sum()) for t in THRESHOLDS},
            "turned_caught": {str(t): int((down >= t).sum()) for t in THRESHOLDS},
        }
    return out


def export_classifier(model: OrientationNet, out_dir: str | Path) -> Path:
    """Write ``orient-<sha256[:8]>.onnx`` into ``out_dir`` (input ``(N, 1, HEIGHT,
    WIDTH)`` float32 in [-1, 1], output ``(N, 2)`` logits) and return its path."""
    import warnings

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "orient.onnx.tmp"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.onnx.export(
            model.eval(),
            (torch.zeros(1, 1, HEIGHT, WIDTH),),
            str(tmp),
            dynamo=False,
            input_names=["windows"],
            output_names=["logits"],
            dynamic_axes={"windows": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=17,
        )
    path = out_dir / f"orient-{sha256_file(tmp)[:8]}.onnx"
    atomic_write(path, lambda f: f.write(tmp.read_bytes()))
    tmp.unlink()
    return path
