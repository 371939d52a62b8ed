"""Evaluation under no-grad: decode a dataset and measure it, sharded over ranks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from crnn.charset import Charset
from crnn.ctc import greedy_decode
from crnn.data.batching import EvalBatchSampler, collate
from crnn.data.transforms import normalize
from crnn.engine.distributed import DistInfo, all_reduce_sum
from crnn.engine.parallel import autocast_for, unwrap
from crnn.metrics import TextMetrics


@dataclass
class EvalResult:
    metrics: dict[str, float]
    images_per_s: float
    # The summed counts behind ``metrics`` (add several to combine datasets).
    sums: TextMetrics = field(default_factory=TextMetrics)
    bad_images: int = 0
    # The first batch seen by this rank, for image grids: images, widths, labels, preds.
    examples: dict[str, Any] = field(default_factory=dict)


def make_eval_loader(
    dataset: Dataset, batch_size: int, info: DistInfo, num_workers: int = 0, widths: Any = None
) -> DataLoader:
    sampler = EvalBatchSampler(
        len(dataset),
        batch_size,
        widths=widths,
        world_size=info.world_size,
        rank=info.rank,  # type: ignore[arg-type]
    )
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate,
        pin_memory=info.device.type == "cuda",
    )


@torch.inference_mode()
def evaluate(
    model: nn.Module | Any,
    loader: DataLoader,
    charset: Charset,
    info: DistInfo,
    amp: str = "none",
    output_length: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> EvalResult:
    """Greedy-decode every batch of ``loader`` with the bare ``model``; metrics are
    summed over ranks, so every rank returns the same numbers.

    ``model`` may also be an exported :class:`crnn.runtime.OnnxModel` (uint8 images in,
    normalised inside; CPU), with ``output_length`` giving its time steps per real
    width (a PyTorch model's own ``output_length`` is the default)."""
    is_torch = isinstance(model, nn.Module)
    if output_length is None:
        output_length = unwrap(model).output_length  # type: ignore[assignment]
    was_training = model.training if is_torch else False
    if is_torch:
        model.eval()
    metrics = TextMetrics()
    examples: dict[str, Any] = {}
    bad = 0
    n = 0
    t0 = time.perf_counter()
    try:
        for batch in loader:
            bad += len(batch["errors"])
            if batch["images"] is None:
                continue
            if is_torch:
                images = batch["images"].to(info.device, non_blocking=True)
                widths = batch["widths"].to(info.device, non_blocking=True)
                with autocast_for(info.device, amp):
                    logits = model(normalize(images))
            else:
                widths = batch["widths"]
                logits = model(batch["images"])
            lengths = output_length(widths).clamp(max=logits.shape[1])
            preds = [p.text for p in greedy_decode(logits, charset, lengths)]
            metrics.update(preds, batch["labels"], batch["raw_labels"])
            n += len(preds)
            if not examples:
                examples = {
                    "images": batch["images"],
                    "widths": batch["widths"],
                    "labels": batch["labels"],
                    "preds": preds,
                }
    finally:
        if is_torch:
            model.train(was_training)
    elapsed = time.perf_counter() - t0
    counts = torch.tensor([n, bad, elapsed], dtype=torch.float64)
    total = all_reduce_sum(torch.cat([metrics.to_tensor(), counts]), info)
    merged = TextMetrics.from_tensor(total[:-3])
    n_all, bad_all, secs = total[-3:].tolist()
    # Ranks run concurrently: throughput is all images over the mean rank time.
    ips = n_all / max(secs / info.world_size, 1e-9)
    return EvalResult(merged.compute(), ips, merged, int(bad_all), examples)
