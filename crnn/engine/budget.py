"""Time-budgeted training: fit the whole schedule into a fixed number of minutes.

With ``train.time_budget_min`` (``--time-budget``) the trainer runs a short warm-up,
measures its steady speed (optimizer steps per second over a window of steps, a
validation, a save), then fixes ``train.max_steps`` so that the rest of the run (the
learning-rate decay, the validations every ``val_every`` steps, the final validation and
save) ends inside the budget, counted from the start of training. The decision is
logged and stored in the checkpoint (``budget``, and ``max_steps`` in the saved config),
so ``--resume`` continues the same schedule instead of deciding again.

Users with fixed allocations (a 30-minute GPU slot, a SLURM time limit) get a run that
uses the time and finishes its schedule, instead of guessing ``max_steps``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from crnn.engine.distributed import all_reduce_sum, any_rank

log = logging.getLogger(__name__)

# Steps before measuring: cuDNN autotuning, torch.compile, allocator growth, workers.
SKIP_STEPS = 5
# The measuring window: at least this many steps and this share of the budget (at most
# MEASURE_MAX_S seconds), so short budgets decide early and long ones measure well.
MEASURE_MIN_STEPS = 20
MEASURE_SHARE = 0.03
MEASURE_MAX_S = 30.0
# Kept free at the end: timing noise, logging, the process's exit.
SAFETY = 0.95


def plan_max_steps(
    budget_s: float,
    elapsed_s: float,
    step: int,
    step_s: float,
    val_s: float,
    save_s: float,
    val_every: int,
) -> int:
    """The largest ``max_steps`` whose remaining steps, validations (every
    ``val_every`` steps and one at the end, each with a save) fit into
    ``budget_s * SAFETY - elapsed_s``; at least ``step + 1``."""
    left = budget_s * SAFETY - elapsed_s
    best = step + 1
    lo, hi = step + 1, step + 1 + int(max(left, 0.0) / max(step_s, 1e-9)) + 1
    while lo <= hi:  # the cost is monotone in max_steps: bisect
        mid = (lo + hi) // 2
        vals = mid // val_every - step // val_every + (mid % val_every != 0)
        cost = (mid - step) * step_s + vals * (val_s + save_s)
        if cost <= left:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


class TimeBudget:
    """A trainer step callback that decides ``max_steps`` once (see the module
    docstring). Every rank decides from the same all-reduced timings."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.budget_s = trainer.cfg.train.time_budget_min * 60.0
        self.t_start = time.monotonic()  # set-up, data and model included
        self.first_step: int | None = None
        self.t_measure: float | None = None
        self.step_measure = 0

    @property
    def decided(self) -> bool:
        return bool(self.trainer.state.budget)

    def __call__(self, rank: int, step: int) -> None:
        """Called before each optimizer step ``step``."""
        if self.decided:
            return
        now = time.monotonic()
        if self.t_measure is None:
            self.first_step = step if self.first_step is None else self.first_step
            if step - self.first_step >= SKIP_STEPS:
                self.t_measure, self.step_measure = now, step
            return
        steps = step - self.step_measure
        window = min(MEASURE_MAX_S, MEASURE_SHARE * self.budget_s)
        ready = steps >= MEASURE_MIN_STEPS and now - self.t_measure >= window
        # Deciding runs collectives (validation, save): every rank must decide at once.
        if any_rank(ready, self.trainer.info):
            self._decide(step, (now - self.t_measure) / steps)

    def _decide(self, step: int, step_s: float) -> None:
        t = self.trainer
        tc = t.cfg.train
        t0 = time.monotonic()
        t.validate()
        val_s = time.monotonic() - t0
        t0 = time.monotonic()
        t.save()
        save_s = time.monotonic() - t0
        # Ranks agree on one plan: the mean of their timings (they run in lockstep).
        timings = torch.tensor([step_s, val_s, save_s, time.monotonic() - self.t_start],
                               dtype=torch.float64)  # fmt: skip
        mean = all_reduce_sum(timings, t.info) / t.info.world_size
        step_s, val_s, save_s, elapsed = mean.tolist()
        max_steps = plan_max_steps(
            self.budget_s, elapsed, step, step_s, val_s, save_s, tc.val_every
        )
        warmup = tc.warmup_steps
        if warmup > max_steps // 5 and warmup > step:
            tc.warmup_steps = max(step, max_steps // 5)
        tc.max_steps = max_steps
        t.state.budget = {
            "minutes": tc.time_budget_min, "decided_at_step": step,
            "step_s": round(step_s, 6), "validation_s": round(val_s, 3),
            "save_s": round(save_s, 3), "elapsed_s": round(elapsed, 1), "max_steps": max_steps,
        }  # fmt: skip
        if t.info.is_main:
            images = max_steps * tc.batch_size
            log.info(
                "time budget %.1f min: %.1f steps/s (%.0f images/s), validation %.1f s, save "
                "%.1f s, %.0f s used so far -> train.max_steps=%d (%s images)%s",
                tc.time_budget_min, 1 / step_s, tc.batch_size / step_s, val_s, save_s,
                elapsed, max_steps, f"{images:,}",
                f", warm-up shortened {warmup} -> {tc.warmup_steps} steps"
                if tc.warmup_steps != warmup else "",
            )  # fmt: skip
