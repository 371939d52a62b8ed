"""The detector's training loop (``task: detect``), on the engine the recognizer uses.

The same promises as :mod:`crnn.engine.trainer`: one process or DDP (one process per
GPU, or gloo on the CPU) or DataParallel with the loss inside the replicas
(:class:`DetTrainModule`), ``train.batch_size`` the global batch split over ranks and
``accum_steps`` (``no_sync`` on the micro-batches that don't step), autocast (bf16/fp16 on
CUDA, bf16 on a CPU with bfloat16 units), gradient clipping, non-finite steps skipped,
the engine's optimizer, schedule, stop request (Ctrl-C, SIGTERM), run-directory lock
and rank-aware saver. Data order comes from the global step alone
(``crnn.data.detection.StepSampler``), so ``--resume`` continues exactly.

Validation reads each validation image whole, as reading does (``crnn.detect.detector``),
sharded over ranks; the ICDAR 2015 counts are all-reduced, so every rank sees the same
precision, recall and hmean. ``best.pt`` tracks hmean. Rank 0 writes TensorBoard: the
losses, the learning rate, precision/recall/hmean, and validation images with the true
boxes (green) and the found ones (red).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from crnn.config import Config
from crnn.data import ignore_stop_signals, stop_workers_at_exit
from crnn.data.detection import DetAugment, DetectionDataset, StepSampler, collate, read_rgb
from crnn.data.errors import DataError
from crnn.data.quads import (
    LabelledImage,
    count_problems,
    describe_problems,
    find_labelled,
    split_by_image,
)
from crnn.detect.detector import detect
from crnn.detect.loss import db_loss
from crnn.detect.metrics import DetCounts, match_image
from crnn.engine import state as st
from crnn.engine.budget import TimeBudget
from crnn.engine.data import num_workers
from crnn.engine.distributed import DistInfo, all_reduce_sum, any_rank, sync_buffers
from crnn.engine.logging import RunLogger, pass_bar, step_bar
from crnn.engine.optim import make_optimizer, make_scheduler, step_schedule
from crnn.engine.signals import StopRequest, watchdog
from crnn.engine.state import CheckpointSaver, FitResult
from crnn.io import atomic_save
from crnn.model.dbnet import DBNet, build_detector, deepen_from
from crnn.precision import autocast_for, cpu_bf16_units, resolve_amp

log = logging.getLogger(__name__)

KIND = "detector"
STOP_CHECK_EVERY = 10


class DetTrainModule(nn.Module):
    """``(images uint8 (B, 3, H, W), targets (B, 4, H, W)) -> per-sample loss (B,)``,
    autocast inside each replica, the loss in fp32."""

    def __init__(self, net: DBNet, amp: str = "none") -> None:
        super().__init__()
        self.net = net
        self.amp = amp

    def forward(self, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with autocast_for(images.device, self.amp):
            maps = self.net(images)
        return db_loss(maps, targets)


def wrap_detector(
    net: DBNet,
    strategy: str,
    device: torch.device,
    device_ids: list[int] | None,
    distributed: bool,
    amp: str,
) -> nn.Module:
    """The module that trains: :class:`DetTrainModule`, under DP or DDP as asked."""
    module: nn.Module = DetTrainModule(net, amp)
    if strategy == "dp":
        if not device_ids:
            raise ValueError("DataParallel needs device_ids (the GPUs to use)")
        return nn.DataParallel(module, device_ids=device_ids, output_device=device_ids[0])
    if strategy == "ddp" and distributed:
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(
            module, device_ids=ids, gradient_as_bucket_view=True
        )
    return module


def detector_bundle(net: DBNet, cfg: Config) -> dict[str, Any]:
    """What describes a detector checkpoint: kind, network hyper-parameters, read scale."""
    return {
        "kind": KIND,
        "hparams": dict(net.hparams),
        "limit_side": cfg.det.limit_side,
        "model": net.state_dict(),
    }


def load_sets(cfg: Config) -> tuple[list[LabelledImage], list[LabelledImage]]:
    """The training and validation images, with a count of the boxes dropped or cut."""
    train = [item for folder in cfg.det.train for item in find_labelled(folder)]
    if cfg.det.val:
        val = [item for folder in cfg.det.val for item in find_labelled(folder)]
    else:
        train, val = split_by_image(train, cfg.det.val_share, cfg.train.seed)
    problems = count_problems(train + val)
    if problems:
        log.warning(
            "labels: %s; %d images, %d lines kept",
            describe_problems(problems),
            len(train) + len(val),
            sum(len(i) for i in train + val),
        )
    if not train:
        raise DataError(f"det.train {cfg.det.train}: no labelled image to train on")
    return train, val


class DetTrainer:
    """Builds a detector run from a :class:`Config` (``task: detect``) and trains it."""

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
        torch.manual_seed(tc.seed)
        d = cfg.det
        self.model = build_detector(
            {"widths": d.widths, "depths": d.depths, "expand": d.expand, "inner": d.inner}
        )
        ckpt = self._load(resume)
        if ckpt is None and tc.init_from:
            self._init_from(tc.init_from)
        one_process_ddp = cfg.dist.strategy == "ddp" and not info.distributed
        self.strategy = "none" if one_process_ddp else cfg.dist.strategy
        device = (
            torch.device("cuda", device_ids[0])
            if self.strategy == "dp" and device_ids
            else info.device
        )
        self.device = device
        self.model.to(device)
        self.amp = self._amp()
        self.train_module = wrap_detector(
            self.model, self.strategy, device, device_ids, info.distributed, self.amp
        )
        self.optimizer = make_optimizer(self.model, tc, device)
        self.scheduler = make_scheduler(self.optimizer, tc)
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=device.type == "cuda" and self.amp == "fp16"
        )
        self.state = st.TrainState("hmean")
        # An average of the weights (train.ema_decay) is what validation, best.pt and the
        # release use. A fine-tune's average starts at the trained weights it starts from
        # and keeps its full decay: warmed up, it followed the first steps' disturbance.
        self.ema = st.WeightAverage.create(self.model, tc.ema_decay, ckpt, warmup=not tc.init_from)
        self.trained: DBNet = self.model if self.ema is None else self.ema.model  # type: ignore[assignment]
        if ckpt is not None:
            self.state = st.restore_training(ckpt, self.optimizer, self.scheduler, self.scaler, cfg)
        self.train_set, self.val_set = load_sets(cfg)
        self.aug = DetAugment(crop=d.crop, limit_side=d.limit_side, enlarge=d.enlarge)
        self.saver = CheckpointSaver(self.out, info)
        self.logger = RunLogger(self.out / "tb", info.is_main)
        self.bad_images = 0
        # Called with (rank, step) before every optimizer step, as the recognizer's are.
        self.step_callbacks: list[Callable[[int, int], None]] = []
        if tc.time_budget_min > 0:  # decides max_steps after a warm-up (crnn.engine.budget)
            self.step_callbacks.append(TimeBudget(self))

    def _amp(self) -> str:
        if self.device.type == "cuda":
            return resolve_amp(self.cfg.train.amp, self.device)
        setting = self.cfg.train.cpu_bf16
        # Measured on a 2-core Xeon with AMX: bf16 steps 0.75 s against 1.05 s in fp32
        # (batch 8, 384 px crops); without bfloat16 units bf16 is emulated and slow.
        return "bf16" if setting is True or (setting == "auto" and cpu_bf16_units()) else "none"

    def _load(self, resume: str | Path | None) -> dict[str, Any] | None:
        if resume is None:
            return None
        path = Path(resume)
        if path.is_dir():
            path = path / "last.pt"
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("kind") != KIND:
            raise DataError(
                f"{path} is not a detector checkpoint (kind {ckpt.get('kind')!r}); resume a run "
                "of task: detect"
            )
        # With an average, "model" holds it and "model_raw" the weights training goes on with.
        self.model.load_state_dict(ckpt.get("model_raw", ckpt["model"]))
        return ckpt

    def _init_from(self, name: str) -> None:
        """Start from a detector's weights (fine-tuning): a detector checkpoint, a run
        folder (its ``best.pt``), or ``det_zh`` for the bundled detector's checkpoint."""
        from crnn.detect.runtime import bundled_detector_checkpoint

        path = Path(name)
        if name == "det_zh":
            found = bundled_detector_checkpoint()
            if found is None:
                raise DataError(
                    "train.init_from=det_zh: this installation bundles no detector checkpoint"
                )
            path = found
        elif path.is_dir():
            path = path / "best.pt"
        if not path.is_file():
            raise DataError(
                f"train.init_from={name!r}: no such file; expected a detector checkpoint "
                "(a run's best.pt or last.pt), its run folder, or det_zh (the bundled one)"
            )
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("kind") != KIND:
            raise DataError(
                f"train.init_from={name!r} is not a detector checkpoint (kind "
                f"{ckpt.get('kind')!r}): a detector starts from a detector's weights"
            )
        if dict(ckpt["hparams"]) == dict(self.model.hparams):
            self.model.load_state_dict(ckpt["model"])
            log.info("initialised the detector's weights from %s", path)
            return
        try:  # a deeper detector grown from it, starting as the same function
            added = deepen_from(self.model, ckpt["model"], dict(ckpt["hparams"]))
        except ValueError:
            raise DataError(
                f"train.init_from={name!r} is a detector of {ckpt['hparams']}, this run builds "
                f"{self.model.hparams}: set det.widths, det.depths, det.expand and det.inner "
                "to the checkpoint's (det.depths may be larger: the run grows it deeper)"
            ) from None
        log.info(
            "initialised the detector's weights from %s, grown deeper to det.depths %s (%d "
            "blocks added, each starting as the identity)",
            path,
            self.model.hparams["depths"],
            added,
        )

    # ---- checkpoints ----------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        out = detector_bundle(self.trained, self.cfg)
        if self.ema is not None:
            out.update(model_raw=st.bundle_model_state(self.model), ema={"decay": self.ema.decay})
        out.update(
            config=self.cfg.to_dict(),
            optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict(),
            scaler=self.scaler.state_dict(),
            rng=st.rng_state(),
            **self.state.to_dict(),
        )
        return out

    def save(self, is_best: bool = False) -> None:
        self.saver.save(self.checkpoint, self.state.step, self.state.best if is_best else None)

    # ---- data -----------------------------------------------------------------------

    def scenes(self) -> Any:
        """The synthetic scene maker of ``det.synth_share`` (None when 0): the generator of
        ``data.synth`` over ``data.charset``, on the training images."""
        if not self.cfg.det.synth_share:
            return None
        from crnn.data.scenes import SceneMaker
        from crnn.data.synth import SynthGenerator
        from crnn.text.alphabet import Charset

        d = self.cfg.data
        charset = Charset.from_spec(d.charset, d.case_fold, d.bidi)
        gen = SynthGenerator(charset, d.synth, seed=self.cfg.train.seed, rgb=True)
        return SceneMaker(gen, self.train_set, self.cfg.det.limit_side)

    def loader(self) -> DataLoader:
        tc, info = self.cfg.train, self.info
        sampler = StepSampler(
            len(self.train_set),
            tc.batch_size,
            info.world_size,
            info.rank,
            tc.accum_steps,
            tc.seed,
            self.state.step,
        )
        workers = num_workers(self.cfg.data.num_workers)
        return DataLoader(
            DetectionDataset(self.train_set, self.aug, self.scenes(), self.cfg.det.synth_share),
            batch_size=sampler.micro,
            sampler=sampler,
            num_workers=workers,
            collate_fn=collate,
            # Ctrl-C and a scheduler's SIGTERM reach the workers too: they ignore it, the
            # loop saves and stops (a worker killed first failed the run instead).
            worker_init_fn=ignore_stop_signals,
            persistent_workers=workers > 0,
            prefetch_factor=4 if workers > 0 else None,
            pin_memory=self.device.type == "cuda",
        )

    # ---- the loop -------------------------------------------------------------------

    def train_step(self, batches: Any) -> tuple[float, int]:
        for callback in self.step_callbacks:
            callback(self.info.rank, self.state.step)
        accum = self.cfg.train.accum_steps
        loss_sum = torch.zeros((), device=self.device)
        n = 0
        for m in range(accum):
            batch = next(batches)
            self.bad_images += len(batch["errors"])
            for e in batch["errors"][:3]:
                log.warning("skipped an image that cannot be read: %s", e)
            images = batch["images"].to(self.device, non_blocking=True)
            targets = batch["targets"].to(self.device, non_blocking=True)
            sync = m == accum - 1 or self.strategy != "ddp"
            ctx = contextlib.nullcontext() if sync else self.train_module.no_sync()  # type: ignore[operator]
            with ctx:
                losses = self.train_module(images, targets)
                self.scaler.scale(losses.mean() / accum).backward()
            loss_sum += losses.detach().sum()
            n += len(images)
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.train.grad_clip if self.cfg.train.grad_clip > 0 else float("inf")
        norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        finite = bool(torch.isfinite(norm)) and bool(torch.isfinite(loss_sum))
        if finite:
            self.scaler.step(self.optimizer)
            if self.ema is not None:
                self.ema.update(self.state.step)
        else:
            log.warning(
                "step %d: loss or gradients not finite; the step is skipped", self.state.step + 1
            )
        self.scaler.update()
        step_schedule(self.scheduler)
        self.optimizer.zero_grad(set_to_none=True)
        self.state.advance(max(1, len(self.train_set) // self.cfg.train.batch_size))
        return loss_sum, n

    @torch.no_grad()
    def validate(
        self,
    ) -> tuple[dict[str, float], list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]]:
        """ICDAR 2015 precision, recall, hmean over the validation images (all ranks)."""
        for m in dict.fromkeys((self.model, self.trained)):  # rank 0's BatchNorm statistics
            sync_buffers(m, self.info)
        net = self.trained
        net.eval()
        counts = DetCounts()
        shown: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []

        def prob_map(batch: np.ndarray) -> np.ndarray:
            x = torch.from_numpy(batch).to(self.device)
            with autocast_for(self.device, self.amp):
                return net(x).float().cpu().numpy()

        d = self.cfg.det
        try:
            mine = self.val_set[self.info.rank :: self.info.world_size]
            for item in pass_bar(mine, "validation", self.info.is_main):
                try:
                    image = read_rgb(str(item.image))
                except (OSError, ValueError):
                    continue
                found = [
                    f.quad
                    for f in detect(image, prob_map, limit_side=d.limit_side, enlarge=d.enlarge)
                ]
                counts.add(match_image(found, item.quads, item.ignore))
                if len(shown) < d.log_images:
                    shown.append((image, item.quads, found))
        finally:
            self.model.train()  # an average stays in eval mode
        t = torch.tensor(counts.as_list(), dtype=torch.float64)
        t = all_reduce_sum(
            t.to(self.device) if self.info.distributed and self.device.type == "cuda" else t,
            self.info,
        ).cpu()
        total = DetCounts(*(int(v) for v in t.tolist()))
        return total.compute(), shown

    def fit(self, stop_at_step: int | None = None, time_limit_s: float | None = None) -> FitResult:
        tc, state, main = self.cfg.train, self.state, self.info.is_main
        t_start = time.monotonic()
        claim = st.claim_run_dir(self.out, self.cfg, main)
        if main:
            n_params = sum(p.numel() for p in self.model.parameters())
            log.info(
                "detector: %.2f M parameters; %d training images (%d lines), %d validation; "
                "batch %d, %s px crops, %s on %s; run directory %s",
                n_params / 1e6,
                len(self.train_set),
                sum(len(i) for i in self.train_set),
                len(self.val_set),
                tc.batch_size,
                self.cfg.det.crop,
                self.amp if self.amp != "none" else "fp32",
                self.device,
                self.out,
            )
        stop_workers_at_exit()
        batches = iter(self.loader())
        bar = step_bar(tc.max_steps, state.step, "train det", main)
        interrupted = False
        run_loss, run_n, t_log = torch.zeros((), device=self.device), 0, time.monotonic()
        self.train_module.train()
        try:
            with claim, StopRequest(main, watchdog(self.info)) as stop:
                while state.step < tc.max_steps:
                    stop.beat()
                    loss_sum, n = self.train_step(batches)
                    run_loss += loss_sum
                    run_n += n
                    bar.update(1)
                    last = state.step >= tc.max_steps
                    if state.step % tc.log_every == 0 or last:
                        loss = float(all_reduce_sum(run_loss.clone(), self.info)) / max(
                            run_n * self.info.world_size, 1
                        )
                        dt = time.monotonic() - t_log
                        lr = self.optimizer.param_groups[0]["lr"]
                        self.logger.scalars(
                            {
                                "train/loss": loss,
                                "train/lr": lr,
                                "train/images_per_s": run_n * self.info.world_size / max(dt, 1e-9),
                            },
                            state.step,
                        )
                        if main:
                            log.info(
                                "step %d loss %.4f lr %.2e %.2f s/step",
                                state.step,
                                loss,
                                lr,
                                dt / tc.log_every,
                            )
                        run_loss.zero_()
                        run_n, t_log = 0, time.monotonic()
                    if state.step % tc.val_every == 0 or last:
                        self._validate_and_save()
                    elif st.saves_at(tc, state.step):
                        self.save()
                    check = not self.info.distributed or state.step % STOP_CHECK_EVERY == 0
                    interrupted = check and any_rank(stop.requested, self.info) and not last
                    late = (
                        time_limit_s is not None
                        and check
                        and any_rank(time.monotonic() - t_start > time_limit_s, self.info)
                    )
                    if not last and (interrupted or late or state.step == stop_at_step):
                        if self.saver.saved_step != state.step:
                            self.save()
                        log.info(
                            "stopping at step %d; resume with --resume %s", state.step, self.out
                        ) if main else None
                        break
            if interrupted and main:
                log.warning("stopped at step %d; resume with --resume %s", state.step, self.out)
            elif state.step >= tc.max_steps and main:
                log.info("finished %d steps; best %s", state.step, state.best_summary(self.out))
        finally:
            bar.close()
            self.logger.close()
        return FitResult(state.step, interrupted, state.metrics, state.best, self.out)

    def _validate_and_save(self) -> None:
        metrics, shown = self.validate()
        step = self.state.step
        self.logger.scalars({f"val/{k}": v for k, v in metrics.items()}, step)
        for i, (image, gts, found) in enumerate(shown):
            self.logger.writer.add_image(
                f"val/boxes_{i}", draw_boxes(image, gts, found), step, dataformats="HWC"
            ) if self.logger.enabled else None
        if self.info.is_main:
            log.info(
                "step %d validation: precision %.4f recall %.4f hmean %.4f",
                step,
                metrics["precision"],
                metrics["recall"],
                metrics["hmean"],
            )
        self.save(is_best=self.state.update_best(metrics))


def draw_boxes(image: np.ndarray, truth: np.ndarray, found: list[np.ndarray]) -> np.ndarray:
    """``image`` with the true lines in green and the found ones in red."""
    import cv2

    out = image.copy()
    for q in truth:
        cv2.polylines(out, [np.round(q).astype(np.int32)], True, (0, 200, 0), 2)
    for q in found:
        cv2.polylines(out, [np.round(q).astype(np.int32)], True, (230, 0, 0), 2)
    return out


def release(
    ckpt_path: str | Path, out: str | Path, postprocess: dict[str, Any] | None = None
) -> Path:
    """An inference-only detector file (kind, hyper-parameters, read scale, weights, and
    the post-processing options chosen for it)."""
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    keep = {k: ckpt[k] for k in ("kind", "hparams", "limit_side", "model")}
    keep["postprocess"] = dict(postprocess or ckpt.get("postprocess") or {})
    keep["source"] = {"step": ckpt.get("step"), "best": ckpt.get("best")}
    return atomic_save(keep, out)
