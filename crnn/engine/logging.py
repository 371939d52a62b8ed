"""The run's one TensorBoard writer (rank 0 only), image grids and memory statistics."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

log = logging.getLogger(__name__)


@contextlib.contextmanager
def run_log_file(path: str | Path, enabled: bool = True) -> Iterator[None]:
    """Copy every log message to ``path`` while the block runs (appending, so a resumed
    run continues the same file). Only rank 0 passes ``enabled``."""
    if not enabled:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


class RunLogger:
    """TensorBoard scalars and images; every method is a no-op when ``enabled`` is False
    (ranks other than 0), so callers never branch on rank."""

    def __init__(self, log_dir: str | Path, enabled: bool = True) -> None:
        self.enabled = enabled
        self.writer = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(log_dir))

    def scalars(self, values: dict[str, float], step: int) -> None:
        if self.writer is not None:
            for k, v in values.items():
                self.writer.add_scalar(k, v, step)

    def prediction_grid(
        self,
        tag: str,
        images: torch.Tensor,
        widths: torch.Tensor,
        labels: list[str],
        preds: list[str],
        step: int,
    ) -> None:
        """A column of images with ``label -> prediction`` under each (red if wrong)."""
        if self.writer is None or not len(labels):
            return
        grid = render_prediction_grid(images, widths, labels, preds)
        self.writer.add_image(tag, np.asarray(grid), step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, text, step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def render_prediction_grid(
    images: torch.Tensor, widths: torch.Tensor, labels: list[str], preds: list[str]
) -> Image.Image:
    """``(B, C, H, W)`` uint8 images -> one RGB picture, a row per sample."""
    font = ImageFont.load_default()
    n = len(labels)
    h = images.shape[2]
    text_w = 260
    row_h = max(h, 14) + 4
    width = int(widths[:n].max()) + text_w + 12
    canvas = Image.new("RGB", (width, row_h * n + 4), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    for i in range(n):
        img = images[i, :, :, : int(widths[i])].cpu().numpy()
        img = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
        canvas.paste(Image.fromarray(img).convert("RGB"), (4, 4 + i * row_h))
        ok = labels[i] == preds[i]
        draw.text(
            (int(widths[:n].max()) + 10, 4 + i * row_h + (row_h - 14) // 2),
            f"{labels[i]} -> {preds[i]}",
            fill=(0, 120, 0) if ok else (200, 0, 0),
            font=font,
        )
    return canvas


def memory_stats(device: torch.device) -> dict[str, float]:
    """Peak allocated/reserved GPU memory in MiB since the last reset (empty on CPU)."""
    if device.type != "cuda":
        return {}
    mib = 2**20
    return {
        "peak_allocated_mib": torch.cuda.max_memory_allocated(device) / mib,
        "peak_reserved_mib": torch.cuda.max_memory_reserved(device) / mib,
    }


def format_metrics(metrics: dict[str, Any]) -> str:
    return (
        f"acc {metrics['accuracy']:.4f}  alnum-acc {metrics['alnum_accuracy']:.4f}  "
        f"CER {metrics['cer']:.4f}  NED {metrics['ned']:.4f}  (n={int(metrics['count'])})"
    )
