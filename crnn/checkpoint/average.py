"""Averaging the weights of several checkpoints of one model.

The mean of points near one training path (a run's last kept steps, ``train.keep_every``)
or of runs fine-tuned from one start (a "model soup") often reads more steadily than any
one of them: stochastic weight averaging (Izmailov et al., 2018), model soups (Wortsman
et al., 2022). Every tensor is averaged, BatchNorm statistics included; counters such as
``num_batches_tracked`` come from the first file. Files that do not describe the same
network and alphabet are refused, naming what differs.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import torch

from crnn.checkpoint.format import CheckpointError, model_from_checkpoint

log = logging.getLogger(__name__)


def kept_step_path(run_dir: str | Path, step: int) -> Path:
    """Where ``train.keep_every`` keeps step ``step``'s weights (names sort by step)."""
    return Path(run_dir) / "steps" / f"step-{step:08d}.pt"


def kept_steps(run_dir: str | Path) -> list[Path]:
    """The steps ``run_dir`` kept (:func:`kept_step_path`), oldest first."""
    return sorted(kept_step_path(run_dir, 0).parent.glob("step-*.pt"))


def expand_sources(sources: list[str], last: int | None = None) -> list[str]:
    """Files to average: a run directory stands for the steps it kept
    (``steps/step-*.pt``, oldest first); ``last`` keeps the last that many of the whole
    list. Raises ``ValueError`` for a directory that kept none."""
    files: list[str] = []
    for src in sources:
        if Path(src).is_dir():
            kept = [str(p) for p in kept_steps(src)]
            if not kept:
                raise ValueError(
                    f"{src} is a directory without kept steps (steps/step-*.pt): train with "
                    "--set train.keep_every=N to keep them, or name checkpoint files"
                )
            files += kept
        else:
            files.append(src)
    if last is not None:
        if last < 2:
            raise ValueError(f"--last {last}: expected 2 or more checkpoints to average")
        files = files[-last:]
    return files


def parse_shares(text: str | None, n: int) -> list[float]:
    """``"3,7"`` -> ``[0.3, 0.7]``: one part per file, scaled to sum to 1; ``None``:
    equal shares. Raises ``ValueError`` saying what was received and what is expected."""
    if text is None:
        return [1.0 / n] * n
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--shares {text!r}: expected {n} comma-separated numbers, one per file, "
            "e.g. 3,7 (scaled to sum to 1)"
        ) from None
    if len(parts) != n:
        raise ValueError(f"--shares {text!r} gives {len(parts)} parts for {n} files; give one each")
    if any(not math.isfinite(p) or p < 0 for p in parts) or sum(parts) <= 0:
        raise ValueError(f"--shares {text!r}: parts must be >= 0 and not all 0")
    total = sum(parts)
    return [p / total for p in parts]


def average_checkpoints(
    ckpts: list[tuple[str, dict[str, Any]]], shares: list[float]
) -> dict[str, Any]:
    """A checkpoint whose weights are the ``shares``-weighted mean of the inputs'.

    ``ckpts`` are ``(source name, loaded checkpoint)`` pairs: training checkpoints (their
    ``model``, the EMA where the run kept one), release files or kept steps, in any mix
    of float32 and float16. The header, calibration and training config come from the
    first; ``averaged`` lists every input with its step and share (release files carry it
    in their provenance). Raises :class:`CheckpointError` when the files differ in
    architecture, size or alphabet."""
    if len(ckpts) < 2:
        raise CheckpointError(f"averaging needs at least 2 checkpoints, got {len(ckpts)}")
    if len(shares) != len(ckpts):
        raise CheckpointError(f"{len(shares)} shares for {len(ckpts)} checkpoints")
    bundles = [model_from_checkpoint(ck, src) for src, ck in ckpts]
    first_src, first = ckpts[0]
    head = bundles[0].header()
    for (src, _), bundle in zip(ckpts[1:], bundles[1:]):
        other = bundle.header()
        for key, what in (("model_config", "architecture"), ("charset", "alphabet")):
            if other[key] != head[key]:
                diff = sorted(
                    k
                    for k in set(head[key]) | set(other[key])
                    if head[key].get(k) != other[key].get(k)
                )
                raise CheckpointError(
                    f"{src} has a different {what} from {first_src} ({key} differs in "
                    f"{', '.join(diff)}): only checkpoints of one model can be averaged"
                )
        if other["image"] != head["image"]:
            log.warning(
                "%s: image spec differs from %s's; the average keeps the first", src, first_src
            )
    states = [b.model.state_dict() for b in bundles]
    mean: dict[str, torch.Tensor] = {}
    for k, v in states[0].items():
        if v.is_floating_point():
            mean[k] = sum(w * s[k].float() for w, s in zip(shares, states))
        else:
            mean[k] = v.clone()
    out = {**bundles[0].header(mean)}
    for key in ("calibration", "config"):
        if key in first:
            out[key] = first[key]
    if "config" not in first and "release" in first:
        out["release"] = {k: v for k, v in first["release"].items() if k == "synth"}
    out["step"] = max(step_of(ck) for _, ck in ckpts)
    out["averaged"] = [
        {"source": Path(src).name, "step": step_of(ck), "share": round(w, 6)}
        for (src, ck), w in zip(ckpts, shares)
    ]
    return out


def step_of(ckpt: dict[str, Any]) -> int:
    """The training step a checkpoint (or the release made from it) was saved at."""
    return int(ckpt.get("step", ckpt.get("release", {}).get("step", 0)))
