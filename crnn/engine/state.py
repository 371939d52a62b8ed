"""Training state: what a training checkpoint holds beyond the model, and who saves it.

:class:`TrainState` is the loop's position (step, epoch, batch in the epoch), the best
validation result and a few counters. :func:`training_checkpoint` composes the file from
the model's header (``crnn.checkpoint.ModelBundle``, the one owner of that part), the run
config, this state, the optimizer, scheduler, scaler and RNG states;
:func:`restore_training` puts all of them back, so ``--resume`` continues at the same
step, learning rate and data order.

:class:`CheckpointSaver` is rank-aware: rank 0 writes ``last.pt`` (and ``best.pt``
when the tracked metric improved) atomically, the other ranks wait at a barrier.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from crnn.checkpoint import (
    CheckpointError,
    ModelBundle,
    init_state_dict,
    is_native,
    load_checkpoint,
    load_state_dict_checked,
    release_checkpoint,
)
from crnn.checkpoint.average import kept_step_path
from crnn.config import Config, ConfigError, save_config
from crnn.engine.distributed import DistInfo, barrier
from crnn.engine.runlock import RunLock
from crnn.io import atomic_save, remove_stale_temporaries
from crnn.text.alphabet import Charset
from crnn.text.metrics import HIGHER_IS_BETTER

log = logging.getLogger(__name__)


def rng_state() -> dict[str, Any]:
    """Python's and torch's (and CUDA's) random states, for an exact resume."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


@dataclass
class TrainState:
    """Where the loop is, and the best validation result so far.

    ``step`` counts optimizer steps; ``epoch``/``step_in_epoch`` place the data sampler
    (finite datasets; the endless generator stays in epoch 0). ``best`` is
    ``{"metric", "value", "step"}`` (``value`` None before the first validation);
    ``metrics`` the last validation's pooled metrics; ``bad_images`` the training images
    that could not be read so far."""

    best_metric: str = "accuracy"
    step: int = 0
    epoch: int = 0
    step_in_epoch: int = 0
    best: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    bad_images: int = 0
    # The time-budget decision (crnn.engine.budget), once made: resuming keeps it.
    budget: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.best:
            self.best = {"metric": self.best_metric, "value": None, "step": None}

    def advance(self, steps_per_epoch: int | None) -> None:
        """One optimizer step done; roll the epoch over at ``steps_per_epoch``."""
        self.step += 1
        self.step_in_epoch += 1
        if steps_per_epoch and self.step_in_epoch >= steps_per_epoch:
            self.epoch += 1
            self.step_in_epoch = 0

    def update_best(self, metrics: dict[str, float]) -> bool:
        """Record ``metrics`` as the latest validation; True if it is a new best."""
        self.metrics = dict(metrics)
        metric = self.best["metric"]
        if metric not in metrics:
            # alnum_accuracy is left out for labels that are not Latin script.
            log.warning(
                "train.best_metric=%s means nothing for these validation labels (mostly not "
                "Latin letters or digits); the best checkpoint is chosen by cer instead "
                "(set train.best_metric=cer or accuracy to keep it that way)",
                metric,
            )
            metric = self.best["metric"] = "cer"
            self.best["value"] = None
        value = metrics[metric]
        old = self.best["value"]
        better = old is None or (value > old if HIGHER_IS_BETTER[metric] else value < old)
        if better:
            self.best = {"metric": metric, "value": value, "step": self.step}
        return better

    def best_summary(self, out: Path) -> str:
        if self.best["value"] is None:
            return "none yet"
        return (
            f"{self.best['metric']} {self.best['value']:.4f} at step {self.best['step']} "
            f"({out / 'best.pt'})"
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        del d["best_metric"]  # kept in best["metric"]
        d["best"] = dict(self.best)
        return d

    @classmethod
    def from_checkpoint(cls, ckpt: dict[str, Any], best_metric: str) -> TrainState:
        return cls(
            best_metric=best_metric,
            step=int(ckpt["step"]),
            epoch=int(ckpt["epoch"]),
            step_in_epoch=int(ckpt["step_in_epoch"]),
            best=dict(ckpt.get("best") or {}),
            metrics=dict(ckpt.get("metrics", {})),
            bad_images=int(ckpt.get("bad_images", 0)),
            budget=dict(ckpt.get("budget") or {}),
        )


def training_checkpoint(
    bundle: ModelBundle,
    cfg: Config,
    state: TrainState,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    ema: WeightAverage | None = None,
    mix: Any = None,
) -> dict[str, Any]:
    """Everything ``--resume`` needs, as plain types and tensors (``weights_only`` loads
    it): the model header, the run config, the loop state and the optimiser's. With an
    EMA the header's ``model`` is the averaged weights (what evaluation, release and
    predict use) and ``model_raw`` the trained ones (what training resumes from). With a
    fine-tune's weight mix (``crnn.engine.replay.WeightMix``) ``model`` is the mix, and
    an EMA's own weights go in ``model_ema``."""
    extra: dict[str, Any] = {}
    if ema is not None or mix is not None:
        extra["model_raw"] = bundle_model_state(bundle.model)
    if ema is not None:
        extra["ema"] = {"decay": ema.decay}
        bundle = ModelBundle(ema.model, bundle.charset, bundle.spec)
    if mix is not None:
        if ema is not None:
            extra["model_ema"] = bundle_model_state(ema.model)
        extra["init_share"] = mix.share
        bundle = ModelBundle(mix.refresh(), bundle.charset, bundle.spec)
    return {
        **bundle.header(),
        **extra,
        "config": cfg.to_dict(),
        **state.to_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler.is_enabled() else {},
        "rng": rng_state(),
    }


def check_resumable(ckpt: dict[str, Any], bundle: ModelBundle, source: str) -> None:
    """Refuse to resume from a checkpoint whose charset or model differ from the run's."""
    if not is_native(ckpt):
        raise CheckpointError(f"{source} is not a crnn-ocr checkpoint; cannot resume from it")
    theirs = Charset.from_dict(ckpt["charset"])
    ours = bundle.charset
    if theirs.chars != ours.chars:
        raise CheckpointError(
            f"{source} was trained with charset {theirs.name!r} ({len(theirs)} characters), "
            f"this run uses {ours.name!r} ({len(ours)}). Resume with the checkpoint's own "
            "config, or start a new run with --set train.init_from=... to fine-tune on the "
            "new charset."
        )
    if ckpt["model_config"] != bundle.model.hparams:
        raise CheckpointError(
            f"{source} holds a model {ckpt['model_config']}, this run builds "
            f"{bundle.model.hparams}; resume with the checkpoint's own model settings"
        )


_INIT: dict[tuple[str, int], dict[str, Any]] = {}


def missing_init(name: str) -> ConfigError:
    """The error for a ``train.init_from`` that does not exist: which run writes it, and
    how to start from something else (a later stage of a recipe run before its first)."""
    from crnn.bundled import BUNDLED

    run = Path(name).parent if Path(name).suffix == ".pt" else Path(name)
    return ConfigError(
        f"train.init_from={name!r}: no such checkpoint. This run starts from those weights: "
        f"train the run that writes them first (a config whose train.output_dir is "
        f"{str(run)!r}), or start from another checkpoint, a run directory or a bundled model "
        f"({', '.join(BUNDLED)}): --set train.init_from=..."
    )


def load_init(path: str) -> dict[str, Any]:
    """The ``train.init_from`` checkpoint, read from disk once per process while the file
    is unchanged (the starting weights, the replay's generator settings and the weight
    mix all need it). Treat it as read-only. A missing file raises :func:`missing_init`."""
    p = Path(path)
    if not p.exists():
        raise missing_init(path)
    key = (str(p.resolve()), p.stat().st_mtime_ns)
    if key not in _INIT:
        _INIT.clear()
        _INIT[key] = load_checkpoint(path)
    return _INIT[key]


def load_initial_weights(
    bundle: ModelBundle, resume: str | Path | None, init_from: str = ""
) -> dict[str, Any] | None:
    """Load the weights a run starts from into ``bundle.model``: the checkpoint to
    ``resume`` (checked to fit; returned, for :func:`restore_training`), else
    ``train.init_from`` (fine-tuning; the classifier adapts to a new charset)."""
    if resume:
        ckpt = load_checkpoint(resume)
        check_resumable(ckpt, bundle, str(resume))
        # With an EMA, "model" holds the averaged weights and "model_raw" the trained ones.
        load_state_dict_checked(bundle.model, ckpt.get("model_raw", ckpt["model"]), str(resume))
        return ckpt
    if init_from:
        init = load_init(init_from)
        sd = init_state_dict(init, bundle.model, bundle.charset, init_from)
        load_state_dict_checked(bundle.model, sd, init_from)
        log.info("initialised weights from %s", init_from)
        theirs = init.get("image", {}).get("height")
        if theirs and theirs != bundle.spec.height:
            log.warning(
                "train.init_from=%s read lines %d px high and this run trains at %d "
                "(data.height): its filters meet characters %.2fx the size they learned, so "
                "it reads worse at first and relearns the scale over thousands of steps; "
                "--set data.height=%d keeps its scale",
                init_from,
                theirs,
                bundle.spec.height,
                bundle.spec.height / theirs,
                theirs,
            )
    return None


def restore_training(
    ckpt: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    cfg: Config,
) -> TrainState:
    """Put the optimiser, scheduler, scaler and RNG states back; return the loop state.

    Warns when the resumed run changes what the data position means: it is counted in
    global batches of the saved ``train.batch_size`` over the saved ``data.train``."""
    saved = ckpt.get("config", {})
    for section, key in (("train", "batch_size"), ("data", "train"), ("train", "seed")):
        old, new = saved.get(section, {}).get(key), getattr(getattr(cfg, section), key)
        if old is not None and old != new:
            log.warning(
                "%s.%s changed from %s to %s on resume: training continues at the same step "
                "and learning rate, but the samples it sees from here are not the ones the "
                "original run would have seen (the data position counts global batches of "
                "the saved settings); resume with the saved %s.%s for an exact continuation",
                section,
                key,
                old,
                new,
                section,
                key,
            )
    best_metric = cfg.train.best_metric
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    if ckpt.get("scaler"):
        scaler.load_state_dict(ckpt["scaler"])
    set_rng_state(ckpt["rng"])
    state = TrainState.from_checkpoint(ckpt, best_metric)
    log.info(
        "resumed at step %d (epoch %d, batch %d of the epoch)",
        state.step,
        state.epoch,
        state.step_in_epoch,
    )
    return state


@dataclass
class FitResult:
    """How :meth:`Trainer.fit` ended."""

    step: int
    interrupted: bool
    metrics: dict[str, float]
    best: dict[str, Any]
    output_dir: Path


def saves_at(tc: Any, step: int) -> bool:
    """True when step ``step`` saves besides validating (``save_every``, ``keep_every``)."""
    return any(every and step % every == 0 for every in (tc.save_every, tc.keep_every))


class CheckpointSaver:
    """Writes ``last.pt`` (and ``best.pt``) into ``out`` from rank 0; every rank calls
    :meth:`save` and the others wait at a barrier, so no rank runs ahead of a save."""

    def __init__(self, out: Path, info: DistInfo, keep_every: int = 0) -> None:
        self.out = Path(out)
        self.info = info
        self.keep_every = keep_every
        self.saved_step = -1
        if info.is_main:  # a run killed inside a save left its temporary behind
            for name in ("last.pt", "best.pt"):
                for tmp in remove_stale_temporaries(self.out / name):
                    log.info("removed %s, left by a run that was killed while saving", tmp)

    def save(self, checkpoint: Any, step: int, best: dict[str, Any] | None = None) -> None:
        """``checkpoint`` is a callable returning the dict (built on rank 0 only);
        ``best`` (the new best record) also writes ``best.pt``; a multiple of
        ``keep_every`` also writes the step's weights as ``steps/step-<step>.pt``."""
        if self.info.is_main:
            state = checkpoint()
            path = atomic_save(state, self.out / "last.pt")
            msg = f"saved {path}"
            if best is not None:
                atomic_save(state, self.out / "best.pt")
                msg += f" and best.pt ({best['metric']} {best['value']:.4f})"
            if self.keep_every and step % self.keep_every == 0:
                kept = kept_step_path(self.out, step)
                kept.parent.mkdir(exist_ok=True)
                atomic_save(release_checkpoint(state, source=str(path)), kept)
                msg += f" and kept the weights as {kept.relative_to(self.out)}"
            log.info(msg)
        self.saved_step = step
        barrier(self.info)


def claim_run_dir(out: Path, cfg: Config, is_main: bool) -> contextlib.AbstractContextManager[Any]:
    """Rank 0: create the run directory, take its lock (:mod:`crnn.engine.runlock`: a
    second run into it is refused) and write ``config.yaml``; the returned context
    manager holds the lock until it exits. Other ranks: nothing."""
    if not is_main:
        return contextlib.nullcontext()
    out.mkdir(parents=True, exist_ok=True)
    lock = RunLock(out)
    lock.acquire()
    save_config(cfg, out / "config.yaml")
    return lock


def calibrate_best(trainer: Any) -> None:
    """Fit the confidence temperature of ``best.pt`` on the validation sets and store it
    there (``calibration``: temperature, calibration error before and after, samples).

    Every rank reads its shard of the validation sets with ``best.pt``'s weights (rank 0
    reads the file and sends it: on several nodes the run directory may be rank 0's
    disk alone); rank 0 gathers what they saw, fits, and writes; the others wait. See
    ``crnn.reading.calibration``."""
    from crnn.backends.torch import TorchBackend
    from crnn.engine.distributed import broadcast_from_main, gather_to_main
    from crnn.evaluation import evaluate
    from crnn.reading.calibration import TemperatureFit

    t = trainer
    path = t.out / "best.pt"
    barrier(t.info)  # rank 0 has written best.pt
    ckpt = load_checkpoint(path) if t.info.is_main and path.is_file() else None
    ckpt = broadcast_from_main(ckpt, t.info)
    if ckpt is None:
        return
    model, charset, spec = ModelBundle.from_checkpoint(ckpt, str(path))
    backend = TorchBackend(model, charset, spec, t.device, t.amp, t.cfg.train.channels_last)
    fit = TemperatureFit()
    for _, loader in t.val_sets:
        evaluate(backend, loader, calibrate=fit)
    parts = gather_to_main((fit.samples, fit.correct, fit.empty), t.info)
    if t.info.is_main:
        fit = TemperatureFit()
        for samples, correct, empty in parts:
            fit.samples += samples
            fit.correct += correct
            fit.empty += empty
        temperature = fit.fit()
        ckpt["calibration"] = {
            "temperature": temperature,
            "ece_before": fit.ece(1.0),
            "ece_after": fit.ece(temperature),
            "samples": len(fit.samples),
        }
        atomic_save(ckpt, path)
        log.info(
            "confidence calibration of best.pt on %d validation reads: temperature %.2f, "
            "calibration error %.3f -> %.3f",
            len(fit.samples),
            temperature,
            ckpt["calibration"]["ece_before"],
            ckpt["calibration"]["ece_after"],
        )
    barrier(t.info)


def bundle_model_state(model: torch.nn.Module) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class WeightAverage:
    """An exponential moving average of the model's weights (``train.ema_decay``),
    updated after every optimizer step: ``avg = decay * avg + (1 - decay) * weights``;
    BatchNorm statistics are copied. The decay warms up as ``min(decay, (1 + step) /
    (10 + step))``: a plain 0.999 still holds 37 % of the random initial weights at step
    1,000, and a model whose raw weights already read validated as CER 1.0. Validation,
    ``best.pt`` and releases use the
    average; training goes on with the raw weights."""

    def __init__(self, source: torch.nn.Module, decay: float, warmup: bool = True) -> None:
        import copy

        self.source, self.decay, self.warmup = source, decay, warmup
        self.model = copy.deepcopy(source).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @classmethod
    def create(
        cls,
        source: torch.nn.Module,
        decay: float,
        ckpt: dict[str, Any] | None,
        warmup: bool = True,
    ) -> WeightAverage | None:
        """None without an EMA; resumed from ``ckpt`` when it holds one. ``warmup=False``
        for weights that start trained (a fine-tune): the full decay from the first step."""
        if not decay:
            return None
        ema = cls(source, decay, warmup)
        if ckpt is not None and "ema" in ckpt:
            # With a fine-tune's weight mix, "model" is the mix and the EMA has its own key.
            own = ckpt.get("model_ema", ckpt["model"])
            load_state_dict_checked(ema.model, own, "the checkpoint's EMA")
        return ema

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Average in the weights after optimizer step ``step`` (0-based; resumes with it)."""
        decay = min(self.decay, (1.0 + step) / (10.0 + step)) if self.warmup else self.decay
        ours, theirs = self.model.state_dict(), self.source.state_dict()
        for name, avg in ours.items():
            w = theirs[name]
            if avg.is_floating_point() and name.split(".")[-1] not in (
                "running_mean",
                "running_var",
            ):
                avg.lerp_(w.to(avg.dtype), 1.0 - decay)
            else:
                avg.copy_(w)
