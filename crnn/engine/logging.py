"""The run's one TensorBoard writer (rank 0 only), image grids and memory statistics."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crnn.data.errors import DataError
from crnn.engine.distributed import DistInfo, all_reduce_sum
from crnn.reports.training import render_prediction_grid

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
    except BaseException as e:
        # The command line reports it on the console after this block: the log file
        # must say why the run ended too (never an empty train.log).
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        handler.handle(
            logging.makeLogRecord(
                {
                    "name": "crnn.train",
                    "levelno": logging.ERROR,
                    "levelname": "ERROR",
                    "msg": "the run stopped: %s",
                    "args": (why,),
                }
            )
        )
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


class RunLogger:
    """TensorBoard scalars and images; every method is a no-op when ``enabled`` is False
    (ranks other than 0), so callers never branch on rank. The event file is created at
    the first write: a run that stops during set-up (or a --dry-run) leaves no tb/."""

    def __init__(
        self, log_dir: str | Path, enabled: bool = True, font_dirs: list[str] | None = None
    ) -> None:
        self.enabled = enabled
        self.log_dir = Path(log_dir)
        self._writer: Any = None
        self._font_dirs = list(font_dirs or [])
        self._fonts: Any = None

    @property
    def fonts(self) -> Any:
        """The fonts the prediction grid draws labels with: the run's training fonts
        (``data.synth.font_dirs``) first, so labels in its script have their glyphs."""
        if self._fonts is None:
            from crnn.data.synth.labelfonts import LabelFonts

            self._fonts = LabelFonts(13, self._font_dirs)
        return self._fonts

    @property
    def writer(self) -> Any:
        if self._writer is None and self.enabled:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.log_dir))
        return self._writer

    def scalars(self, values: dict[str, float], step: int) -> None:
        if self.enabled:
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
        if not self.enabled or not len(labels):
            return
        grid = render_prediction_grid(images, widths, labels, preds, self.fonts)
        self.writer.add_image(tag, np.asarray(grid), step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        if self.enabled:
            self.writer.add_text(tag, text, step)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.enabled = False


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
    """One line; alnum accuracy only where it means something (Latin-script labels)."""
    alnum = f"alnum-acc {metrics['alnum_accuracy']:.4f}  " if "alnum_accuracy" in metrics else ""
    return (
        f"acc {metrics['accuracy']:.4f}  {alnum}"
        f"CER {metrics['cer']:.4f}  NED {metrics['ned']:.4f}  (n={int(metrics['count'])})"
    )


class BadImageReport:
    """Counts training images that could not be read; shows the first few messages,
    then only counts (``data/bad_images`` in TensorBoard)."""

    # Micro-batches in a row without one readable image before the run stops: the data
    # is unusable (a disk gone, a mount lost), and training on it would learn nothing.
    MAX_EMPTY_IN_A_ROW = 50

    def __init__(self, count: int = 0, show: int = 10) -> None:
        self.count = count
        self.show = show
        self._shown = 0
        self.empty_in_a_row = 0

    def add(self, errors: list[str], readable: int = 1) -> None:
        """``errors`` of one micro-batch that held ``readable`` readable images."""
        self.empty_in_a_row = 0 if readable else self.empty_in_a_row + 1
        if self.empty_in_a_row >= self.MAX_EMPTY_IN_A_ROW:
            raise DataError(
                f"no image could be read in the last {self.empty_in_a_row} batches "
                f"({self.count + len(errors)} unreadable so far, e.g. "
                f"{errors[0] if errors else 'none recorded'}): the training data has become "
                "unreadable; check the disk or mount it is on, then resume with --resume"
            )
        self.count += len(errors)
        for e in errors:
            if self._shown < self.show:
                log.warning("skipped an unreadable image: %s", e)
                self._shown += 1
                if self._shown == self.show:
                    log.warning(
                        "further unreadable images are counted, not shown "
                        "(data/bad_images in TensorBoard)"
                    )


def throughput_and_memory(
    per_rank: torch.Tensor, device: torch.device, device_ids: list[int] | None
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """TensorBoard scalars for images/s per rank and peak GPU memory, from the
    all-reduced ``(world, 3)`` rows (images/s, peak allocated MiB, peak reserved MiB);
    also the peaks per GPU (DataParallel: this process's GPUs) or per rank (DDP)."""
    values = {
        f"throughput/images_per_s/rank{r}": float(per_rank[r, 0]) for r in range(len(per_rank))
    }
    peaks: dict[str, tuple[float, float]] = {}
    if device_ids:  # DataParallel: this one process sees every GPU
        for d in device_ids:
            m = memory_stats(torch.device("cuda", d))
            peaks[f"gpu{d}"] = (m["peak_allocated_mib"], m["peak_reserved_mib"])
    elif device.type == "cuda":
        for r in range(len(per_rank)):
            peaks[f"rank{r}"] = (float(per_rank[r, 1]), float(per_rank[r, 2]))
    for who, (alloc, reserved) in peaks.items():
        values[f"memory/peak_allocated_mib/{who}"] = alloc
        values[f"memory/peak_reserved_mib/{who}"] = reserved
    return values, peaks


def format_peaks(peaks: dict[str, tuple[float, float]]) -> str:
    """One line that shows the balance between GPUs."""
    where = ", ".join(f"{who} {a:.0f}/{r:.0f}" for who, (a, r) in peaks.items())
    return f"peak GPU memory, MiB allocated/reserved: {where}"


class TrainMeter:
    """Loss and images/s since the last log line, all-reduced over ranks, with peak GPU
    memory per rank (DDP) or per GPU (DataParallel). Every rank calls :meth:`log` (one
    all-reduce); rank 0's :class:`RunLogger` writes."""

    def __init__(self, info: DistInfo, device: torch.device, device_ids: list[int] | None):
        self.info, self.device, self.device_ids = info, device, device_ids
        self.peaks: dict[str, tuple[float, float]] = {}
        self.restart_clock()

    def restart_clock(self) -> None:
        """Start timing anew (after validation, so it stays out of images/s)."""
        self._t = time.perf_counter()

    def log(
        self,
        run_loss: torch.Tensor,
        run_n: int,
        values: dict[str, float],
        step: int,
        logger: RunLogger,
    ) -> tuple[float, float]:
        """Write ``train/loss``, ``train/images_per_s``, throughput and memory scalars
        plus ``values``; returns ``(mean loss, images/s)`` over all ranks."""
        now = time.perf_counter()
        elapsed, self._t = max(now - self._t, 1e-9), now
        world = self.info.world_size
        sums = torch.tensor([run_loss.item(), float(run_n)], dtype=torch.float64)
        # One row per rank: images/s, peak allocated MiB, peak reserved MiB.
        rows = torch.zeros((world, 3), dtype=torch.float64)
        mem = memory_stats(self.device)
        rows[self.info.rank] = torch.tensor(
            [run_n / elapsed, mem.get("peak_allocated_mib", 0.0), mem.get("peak_reserved_mib", 0.0)]
        )
        reduced = all_reduce_sum(torch.cat([sums, rows.flatten()]), self.info)
        loss = reduced[0].item() / max(reduced[1].item(), 1.0)
        per_rank = reduced[2:].view(world, 3)
        ips = float(per_rank[:, 0].sum())
        more, peaks = throughput_and_memory(per_rank, self.device, self.device_ids)
        if peaks and not self.peaks and self.info.is_main:  # the balance, early on
            log.info(format_peaks(peaks))
        self.peaks = peaks
        logger.scalars({"train/loss": loss, "train/images_per_s": ips, **values, **more}, step)
        return loss, ips


METRICS = ("accuracy", "alnum_accuracy", "cer", "ned", "empty_rate")


def log_validation(
    logger: RunLogger,
    results: list[tuple[str, Any]],
    pooled: dict[str, float],
    step: int,
    images: int = 0,
) -> None:
    """Metrics per validation set (``val/NAME/...``) and pooled (``val/...``) to
    TensorBoard, a line per set to the log (so train.log keeps them), and a grid of
    ``images`` predictions per set."""
    scalars = {f"val/{k}": pooled[k] for k in METRICS if k in pooled}
    for name, res in results:
        scalars.update({f"val/{name}/{k}": res.metrics[k] for k in METRICS if k in res.metrics})
        scalars[f"val/{name}/images_per_s"] = res.images_per_s
        if logger.enabled:
            log.info("step %d %s: %s", step, name, format_metrics(res.metrics))
        ex = res.examples
        if ex and images:
            logger.prediction_grid(
                f"val/{name}/predictions",
                ex["images"][:images],
                ex["widths"][:images],
                ex["labels"][:images],
                ex["preds"][:images],
                step,
            )
    logger.scalars(scalars, step)
    logger.flush()


def announce_run(
    out: Path, model: Any, cfg: Any, strategy: str, info: DistInfo, device: torch.device
) -> None:
    """Say where the run's files go and what it trains (rank 0)."""
    log.info(
        "run directory %s (checkpoints last.pt/best.pt, log train.log, "
        "TensorBoard: tensorboard --logdir %s)",
        out.resolve(),
        out,
    )
    n_params = sum(p.numel() for p in model.parameters())
    tc = cfg.train
    micro = tc.batch_size // (info.world_size * tc.accum_steps)
    log.info(
        "model %s, %.2f M parameters, %d classes; strategy %s, world size %d, device %s; "
        "global batch %d (%d per device x %d accumulation)",
        model.arch,
        n_params / 1e6,
        model.num_classes,
        strategy,
        info.world_size,
        device,
        tc.batch_size,
        micro,
        tc.accum_steps,
    )


def on_terminal() -> bool:
    """Whether standard error is a terminal: progress bars draw there only (in a log file
    or SLURM's output their redraws pile up as raw carriage-return updates)."""
    return sys.stderr.isatty()


def step_bar(total: int, initial: int, desc: str, main: bool) -> Any:
    """Training's progress bar: rank 0's, on a terminal. Elsewhere it is off and
    :func:`log_progress` writes one log line per ``train.log_every`` steps instead."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        disable=not (main and on_terminal()),
        desc=desc,
        unit="step",
        dynamic_ncols=True,
    )


def pass_bar(items: Any, desc: str, main: bool) -> Any:
    """A bar over one pass of ``items`` (a validation set's batches or images) that goes
    away when it ends; rank 0's, on a terminal only."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, leave=False, disable=not (main and on_terminal()))


def log_progress(trainer: Any, run_loss: torch.Tensor, run_n: int, bar: Any) -> None:
    """The trainer's running loss, learning rate, gradient norm and speed: to TensorBoard
    (rank 0) and the progress bar, or where there is no bar (not a terminal) one log
    line."""
    lr = trainer.scheduler.get_last_lr()[0]
    values = {
        "train/lr": lr,
        "train/grad_norm": float(trainer.grad_norm),
        "train/epoch": float(trainer.state.epoch),
        "data/bad_images": float(trainer.bad_images.count),
    }
    loss, ips = trainer.meter.log(run_loss, run_n, values, trainer.state.step, trainer.logger)
    bar.total = trainer.cfg.train.max_steps  # a time budget may have set it
    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", img_s=f"{ips:.0f}")
    if bar.disable and trainer.info.is_main:
        log.info(
            "step %d/%d loss %.4f lr %.2e %.0f images/s",
            trainer.state.step,
            trainer.cfg.train.max_steps,
            loss,
            lr,
            ips,
        )
