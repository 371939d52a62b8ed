"""Time-budgeted training: fit the whole schedule into a fixed number of minutes.

With ``train.time_budget_min`` (``--time-budget``) the trainer runs a short warm-up,
measures its steady speed (optimizer steps per second over a window of steps, a
validation, a save), then fixes ``train.max_steps`` so that the rest of the run (the
learning-rate decay, the validations every ``val_every`` steps, the final validation and
save) ends inside the budget, counted from the start of training. The decision is
logged and stored in the checkpoint (``budget``, and ``max_steps`` in the saved config),
so ``--resume`` continues the same schedule instead of deciding again.

A machine's speed can change after the measurement (a shared node, another job on the
same cores for a while, thermal limits). The process that decided keeps timing its steps
(validations and saves left out) and every ``RECHECK_EVERY`` steps projects the end of
the run from the step time of its last ``RECENT_SHARE`` of the budget (at least
``RECENT_MIN_S`` seconds; the measurement opens that window, and the first projection
waits until it is full): a blip of a few seconds moves that little, a lasting change
moves it fully; a single step many times slower than the others (``PAUSE_FACTOR``: the
process was suspended) is time spent, left out of the step time. When the projection
passes the budget, it plans again and shortens
``max_steps``, so the run still ends inside; when it falls under ``LENGTHEN_BELOW`` of
the budget (the slowdown is over), it plans again and lengthens it. The learning-rate
decay follows the new length. Each re-plan is logged and kept in the checkpoint's
``budget`` (``replanned``).

Users with fixed allocations (a 30-minute GPU slot, a SLURM time limit) get a run that
uses the time and finishes its schedule, instead of guessing ``max_steps``.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import torch

from crnn.engine.distributed import all_reduce_sum, any_rank
from crnn.engine.state import saves_at

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
# After the decision: how often the end of the run is projected again (steps; every rank
# at the same steps, since a re-plan agrees on timings with a collective), and the fewest
# step times the window of recent ones keeps.
RECHECK_EVERY = 10
RECHECK_MIN_STEPS = 5
# The projection's step time: over the most recent timed steps that add up to this share
# of the budget (between RECENT_MIN_S and RECENT_MAX_S seconds).
RECENT_SHARE = 0.05
RECENT_MIN_S = 10.0
RECENT_MAX_S = 300.0
# A projected end under this share of the budget lengthens the run again (above SAFETY,
# where a plan puts it, so that noise does not re-plan back and forth).
LENGTHEN_BELOW = 0.9
# A re-plan in the same direction as the last one logged is logged again only after this
# many seconds (a slowdown that passes re-plans every RECHECK_EVERY steps as the window of
# recent step times recovers); every re-plan is kept in the state's ``replanned`` list, of
# which the newest REPLANS_KEPT stay.
REPLAN_LOG_S = 60.0
REPLANS_KEPT = 100
# A step that takes this many times the recent step time, after one that did not, is a
# pause (the process suspended: SIGSTOP, SLURM's scontrol suspend, Ctrl-Z; a stalled
# filesystem), not the machine's speed: its time counts as spent, but it stays out of the
# step time the end is projected from. Five minutes of SIGSTOP in a 95-minute run once
# made the planner cut train.max_steps from 4,330 to 446, one step past where it was,
# before the window recovered. A second slow step in a row counts: a lasting slowdown.
PAUSE_FACTOR = 20.0


def clock() -> float:
    """The budget's clock: seconds, monotonic (the tests run the budget on a simulated
    clock instead, so that a busy machine cannot fail them)."""
    return time.monotonic()


def remaining_s(
    step: int, max_steps: int, step_s: float, val_s: float, save_s: float, val_every: int
) -> float:
    """Seconds from ``step`` to the end of a ``max_steps`` run: its steps, and its
    validations (every ``val_every`` steps and one at the end), each with a save."""
    vals = max_steps // val_every - step // val_every + (max_steps % val_every != 0)
    return (max_steps - step) * step_s + vals * (val_s + save_s)


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
        if remaining_s(step, mid, step_s, val_s, save_s, val_every) <= left:
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
        self.t_start = clock()  # set-up, data and model included
        self.first_step: int | None = None
        self.t_measure: float | None = None
        self.step_measure = 0
        # After the decision: the previous call, and the steps timed since the last check.
        self.t_decided: float | None = None
        self.last: tuple[float, int] | None = None
        self.recent: collections.deque[float] = collections.deque()  # step times, newest last
        self.recent_s = 0.0
        self.window_s = min(RECENT_MAX_S, max(RECENT_MIN_S, RECENT_SHARE * self.budget_s))
        # The last re-plan logged: (clock, lengthened), and the re-plans left unlogged since.
        self.logged: tuple[float, bool] | None = None
        self.unlogged = 0
        self.paused = False  # the last step timed was a pause (PAUSE_FACTOR)

    @property
    def decided(self) -> bool:
        return bool(self.trainer.state.budget)

    def __call__(self, rank: int, step: int) -> None:
        """Called before each optimizer step ``step``."""
        now = clock()
        if self.decided:
            if self.t_decided is not None:  # this process decided: keep the run inside
                self._recheck(now, step)
            return
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
            self._decide(step, (now - self.t_measure) / steps, steps)

    def _decide(self, step: int, step_s: float, steps: int) -> None:
        t = self.trainer
        tc = t.cfg.train
        t0 = clock()
        t.validate()
        val_s = clock() - t0
        t0 = clock()
        t.save()
        save_s = clock() - t0
        # Ranks agree on one plan: the mean of their timings (they run in lockstep).
        timings = torch.tensor([step_s, val_s, save_s, clock() - self.t_start], dtype=torch.float64)
        mean = all_reduce_sum(timings, t.info) / t.info.world_size
        step_s, val_s, save_s, elapsed = mean.tolist()
        max_steps = plan_max_steps(
            self.budget_s, elapsed, step, step_s, val_s, save_s, tc.val_every
        )
        warmup = tc.warmup_steps
        self._set_max_steps(step, max_steps)
        t.state.budget = {
            "minutes": tc.time_budget_min,
            "decided_at_step": step,
            "step_s": round(step_s, 6),
            "validation_s": round(val_s, 3),
            "save_s": round(save_s, 3),
            "elapsed_s": round(elapsed, 1),
            "max_steps": max_steps,
        }
        if t.info.is_main:
            images = max_steps * tc.batch_size
            log.info(
                "time budget %.1f min: %.1f steps/s (%.0f images/s), validation %.1f s, save "
                "%.1f s, %.0f s used so far -> train.max_steps=%d (%s images)%s",
                tc.time_budget_min,
                1 / step_s,
                tc.batch_size / step_s,
                val_s,
                save_s,
                elapsed,
                max_steps,
                f"{images:,}",
                f", warm-up shortened {warmup} -> {tc.warmup_steps} steps"
                if tc.warmup_steps != warmup
                else "",
            )
        self.t_decided = clock()
        # The measurement opens the window of recent step times, so that the first
        # projections do not rest on a few steps (their time varies with the lines' widths).
        self.recent.extend([step_s] * steps)
        self.recent_s = step_s * steps

    def _set_max_steps(self, step: int, max_steps: int) -> None:
        """Fix the schedule's length; a warm-up longer than a fifth of it is shortened."""
        tc = self.trainer.cfg.train
        if tc.warmup_steps > max_steps // 5 and tc.warmup_steps > step:
            tc.warmup_steps = max(step, max_steps // 5)
        tc.max_steps = max_steps

    def _recheck(self, now: float, step: int) -> None:
        """Time the step just taken; every ``RECHECK_EVERY`` steps project the end of the
        run from the recent step time and re-plan when it ends past the budget or well
        inside it."""
        t = self.trainer
        tc = t.cfg.train
        if self.last is not None and step == self.last[1] + 1:
            # The interval also holds what followed that step: a validation and save
            # (priced separately in the plan) are left out of the step time.
            saved = step % tc.val_every == 0 or saves_at(tc, step)
            took = now - self.last[0]
            typical = self.recent_s / len(self.recent) if self.recent else t.state.budget["step_s"]
            paused = not saved and not self.paused and took >= PAUSE_FACTOR * typical
            if paused and t.info.is_main:
                log.warning(
                    "time budget: step %d took %.0f s, %.0fx the recent step time (the process "
                    "was paused or stalled): that time is spent, but the projection leaves it out",
                    step - 1,
                    took,
                    took / typical,
                )
            self.paused = paused
            if not saved and not paused:
                self.recent.append(took)
                self.recent_s += self.recent[-1]
                while (
                    len(self.recent) > RECHECK_MIN_STEPS
                    and self.recent_s - self.recent[0] >= self.window_s
                ):
                    self.recent_s -= self.recent.popleft()
        self.last = (now, step)
        # Every rank reaches this collective at the same steps: the gate is the step alone,
        # never a rank's own clock (ranks whose windows fill on different steps would
        # otherwise meet DDP's all-reduce with this one, and hang).
        if step % RECHECK_EVERY:
            return
        full = float(self.recent_s >= self.window_s and bool(self.recent))
        timings = torch.tensor(
            [self.recent_s / max(1, len(self.recent)), now - self.t_start, full],
            dtype=torch.float64,
        )
        total = all_reduce_sum(timings, t.info).tolist()
        # Projections wait until every rank's window is full: a step's time varies with its
        # lines' widths, and the first minutes speed up as the data workers' caches fill.
        if total[2] < t.info.world_size:
            return
        step_s, elapsed = total[0] / t.info.world_size, total[1] / t.info.world_size
        b = t.state.budget
        # What slowed the steps slows the validations and saves as much.
        slower = max(1.0, step_s / b["step_s"])
        val_s, save_s = b["validation_s"] * slower, b["save_s"] * slower
        end = elapsed + remaining_s(step, tc.max_steps, step_s, val_s, save_s, tc.val_every)
        if LENGTHEN_BELOW * self.budget_s <= end <= self.budget_s:
            return
        max_steps = plan_max_steps(
            self.budget_s, elapsed, step, step_s, val_s, save_s, tc.val_every
        )
        if max_steps == tc.max_steps:
            return
        longer = max_steps > tc.max_steps
        if self.logged is None or self.logged[1] != longer or now - self.logged[0] >= REPLAN_LOG_S:
            if t.info.is_main:
                (log.info if longer else log.warning)(
                    "time budget %.1f min: %.1f steps/s now (%.1f when planned); the run would end "
                    "%.0f s %s -> train.max_steps %d -> %d%s",
                    tc.time_budget_min,
                    1 / step_s,
                    1 / b["step_s"],
                    abs(end - self.budget_s),
                    "late" if end > self.budget_s else "early",
                    tc.max_steps,
                    max_steps,
                    f" ({self.unlogged} re-plan{'s' * (self.unlogged > 1)} since the last line)"
                    if self.unlogged
                    else "",
                )
            self.logged, self.unlogged = (now, longer), 0
        else:
            self.unlogged += 1
        replans = b.setdefault("replanned", [])
        replans.append({"at_step": step, "step_s": round(step_s, 6), "max_steps": max_steps})
        del replans[:-REPLANS_KEPT]
        b["max_steps"] = max_steps
        self._set_max_steps(step, max_steps)
