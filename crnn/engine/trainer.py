"""The training loop: one code path for CPU, one GPU, DataParallel and DDP.

A step is ``accum_steps`` micro-batches followed by one optimizer step. Per step:
autocast (bf16/fp16 on CUDA, one code path with AMP on or off), loss scaled by
``1/accum_steps``, ``no_sync()`` on the micro-batches that don't step (DDP all-reduces
once per step), gradient clipping after unscaling, a GradScaler that lives for the
whole run and is saved with it. Running sums stay on the device; the host reads them
only when it logs (no ``.item()`` per step).

Rank 0 alone logs to TensorBoard, shows the progress bar and writes checkpoints;
the other ranks wait at a barrier. Validation is sharded over ranks and its metrics
all-reduced, so every rank sees the same numbers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from crnn.charset import Charset
from crnn.config import Config, save_config
from crnn.data.batching import BucketBatchSampler, MixedBatchSampler, collate
from crnn.data.datasets import MixedDataset, RecognitionDataset, SynthDataset, open_sources
from crnn.data.transforms import ImageSpec, TrainAugment
from crnn.engine import checkpoint as ckpt_io
from crnn.engine.distributed import (
    DistInfo,
    FaultInjection,
    all_reduce_sum,
    any_rank,
    barrier,
    sync_buffers,
)
from crnn.engine.evaluator import EvalResult, evaluate, make_eval_loader
from crnn.engine.logging import RunLogger, format_metrics, memory_stats
from crnn.engine.parallel import wrap
from crnn.metrics import HIGHER_IS_BETTER, TextMetrics
from crnn.model import CRNN, build_model

log = logging.getLogger(__name__)

# The fixed synthetic validation set uses its own seed, whatever the training seed.
SYNTH_VAL_SEED = 20_151_231
_MAX_ERROR_MESSAGES = 10
# In a distributed run the ranks agree on stopping (Ctrl-C) at most this many steps
# apart: each check is a collective, so not every step.
STOP_CHECK_EVERY = 10


TrainSampler = BucketBatchSampler | MixedBatchSampler


@dataclass
class FitResult:
    step: int
    interrupted: bool
    metrics: dict[str, float]
    best: dict[str, Any]
    output_dir: Path


def lr_factor(step: int, cfg: Any) -> float:
    """Multiplier of ``train.lr`` for optimizer step ``step`` (0-based): linear warm-up,
    then cosine or linear decay to ``min_lr_ratio``, or constant."""
    warm = cfg.warmup_steps
    if step < warm:
        return (step + 1) / warm
    if cfg.schedule == "constant":
        return 1.0
    p = min(1.0, (step - warm) / max(1, cfg.max_steps - warm))
    lo = cfg.min_lr_ratio
    if cfg.schedule == "linear":
        return 1.0 - (1.0 - lo) * p
    return lo + (1.0 - lo) * 0.5 * (1.0 + math.cos(math.pi * p))


class _StopRequest:
    """SIGINT/SIGTERM -> finish the current step, save, stop. A second SIGINT aborts."""

    def __init__(self, announce: bool = True) -> None:
        self.requested = False
        self.announce = announce  # rank 0 says it; the other ranks just stop
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        if not self.announce:
            return
        log.warning(
            "%s received: stopping after the current step and saving a checkpoint "
            "(press Ctrl-C again to abort at once)",
            signal.Signals(signum).name,
        )

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _worker_init(_: int) -> None:
    # Ctrl-C reaches the whole process group; workers leave it to the main process,
    # which finishes its step and shuts them down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Trainer:
    """Builds everything a run needs from a :class:`Config` and trains.

    Args:
        cfg: the run configuration.
        info: this process's place in the run (see ``crnn.engine.distributed``).
        resume: a checkpoint to continue from exactly (same step, LR, data order).
        device_ids: GPUs for DataParallel (``dist.strategy=dp``).
    """

    def __init__(
        self,
        cfg: Config,
        info: DistInfo,
        resume: str | Path | None = None,
        device_ids: list[int] | None = None,
    ) -> None:
        self.cfg = cfg
        self.info = info
        tc = cfg.train
        self.out = Path(tc.output_dir)
        torch.manual_seed(tc.seed)  # same initial weights on every rank
        if info.device.type == "cpu":
            # LSTM gates produce denormal floats as training goes on; x86 computes on them
            # several times slower. Flushing them to zero changes no result that matters.
            torch.set_flush_denormal(True)
        self.charset = Charset.from_spec(cfg.data.charset, cfg.data.case_fold)
        self.spec = ImageSpec.from_config(cfg.data)
        model = build_model(cfg.model, self.charset.num_classes, self.spec.channels)

        state = ckpt_io.load_checkpoint(resume) if resume else None
        if state is not None:
            self._check_resumable(state, model, str(resume))
            ckpt_io.load_state_dict_checked(model, state["model"], str(resume))
        elif tc.init_from:
            self._init_from(model, tc.init_from)

        strategy = cfg.dist.strategy
        if strategy == "ddp" and not info.distributed:
            strategy = "none"
        if info.distributed and strategy != "ddp":
            # Ranks that never all-reduce would silently train separate models.
            raise ValueError(
                f"dist.strategy={strategy} in a run of {info.world_size} processes; "
                "use dist.strategy=ddp"
            )
        if strategy == "ddp" and cfg.dist.sync_bn and info.device.type != "cuda":
            raise ValueError(
                "dist.sync_bn=true needs GPUs: PyTorch's SyncBatchNorm has no CPU "
                "implementation. Use dist.sync_bn=false with --gpus cpu."
            )
        self.strategy = strategy
        self.world = info.world_size
        self.train_module, self.model = wrap(
            model,
            strategy=strategy,
            device=info.device,
            device_ids=device_ids,
            distributed=info.distributed,
            amp=tc.amp,
            sync_bn=cfg.dist.sync_bn,
            compile=tc.compile,
            channels_last=tc.channels_last,
            grad_checkpoint=tc.grad_checkpoint,
        )
        self.device = next(self.model.parameters()).device
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = tc.cudnn_benchmark
        self.device_ids = device_ids if strategy == "dp" else None
        self.optimizer = self._make_optimizer()
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, tc)
        )
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.device.type == "cuda" and tc.amp == "fp16"
        )
        self.step = 0
        self.epoch = 0
        self.step_in_epoch = 0
        self.best: dict[str, Any] = {"metric": tc.best_metric, "value": None, "step": None}
        self.last_metrics: dict[str, float] = {}
        self.bad_images = 0
        self._errors_shown = 0
        self._fault = FaultInjection.from_env()
        self.peak_memory: dict[str, tuple[float, float]] = {}
        self._saved_step = -1

        self._build_data()
        if state is not None:
            self._restore(state)
        self.logger = RunLogger(self.out / "tb", enabled=info.is_main)

    # ---- set-up ---------------------------------------------------------------------

    def _check_resumable(self, state: dict[str, Any], model: CRNN, source: str) -> None:
        if not ckpt_io.is_native(state):
            raise ckpt_io.CheckpointError(
                f"{source} is not a crnn-ocr checkpoint; cannot resume from it"
            )
        theirs = Charset.from_dict(state["charset"])
        if theirs.chars != self.charset.chars:
            raise ckpt_io.CheckpointError(
                f"{source} was trained with charset {theirs.name!r} ({len(theirs)} characters), "
                f"this run uses {self.charset.name!r} ({len(self.charset)}). Resume with the "
                "checkpoint's own config, or start a new run with --set train.init_from=... "
                "to fine-tune on the new charset."
            )
        if state["model_config"] != model.hparams:
            raise ckpt_io.CheckpointError(
                f"{source} holds a model {state['model_config']}, this run builds {model.hparams}; "
                "resume with the checkpoint's own model settings"
            )

    def _init_from(self, model: CRNN, path: str) -> None:
        state = ckpt_io.load_checkpoint(path)
        sd = ckpt_io.init_state_dict(state, model, self.charset, path)  # adapts the charset
        ckpt_io.load_state_dict_checked(model, sd, path)
        log.info("initialised weights from %s", path)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        tc = self.cfg.train
        decay, no_decay = [], []
        for p in self.model.parameters():
            # Biases and normalisation scales are not weights to shrink.
            (no_decay if p.ndim <= 1 else decay).append(p)
        groups = [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        cls = torch.optim.AdamW if tc.optimizer == "adamw" else torch.optim.Adam
        kwargs: dict[str, Any] = {"lr": tc.lr, "betas": tuple(tc.betas)}
        if self.device.type == "cuda":
            kwargs["fused"] = True
        return cls(groups, **kwargs)

    def _output_length(self, width: int) -> int:
        return int(self.model.output_length(width))

    def _build_data(self) -> None:
        cfg, info, tc = self.cfg, self.info, self.cfg.train
        augment = TrainAugment(cfg.data.augment) if cfg.data.augment.enabled else None
        common = {"world_size": info.world_size, "rank": info.rank, "accum_steps": tc.accum_steps}
        train = cfg.data.train or ["synth"]
        if cfg.data.train_ratios or train == ["synth"]:
            # Endless: the generator alone, or mixed with datasets at fixed ratios.
            ratios = cfg.data.train_ratios or [1.0]
            parts = [self._train_part(entry, augment) for entry in train]
            ds: Dataset = MixedDataset(parts)
            self.train_sampler: TrainSampler = MixedBatchSampler(
                [None if entry == "synth" else len(p) for entry, p in zip(train, parts)],
                ratios,
                tc.batch_size,
                seed=tc.seed,
                **common,
            )
            log.info(
                "training on %s, %s per global batch of %d",
                ", ".join(train), self.train_sampler.counts, tc.batch_size,
            )  # fmt: skip
        else:
            ds = self._train_part(train, augment)
            self.train_sampler = BucketBatchSampler(
                len(ds),
                tc.batch_size,
                widths=ds.widths if cfg.data.bucketing else None,  # type: ignore[attr-defined]
                shuffle=True,
                seed=tc.seed,
                **common,
            )
        self.train_dataset = ds
        nw = cfg.data.num_workers
        self.train_loader = DataLoader(
            ds,
            batch_sampler=self.train_sampler,
            num_workers=nw,
            collate_fn=collate,
            pin_memory=self.device.type == "cuda",
            persistent_workers=nw > 0,
            prefetch_factor=4 if nw > 0 else None,
            worker_init_fn=_worker_init if nw > 0 else None,
        )
        eval_bs = max(1, tc.batch_size // (info.world_size * tc.accum_steps)) * 2
        self.val_sets: list[tuple[str, DataLoader]] = []
        if cfg.data.val:
            for path in cfg.data.val:
                vds = RecognitionDataset(
                    open_sources([path]), self.charset, self.spec, self._output_length,
                    evaluation=True,
                )  # fmt: skip
                name = Path(path).name or str(path)
                loader = make_eval_loader(vds, eval_bs, info, nw, widths=vds.widths)
                self.val_sets.append((name, loader))
        else:
            gen = self._synth_generator(SYNTH_VAL_SEED)
            vds = SynthDataset(
                gen, self.charset, self.spec, self._output_length, length=cfg.data.synth.val_size
            )
            self.val_sets.append(("synth_val", make_eval_loader(vds, eval_bs, info, nw)))

    def _train_part(self, entry: str | list[str], augment: TrainAugment | None) -> Dataset:
        """The on-the-fly generator for ``"synth"``, else the samples of the given paths."""
        cfg = self.cfg
        if entry == "synth":
            gen = self._synth_generator(cfg.train.seed)
            if cfg.data.num_workers > 0:
                # Draw every glyph once here so forked workers start with a warm cache.
                gen.warm_up()
            # The generator has its own effects; training augmentations are for real data.
            return SynthDataset(gen, self.charset, self.spec, self._output_length)
        return RecognitionDataset(
            open_sources([entry] if isinstance(entry, str) else entry),
            self.charset,
            self.spec,
            self._output_length,
            unknown_chars=cfg.data.unknown_chars,
            max_label_length=cfg.data.max_label_length,
            augment=augment,
        )

    def _synth_generator(self, seed: int) -> Any:
        from crnn.data.synth import SynthGenerator

        return SynthGenerator(
            self.charset, self.cfg.data.synth, seed=seed, height=self.spec.height, rgb=self.spec.rgb
        )

    def _restore(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.epoch = int(state["epoch"])
        self.step_in_epoch = int(state["step_in_epoch"])
        self.best = dict(state.get("best", self.best))
        self.last_metrics = dict(state.get("metrics", {}))
        self.bad_images = int(state.get("bad_images", 0))
        ckpt_io.set_rng_state(state["rng"])
        log.info(
            "resumed at step %d (epoch %d, batch %d of the epoch)",
            self.step,
            self.epoch,
            self.step_in_epoch,
        )

    # ---- checkpoints ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": ckpt_io.FORMAT,
            "version": ckpt_io.VERSION,
            "model": self.model.state_dict(),
            "model_config": dict(self.model.hparams),
            "charset": self.charset.to_dict(),
            "image": self.spec.to_dict(),
            "config": self.cfg.to_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else {},
            "rng": ckpt_io.rng_state(),
            "best": dict(self.best),
            "metrics": dict(self.last_metrics),
            "bad_images": self.bad_images,
        }

    def save(self, is_best: bool = False) -> None:
        """Rank 0 writes ``last.pt`` (and ``best.pt``); the others wait for it."""
        if self.info.is_main:
            state = self.state_dict()
            path = ckpt_io.atomic_save(state, self.out / "last.pt")
            msg = f"saved {path}"
            if is_best:
                ckpt_io.atomic_save(state, self.out / "best.pt")
                msg += f" and best.pt ({self.best['metric']} {self.best['value']:.4f})"
            log.info(msg)
        self._saved_step = self.step
        barrier(self.info)

    # ---- the loop -------------------------------------------------------------------

    def _batches(self) -> Iterator[dict[str, Any]]:
        """Micro-batches forever; rolls epochs over at the sampler's epoch length."""
        while True:
            self.train_sampler.set_epoch(self.epoch, self.step_in_epoch)
            yield from self.train_loader

    def _to_device(self, batch: dict[str, Any]) -> tuple[torch.Tensor, ...]:
        dev = self.device
        # F.ctc_loss reads the lengths on the host: CUDA ones would be copied back, a
        # device sync every step. On one device they stay on the host (DP and DDP move
        # every argument to the GPU themselves).
        host = ("widths", "target_lengths") if self.strategy == "none" else ()
        return tuple(
            batch[k] if k in host else batch[k].to(dev, non_blocking=True)
            for k in ("images", "widths", "targets", "target_lengths")
        )

    def _dummy_batch(self) -> tuple[torch.Tensor, ...]:
        """A one-sample batch for a micro-step whose images all failed to decode: every
        rank must still run forward/backward so DDP's collectives line up."""
        w = self.spec.max_width // self.spec.width_multiple * self.spec.width_multiple
        images = torch.full((1, self.spec.channels, self.spec.height, w), 255, dtype=torch.uint8)
        widths = torch.tensor([w])
        return tuple(
            t.to(self.device)
            for t in (
                images,
                widths,
                torch.ones(1, 1, dtype=torch.long),
                torch.ones(1, dtype=torch.long),
            )
        )

    def _note_errors(self, errors: list[str]) -> None:
        self.bad_images += len(errors)
        for e in errors:
            if self._errors_shown < _MAX_ERROR_MESSAGES:
                log.warning("skipped an unreadable image: %s", e)
                self._errors_shown += 1
                if self._errors_shown == _MAX_ERROR_MESSAGES:
                    log.warning(
                        "further unreadable images are counted, not shown (data/bad_images in TensorBoard)"
                    )

    def train_step(self, batches: Iterator[dict[str, Any]]) -> tuple[torch.Tensor, int]:
        """One optimizer step over ``accum_steps`` micro-batches.

        Returns the summed per-sample loss (device tensor, no sync) and the number of
        samples this rank processed.
        """
        tc = self.cfg.train
        if self._fault is not None:
            self._fault.maybe_fire(self.info.rank, self.step)
        accum = tc.accum_steps
        loss_sum = torch.zeros((), device=self.device)
        n = 0
        for m in range(accum):
            batch = next(batches)
            if batch["errors"]:
                self._note_errors(batch["errors"])
            empty = batch["images"] is None
            inputs = self._dummy_batch() if empty else self._to_device(batch)
            # DDP: all-reduce gradients only on the micro-batch that steps.
            sync = m == accum - 1 or self.strategy != "ddp"
            ctx = contextlib.nullcontext() if sync else self.train_module.no_sync()  # type: ignore[operator]
            with ctx:
                losses = self.train_module(*inputs)
                loss = losses.mean() / accum
                if empty:
                    loss = loss * 0.0
                self.scaler.scale(loss).backward()
            if not empty:
                loss_sum += losses.detach().sum()
                n += len(batch["labels"])
        if tc.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            self.grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), tc.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.step_in_epoch += 1
        spe = self.train_sampler.steps_per_epoch
        if spe and self.step_in_epoch >= spe:
            self.epoch += 1
            self.step_in_epoch = 0
        return loss_sum, n

    def validate(self) -> tuple[dict[str, float], list[tuple[str, EvalResult]]]:
        """Evaluate every validation set; also returns the metrics of all sets pooled."""
        results = []
        pooled = TextMetrics()
        # Every rank evaluates its shard with rank 0's BatchNorm statistics (the saved ones).
        sync_buffers(self.model, self.info)
        for name, loader in self.val_sets:
            res = evaluate(self.model, loader, self.charset, self.info, self.cfg.train.amp)
            results.append((name, res))
            pooled.add(res.sums)
        return pooled.compute(), results

    def fit(self, stop_at_step: int | None = None, time_limit_s: float | None = None) -> FitResult:
        """Train until ``train.max_steps``.

        Args:
            stop_at_step: save and stop after this step, leaving the schedule (defined by
                ``max_steps``) unchanged: for training in chunks that resume exactly.
            time_limit_s: likewise, after the step during which this many seconds passed
                (in a distributed run at the next stop check, at most
                ``STOP_CHECK_EVERY`` steps later).
        """
        tc = self.cfg.train
        t_start = time.monotonic()
        self._stop_check_every = min(tc.log_every, STOP_CHECK_EVERY)
        if self.info.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            save_config(self.cfg, self.out / "config.yaml")
            log.info(
                "run directory %s (checkpoints last.pt/best.pt, log train.log, "
                "TensorBoard: tensorboard --logdir %s)",
                self.out.resolve(), self.out,
            )  # fmt: skip
            n_params = sum(p.numel() for p in self.model.parameters())
            log.info(
                "model %s, %.2f M parameters, %d classes; strategy %s, world size %d, device %s; "
                "global batch %d (%d per device x %d accumulation)",
                self.model.arch, n_params / 1e6, self.charset.num_classes, self.strategy, self.world,
                self.device, tc.batch_size, self.train_sampler.micro_batch_size, tc.accum_steps,
            )  # fmt: skip
        batches = self._batches()
        bar = tqdm(
            total=tc.max_steps, initial=self.step, disable=not self.info.is_main,
            desc="train", unit="step", dynamic_ncols=True,
        )  # fmt: skip
        interrupted = False
        run_loss = torch.zeros((), device=self.device)
        run_n = 0
        self._t_log = time.perf_counter()
        self.grad_norm = torch.zeros(())
        self.train_module.train()
        # Rank 0 prints log lines above its progress bar instead of glued to it.
        redirect = logging_redirect_tqdm() if self.info.is_main else contextlib.nullcontext()
        try:
            with _StopRequest(announce=self.info.is_main) as stop, redirect:
                while self.step < tc.max_steps:
                    loss_sum, n = self.train_step(batches)
                    run_loss += loss_sum
                    run_n += n
                    bar.update(1)
                    last = self.step >= tc.max_steps
                    if self.step % tc.log_every == 0 or last:
                        self._log_train(run_loss, run_n, bar)
                        run_loss.zero_()
                        run_n = 0
                    if self.step % tc.val_every == 0 or last:
                        self._validate_and_save()
                    elif tc.save_every and self.step % tc.save_every == 0:
                        self.save()
                    # Agreeing on a stop costs a collective: not at every step.
                    check = not self.info.distributed or self.step % self._stop_check_every == 0
                    if check and any_rank(stop.requested, self.info) and not last:
                        interrupted = True
                        if self._saved_step != self.step:
                            self.save()
                        break
                    out_of_time = (
                        time_limit_s is not None
                        and check
                        and any_rank(time.monotonic() - t_start > time_limit_s, self.info)
                    )
                    if not last and (self.step == stop_at_step or out_of_time):
                        log.info(
                            "stopping at step %d as asked; resume with --resume %s",
                            self.step,
                            self.out,
                        )
                        if self._saved_step != self.step:
                            self.save()
                        break
            self._log_peak_memory()
            if interrupted and self.info.is_main:
                log.warning("stopped at step %d; resume with --resume %s", self.step, self.out)
            elif self.info.is_main and self.step >= tc.max_steps:
                log.info("finished %d steps; best %s", self.step, self._best_str())
        finally:
            bar.close()
            self.logger.close()
        return FitResult(self.step, interrupted, self.last_metrics, self.best, self.out)

    def _best_str(self) -> str:
        if self.best["value"] is None:
            return "none yet"
        return f"{self.best['metric']} {self.best['value']:.4f} at step {self.best['step']} ({self.out / 'best.pt'})"

    def _log_train(self, run_loss: torch.Tensor, run_n: int, bar: tqdm) -> None:
        """Log the mean loss since the last call (over all ranks), the learning rate,
        images/s in total and per rank, and peak GPU memory per rank (DDP) or per GPU
        (DataParallel). Every rank takes part (one all-reduce); rank 0 writes."""
        now = time.perf_counter()
        elapsed = max(now - self._t_log, 1e-9)
        self._t_log = now
        sums = torch.tensor([run_loss.item(), float(run_n)], dtype=torch.float64)
        # One row per rank: images/s, peak allocated MiB, peak reserved MiB.
        per_rank = torch.zeros((self.world, 3), dtype=torch.float64)
        mem = memory_stats(self.device)
        per_rank[self.info.rank] = torch.tensor(
            [run_n / elapsed, mem.get("peak_allocated_mib", 0.0), mem.get("peak_reserved_mib", 0.0)]
        )
        reduced = all_reduce_sum(torch.cat([sums, per_rank.flatten()]), self.info)
        loss = reduced[0].item() / max(reduced[1].item(), 1.0)
        per_rank = reduced[2:].view(self.world, 3)
        ips = float(per_rank[:, 0].sum())
        lr = self.scheduler.get_last_lr()[0]
        values = {
            "train/loss": loss,
            "train/lr": lr,
            "train/images_per_s": ips,
            "train/grad_norm": float(self.grad_norm),
            "train/epoch": float(self.epoch),
            "data/bad_images": float(self.bad_images),
        }
        for r in range(self.world):
            values[f"throughput/images_per_s/rank{r}"] = float(per_rank[r, 0])
        peaks: dict[str, tuple[float, float]] = {}
        if self.device_ids:  # DataParallel: this one process sees every GPU
            for d in self.device_ids:
                m = memory_stats(torch.device("cuda", d))
                peaks[f"gpu{d}"] = (m["peak_allocated_mib"], m["peak_reserved_mib"])
        elif self.device.type == "cuda":
            for r in range(self.world):
                peaks[f"rank{r}"] = (float(per_rank[r, 1]), float(per_rank[r, 2]))
        for who, (alloc, reserved) in peaks.items():
            values[f"memory/peak_allocated_mib/{who}"] = alloc
            values[f"memory/peak_reserved_mib/{who}"] = reserved
        first = not self.peak_memory
        self.peak_memory = peaks
        if first:  # the balance between GPUs, early and (see fit) at the end
            self._log_peak_memory()
        self.logger.scalars(values, self.step)
        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", img_s=f"{ips:.0f}")

    def _log_peak_memory(self) -> None:
        """One line that shows the balance between GPUs (rank 0; nothing on the CPU)."""
        if self.info.is_main and self.peak_memory:
            where = ", ".join(
                f"{who} {alloc:.0f}/{reserved:.0f}"
                for who, (alloc, reserved) in self.peak_memory.items()
            )
            log.info("peak GPU memory, MiB allocated/reserved: %s", where)

    def _validate_and_save(self) -> None:
        combined, results = self.validate()
        self.last_metrics = combined
        scalars = {}
        for name, res in results:
            for k in ("accuracy", "alnum_accuracy", "cer", "ned"):
                scalars[f"val/{name}/{k}"] = res.metrics[k]
            scalars[f"val/{name}/images_per_s"] = res.images_per_s
            if self.info.is_main:  # into train.log too, not only onto the console
                log.info("step %d %s: %s", self.step, name, format_metrics(res.metrics))
            ex = res.examples
            if ex and self.cfg.train.log_images:
                k = self.cfg.train.log_images
                self.logger.prediction_grid(
                    f"val/{name}/predictions", ex["images"][:k], ex["widths"][:k],
                    ex["labels"][:k], ex["preds"][:k], self.step,
                )  # fmt: skip
        for k in ("accuracy", "alnum_accuracy", "cer", "ned"):
            scalars[f"val/{k}"] = combined[k]
        self.logger.scalars(scalars, self.step)
        self.logger.flush()
        metric = self.best["metric"]
        value = combined[metric]
        better = self.best["value"] is None or (
            value > self.best["value"] if HIGHER_IS_BETTER[metric] else value < self.best["value"]
        )
        if better:
            self.best = {"metric": metric, "value": value, "step": self.step}
        self.save(is_best=better)
        self._t_log = time.perf_counter()  # keep validation time out of images/s
