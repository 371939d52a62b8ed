"""Clusters: SLURM's srun tasks join one run (rank, world, rendezvous from SLURM_*), a
run directory takes one run at a time, two ranks sharing one GPU get a clear message
instead of NCCL's, errors while a rank sets up reach the launcher's report, and the
dry run and DataParallel refusals describe what would really run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, base_overrides

from crnn.checkpoint import load_checkpoint
from crnn.config import ConfigError, load_config
from crnn.engine.distributed import expand_hostlist, first_host, slurm_env
from crnn.engine.launch import Devices, run_training
from crnn.engine.runlock import LOCK_NAME, RunDirectoryBusy, RunLock

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
for var in ("CRNN_FAULT_INJECT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(var, None)


# ---- SLURM -----------------------------------------------------------------------------


def test_slurm_host_lists_and_variables():
    assert first_host("gpu[03-05,9],cpu1") == "gpu03"
    assert first_host("node17") == "node17"
    assert first_host("a[001-004]-ib,b") == "a001-ib"
    # Several bracket groups in one name multiply out, as `scontrol show hostnames` does.
    assert first_host("rack[1-2]-node[01-04]") == "rack1-node01"
    assert list(expand_hostlist("rack[1-2]-node[01-02],login")) == [
        "rack1-node01",
        "rack1-node02",
        "rack2-node01",
        "rack2-node02",
        "login",
    ]
    assert list(expand_hostlist("gpu[03-05,9],cpu1")) == ["gpu03", "gpu04", "gpu05", "gpu9", "cpu1"]
    assert list(expand_hostlist("n[8-10]")) == ["n8", "n9", "n10"]
    step = {
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_NODELIST": "gpu[12-13]",
        "SLURM_JOB_ID": "4242424",
    }
    assert slurm_env(step) == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "gpu12",
        "MASTER_PORT": str(15000 + 2424),
    }
    # A batch script (no srun step) or a one-task step is one process, not a rank.
    assert slurm_env({k: v for k, v in step.items() if k != "SLURM_STEP_NUM_TASKS"}) == {}
    assert slurm_env({**step, "SLURM_STEP_NUM_TASKS": "1"}) == {}
    assert slurm_env({**step, "MASTER_PORT": "29500"})["MASTER_PORT"] == "29500"


@pytest.mark.slow
def test_srun_tasks_join_one_run_instead_of_writing_one_directory_twice(word_lmdb, tmp_path):
    """What `srun --ntasks=2 tools/train.py` starts: two copies with SLURM's variables
    and no RANK/WORLD_SIZE. They must form one DDP run: one writer, world size 2."""
    out = tmp_path / "run"
    port = 15000 + int(str(os.getpid())[-4:])
    procs, logs = [], []
    for task in range(2):
        env = {
            **ENV,
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_PROCID": str(task),
            "SLURM_LOCALID": str(task),
            "SLURM_STEP_NODELIST": "localhost",
            "SLURM_JOB_ID": str(port - 15000),
            "OMP_NUM_THREADS": "1",
        }
        logs.append(tmp_path / f"task{task}.log")
        with open(logs[-1], "w") as log:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(ROOT / "tools" / "train.py"),
                        "--gpus",
                        "cpu",
                        "--set",
                        *base_overrides(word_lmdb, out, "train.max_steps=4"),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
            )
    for p in procs:
        p.wait(timeout=240)
    texts = [p.read_text() for p in logs]
    assert [p.returncode for p in procs] == [0, 0], texts[0][-2000:] + texts[1][-2000:]
    assert "world size 2" in texts[0] and "finished 4 steps" in texts[0]
    assert "run directory" not in texts[1] and "saved" not in texts[1]
    assert load_checkpoint(out / "last.pt")["step"] == 4


# ---- one run per directory -------------------------------------------------------------


def test_a_second_run_into_a_busy_directory_is_refused_and_a_stale_lock_taken(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK_NAME).write_text(
            json.dumps({"host": os.uname().nodename, "pid": other.pid, "started": time.time()})
        )
        with pytest.raises(RunDirectoryBusy, match=rf"another training run \(pid {other.pid} on"):
            RunLock(tmp_path).acquire()
    finally:
        other.kill()
        other.wait()
    with RunLock(tmp_path) as lock:  # its process is gone: stale, taken over
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
        assert lock.path.exists()
    assert not (tmp_path / LOCK_NAME).exists()
    # Another host's lock counts until its heartbeat stops.
    (tmp_path / LOCK_NAME).write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": 0}))
    with pytest.raises(RunDirectoryBusy, match="on elsewhere"):
        RunLock(tmp_path).acquire()
    old = time.time() - 3600
    os.utime(tmp_path / LOCK_NAME, (old, old))
    RunLock(tmp_path).acquire()


def test_training_into_a_directory_another_run_holds_exits_2(word_lmdb, tmp_path, capsys):
    from ckpt_helpers import run_main

    from crnn.cli import train as train_cli

    out = tmp_path / "run"
    out.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK_NAME).write_text(
            json.dumps({"host": os.uname().nodename, "pid": other.pid, "started": time.time()})
        )
        rc, _, err = run_main(
            train_cli.main, "--set", *base_overrides(word_lmdb, out), capsys=capsys
        )
    finally:
        other.kill()
        other.wait()
    assert rc == 2 and "another training run" in err and "Traceback" not in err
    assert not (out / "config.yaml").exists()  # the other run's files are untouched


# ---- GPUs and set-up failures, driven with mocks -----------------------------------------


def test_two_ranks_on_one_gpu_get_a_clear_message_not_nccls(monkeypatch):
    import torch.distributed as dist

    from crnn.engine.distributed import init_distributed

    for k, v in {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: None)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)

    def nccl_init(**kw):  # what NCCL says when two ranks share a GPU
        raise dist.DistBackendError(
            "NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage, NCCL version 2.21.5\n"
            "ncclInvalidUsage: ... Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
            "device 1000"
        )

    monkeypatch.setattr(dist, "init_process_group", nccl_init)
    with pytest.raises(
        RuntimeError, match=r"ranks 0 and 1 of this machine were given the same GPU"
    ):
        init_distributed([torch.device("cuda", 0)])


def test_an_error_while_a_rank_sets_up_is_recorded_for_the_launcher(
    word_lmdb, tmp_path, monkeypatch
):
    """No GPU for local rank 1 (two listed, one visible): the launcher's report names the
    error instead of "exited with code 1 (no exception recorded)"."""
    err = tmp_path / "error.json"
    for k, v in {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "TORCHELASTIC_ERROR_FILE": str(err),
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path / "r"))
    with pytest.raises(RuntimeError, match="local rank 1 has no GPU"):
        run_training(cfg, Devices("cuda", [0], 1))
    assert "local rank 1 has no GPU" in json.loads(err.read_text())["message"]["message"]


def test_dataparallel_is_refused_on_the_cpu_and_sync_bn_under_it(word_lmdb, tmp_path):
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path, "dist.strategy=dp"))
    with pytest.raises(ConfigError, match="DataParallel.*needs CUDA GPUs.*--strategy none"):
        run_training(cfg, Devices("cpu", [], 1))
    with pytest.raises(ConfigError, match="sync_bn=true works with DDP only"):
        load_config(None, ["dist.strategy=dp", "dist.sync_bn=true"])


def test_the_dry_run_describes_the_run_that_will_start(word_lmdb, tmp_path, capsys, monkeypatch):
    from ckpt_helpers import run_main

    from crnn.cli import train as train_cli

    args = ["--dry-run", "--set", *base_overrides(word_lmdb, tmp_path / "d", "train.batch_size=16")]
    rc, out, err = run_main(train_cli.main, "--gpus", "cpu", "--nproc", "2", *args, capsys=capsys)
    assert rc == 0, err
    assert "cpu, 2 DDP processes (gloo)" in out
    assert re.search(
        r"batch\s+16 per optimizer step = 8 per device x 1 accumulation x 2 processes", out
    )
    rc, out, err = run_main(train_cli.main, "--strategy", "dp", *args, capsys=capsys)
    assert rc == 2 and "needs CUDA GPUs" in err and "Traceback" not in err
    # With GPUs, DataParallel's dry run gets its device list (it crashed without one).
    import crnn.engine.trainer as trainer_mod

    seen = {}

    class Stop(Exception):
        pass

    def fake_trainer(cfg, info, resume=None, device_ids=None):
        seen["device_ids"] = device_ids
        raise Stop

    monkeypatch.setattr(trainer_mod, "Trainer", fake_trainer)
    from crnn.engine import dryrun

    monkeypatch.setattr(dryrun, "init_distributed", lambda devices: None)
    cfg = load_config(None, [*base_overrides(word_lmdb, tmp_path / "e"), "dist.strategy=dp"])
    with pytest.raises(Stop):
        dryrun.dry_run(cfg, Devices("cuda", [0, 1], 1))
    assert seen["device_ids"] == [0, 1]


def test_a_bad_charset_file_is_one_message_before_any_rank_starts(word_lmdb, tmp_path, capsys):
    from ckpt_helpers import run_main

    from crnn.cli import train as train_cli

    bad = tmp_path / "char_std.txt"
    bad.write_text("blank\n" + "\n".join("abcdefghijklmnopqrst") + "\nuv\nw\n", encoding="utf-8")
    rc, _, err = run_main(
        train_cli.main,
        "--gpus",
        "cpu",
        "--nproc",
        "2",
        "--set",
        *base_overrides(word_lmdb, tmp_path / "r", f"data.charset={bad}"),
        capsys=capsys,
    )
    assert rc == 2 and "Traceback" not in err
    assert err.count("char_std.txt:22: expected one character per line, got 'uv'") == 1
    assert "starting 2 processes" not in err


def test_a_lock_lost_in_every_attempt_is_never_held_without_the_file(tmp_path, monkeypatch):
    # Other runs keep re-creating the lock between our attempts: we must give up with a
    # message, not go on (and start a heartbeat) without holding it.
    real_open = os.open

    def always_taken(path, flags, *a):
        if str(path).endswith(LOCK_NAME) and flags & os.O_EXCL:
            raise FileExistsError(path)
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", always_taken)
    lock = RunLock(tmp_path)
    with pytest.raises(RunDirectoryBusy, match="could not take"):
        lock.acquire()
    assert lock._thread is None


def test_breaking_a_stale_lock_never_deletes_a_peers_new_lock(tmp_path, monkeypatch):
    stale = tmp_path / LOCK_NAME
    stale.write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 7, "started": 0}))
    lock = RunLock(tmp_path)
    snap = lock._snapshot()
    assert lock._owner(snap) is None  # judged stale
    # Meanwhile a peer broke it and created its own, live lock.
    stale.unlink()
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stale.write_text(json.dumps({"host": os.uname().nodename, "pid": peer.pid, "started": 1}))
        lock._break(snap)  # our late break must leave the peer's lock alone
        assert json.loads(stale.read_text())["pid"] == peer.pid
        with pytest.raises(RunDirectoryBusy, match=f"pid {peer.pid}"):
            lock.acquire()
    finally:
        peer.kill()
        peer.wait()
