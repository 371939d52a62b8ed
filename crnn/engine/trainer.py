"""The training loop: one code path for CPU, one GPU, DataParallel and DDP.

A step is ``accum_steps`` micro-batches followed by one optimizer step. Per step:
autocast (bf16/fp16 on CUDA, one code path with AMP on or off), loss scaled by
``1/accum_steps``, ``no_sync()`` on the micro-batches that don't step (DDP all-reduces
once per step), gradient clipping after unscaling, a GradScaler that lives for the
whole run and is saved with it. Running sums stay on the device (no ``.item()`` per step).

Data is built in ``crnn.engine.data``, the checkpoint and the best-metric tracking live
in ``crnn.engine.state``; this module is the loop. Rank 0 alone logs to TensorBoard,
shows the progress bar and writes checkpoints; validation is sharded over ranks and its
metrics all-reduced, so every rank sees the same numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.contrib.logging import logging_redirect_tqdm

from crnn.backends.torch import TorchBackend
from crnn.checkpoint import ModelBundle
from crnn.config import Config
from crnn.config.image_spec import ImageSpec
from crnn.engine import cpu_precision, prior, replay
from crnn.engine import state as st
from crnn.engine.budget import TimeBudget
from crnn.engine.data import (
    build_train_data,
    build_val_sets,
    placeholder_batch,
    to_device,
)
from crnn.engine.distributed import DistInfo, all_reduce_sum, any_rank, sync_buffers
from crnn.engine.guards import RunGuards
from crnn.engine.logging import (
    BadImageReport,
    RunLogger,
    TrainMeter,
    announce_run,
    format_peaks,
    log_progress,
    log_validation,
    pass_bar,
    step_bar,
)
from crnn.engine.optim import make_optimizer, make_scheduler, step_schedule
from crnn.engine.parallel import wrap
from crnn.engine.signals import StopRequest, watchdog
from crnn.engine.state import FitResult
from crnn.evaluation import EvalResult, evaluate
from crnn.model import build_model
from crnn.precision import resolve_amp
from crnn.text.alphabet import Charset
from crnn.text.metrics import TextMetrics

log = logging.getLogger(__name__)

# In a distributed run the ranks agree on stopping (Ctrl-C) at most this many steps
# apart: each check is a collective, so not every step.
STOP_CHECK_EVERY = 10


class Trainer:
    """Builds everything a run needs from a :class:`Config` and trains.

    Args:
        cfg: the run configuration (checked here with :meth:`Config.validate` against
            this process's place in the run).
        info: this process's place in the run (see ``crnn.engine.distributed``).
        resume: a checkpoint to continue from exactly (same step, LR, data order).
        device_ids: GPUs for DataParallel (``dist.strategy=dp``).

    ``step_callbacks`` are called with ``(rank, step)`` before every optimizer step.
    """

    def __init__(
        self,
        cfg: Config,
        info: DistInfo,
        resume: str | Path | None = None,
        device_ids: list[int] | None = None,
    ) -> None:
        cfg.validate(info.world_size, info.device.type, len(device_ids or [None]))
        self.cfg, self.info, tc = cfg, info, cfg.train
        self.out = Path(tc.output_dir)
        torch.manual_seed(tc.seed)  # same initial weights on every rank
        if info.device.type == "cpu":
            # LSTM gates make denormal floats, several times slower on x86: flush to zero.
            torch.set_flush_denormal(True)
        self.charset = Charset.from_spec(cfg.data.charset, cfg.data.case_fold, cfg.data.bidi)
        self.spec = ImageSpec.from_config(cfg.data)
        model = build_model(cfg.model, self.charset.num_classes, self.spec.channels)
        bundle = ModelBundle(model, self.charset, self.spec)
        ckpt = st.load_initial_weights(bundle, resume, tc.init_from)
        one_process_ddp = cfg.dist.strategy == "ddp" and not info.distributed
        self.strategy = "none" if one_process_ddp else cfg.dist.strategy
        self.device_ids = device_ids if self.strategy == "dp" else None
        self.amp = resolve_amp(tc.amp, info.device)
        self.train_module, self.model = wrap(
            model,
            strategy=self.strategy,
            device=info.device,
            device_ids=device_ids,
            distributed=info.distributed,
            amp=self.amp,
            sync_bn=cfg.dist.sync_bn,
            compile=tc.compile,
            channels_last=tc.channels_last,
            grad_checkpoint=tc.grad_checkpoint,
        )
        self.device = next(self.model.parameters()).device
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = tc.cudnn_benchmark
        self.optimizer = make_optimizer(self.model, tc, self.device)
        self.scheduler = make_scheduler(self.optimizer, tc)
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.device.type == "cuda" and self.amp == "fp16"
        )
        self.state = st.TrainState(tc.best_metric)
        lengths = lambda w: int(self.model.output_length(w))  # noqa: E731 (width -> frames)
        common = (cfg, info, self.charset, self.spec, lengths, self.device.type == "cuda")
        rp = self.replay = replay.plan(cfg)
        if rp is not None:
            # The run learns from the generator it replays, so its config.yaml, checkpoints
            # and release record that one (a fine-tune's own data.synth is the defaults: a
            # fine-tune of a fine-tune would otherwise replay Latin lines).
            # The size of the general validation set stays this run's choice.
            cfg.data.synth = dataclasses.replace(rp.synth, val_size=cfg.data.synth.val_size)
        self.data, self.val_sets = (
            build_train_data(*common, replay=rp),
            build_val_sets(*common, replay=rp),
        )
        if self.device.type == "cpu":  # bf16 only where measured faster
            cpu_precision.apply(self)
        if ckpt is None and not tc.init_from:  # a new run
            prior.apply(self.model, self.data.dataset, lengths, cfg)
        self.ema = st.WeightAverage.create(self.model, tc.ema_decay, ckpt)
        self.trained = self.model if self.ema is None else self.ema.model  # evaluated and released
        self.mix = replay.weight_mix(cfg, self.trained, self.charset)
        if ckpt is not None:
            self.state = st.restore_training(ckpt, self.optimizer, self.scheduler, self.scaler, cfg)
        self.bad_images = BadImageReport(self.state.bad_images)
        self.saver = st.CheckpointSaver(self.out, info, tc.keep_every)
        self.logger = RunLogger(self.out / "tb", info.is_main, cfg.data.synth.font_dirs)
        self.step_callbacks: list[Callable[[int, int], None]] = []
        if tc.time_budget_min > 0:  # decides max_steps after a warm-up
            self.step_callbacks.append(TimeBudget(self))
        self.grad_norm = torch.zeros(())
        self.meter = TrainMeter(info, self.device, self.device_ids)
        self.guards = RunGuards(cfg, self.scaler.is_enabled(), lengths(self.spec.max_width))

    # ---- checkpoints ----------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """The training checkpoint of the current step (see ``crnn.engine.state``)."""
        self.state.bad_images = self.bad_images.count
        args = (
            self.cfg,
            self.state,
            self.optimizer,
            self.scheduler,
            self.scaler,
            self.ema,
            self.mix,
        )
        return st.training_checkpoint(ModelBundle(self.model, self.charset, self.spec), *args)

    def save(self, is_best: bool = False) -> None:
        """Rank 0 writes ``last.pt`` (and ``best.pt``); the others wait for it."""
        self.saver.save(self.checkpoint, self.state.step, self.state.best if is_best else None)

    # ---- the loop -------------------------------------------------------------------

    def batches(self) -> Iterator[dict[str, Any]]:
        """Micro-batches forever, from the data position in :attr:`state`."""
        return self.data.batches(self.state)

    def train_step(self, batches: Iterator[dict[str, Any]]) -> tuple[torch.Tensor, int]:
        """One optimizer step over ``accum_steps`` micro-batches.

        Returns the summed per-sample loss (device tensor, no sync) and the number of
        samples this rank processed.
        """
        for callback in self.step_callbacks:
            callback(self.info.rank, self.state.step)
        accum = self.cfg.train.accum_steps
        loss_sum = torch.zeros((), device=self.device)
        n, labels = 0, []
        for m in range(accum):
            batch = next(batches)
            labels += batch["labels"]
            empty = batch["images"] is None
            self.bad_images.add(batch["errors"], readable=0 if empty else len(batch["labels"]))
            if empty:
                inputs = placeholder_batch(self.spec, self.device)
            else:  # on one device the lengths stay on the host (see to_device)
                inputs = to_device(batch, self.device, host_lengths=self.strategy == "none")
            # DDP: all-reduce gradients only on the micro-batch that steps.
            sync = m == accum - 1 or self.strategy != "ddp"
            ctx = contextlib.nullcontext() if sync else self.train_module.no_sync()  # type: ignore[operator]
            with ctx:
                losses = self.train_module(*inputs)
                loss = losses.mean() / accum * (0.0 if empty else 1.0)
                self.scaler.scale(loss).backward()
            if not empty:
                loss_sum += losses.detach().sum()
                n += len(batch["labels"])
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.train.grad_clip if self.cfg.train.grad_clip > 0 else float("inf")
        self.grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if self.guards.allow(self.grad_norm, labels, self.state.step):  # never a NaN step
            self.scaler.step(self.optimizer)
            if self.ema is not None:
                self.ema.update(self.state.step)
        self.scaler.update()
        step_schedule(self.scheduler)
        self.optimizer.zero_grad(set_to_none=True)
        self.state.advance(self.data.sampler.steps_per_epoch)
        return loss_sum, n

    def validate(self) -> tuple[dict[str, float], list[tuple[str, EvalResult]]]:
        """Evaluate every validation set; also returns the metrics of all sets pooled."""
        for m in dict.fromkeys(
            (self.model, self.trained)
        ):  # rank 0's BatchNorm statistics everywhere
            sync_buffers(m, self.info)
        model = self.trained if self.mix is None else self.mix.refresh()  # what gets saved as best
        args = (self.charset, self.spec, self.device, self.amp, self.cfg.train.channels_last)
        backend = TorchBackend(model, *args)
        results, pooled = [], TextMetrics()
        try:
            for name, loader in self.val_sets:
                reduce = lambda t: all_reduce_sum(t, self.info)  # noqa: E731
                batches = pass_bar(loader, f"validation {name}", self.info.is_main)
                res = evaluate(backend, batches, reduce, self.info.world_size)
                results.append((name, res))
                pooled.add(res.sums)
        finally:
            self.train_module.train()
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
        tc, state, main = self.cfg.train, self.state, self.info.is_main
        t_start = time.monotonic()
        every = min(tc.log_every, STOP_CHECK_EVERY)
        claim = st.claim_run_dir(self.out, self.cfg, main)  # one run per directory
        if main:
            announce_run(self.out, self.model, self.cfg, self.strategy, self.info, self.device)
        batches = self.batches()
        bar = step_bar(tc.max_steps, state.step, "train", main)
        interrupted = False
        run_loss, run_n = torch.zeros((), device=self.device), 0
        self.meter.restart_clock()
        self.train_module.train()
        # Rank 0 prints log lines above its progress bar instead of glued to it.
        redirect = logging_redirect_tqdm() if main else contextlib.nullcontext()
        try:
            with claim, StopRequest(main, watchdog(self.info)) as stop, redirect:
                self.step_callbacks.append(stop.beat)  # the watchdog's sign of progress
                while state.step < tc.max_steps:
                    loss_sum, n = self.train_step(batches)
                    run_loss += loss_sum
                    run_n += n
                    bar.update(1)
                    last = state.step >= tc.max_steps
                    if state.step % tc.log_every == 0 or last:
                        log_progress(self, run_loss, run_n, bar)
                        run_loss.zero_()
                        run_n = 0
                    if state.step % tc.val_every == 0 or last:
                        if self._validate_and_save() and not last:
                            break  # early stop: saved, and every rank agrees (same metrics)
                    elif st.saves_at(tc, state.step):
                        self.save()
                    # Agreeing on a stop costs a collective: not at every step.
                    check = not self.info.distributed or state.step % every == 0
                    interrupted = check and any_rank(stop.requested, self.info) and not last
                    late = (
                        time_limit_s is not None
                        and check
                        and any_rank(time.monotonic() - t_start > time_limit_s, self.info)
                    )
                    if not last and (interrupted or late or state.step == stop_at_step):
                        if not interrupted:
                            log.info(
                                "stopping at step %d as asked; resume with --resume %s",
                                state.step,
                                self.out,
                            )
                        if self.saver.saved_step != state.step:
                            self.save()
                        break
            if main and self.meter.peaks:
                log.info(format_peaks(self.meter.peaks))
            if interrupted and main:
                log.warning("stopped at step %d; resume with --resume %s", state.step, self.out)
            elif state.step >= tc.max_steps:
                st.calibrate_best(self)  # confidences that match accuracy
                if main:
                    log.info("finished %d steps; best %s", state.step, state.best_summary(self.out))
        finally:
            bar.close()
            self.logger.close()
        return FitResult(state.step, interrupted, state.metrics, state.best, self.out)

    def _validate_and_save(self) -> bool:
        """Validate, save; True when early stopping says the run is over."""
        combined, results = self.validate()
        log_validation(self.logger, results, combined, self.state.step, self.cfg.train.log_images)
        self.save(is_best=self.state.update_best(combined))
        self.meter.restart_clock()  # keep validation time out of images/s
        return self.guards.after_validation(combined, self.state, self.info.is_main)
