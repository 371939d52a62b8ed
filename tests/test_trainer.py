import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT

from crnn.checkpoint import load_checkpoint, model_from_checkpoint
from crnn.config import load_config
from crnn.engine.distributed import DistInfo
from crnn.engine.optim import lr_factor
from crnn.engine.trainer import Trainer
from crnn.io import temporary_path


def _train(overrides, resume=None):
    cfg = load_config(None, overrides)
    return Trainer(cfg, DistInfo(), resume=resume)


def test_tiny_run_learns_and_writes_self_describing_checkpoints(tiny_overrides):
    t = _train(
        [*tiny_overrides, "train.max_steps=40", "train.val_every=40", "train.warmup_steps=5"]
    )
    losses = []
    batches = t.batches()
    for _ in range(40):
        loss_sum, n = t.train_step(batches)
        losses.append(loss_sum.item() / n)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5
    res = _train(tiny_overrides).fit()
    out = res.output_dir
    assert (
        (out / "last.pt").is_file()
        and (out / "best.pt").is_file()
        and (out / "config.yaml").is_file()
    )
    assert any(p.name.startswith("events.out.tfevents") for p in (out / "tb").iterdir())
    ckpt = load_checkpoint(out / "last.pt")
    assert ckpt["step"] == 6 and ckpt["charset"]["chars"].startswith("0123")
    assert ckpt["image"]["height"] == 32 and ckpt["model_config"]["hidden"] == 16
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in ckpt["model"])
    assert {"optimizer", "scheduler", "rng", "best", "config"} <= set(ckpt)


def test_checkpoint_reload_gives_identical_outputs(tiny_overrides):
    t = _train(tiny_overrides)
    t.fit()
    model, charset, spec = model_from_checkpoint(load_checkpoint(t.out / "last.pt"))
    x = torch.randn(2, 1, 32, 64)
    t.model.eval()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), t.model(x), rtol=0, atol=0)
    assert charset == t.charset and spec == t.spec


def test_resume_continues_exactly(tiny_overrides, tmp_path):
    # Augmentation on, so the per-sample seeds are exercised too.
    base = [
        *tiny_overrides,
        "data.augment.enabled=true",
        "train.val_every=100",
        "train.save_every=3",
        "train.max_steps=6",
    ]
    full = _train([*base, f"train.output_dir={tmp_path / 'full'}"])
    full.fit()
    part = _train([*base, f"train.output_dir={tmp_path / 'part'}"])
    assert part.fit(stop_at_step=3).step == 3
    resumed = _train(
        [*base, f"train.output_dir={tmp_path / 'part'}"], resume=tmp_path / "part" / "last.pt"
    )
    assert resumed.state.step == 3
    assert resumed.scheduler.get_last_lr() == pytest.approx(
        [3e-3 * lr_factor(3, resumed.cfg.train)] * 2
    )
    resumed.fit()
    assert resumed.state.step == 6
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_resume_refuses_another_charset(tiny_overrides):
    t = _train(tiny_overrides)
    t.fit()
    from crnn.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match="charset"):
        _train([*tiny_overrides, "data.charset=alnum62"], resume=t.out / "last.pt")


def test_lr_schedule_warms_up_then_decays():
    cfg = load_config(
        None, ["train.warmup_steps=10", "train.max_steps=110", "train.min_lr_ratio=0.1"]
    ).train
    f = [lr_factor(s, cfg) for s in range(110)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert f[-1] == pytest.approx(0.1, abs=1e-3)


@pytest.mark.slow
def test_sigkill_at_any_moment_leaves_a_loadable_checkpoint(tiny_overrides, tmp_path):
    """SIGKILL a run that saves after every step, at two moments; what is on disk must
    load each time, and the second launch must resume from the first one's checkpoint."""
    out = tmp_path / "killed"
    args = [
        a
        for a in tiny_overrides
        if not a.startswith(("train.output_dir", "train.max_steps", "train.val_every"))
    ]
    args += [
        f"train.output_dir={out}",
        "train.max_steps=100000",
        "train.val_every=100000",
        "train.save_every=1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    fresh = [sys.executable, str(ROOT / "tools" / "train.py"), "--gpus", "cpu", "--set", *args]
    resume = [
        sys.executable,
        str(ROOT / "tools" / "train.py"),
        "--gpus",
        "cpu",
        "--resume",
        str(out),
    ]
    steps = []
    for cmd, extra_s in ((fresh, 1.0), (resume, 1.7)):
        before = (out / "last.pt").stat().st_mtime_ns if (out / "last.pt").exists() else 0
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 90
        while time.time() < deadline and not (
            (out / "last.pt").exists() and (out / "last.pt").stat().st_mtime_ns > before
        ):
            time.sleep(0.05)
        time.sleep(extra_s)  # mid-run, most likely inside a save
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ckpt = load_checkpoint(out / "last.pt")
        model_from_checkpoint(ckpt)
        steps.append(ckpt["step"])
        if cmd is fresh:
            # What a kill inside a save leaves (named as the writer names it, by a
            # process that is gone): the resumed run must clean it up.
            stale = temporary_path(out / "last.pt", pid=proc.pid)
            stale.write_bytes(b"torn")
    assert steps[1] > steps[0] >= 1  # the second launch resumed and went on
    assert not stale.exists()
    # Whatever the second kill interrupted, only whole files and writer temporaries
    # (which the next start removes) are there: last.pt was never written in place.
    # (The run lock a killed run leaves is stale and taken over: the resume just did.)
    assert {p.name for p in out.iterdir()} <= {
        "last.pt",
        "best.pt",
        "config.yaml",
        "train.log",
        "tb",
        ".run.lock",
    } | {temporary_path(out / n, pid=proc.pid).name for n in ("last.pt", "best.pt")}


def test_training_mixes_synthetic_and_real_data(tiny_overrides):
    lmdb = next(a for a in tiny_overrides if a.startswith("data.train=")).split("=", 1)[1]
    path = lmdb.strip('[]"')
    t = _train([*tiny_overrides, f'data.train=["synth", "{path}"]', "data.train_ratios=[0.5, 0.5]"])
    batch = next(t.batches())
    assert len(batch["labels"]) == 8
    from conftest import WORDS

    real = [lbl for lbl in batch["labels"] if lbl in WORDS]
    assert 2 <= len(real) <= 6  # about half real words, half synthetic text
    res = t.fit()
    assert res.step == 6 and (res.output_dir / "last.pt").is_file()


def test_plan_fits_steps_validations_and_saves_into_the_budget():
    from crnn.engine.budget import SAFETY, plan_max_steps

    # 600 s budget, 60 s used, step 50 done; 0.1 s a step; validation + save 6 s, every 1000.
    m = plan_max_steps(600, 60, 50, 0.1, 5.0, 1.0, 1000)
    vals = m // 1000 - 50 // 1000 + (m % 1000 != 0)
    assert (m - 50) * 0.1 + vals * 6.0 <= 600 * SAFETY - 60 < (m + 1 - 50) * 0.1 + vals * 6.0
    assert m == 50 + int((600 * SAFETY - 60 - 5 * 6.0) / 0.1)  # 5 validations fit
    assert plan_max_steps(100, 200, 7, 0.1, 1, 1, 10) == 8  # over budget: one more step


@pytest.mark.slow
class SimClock:
    """The time budget's clock, simulated: each optimizer step costs ``step_s`` seconds
    times what ``load(step)`` says (1 by default), validations and saves nothing. The
    budget tests read it instead of the wall clock, so a busy machine cannot fail them."""

    def __init__(self, step_s: float) -> None:
        self.now, self.step_s = 0.0, step_s
        self.load = lambda step: 1.0

    def __call__(self) -> float:
        return self.now

    def tick(self, rank: int, step: int) -> None:  # a step callback, after the budget's
        self.now += self.step_s * self.load(step)


def _budget_run(tiny_overrides, monkeypatch, budget_min: float, step_s: float):
    """A trainer with a time budget on a simulated clock."""
    from crnn.engine import budget

    clock = SimClock(step_s)
    monkeypatch.setattr(budget, "clock", clock)
    args = [
        *tiny_overrides,
        "train.max_steps=100000",
        "train.val_every=40",
        "train.log_every=50",
        f"train.time_budget_min={budget_min}",
    ]
    t = _train(args)
    t.step_callbacks.append(clock.tick)
    return t, clock


def test_time_budget_decides_max_steps_and_resume_keeps_it(
    tiny_overrides, tmp_path, caplog, monkeypatch
):
    import logging

    caplog.set_level(logging.INFO)
    budget_min = 0.25
    t, clock = _budget_run(tiny_overrides, monkeypatch, budget_min, step_s=0.1)
    res = t.fit()
    decided = t.state.budget
    assert decided and decided["max_steps"] == res.step == t.cfg.train.max_steps < 100000
    assert decided["step_s"] == pytest.approx(0.1)
    # It plans to use the budget, less the safety margin, and ends inside it.
    assert budget_min * 60 * 0.9 <= clock.now <= budget_min * 60, clock.now
    assert "time budget 0.2 min" in caplog.text or "time budget 0.3 min" in caplog.text
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert ckpt["budget"] == decided and ckpt["config"]["train"]["max_steps"] == res.step
    # Resumed from a checkpoint of that run: the same schedule, no new decision.
    from crnn.config import config_from_dict

    cfg = config_from_dict(ckpt["config"])  # as --resume reads it
    resumed = Trainer(cfg, DistInfo(), resume=tmp_path / "run" / "last.pt")
    assert resumed.state.budget == decided and resumed.cfg.train.max_steps == res.step


def _six_second_budget_run(tiny_overrides, monkeypatch):
    """A 6 s budget at 0.05 s a step, whose step time is judged over the last 0.5 s (5 %
    of the budget, at least 10 s, in a real run: 225 s of a 75-minute one)."""
    from crnn.engine import budget

    monkeypatch.setattr(budget, "RECENT_MIN_S", 0.5)
    t, clock = _budget_run(tiny_overrides, monkeypatch, 0.1, step_s=0.05)
    return t, clock, 0.1


def test_a_run_that_slows_down_after_the_budget_decision_is_shortened_to_stay_inside(
    tiny_overrides, tmp_path, caplog, monkeypatch
):
    import logging

    caplog.set_level(logging.INFO)
    t, clock, budget_min = _six_second_budget_run(tiny_overrides, monkeypatch)
    planned = {}

    def slow_down(step):  # another job takes the cores once the plan is made
        if not t.state.budget:
            return 1.0
        planned.setdefault("max_steps", t.state.budget["max_steps"])
        return 3.0

    clock.load = slow_down
    res = t.fit()
    replans = t.state.budget["replanned"]
    assert res.step == t.cfg.train.max_steps == t.state.budget["max_steps"] < planned["max_steps"]
    assert (
        replans[-1]["max_steps"] == res.step
        and max(r["step_s"] for r in replans) > 2 * t.state.budget["step_s"]
    )
    assert "steps/s now" in caplog.text and "late -> train.max_steps" in caplog.text
    # Without the re-plan the last four fifths of the budget take three times as long.
    assert clock.now <= budget_min * 60 * 1.05, clock.now
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert (
        ckpt["budget"]["replanned"] == replans and ckpt["config"]["train"]["max_steps"] == res.step
    )


def test_a_blip_of_slow_steps_after_the_budget_decision_does_not_cut_the_run_short(
    tiny_overrides, tmp_path, caplog, monkeypatch
):
    import logging

    caplog.set_level(logging.INFO)
    t, clock, budget_min = _six_second_budget_run(tiny_overrides, monkeypatch)
    planned = {}

    def blip(step):  # another job takes the cores for 15 steps, then leaves
        if not t.state.budget:
            return 1.0
        first = planned.setdefault("step", step)
        planned.setdefault("max_steps", t.state.budget["max_steps"])
        return 3.0 if step - first < 15 else 1.0

    clock.load = blip
    res = t.fit()
    # Shortened while the blip filled the window, lengthened again once it had passed:
    # the run loses the steps the blip took (15 steps at 3x: 30 steps' time), no more,
    # and uses its time (shortened for good it would end at about 0.7 of the budget).
    assert len(t.state.budget.get("replanned", [])) >= 2, t.state.budget
    assert res.step >= planned["max_steps"] - 2 * 15 - 5, (res.step, planned, t.state.budget)
    assert budget_min * 60 * 0.9 <= clock.now <= budget_min * 60, clock.now
    # One line when the blip shortens the run and one when it is lengthened again; the
    # re-plans that follow as the window of recent steps recovers are counted, not logged
    # (inside budget.REPLAN_LOG_S of the last line, in the same direction).
    lines = [r.getMessage() for r in caplog.records if "steps/s now" in r.getMessage()]
    replans = t.state.budget["replanned"]
    assert len(replans) > len(lines) and [("late" in m) for m in lines] == [True, False], (
        lines,
        replans,
    )


def test_a_pause_after_the_budget_decision_costs_its_own_time_and_no_more(
    tiny_overrides, tmp_path, caplog, monkeypatch
):
    """A process suspended for a while (SIGSTOP, SLURM's scontrol suspend) took one step
    of minutes: the planner read it as the machine's speed and cut train.max_steps to one
    step past where the run was. The pause is time spent, not a speed: the run loses the
    steps it could have taken meanwhile, and ends inside the budget."""
    import logging

    caplog.set_level(logging.INFO)
    t, clock, budget_min = _six_second_budget_run(tiny_overrides, monkeypatch)
    planned = {}

    def pause(step):  # suspended for 24 steps' time, once, 10 steps after the plan
        if not t.state.budget:
            return 1.0
        first = planned.setdefault("step", step)
        planned.setdefault("max_steps", t.state.budget["max_steps"])
        return 24.0 if step - first == 10 else 1.0

    clock.load = pause
    res = t.fit()
    assert "the process was paused or stalled" in caplog.text
    assert planned["max_steps"] - 24 - 5 <= res.step <= planned["max_steps"], (res.step, planned)
    assert budget_min * 60 * 0.9 <= clock.now <= budget_min * 60, clock.now


def test_a_non_finite_step_never_reaches_the_weights_and_too_many_stop_the_run(
    tiny_overrides, monkeypatch, caplog
):
    import logging

    from crnn.engine import parallel
    from crnn.engine.guards import TrainingError

    caplog.set_level(logging.WARNING)
    t = _train([*tiny_overrides, "train.max_nonfinite_steps=3"])
    real = parallel.ctc_loss_per_sample
    poison = {"on": False}

    def loss(*args):
        out = real(*args)
        return out * float("nan") if poison["on"] else out

    monkeypatch.setattr(parallel, "ctc_loss_per_sample", loss)
    batches = t.batches()
    t.train_module.train()
    t.train_step(batches)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}
    poison["on"] = True
    t.train_step(batches)  # skipped: the weights do not move
    for n, p in t.model.named_parameters():
        assert torch.equal(p, before[n]), n
    assert "not finite" in caplog.text and "Labels of its samples: '" in caplog.text
    t.train_step(batches)
    with pytest.raises(TrainingError, match="not finite for 3 steps in a row"):
        t.train_step(batches)
    poison["on"] = False


def test_the_all_blank_plateau_is_explained_once(caplog):
    import logging

    from crnn.config import load_config
    from crnn.engine.guards import BlankWatch

    caplog.set_level(logging.WARNING)
    w = BlankWatch(patience=2)
    cfg = load_config()
    w.after_validation({"empty_rate": 1.0}, 100, cfg, 33)
    w.after_validation({"empty_rate": 0.5}, 200, cfg, 33)  # reads something: reset
    w.after_validation({"empty_rate": 1.0}, 300, cfg, 33)
    assert "plateau" not in caplog.text
    w.after_validation({"empty_rate": 0.99}, 400, cfg, 33)
    assert caplog.text.count("all-blank plateau") == 1 and "train.lr=" in caplog.text
    w.after_validation({"empty_rate": 1.0}, 500, cfg, 33)
    assert caplog.text.count("all-blank plateau") == 1


def test_early_stopping_after_patience_validations_without_a_better_metric(tiny_overrides):
    # lr 0: nothing improves after the first validation.
    t = _train(
        [
            *tiny_overrides,
            "train.lr=0",
            "train.max_steps=30",
            "train.val_every=2",
            "train.early_stop_patience=2",
        ]
    )
    res = t.fit()
    assert res.step == 6 and t.state.best["step"] == 2  # validations at 2, 4, 6: stop
    assert load_checkpoint(t.out / "last.pt")["step"] == 6


def test_ema_weights_are_evaluated_saved_and_resumed(tiny_overrides, tmp_path):
    """With train.ema_decay the average is what validation scores and best.pt holds;
    training continues on the raw weights, and both come back on resume."""
    from crnn.engine.state import WeightAverage

    args = [*tiny_overrides, "train.ema_decay=0.9", "train.max_steps=4", "train.val_every=2"]
    t = _train(args)
    assert isinstance(t.ema, WeightAverage)
    t.fit()
    ckpt = load_checkpoint(t.out / "last.pt")
    raw = {k: v for k, v in t.model.state_dict().items()}
    avg = t.ema.model.state_dict()
    w = "cnn.conv0.weight"
    assert not torch.equal(raw[w], avg[w])  # the average lags the weights
    assert torch.equal(ckpt["model"][w], avg[w]) and torch.equal(ckpt["model_raw"][w], raw[w])
    resumed = _train(
        [*tiny_overrides, "train.ema_decay=0.9", "train.max_steps=5", "train.val_every=2"],
        resume=t.out / "last.pt",
    )
    assert torch.equal(resumed.model.state_dict()[w], raw[w])
    assert torch.equal(resumed.ema.model.state_dict()[w], avg[w])
    # An average of d * avg + (1 - d) * w after each step, d warming up to 0.9.
    before = {k: v.clone() for k, v in resumed.ema.model.state_dict().items()}
    resumed.train_module.train()
    resumed.train_step(resumed.batches())
    new_w = resumed.model.state_dict()[w]
    d = (1 + 4) / (10 + 4)  # step 4: still warming up
    torch.testing.assert_close(resumed.ema.model.state_dict()[w], d * before[w] + (1 - d) * new_w)


def test_the_ema_decay_warms_up_so_early_validation_sees_the_trained_weights():
    """A plain 0.999 still holds 37 % of the random initial weights after 1,000 steps
    (a Chinese run whose raw weights were learning validated as CER 1.0 there)."""
    from crnn.engine.state import WeightAverage

    src = torch.nn.Linear(3, 3)
    ema = WeightAverage(src, 0.999)
    with torch.no_grad():
        init = src.weight.clone()
        src.weight.add_(1.0)
    ema.update(0)  # decay 0.1: the average is almost the new weights
    torch.testing.assert_close(ema.model.weight, 0.1 * init + 0.9 * src.weight)
    with torch.no_grad():
        before = ema.model.weight.clone()
        src.weight.add_(1.0)
    ema.update(100_000)  # long after the warm-up: the configured decay
    torch.testing.assert_close(ema.model.weight, 0.999 * before + 0.001 * src.weight)


def test_validation_synchronises_the_ema_batchnorm_statistics_too(tiny_overrides, monkeypatch):
    """Under DDP the EMA copies each rank's own BatchNorm statistics; every rank must
    validate with rank 0's (what best.pt holds), like the raw model."""
    import crnn.engine.trainer as trainer_mod

    t = _train([*tiny_overrides, "train.ema_decay=0.9", "train.max_steps=2"])
    synced = []
    monkeypatch.setattr(trainer_mod, "sync_buffers", lambda m, info: synced.append(m))
    t.validate()
    assert t.ema.model in synced and t.model in synced


def test_compile_covers_the_cnn_in_one_graph_whatever_the_widths(tiny_overrides, monkeypatch):
    """train.compile compiles the CNN alone (Dynamo cannot trace the LSTMs: compiling the
    whole model split the graph there), without graph breaks from activation
    checkpointing, and widths cost one recompile, not one per width. Traced on the CPU
    with Dynamo's eager backend (the graphs are the same as inductor's)."""
    import functools

    import torch._dynamo
    from torch._dynamo.utils import counters

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch._dynamo.reset()
    counters.clear()
    t = _train([*tiny_overrides, "train.compile=true", "train.grad_checkpoint=true"])
    batches = t.batches()
    t.train_module.train()
    widths = set()
    for _ in range(12):
        b = next(batches)
        widths.add(b["images"].shape[-1])
        t.train_step(iter([b]))
    torch._dynamo.reset()
    assert len(widths) >= 3, widths
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
    from crnn.model import CRNN

    assert isinstance(t.model, CRNN) and not hasattr(t.model, "_features")


def test_time_budget_rechecks_meet_in_their_collective_on_the_same_steps_on_every_rank(monkeypatch):
    """Two ranks whose windows of recent step times fill on different steps (their clocks
    differ) still enter the re-check's all-reduce on the same steps: a rank that skipped
    it would leave the other waiting in it while it enters DDP's (a hang)."""
    from types import SimpleNamespace

    from crnn.engine import budget

    def rank(step_s: float):
        train = SimpleNamespace(
            time_budget_min=10.0,
            val_every=1000,
            save_every=0,
            keep_every=0,
            max_steps=500,
            warmup_steps=0,
        )
        trainer = SimpleNamespace(
            cfg=SimpleNamespace(train=train),
            info=SimpleNamespace(world_size=2, is_main=False),
            state=SimpleNamespace(
                budget={"step_s": 0.1, "validation_s": 0.0, "save_s": 0.0, "max_steps": 500}
            ),
        )
        b = budget.TimeBudget(trainer)
        b.t_decided, b.t_start = 0.0, 0.0
        return b, step_s

    entered: dict[int, list[int]] = {0: [], 1: []}
    current = {"rank": 0, "step": 0}
    monkeypatch.setattr(
        budget,
        "all_reduce_sum",
        lambda t, info: entered[current["rank"]].append(current["step"]) or t * 2,
    )
    ranks = [rank(0.1), rank(0.5)]  # rank 1's window (30 s) fills five times sooner
    for step in range(1, 400):
        for r, (b, step_s) in enumerate(ranks):
            current.update(rank=r, step=step)
            b._recheck(step * step_s, step)
    assert entered[0] == entered[1] == list(range(10, 400, 10))


def test_off_a_terminal_the_bar_is_a_log_line_per_interval_and_on_one_a_bar(
    tiny_overrides, monkeypatch, capsys, caplog
):
    """A log file or SLURM's output gets one line per ``train.log_every`` steps (not the
    bar's raw redraws); a terminal gets the bar, with validation's own bar beside it."""
    import logging
    import re

    from crnn.engine import logging as run_logging

    caplog.set_level(logging.INFO, logger="crnn.engine.logging")
    pattern = r"step (\d+)/6 loss [\d.]+ lr \S+ \d+ images/s"
    _train([*tiny_overrides, "train.log_every=2"]).fit()
    assert re.findall(pattern, caplog.text) == ["2", "4", "6"]
    assert "train:" not in capsys.readouterr().err  # no bar drawn

    caplog.clear()
    monkeypatch.setattr(run_logging, "on_terminal", lambda: True)
    _train(
        [
            *tiny_overrides,
            "train.log_every=2",
            "train.output_dir=" + str(caplog_dir(tiny_overrides)),
        ]
    ).fit()
    assert not re.findall(pattern, caplog.text)
    err = capsys.readouterr().err
    assert "train:" in err and "validation" in err


def caplog_dir(overrides: list[str]) -> str:
    run = next(o for o in overrides if o.startswith("train.output_dir="))
    return run.split("=", 1)[1] + "_tty"
