"""Training and validation data for a run: datasets, rank-aware samplers and loaders.

Built from the config here, so the trainer only iterates. The training loader yields
micro-batches forever (epochs roll over at the sampler's epoch length); validation sets
are sharded over ranks (``crnn.evaluation``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from crnn.config import Config
from crnn.config.image_spec import ImageSpec
from crnn.data import ignore_stop_signals, stop_workers_at_exit, usable_cores
from crnn.data.batching import (
    BucketBatchSampler,
    MixedBatchSampler,
    collate,
    width_sorted_windows,
)
from crnn.data.datasets import MixedDataset, RecognitionDataset, SynthDataset, open_sources
from crnn.data.errors import DataError
from crnn.data.transforms import TrainAugment
from crnn.engine.distributed import DistInfo
from crnn.evaluation import make_eval_loader
from crnn.text.alphabet import BUILTIN_CHARSETS, Charset

log = logging.getLogger(__name__)

# The fixed synthetic validation set uses its own seed, whatever the training seed.
SYNTH_VAL_SEED = 20_151_231

TrainSampler = BucketBatchSampler | MixedBatchSampler
OutputLength = Callable[[int], int]


MAX_AUTO_WORKERS = 16
# Optimizer steps whose generator samples are sorted together by their drawn widths.
SORT_WINDOW = 50


def num_workers(setting: int | str, local_world_size: int | None = None) -> int:
    """``data.num_workers`` for this process: the number itself, or for ``"auto"`` this
    process's share of the CPU cores it may use (cores / processes on this machine,
    ``LOCAL_WORLD_SIZE`` as torchrun and our launcher set it) less one for the training
    loop: at least 1, at most 16. So 8 GPUs on 96 cores get 11 each, not 8 x 12."""
    if setting != "auto":
        return int(setting)
    if local_world_size is None:
        local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cores = usable_cores()
    return max(1, min(MAX_AUTO_WORKERS, cores // max(1, local_world_size) - 1))


@dataclass
class TrainData:
    """The training set, its sampler (global batch -> this rank's micro-batches) and
    its loader."""

    dataset: Dataset
    sampler: TrainSampler
    loader: DataLoader
    # Steps per window whose micro-batches are sorted by their drawn widths (the
    # endless generator with data.stream_bucketing); 0: the loader's batches as drawn.
    sort_window: int = 0
    pin_memory: bool = False

    def batches(self, position: Any) -> Iterator[dict[str, Any]]:
        """Micro-batches forever, each pass starting where ``position`` (an object with
        ``epoch`` and ``step_in_epoch``, read at every epoch start) says."""
        while True:
            if not self.sort_window:
                self.sampler.set_epoch(position.epoch, position.step_in_epoch)
                yield from self.loader
                continue
            # Whole windows are drawn and sorted: start at the window holding the step.
            w, k = divmod(position.step_in_epoch, self.sort_window)
            self.sampler.set_epoch(position.epoch, w * self.sort_window)
            accum = self.sampler.accum_steps
            yield from width_sorted_windows(
                self.loader,
                self.sort_window * accum,
                w,
                k * accum,
                self.sampler.seed,
                self.pin_memory,
            )


def synth_generator(
    cfg: Config, charset: Charset, spec: ImageSpec, seed: int, synth: Any = None
) -> Any:
    """The generator of ``synth`` (a ``SynthConfig``; default ``cfg.data.synth``)."""
    from crnn.data.synth import SynthGenerator

    synth = cfg.data.synth if synth is None else synth
    return SynthGenerator(charset, synth, seed=seed, height=spec.height, rgb=spec.rgb)


@dataclass(frozen=True)
class Replay:
    """Fine-tuning replay (``crnn.engine.replay``): the generator's share of each batch
    and the settings it draws with."""

    share: float
    synth: Any  # SynthConfig


def _train_part(
    cfg: Config,
    entry: str | list[str],
    charset: Charset,
    spec: ImageSpec,
    output_length: OutputLength,
    augment: TrainAugment | None,
    synth: Any = None,
) -> Dataset:
    """The on-the-fly generator for ``"synth"`` (drawing with ``synth``, default
    ``cfg.data.synth``), else the samples of the given paths."""
    if entry == "synth":
        gen = synth_generator(cfg, charset, spec, cfg.train.seed, synth)
        if num_workers(cfg.data.num_workers) > 0:
            # Draw every glyph once here so forked workers start with a warm cache.
            gen.warm_up()
        # The generator has its own effects; training augmentations are for real data.
        return SynthDataset(gen, charset, spec, output_length)
    ds = RecognitionDataset(
        open_sources([entry] if isinstance(entry, str) else entry, index_file(cfg)),
        charset,
        spec,
        output_length,
        unknown_chars=cfg.data.unknown_chars,
        max_label_length=cfg.data.max_label_length,
        augment=augment,
    )
    check_usable(ds, entry)
    return ds


def index_file(cfg: Config) -> Path | None:
    """The charset file, when it is one: what the numbers of an index-list label file
    (``name idx idx ...``, the Synthetic Chinese String Dataset's) stand for."""
    from crnn.text.alphabet_files import spec_path

    path = spec_path(cfg.data.charset)
    return path if cfg.data.charset not in BUILTIN_CHARSETS and path.is_file() else None


PROBE_IMAGES = 32


def check_usable(ds: RecognitionDataset, entry: str | list[str]) -> None:
    """Refuse, before training, a dataset that has no usable sample: none left after
    filtering labels, or none of up to ``PROBE_IMAGES`` images (spread over the set)
    decodes. Training on nothing would otherwise "finish" with exit code 0."""
    name = entry if isinstance(entry, str) else ", ".join(entry)
    if len(ds) == 0:
        reasons = ", ".join(f"{n} {r}" for r, n in ds.skipped.items()) or "no samples"
        raise DataError(
            f"{name}: no usable training sample ({reasons}); see the messages above for "
            "why each kind was left out"
        )
    probe = sorted(
        {round(k * (len(ds) - 1) / max(PROBE_IMAGES - 1, 1)) for k in range(PROBE_IMAGES)}
    )
    errors = [item["error"] for item in (ds[i] for i in probe) if "error" in item]
    if len(errors) == len(probe):
        raise DataError(
            f"{name}: none of the {len(probe)} images tried could be read (e.g. {errors[0]}). "
            "Check that the paths in gt.txt point to image files (PNG, JPEG...), or recreate "
            "the LMDB with tools/create_lmdb.py"
        )


def build_train_data(
    cfg: Config,
    info: DistInfo,
    charset: Charset,
    spec: ImageSpec,
    output_length: OutputLength,
    pin_memory: bool = False,
    replay: Replay | None = None,
) -> TrainData:
    """``data.train`` (default: the synthetic generator) for this rank.

    Finite datasets are pooled and bucketed by width; the generator, alone or mixed
    with datasets at ``data.train_ratios``, is endless. With ``replay``, the generator
    (drawing with ``replay.synth``) gives ``replay.share`` of every batch and the data
    the rest (pooled, or at its own ``data.train_ratios``)."""
    tc = cfg.train
    augment = TrainAugment(cfg.data.augment) if cfg.data.augment.enabled else None
    common = {"world_size": info.world_size, "rank": info.rank, "accum_steps": tc.accum_steps}
    train: list[Any] = list(cfg.data.train or ["synth"])
    ratios = list(cfg.data.train_ratios)
    synth_cfg = None
    if replay is not None and replay.share > 0:
        if ratios:
            ratios = [replay.share] + [(1 - replay.share) * r / sum(ratios) for r in ratios]
        else:
            train, ratios = (
                [train if len(train) > 1 else train[0]],
                [replay.share, 1 - replay.share],
            )
        train = ["synth", *train]
        synth_cfg = replay.synth
    sampler: TrainSampler
    sort_window = 0
    if ratios or train == ["synth"]:
        ratios = ratios or [1.0]
        parts = [
            _train_part(cfg, e, charset, spec, output_length, augment, synth_cfg) for e in train
        ]
        ds: Dataset = MixedDataset(parts)
        sampler = MixedBatchSampler(
            [None if entry == "synth" else len(p) for entry, p in zip(train, parts)],
            ratios,
            tc.batch_size,
            seed=tc.seed,
            **common,
        )
        # Sorted once drawn (width_sorted_windows), not by the labels' width guesses.
        sort_window = SORT_WINDOW if _bucket_stream(cfg, charset) else 0
        log.info(
            "training on %s, %s per global batch of %d",
            ", ".join(train),
            sampler.counts,
            tc.batch_size,
        )
    else:
        ds = _train_part(cfg, train, charset, spec, output_length, augment)
        if len(ds) < tc.batch_size:  # type: ignore[arg-type]
            raise DataError(
                f"the training set has {len(ds)} usable samples, fewer than one global batch "  # type: ignore[arg-type]
                f"(train.batch_size={tc.batch_size}): lower train.batch_size or add data"
            )
        sampler = BucketBatchSampler(
            len(ds),  # type: ignore[arg-type]
            tc.batch_size,
            widths=ds.widths if cfg.data.bucketing else None,  # type: ignore[attr-defined]
            shuffle=True,
            seed=tc.seed,
            **common,
        )
    nw = num_workers(cfg.data.num_workers)
    log.debug("%d DataLoader workers for training", nw)
    if nw > 0:
        stop_workers_at_exit()
    # Sorting a window needs all of it drawn: the workers may run a window ahead.
    ahead = max(4, -(-sort_window * tc.accum_steps // max(nw, 1)))
    loader = DataLoader(
        ds,
        batch_sampler=sampler,
        num_workers=nw,
        collate_fn=list if sort_window else collate,
        pin_memory=pin_memory and not sort_window,
        persistent_workers=nw > 0,
        prefetch_factor=ahead if nw > 0 else None,
        worker_init_fn=ignore_stop_signals if nw > 0 else None,
    )
    return TrainData(ds, sampler, loader, sort_window, pin_memory)


def build_val_sets(
    cfg: Config,
    info: DistInfo,
    charset: Charset,
    spec: ImageSpec,
    output_length: OutputLength,
    pin_memory: bool = False,
    replay: Replay | None = None,
) -> list[tuple[str, DataLoader]]:
    """``(name, loader)`` per ``data.val`` entry, or the fixed synthetic set; with
    ``replay``, also a fixed set of the replayed generator's lines, named ``general``
    (``data.synth.val_size`` of them: the size is this run's choice, the generator the
    model's)."""
    tc = cfg.train
    eval_bs = max(1, tc.batch_size // (info.world_size * tc.accum_steps)) * 2
    nw = num_workers(cfg.data.num_workers)
    shard = {"world_size": info.world_size, "rank": info.rank, "pin_memory": pin_memory}
    replaying = replay is not None and replay.share > 0

    def synth_set(synth: Any) -> DataLoader:  # a fixed set of data.synth.val_size lines
        gen = synth_generator(cfg, charset, spec, SYNTH_VAL_SEED, synth)
        vds = SynthDataset(gen, charset, spec, output_length, length=cfg.data.synth.val_size)
        return make_eval_loader(vds, eval_bs, nw, **shard)

    if not cfg.data.val:
        if replaying:
            return [("general", synth_set(replay.synth))]  # type: ignore[union-attr]
        return [("synth_val", synth_set(cfg.data.synth))]
    out = []
    for path in cfg.data.val:
        rds = RecognitionDataset(
            open_sources([path], index_file(cfg)), charset, spec, output_length, evaluation=True
        )
        name = Path(path).name or str(path)
        out.append((name, make_eval_loader(rds, eval_bs, nw, widths=rds.widths, **shard)))
    if replaying:
        out.append(("general", synth_set(replay.synth)))  # type: ignore[union-attr]
    return out


BATCH_KEYS = ("images", "widths", "targets", "target_lengths")


def to_device(
    batch: dict[str, Any], device: torch.device, host_lengths: bool = False
) -> tuple[torch.Tensor, ...]:
    """The tensors the train module takes, on ``device``.

    ``host_lengths`` keeps widths and target lengths on the host: F.ctc_loss reads the
    lengths on the host, so CUDA ones would only be copied back. The step waits for the
    GPU once either way (the CUDA kernel copies its index tables over); this saves the
    extra copy. That is for one device; DataParallel and DDP move every argument to the
    GPU themselves."""
    host = ("widths", "target_lengths") if host_lengths else ()
    return tuple(
        batch[k] if k in host else batch[k].to(device, non_blocking=True) for k in BATCH_KEYS
    )


def placeholder_batch(spec: ImageSpec, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A one-sample batch (blank image, one-character label) for a micro-step whose
    images all failed to decode: every rank must still run forward/backward so that
    DDP's collectives line up; its loss is multiplied by 0."""
    w = spec.max_width // spec.width_multiple * spec.width_multiple
    images = torch.full((1, spec.channels, spec.height, w), 255, dtype=torch.uint8)
    ones = torch.ones(1, dtype=torch.long)
    return tuple(t.to(device) for t in (images, torch.tensor([w]), ones[None], ones))


def _bucket_stream(cfg: Config, charset: Charset) -> bool:
    """Whether the generator's stream is batched by width (``data.stream_bucketing``)."""
    setting = cfg.data.stream_bucketing
    return cfg.data.bucketing and (
        setting is True or (setting == "auto" and charset.num_classes > 1000)
    )
