"""Preemption and failures as clusters deliver them: a scheduler's SIGTERM to the
launcher (our own, torchrun) or to a single-process run, with DataLoader workers; the
ranks save once and exit 130, and the run resumes exactly. A rank that dies is named as
the cause, the survivors as stopped, and survivors blocked waiting for it do not hold
the run for torch's 30 s."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, base_overrides

from crnn.checkpoint import load_checkpoint

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
ENV.pop("CRNN_FAULT_INJECT", None)
TRAIN = str(ROOT / "tools" / "train.py")


def _run_until(cmd: list[str], log_path: Path, step: int, sig: int, env: dict | None = None) -> int:
    """Start ``cmd``, send ``sig`` to its process alone (as a scheduler signals the job's
    main process) once the progress bar shows ``step``; the exit code."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            env=env or ENV,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            done = [int(n) for n in re.findall(r"(\d+)/100000", log_path.read_text())]
            if done and max(done) >= step:
                break
            time.sleep(0.1)
        assert proc.poll() is None, log_path.read_text()[-3000:]
        os.kill(proc.pid, sig)
        return proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _overrides(lmdb: Path, out: Path, *extra: str) -> list[str]:
    return [*base_overrides(lmdb, out, "train.max_steps=100000", *extra), "data.num_workers=1"]


def _assert_stopped_and_saved(text: str, out: Path) -> int:
    assert "DataLoader worker" not in text, text[-3000:]
    saved = [ln for ln in text.splitlines() if "saved " in ln]
    assert len(saved) == 1 and "last.pt" in saved[0], saved
    step = load_checkpoint(out / "last.pt")["step"]
    assert f"stopped at step {step}" in text and step >= 3, text[-3000:]
    assert not (out / ".run.lock").exists()  # released: the resume is not refused
    return step


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_our_launcher_saves_once_with_workers_and_resumes(word_lmdb, tmp_path, sig):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        TRAIN,
        "--gpus",
        "cpu",
        "--nproc",
        "2",
        "--set",
        *_overrides(word_lmdb, out),
    ]
    code = _run_until(cmd, tmp_path / "log.txt", 3, sig)
    text = (tmp_path / "log.txt").read_text()
    assert code == 130, text[-3000:]
    step = _assert_stopped_and_saved(text, out)
    assert "every rank was told to stop after saving" in text
    if sig == signal.SIGTERM:  # the run resumes where it stopped
        r = subprocess.run(
            [
                sys.executable,
                TRAIN,
                "--resume",
                str(out),
                "--gpus",
                "cpu",
                "--nproc",
                "2",
                "--until-step",
                str(step + 2),
            ],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert load_checkpoint(out / "last.pt")["step"] == step + 2


@pytest.mark.slow
def test_sigterm_to_torchrun_saves_once_with_workers(word_lmdb, tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        TRAIN,
        "--gpus",
        "cpu",
        "--set",
        *_overrides(word_lmdb, out),
    ]
    code = _run_until(cmd, tmp_path / "log.txt", 3, signal.SIGTERM)
    text = (tmp_path / "log.txt").read_text()
    # torchrun exits with its own code for a signal; what matters is what the ranks did.
    assert code != 0, text[-3000:]
    _assert_stopped_and_saved(text, out)


@pytest.mark.slow
def test_sigterm_to_a_single_process_run_saves_once_with_workers(word_lmdb, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, TRAIN, "--gpus", "cpu", "--set", *_overrides(word_lmdb, out)]
    code = _run_until(cmd, tmp_path / "log.txt", 3, signal.SIGTERM)
    text = (tmp_path / "log.txt").read_text()
    assert code == 130, text[-3000:]
    _assert_stopped_and_saved(text, out)


@pytest.mark.slow
def test_a_killed_rank_is_the_cause_and_a_survivor_blocked_on_it_stops_within_seconds(
    word_lmdb, tmp_path
):
    """Rank 1 is killed (SIGKILL) at step 4 with a data worker running; rank 0 then
    blocks where no signal handler can act (as a rank waits in NCCL for a dead peer).
    The launcher's SIGTERM must not read as rank 0's failure, and rank 0 must not hold
    the run for torch's 30 s: its watchdog ends it."""
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            TRAIN,
            "--gpus",
            "cpu",
            "--nproc",
            "2",
            "--set",
            *_overrides(word_lmdb, out, "train.save_every=2"),
        ],
        env={**ENV, "CRNN_FAULT_INJECT": "1:4:kill,0:4:hang"},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert r.returncode == 1, r.stderr[-3000:]
    (error,) = re.findall(r"distributed training failed: .*", r.stderr)
    cause, _, echoes = error.partition(". Then, as a consequence: ")
    assert re.search(r"rank 1 \(local rank 1, pid \d+\) was killed by signal SIGKILL", cause), error
    assert "rank 0" not in cause and "DataLoader" not in error, error
    assert re.search(r"rank 0 .*stopped", echoes), error
    injected = re.search(r"(\d\d):(\d\d):(\d\d) \[rank 1\] WARNING .*injecting", r.stderr)
    ended = re.search(
        r"(\d\d):(\d\d):(\d\d) ERROR crnn.train: distributed training failed", r.stderr
    )
    secs = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in (injected.groups(), ended.groups())]
    assert secs[1] - secs[0] < 20, (injected[0], ended[0], time.monotonic() - t0)
    assert load_checkpoint(out / "last.pt")["step"] == 4
