"""Batches: collation with real widths, and rank-aware samplers.

The unit of sampling is the *global batch*: ``batch_size`` samples per optimizer
step, summed over ranks and gradient-accumulation steps. Each global batch is cut into
``accum_steps * world_size`` micro-batches; rank ``r`` takes micro-batches
``m * world_size + r`` for ``m = 0 .. accum_steps - 1``. So the samples behind one
optimizer step are the same whatever the number of GPUs or accumulation steps, which
is what keeps the effective batch (and the learning-rate schedule) fixed when only the
hardware changes, and what the DDP-equals-one-process tests rely on.

With bucketing, samples are grouped by width inside windows of many batches before
the batches are shuffled: micro-batches hold images of similar width (little padding)
while the epoch order stays random. An endless generator's widths are known only once
its images are drawn: :func:`width_sorted_windows` sorts each window after drawing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from crnn.data.transforms import pad_batch


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack dataset items into a batch.

    Returns ``images`` ``(B, C, H, W)`` uint8 (right-padded by repeating the last
    column), ``widths`` ``(B,)`` real widths, ``targets`` ``(B, S)`` ids padded with 0,
    ``target_lengths`` ``(B,)``, ``labels``/``raw_labels``/``sources`` lists (``sources``
    say where each sample came from, for error reports), and ``errors``: messages
    for items whose image could not be read (left out of the batch, counted by the
    trainer). Padded 2-D targets, not a concatenated 1-D one, so DataParallel can
    scatter every tensor along dim 0.
    """
    good = [s for s in samples if "error" not in s]
    errors = [s["error"] for s in samples if "error" in s]
    if not good:
        return {
            "images": None,
            "widths": None,
            "targets": None,
            "target_lengths": None,
            "labels": [],
            "raw_labels": [],
            "sources": [],
            "errors": errors,
        }
    images, widths = pad_batch([s["image"] for s in good])
    lengths = [len(s["target"]) for s in good]
    targets = np.zeros((len(good), max(max(lengths), 1)), dtype=np.int64)
    for i, s in enumerate(good):
        targets[i, : lengths[i]] = s["target"]
    return {
        "images": images,
        "widths": widths,
        "targets": torch.from_numpy(targets),
        "target_lengths": torch.tensor(lengths, dtype=torch.long),
        "labels": [s["label"] for s in good],
        "raw_labels": [s["raw_label"] for s in good],
        "sources": [s.get("source", "") for s in good],
        "errors": errors,
    }


def _check_divisible(batch_size: int, world_size: int, accum_steps: int) -> int:
    """The micro-batch size; the arguments must fit (``Config.validate`` says how to fix
    a training config that does not)."""
    parts = world_size * accum_steps
    if batch_size % parts:
        raise ValueError(
            f"batch_size {batch_size} is not divisible by world_size x accum_steps = "
            f"{world_size} x {accum_steps} = {parts}"
        )
    return batch_size // parts


class _MicroBatches:
    """Shared by the samplers: cut global batches into this rank's micro-batches."""

    def __init__(self, batch_size: int, world_size: int, rank: int, accum_steps: int) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world of size {world_size}")
        self.batch_size = batch_size
        self.world_size = world_size
        self.rank = rank
        self.accum_steps = accum_steps
        self.micro_batch_size = _check_divisible(batch_size, world_size, accum_steps)

    def split(self, global_batch: Sequence[Any]) -> Iterator[list[Any]]:
        b = self.micro_batch_size
        for m in range(self.accum_steps):
            j = m * self.world_size + self.rank
            yield list(global_batch[j * b : (j + 1) * b])


class BucketBatchSampler(_MicroBatches, Sampler[list[tuple[int, int]]]):
    """Epoch-based sampler over a finite dataset; yields this rank's micro-batches.

    Items are ``(index, seed)`` pairs; ``seed`` differs per sample and epoch and seeds
    that sample's augmentation, so augmentations do not depend on which worker loads
    the sample and a resumed run repeats them exactly.

    Args:
        widths: per-sample widths for bucketing (None disables bucketing).
        num_samples: dataset size.
        batch_size: global batch per optimizer step.
        bucket_window: number of global batches sorted together by width.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        widths: Sequence[int] | np.ndarray | None = None,
        world_size: int = 1,
        rank: int = 0,
        accum_steps: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        bucket_window: int = 50,
    ) -> None:
        _MicroBatches.__init__(self, batch_size, world_size, rank, accum_steps)
        if num_samples < batch_size:
            raise ValueError(
                f"the training set has {num_samples} usable samples, fewer than one global "
                f"batch of {batch_size}; lower train.batch_size or add data"
            )
        self.num_samples = num_samples
        self.widths = None if widths is None else np.asarray(widths)
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_window = bucket_window
        self.epoch = 0
        self.start_step = 0

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps (global batches) per epoch; the incomplete last batch is dropped."""
        return self.num_samples // self.batch_size

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        """Select the epoch's order; skip its first ``start_step`` global batches (resume)."""
        self.epoch = epoch
        self.start_step = start_step

    def global_batches(self) -> list[np.ndarray]:
        g = np.random.default_rng([self.seed, self.epoch])
        order = g.permutation(self.num_samples) if self.shuffle else np.arange(self.num_samples)
        order = order[: self.steps_per_epoch * self.batch_size]
        if self.widths is not None:
            win = self.bucket_window * self.batch_size
            chunks = [order[i : i + win] for i in range(0, len(order), win)]
            order = np.concatenate([c[np.argsort(self.widths[c], kind="stable")] for c in chunks])
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.shuffle and self.widths is not None:
            batches = [batches[i] for i in g.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        base = (self.seed * 1_000_003 + self.epoch) * self.num_samples
        for gb in self.global_batches()[self.start_step :]:
            items = [(int(i), int(base + i) % 2**63) for i in gb]
            yield from self.split(items)

    def __len__(self) -> int:
        return (self.steps_per_epoch - self.start_step) * self.accum_steps


class EvalBatchSampler(Sampler[list[int]]):
    """Every sample once, sorted by width (least padding), batches dealt round-robin to
    ranks. No padding samples are added, so all-reduced metrics count each sample once."""

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        widths: Sequence[int] | np.ndarray | None = None,
        world_size: int = 1,
        rank: int = 0,
    ) -> None:
        order = np.arange(num_samples)
        if widths is not None:
            order = np.argsort(np.asarray(widths), kind="stable")
        batches = [order[i : i + batch_size].tolist() for i in range(0, num_samples, batch_size)]
        self.batches = batches[rank::world_size]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def split_counts(ratios: Sequence[float], total: int) -> list[int]:
    """Split ``total`` into integers proportional to ``ratios`` (largest remainders)."""
    s = float(sum(ratios))
    exact = [r / s * total for r in ratios]
    counts = [int(e) for e in exact]
    by_remainder = sorted(range(len(ratios)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


class MixedBatchSampler(_MicroBatches, Sampler[list[tuple[int, int, int]]]):
    """Endless sampler mixing several datasets at fixed ratios in every global batch.

    Global batch ``s`` takes ``counts[p]`` samples from part ``p`` (``split_counts``):
    for an endless part (the synthetic generator, size None) indices
    ``s * counts[p] ...``; for a finite part, consecutive positions of a per-part
    sequence of shuffled epochs. The batch is shuffled and cut into micro-batches like
    every global batch here. Everything is a function of ``(seed, s)``, so resuming at
    step ``s`` is exact and the ranks never overlap. Items are ``(part, index, seed)``.

    With ``width_hints`` (per part, ``index -> about how wide that image comes out``;
    None for a part leaves it unsorted), the batches are bucketed like
    :class:`BucketBatchSampler`'s: inside each window of ``bucket_window`` global
    batches every part's samples are sorted by width and dealt out in order, the k-th
    narrowest share of each part to the k-th batch (so every batch keeps its exact
    mix), each batch is sorted by width (each rank's micro-batch is a run of similar
    widths), and the window's batches are shuffled. Lines of 1 to 12 characters drawn
    at random pad a batch to about 2.3x the pixels of the lines themselves; bucketed,
    about 1.03x (docs/benchmarks.md).
    """

    def __init__(
        self,
        sizes: Sequence[int | None],
        ratios: Sequence[float],
        batch_size: int,
        *,
        world_size: int = 1,
        rank: int = 0,
        accum_steps: int = 1,
        seed: int = 0,
        width_hints: Sequence[Callable[[int], float] | None] | None = None,
        bucket_window: int = 50,
    ) -> None:
        _MicroBatches.__init__(self, batch_size, world_size, rank, accum_steps)
        if len(sizes) != len(ratios):
            raise ValueError(f"{len(sizes)} datasets but {len(ratios)} ratios")
        if width_hints is not None and len(width_hints) != len(sizes):
            raise ValueError(f"{len(sizes)} datasets but {len(width_hints)} width hints")
        if bucket_window < 1:
            raise ValueError(f"bucket_window must be >= 1, got {bucket_window}")
        self.width_hints = (
            list(width_hints) if width_hints is not None and any(width_hints) else None
        )
        self.bucket_window = bucket_window
        self._window: tuple[int, list[list[tuple[int, int, int]]]] | None = None
        self.sizes = list(sizes)
        self.counts = split_counts(ratios, batch_size)
        self.seed = seed
        self.epoch = 0
        self.start_step = 0
        self.steps_per_epoch = 0  # endless
        self._perm_cache: dict[tuple[int, int], np.ndarray] = {}

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        self.epoch = epoch
        self.start_step = start_step

    def _finite(self, part: int, pos: int) -> int:
        n = self.sizes[part]
        assert n
        epoch, k = divmod(pos, n)
        key = (part, epoch)
        if key not in self._perm_cache:
            if len(self._perm_cache) > 2 * len(self.sizes):
                self._perm_cache.clear()
            self._perm_cache[key] = np.random.default_rng([self.seed, part, epoch]).permutation(n)
        return int(self._perm_cache[key][k])

    def _items(self, part: int, start: int, stop: int) -> list[tuple[int, int, int]]:
        """Part ``part``'s samples at positions ``start .. stop - 1`` of its stream."""
        out = []
        for j in range(start, stop):
            idx = j if self.sizes[part] is None else self._finite(part, j)
            out.append((part, idx, (self.seed * 1_000_003 + part * 7_919 + j) % 2**63))
        return out

    def global_batch(self, step: int) -> list[tuple[int, int, int]]:
        if self.width_hints is not None:
            return self._bucketed(step)
        items = []
        for p, c in enumerate(self.counts):
            items += self._items(p, step * c, (step + 1) * c)
        order = np.random.default_rng([self.seed, step, 1]).permutation(len(items))
        return [items[i] for i in order]

    def _bucketed(self, step: int) -> list[tuple[int, int, int]]:
        """Global batch ``step`` with bucketing (see the class docstring); a window's
        batches are computed once, when its first step is asked for."""
        hints = self.width_hints
        assert hints is not None
        n = self.bucket_window
        w, k = divmod(step, n)
        if self._window is None or self._window[0] != w:
            batches: list[list[tuple[float, tuple[int, int, int]]]] = [[] for _ in range(n)]
            for p, c in enumerate(self.counts):
                hint = hints[p]
                items = self._items(p, w * n * c, (w + 1) * n * c)
                keyed = [(hint(it[1]) if hint else 0.0, it) for it in items]
                if hint is not None:
                    keyed.sort(key=lambda kv: kv[0])  # stable: ties keep their order
                for b in range(n):
                    batches[b] += keyed[b * c : (b + 1) * c]
            order = np.random.default_rng([self.seed, w, 2]).permutation(n)
            window = [[it for _, it in sorted(batches[i], key=lambda kv: kv[0])] for i in order]
            self._window = (w, window)
        return self._window[1][k]

    def __iter__(self) -> Iterator[list[tuple[int, int, int]]]:
        for s in itertools.count(self.start_step):
            yield from self.split(self.global_batch(s))


def sort_by_width(
    micro_batches: Sequence[list[dict[str, Any]]], rng: np.random.Generator
) -> list[list[dict[str, Any]]]:
    """Deal the drawn samples of ``micro_batches`` out again by the widths they came out
    at: each dataset part's samples (item key ``part``) sorted by width, the k-th
    narrowest share of each part to the k-th micro-batch (every micro-batch keeps its
    count of each part), then the micro-batches in ``rng``'s order. Items that failed
    to load (``error``) count as width 0 and stay counted."""
    width = lambda s: 0 if "error" in s else int(s["image"].shape[-1])  # noqa: E731
    out: list[list[dict[str, Any]]] = [[] for _ in micro_batches]
    for p in sorted({s.get("part", 0) for mb in micro_batches for s in mb}):
        pool = sorted((s for mb in micro_batches for s in mb if s.get("part", 0) == p), key=width)
        pos = 0
        for j, mb in enumerate(micro_batches):
            c = sum(1 for s in mb if s.get("part", 0) == p)
            out[j] += pool[pos : pos + c]
            pos += c
    return [out[i] for i in rng.permutation(len(out))]


def width_sorted_windows(
    drawn: Iterable[list[dict[str, Any]]],
    window: int,
    first: int,
    skip: int,
    seed: int,
    pin_memory: bool = False,
) -> Iterator[dict[str, Any]]:
    """Collated micro-batches from ``drawn`` (lists of samples, in sampler order), each
    window of ``window`` of them re-dealt by :func:`sort_by_width` (window ``w`` in
    the order seeded by ``(seed, w)``, the same on every rank, so the ranks' k-th
    micro-batches are about equally wide).

    An endless generator's image widths are known only once drawn: sorted by the
    label's guess (``MixedBatchSampler(width_hints=...)``) a batch of Chinese lines is
    still 30 % padding, sorted by the drawn widths 3 %. Windows are numbered from
    ``first``; the first ``skip`` micro-batches of the first window are left out (a
    resumed run draws its window again and goes on where it stopped). Sorted on each
    rank among its own micro-batches: which samples share a step then depends on the
    number of ranks (the samples of each window do not)."""
    it = iter(drawn)
    w = first
    while True:
        chunk = list(itertools.islice(it, window))
        if not chunk:
            return
        for mb in sort_by_width(chunk, np.random.default_rng([seed, w, 3]))[skip:]:
            batch = collate(mb)
            if pin_memory:
                batch = {
                    k: v.pin_memory() if isinstance(v, torch.Tensor) else v
                    for k, v in batch.items()
                }
            yield batch
        skip, w = 0, w + 1
