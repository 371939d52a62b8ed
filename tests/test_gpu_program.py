"""The GPU program's CPU dry run: every stage's wiring (commands, flags, files that come
back) is checked here, so that a typo never costs GPU time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT


def _stage(*args: str) -> subprocess.CompletedProcess[str]:
    # One torch thread in every command it starts: the suite runs two tests at a time on
    # two cores, and a training subprocess on two threads beside them made this 4x slower.
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_program.py"), *args, "--dry-run"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


@pytest.mark.slow
def test_stage1_dry_run_runs_the_tier_and_every_benchmark(tmp_path):
    r = _stage("stage1", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads((tmp_path / "stage1.json").read_text()) == {
        "env": 0, "gpu tier": 0, "bench": 0, "parallel": 0, "data image": 0,
        "data prepared": 0, "wide": 0,
    }  # fmt: skip
    back = {p.name for p in tmp_path.iterdir()}
    assert {"env.json", "gpu_tier.xml", "bench_gpu.json", "parallel.json", "extra.json"} <= back
    extra = json.loads((tmp_path / "extra.json").read_text())
    assert all(extra[k] for k in ("data_image", "data_prepared", "wide_charset"))
    assert len(back) <= 8  # what the device tool brings back
    rows = json.loads((tmp_path / "bench_gpu.json").read_text())["rows"]
    assert {r["section"] for r in rows} >= {"train", "e2e", "infer"}


@pytest.mark.slow
def test_stage2_dry_run_trains_in_chunks_then_evaluates_releases_and_exports(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    # Each call trains one --chunk-min chunk (wall clock), then the next resumes. How many
    # chunks the schedule takes depends on the machine's load (5 were once too few on a
    # loaded machine), so go on while every call moves the run forward.
    done_steps = -1
    for _ in range(30):
        r = _stage("stage2", "--out", str(out), "--run", str(run))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        if "stage2 done" in r.stdout:
            break
        m = re.search(r"stage2: step (\d+) of \d+", r.stdout)
        assert m, f"neither done nor a step count:\n{r.stdout[-2000:]}"
        step = int(m.group(1))
        assert step > done_steps, f"a chunk did not advance the run (step {step}):\n{r.stdout[-2000:]}"
        done_steps = step
    assert "stage2 done" in r.stdout
    back = sorted(p.name for p in out.iterdir())
    assert len(back) <= 8
    assert any(n.startswith("crnn_en-") and n.endswith(".pt") for n in back)
    assert any(n.endswith(".onnx") for n in back)
    rows = json.loads((out / "eval.json").read_text())
    assert [r["dataset"] for r in rows] == ["ic13_857", "svt_647"]
    budget = __import__("torch").load(run / "last.pt", weights_only=True)["budget"]
    assert budget["max_steps"] > 0 and budget["minutes"] > 0


def test_a_silent_hang_is_killed_on_time_and_the_progress_so_far_is_kept(tmp_path):
    """The timeout holds without output (it was checked only when a line was printed, so
    a silent hang used up the whole device call), and each step's code is on disk at once."""
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("gpu_program", ROOT / "tools" / "gpu_program.py")
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)
    codes = gp.Progress(tmp_path / "stage1.json")
    codes["first"] = gp.run([sys.executable, "-c", "print('ok')"], tmp_path / "log", check=False)
    t0 = time.monotonic()
    silent = [sys.executable, "-c", "import time, subprocess, sys; "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]
    codes["hang"] = gp.run(silent, tmp_path / "log", timeout=2, check=False)
    assert time.monotonic() - t0 < 15
    assert json.loads((tmp_path / "stage1.json").read_text()) == {"first": 0, "hang": 124}
    assert "killed after 2 s" in (tmp_path / "log").read_text()
