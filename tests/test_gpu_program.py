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
        [sys.executable, str(ROOT / "dev" / "gpu_program.py"), *args, "--dry-run"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def _failed_parts(r: subprocess.CompletedProcess[str]) -> str:
    """The end of the output: the stage repeats each failed part's last lines there."""
    return r.stdout[-8000:] + r.stderr[-2000:]


@pytest.mark.slow
def test_stage1_dry_run_runs_the_tier_and_every_benchmark(tmp_path):
    r = _stage("stage1", "--out", str(tmp_path))
    assert r.returncode == 0, _failed_parts(r)
    assert json.loads((tmp_path / "stage1.json").read_text()) == {
        "env": 0,
        "gpu tier": 0,
        "bench": 0,
        "parallel": 0,
        "data image": 0,
        "data prepared": 0,
        "wide": 0,
    }
    back = {p.name for p in tmp_path.iterdir()}
    assert {"env.json", "gpu_tier.xml", "bench_gpu.json", "parallel.json", "extra.json"} <= back
    extra = json.loads((tmp_path / "extra.json").read_text())
    assert all(extra[k] for k in ("data_image", "data_prepared", "wide_charset"))
    assert len(back) <= 8  # what the device tool brings back
    rows = json.loads((tmp_path / "bench_gpu.json").read_text())["rows"]
    assert {r["section"] for r in rows} >= {"train", "e2e", "infer"}


def test_stage1_only_runs_the_parts_named(tmp_path):
    r = _stage("stage1", "--out", str(tmp_path), "--only", "wide")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads((tmp_path / "stage1.json").read_text()) == {"env": 0, "wide": 0}
    r = _stage("stage1", "--out", str(tmp_path), "--only", "tier,speed")
    assert r.returncode != 0 and "expected some of tier,bench,parallel,data,wide" in r.stderr


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
        assert step > done_steps, (
            f"a chunk did not advance the run (step {step}):\n{r.stdout[-2000:]}"
        )
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
    import time

    gp = _program()
    codes = gp.Progress(tmp_path / "stage1.json")
    codes["first"] = gp.run([sys.executable, "-c", "print('ok')"], tmp_path / "log", check=False)
    t0 = time.monotonic()
    silent = [
        sys.executable,
        "-c",
        "import time, subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)",
    ]
    codes["hang"] = gp.run(silent, tmp_path / "log", timeout=2, check=False)
    assert time.monotonic() - t0 < 15
    assert json.loads((tmp_path / "stage1.json").read_text()) == {"first": 0, "hang": 124}
    assert "killed after 2 s" in (tmp_path / "log").read_text()


def test_a_failed_part_s_own_last_lines_are_kept_for_the_end_of_the_stage(tmp_path):
    """The end of a stage repeats what each failed part printed last: the tail of the whole
    output (all a device call or CI shows) holds only the last part, which may have passed."""
    gp = _program()
    codes = gp.Progress(tmp_path / "stage1.json")
    fail = [sys.executable, "-c", "print('the cause: port taken'); raise SystemExit(3)"]
    codes["parallel"] = gp.run(fail, check=False)
    codes["wide"] = gp.run([sys.executable, "-c", "print('fine')"], check=False)
    said = codes.failed_output()
    assert "parallel FAILED (exit 3)" in said and "the cause: port taken" in said
    assert "wide" not in said and "fine" not in said


def _program():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_program", ROOT / "dev" / "gpu_program.py")
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)
    return gp


def test_slim_leaves_the_big_files_behind_and_unslim_restores_the_index(tmp_path):
    """The repository is over the device tool's 64 MiB: slim untracks and ignores the
    release files and training logs (kept on disk), unslim puts the index back as it was."""
    gp = _program()
    repo = tmp_path / "repo"
    for name in (
        "crnn/assets/models/crnn_zh-1.pt",
        "crnn/assets/models/crnn_en-1.pt",
        "crnn/assets/models/crnn_en-1.onnx",
        "docs/training/run/tb/events",
        "src.py",
    ):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)

    def git(*a):
        return subprocess.run(
            ["git", *a], cwd=repo, check=True, capture_output=True, text=True
        ).stdout

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "all")
    carried = lambda: sorted(git("ls-files", "-co", "--exclude-standard").split())  # noqa: E731
    every = carried()

    assert gp.slim_tree(repo)
    assert carried() == ["crnn/assets/models/crnn_en-1.pt", "src.py"]
    assert all((repo / p).exists() for p in every)
    assert gp.slim_tree(repo) is None  # twice is once

    assert len(gp.unslim_tree(repo)) == 3
    assert carried() == every
    assert git("status", "--porcelain") == ""
    assert gp.unslim_tree(repo) == []


def test_a_tier_that_passed_nothing_is_told_apart(tmp_path):
    """On a GPU machine a tier whose tests all skipped has not run (the first GPU slot
    found it so: the suite hid CUDA from itself)."""
    gp = _program()
    xml = tmp_path / "t.xml"
    xml.write_text(
        '<testsuites><testsuite><testcase name="a"><skipped message="no"/></testcase>'
        '<testcase name="b"/><testcase name="c"><failure message="x"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert gp.tier_passed(xml) == 1
    assert gp.tier_passed(tmp_path / "missing.xml") == 0


def test_the_gpu_tier_sees_cuda_and_every_other_run_hides_it():
    from conftest import gpu_tier_selected

    assert gpu_tier_selected("gpu") and gpu_tier_selected("gpu and not slow")
    assert not gpu_tier_selected("") and not gpu_tier_selected("not gpu")
    assert not gpu_tier_selected("not slow and not gpu")


def test_each_command_s_exit_code_and_seconds_are_printed(tmp_path, capsys):
    """Where the device minutes went, in the call's output tail."""
    gp = _program()
    gp.run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "log", check=False)
    assert re.search(
        r"\[gpu_program\] exit 3 after \d+\.\d s: python -c\n", capsys.readouterr().out
    )
