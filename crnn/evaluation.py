"""Evaluation: decode a labelled dataset with a :class:`crnn.backends.Backend` and
measure it, optionally sharded over the ranks of a distributed run.

Used by ``tools/eval.py`` (one process, any backend) and by the trainer's validation
(each rank evaluates its shard; ``reduce`` sums the counts over ranks), so it sits
beside ``crnn.reading.recognizer``, below the training engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from crnn.backends import Backend
from crnn.ctc import Lexicon, Prediction
from crnn.ctc.lm import CharBigram
from crnn.data import ignore_stop_signals, stop_workers_at_exit
from crnn.data.batching import EvalBatchSampler, collate
from crnn.reading.calibration import TemperatureFit
from crnn.reading.decoder import Decoder
from crnn.text.metrics import TextMetrics


@dataclass
class EvalResult:
    metrics: dict[str, float]
    images_per_s: float
    # The summed counts behind ``metrics`` (add several to combine datasets).
    sums: TextMetrics = field(default_factory=TextMetrics)
    bad_images: int = 0
    # What was said of the first unreadable images (this rank's, at most 20).
    bad_examples: list[str] = field(default_factory=list)
    # The first batch seen by this rank, for image grids: images, widths, labels, preds.
    examples: dict[str, Any] = field(default_factory=dict)


def make_eval_loader(
    dataset: Dataset,
    batch_size: int,
    num_workers: int = 0,
    widths: Any = None,
    world_size: int = 1,
    rank: int = 0,
    pin_memory: bool = False,
) -> DataLoader:
    """Batches of similar width (``widths``: each sample's), this rank's share only."""
    sampler = EvalBatchSampler(
        len(dataset),  # type: ignore[arg-type]
        batch_size,
        widths=widths,
        world_size=world_size,
        rank=rank,
    )
    if num_workers > 0:
        stop_workers_at_exit()
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate,
        pin_memory=pin_memory,
        # A stop request (Ctrl-C, SIGTERM) during validation is the trainer's to handle.
        worker_init_fn=ignore_stop_signals if num_workers > 0 else None,
    )


@torch.inference_mode()
def evaluate(
    backend: Backend,
    loader: DataLoader,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    world_size: int = 1,
    beam_width: int = 0,
    lexicon: Lexicon | None = None,
    max_edits: int = 2,
    observe: Callable[[dict[str, Any], list[Prediction]], None] | None = None,
    calibrate: TemperatureFit | None = None,
    numerals: bool = False,
    lm: CharBigram | None = None,
    lm_weight: float = 0.0,
) -> EvalResult:
    """Decode every batch of ``loader`` with ``backend`` (greedy, or as ``predict``
    decodes: ``beam_width``, ``lexicon``, a language prior ``lm``) and score it.

    In a distributed run ``reduce`` sums a float64 tensor over the ``world_size`` ranks
    (every rank then returns the same numbers); the default is one process.
    ``observe(batch, predictions)`` sees each batch's predictions (e.g. to collect the
    errors, ``crnn.reports.errors.ErrorCollector``). ``calibrate`` collects what fitting a
    confidence temperature needs (from the raw logits); the backend's own temperature
    is applied to the confidences reported. ``numerals``: an o read inside a number is
    a 0, as ``predict`` reads it (:class:`crnn.reading.recognizer.Recognizer`'s ``numerals``)."""
    metrics = TextMetrics()
    decoder = Decoder.build(
        backend.charset,
        getattr(backend, "temperature", 1.0),
        beam_width,
        lexicon,
        max_edits,
        lm if lm is not None else False,
        lm_weight,
        numerals,
    )
    examples: dict[str, Any] = {}
    bad = 0
    bad_examples: list[str] = []
    n = 0
    t0 = time.perf_counter()
    for batch in loader:
        bad += len(batch["errors"])
        bad_examples.extend(batch["errors"][: max(0, 20 - len(bad_examples))])
        if batch["images"] is None:
            continue
        logits = backend(batch["images"])
        # Lengths from the host-side widths: no device round trip.
        lengths = torch.as_tensor(backend.output_length(batch["widths"]))
        lengths = lengths.clamp(max=logits.shape[1])
        predictions = decoder(logits, lengths)
        preds = [p.text for p in predictions]
        if calibrate is not None:
            calibrate.add(logits, lengths, [a == b for a, b in zip(preds, batch["labels"])])
        metrics.update(preds, batch["labels"], batch["raw_labels"])
        if observe is not None:
            observe(batch, predictions)
        n += len(preds)
        if not examples:
            examples = {
                "images": batch["images"],
                "widths": batch["widths"],
                "labels": batch["labels"],
                "preds": preds,
            }
    elapsed = time.perf_counter() - t0
    counts = torch.tensor([n, bad, elapsed], dtype=torch.float64)
    total = torch.cat([metrics.to_tensor(), counts])
    if reduce is not None:
        total = reduce(total)
    merged = TextMetrics.from_tensor(total[:-3])
    n_all, bad_all, secs = total[-3:].tolist()
    # Ranks run concurrently: throughput is all images over the mean rank time.
    ips = n_all / max(secs / world_size, 1e-9)
    return EvalResult(merged.compute(), ips, merged, int(bad_all), bad_examples, examples)
