"""Multi-process training on the CPU with gloo: DDP equals one process, data sharding,
accumulation, activation checkpointing, the DataParallel loss-in-replica contract,
faults, Ctrl-C, resume across world sizes, and two "nodes" on the loopback address.

Every multi-process check starts Python processes that import torch (seconds each),
so the launches are few and each is used for several related checks.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import ROOT, TINY_MODEL, base_overrides, free_port

from crnn.checkpoint import load_checkpoint, model_from_checkpoint
from crnn.config import ConfigError, load_config
from crnn.engine.distributed import DistInfo, select_device
from crnn.engine.faults import FaultInjection
from crnn.engine.launch import (
    SHUTDOWN_GRACE_S,
    Devices,
    LaunchError,
    describe_failures,
    parse_gpus,
    run_training,
)
from crnn.engine.parallel import CTCTrainModule
from crnn.engine.trainer import Trainer
from crnn.model import CRNN

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
ENV.pop("CRNN_FAULT_INJECT", None)


def wait_all(
    procs: list[subprocess.Popen], logs: list[Path], timeout_s: float = 240, grace_s: float = 30
) -> tuple[list[int | None], list[str]]:
    """Wait for every process and return their exit codes and logs. Once one has failed,
    the others get ``grace_s`` to follow (a rank whose peer died may wait on it for many
    minutes); whatever is still running then, or at ``timeout_s``, is killed and reads
    ``None``, so the caller's assertion shows every log instead of a bare timeout."""
    deadline = time.monotonic() + timeout_s
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if any(p.poll() not in (None, 0) for p in procs):
                deadline = min(deadline, time.monotonic() + grace_s)
            time.sleep(0.2)
    finally:
        codes = [p.poll() for p in procs]
        for p in procs:
            p.kill()
            p.wait()
    return codes, [p.read_text() for p in logs]


def launch_ok(
    commands: Callable[[int], list[tuple[list[str], dict[str, str]]]],
    logs: list[Path],
    tries: int = 3,
    port: Callable[[], int] | None = None,
) -> list[str]:
    """One process per log, ``commands(port)`` giving each one's (command line,
    environment) for a port on 127.0.0.1 (``port()``, by default a free one); wait for all
    and return their logs. A free port is closed again before the processes bind it, so a
    test running beside this one may take it first: a launch that failed with the address
    in use starts again on a new port, and every other failure fails the test."""
    for attempt in range(tries):
        procs = []
        for (cmd, env), log_path in zip(commands((port or free_port)()), logs):
            with open(log_path, "w") as log:
                procs.append(
                    subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
                )
        codes, texts = wait_all(procs, logs)
        taken = any("address already in use" in t.lower() for t in texts)
        if codes == [0] * len(procs) or not taken or attempt == tries - 1:
            break
    assert codes == [0] * len(procs), f"exit codes {codes} (None: killed)\n\n" + "\n\n".join(
        t[-3000:] for t in texts
    )
    return texts


def one_process(overrides: list[str], resume: Path | None = None) -> Trainer:
    return Trainer(load_config(None, overrides), DistInfo(), resume=resume)


def step_grads(trainer: Trainer, freeze_bn: bool = False) -> dict[str, torch.Tensor]:
    """The gradients the optimizer sees at ``trainer``'s next step; ``freeze_bn``:
    BatchNorm normalises with its running statistics instead of the micro-batch's."""
    seen: dict[str, torch.Tensor] = {}

    def record(*_: Any) -> None:
        seen.update({n: p.grad.clone() for n, p in trainer.model.named_parameters()})

    hook = trainer.optimizer.register_step_pre_hook(record)
    trainer.train_module.train()
    if freeze_bn:
        for m in trainer.model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.eval()
    trainer.train_step(trainer.batches())
    hook.remove()
    return seen


def assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], **tol: Any) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], msg=lambda m, name=name: f"{name}: {m}", **tol)


def train_cmd(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "tools" / "train.py"), *args]


def hhmmss(text: str) -> datetime:
    return datetime.strptime(text, "%H:%M:%S")


# ---- DataParallel's contract, gradient accumulation, checkpointing (one process) --------


def test_loss_in_replica_module_equals_its_dim0_chunks():
    """DataParallel scatters every input along dim 0 and concatenates the replicas'
    outputs: CTCTrainModule's per-sample losses of a batch must equal the concatenated
    losses of its chunks, the padded (B, S) targets and the real widths travelling with
    their images. Eval mode: BatchNorm then does not depend on the batch's make-up."""
    torch.manual_seed(0)
    model = CRNN(37, channels=[8, 16, 16, 32, 32, 32, 32], hidden=16).eval()
    module = CTCTrainModule(model, model.output_length)
    b, width = 5, 96
    images = torch.randint(0, 256, (b, 1, 32, width), dtype=torch.uint8)
    widths = torch.tensor([96, 40, 64, 20, 80])
    target_lengths = torch.tensor([6, 2, 4, 1, 5])
    targets = torch.zeros(b, int(target_lengths.max()), dtype=torch.long)
    for i, n in enumerate(target_lengths.tolist()):
        targets[i, :n] = torch.randint(1, 37, (n,))
    with torch.no_grad():
        whole = module(images, widths, targets, target_lengths)
        for n_chunks in (2, 3):  # uneven chunks (3 + 2, 2 + 2 + 1), as DP makes them
            parts = [
                module(*chunk)
                for chunk in zip(
                    *(t.chunk(n_chunks) for t in (images, widths, targets, target_lengths))
                )
            ]
            torch.testing.assert_close(torch.cat(parts), whole, rtol=1e-5, atol=1e-5)
    assert whole.shape == (b,) and torch.isfinite(whole).all() and (whole > 0).all()
    # The losses depend on each sample's own width and label (else the test proves nothing).
    with torch.no_grad():
        shifted = module(images, widths.roll(1), targets, target_lengths)
    assert not torch.allclose(shifted, whole)


def test_accumulation_equals_one_batch_k_times_larger(word_lmdb, tmp_path):
    """K=2 micro-batches of 4 give the gradients of one batch of 8: the loss is scaled by
    1/K. Every image has the same width here (min_width = max_width), so padding to the
    widest of a micro-batch or of the whole batch is the same; and BatchNorm statistics
    are frozen, since in training mode BatchNorm normalises each micro-batch by its own
    statistics (as each DDP rank does without SyncBatchNorm)."""
    # Clipping off: a gradient twice too large and the right one clip to the same vector.
    fixed = ["data.min_width=96", "data.max_width=96", "train.grad_clip=0"]
    one = one_process(base_overrides(word_lmdb, tmp_path / "a", *fixed))
    accum = one_process(base_overrides(word_lmdb, tmp_path / "b", *fixed, "train.accum_steps=2"))
    assert accum.data.sampler.micro_batch_size == 4 and one.data.sampler.micro_batch_size == 8
    g_one, g_accum = step_grads(one, freeze_bn=True), step_grads(accum, freeze_bn=True)
    assert all(g.abs().sum() > 0 for g in g_one.values())
    assert_same_tensors(g_accum, g_one, rtol=1e-4, atol=1e-6)


def test_activation_checkpointing_in_the_trainer_gives_the_same_gradients(word_lmdb, tmp_path):
    plain = one_process(base_overrides(word_lmdb, tmp_path / "a"))
    ckpt = one_process(base_overrides(word_lmdb, tmp_path / "b", "train.grad_checkpoint=true"))
    assert ckpt.model.grad_checkpoint and not plain.model.grad_checkpoint
    assert_same_tensors(step_grads(plain), step_grads(ckpt), rtol=1e-5, atol=1e-6)
    # BatchNorm statistics were updated once per forward, not again by the recomputation.
    assert_same_tensors(dict(plain.model.named_buffers()), dict(ckpt.model.named_buffers()))


# ---- devices, launch checks, failure messages (no processes) ----------------------------


def test_gpus_count_the_visible_devices_and_local_rank_picks_the_listed_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert parse_gpus("2,3") == Devices("cuda", [2, 3], 1)
    assert parse_gpus(None) == Devices("cuda", [0], 1)
    assert parse_gpus("cpu", 2) == Devices("cpu", [], 2)
    with pytest.raises(
        LaunchError, match=r"GPU 4 does not exist; 4 visible \(CUDA_VISIBLE_DEVICES=4,5,6,7\)"
    ):
        parse_gpus("0,4")
    with pytest.raises(LaunchError, match="listed twice"):
        parse_gpus("1,1")
    with pytest.raises(LaunchError, match="--nproc 2 is for --gpus cpu"):
        parse_gpus("0,1", 2)
    # Under torchrun the default is every visible GPU; local rank i takes the i-th listed.
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert parse_gpus(None).ids == [0, 1, 2, 3]
    listed = parse_gpus("2,3").torch_devices()
    assert select_device(listed, 1) == torch.device("cuda", 3)
    assert select_device([torch.device("cpu")], 1) == torch.device("cpu")
    with pytest.raises(RuntimeError, match="local rank 2 has no GPU: this machine offers 2"):
        select_device(listed, 2)


def test_a_process_that_sees_one_gpu_uses_it_whatever_its_local_rank(monkeypatch):
    """SLURM --gpus-per-task=1 or Kubernetes: each rank sees its own GPU as cuda:0."""
    one = [torch.device("cuda", 0)]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert select_device(one, 1) == select_device(one, 5) == torch.device("cuda", 0)
    # Several visible but one listed (--gpus 0 under torchrun with 2 ranks): refused.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    with pytest.raises(RuntimeError, match="local rank 1 has no GPU"):
        select_device(one, 1)


def test_launcher_refuses_what_the_ranks_could_not_run(word_lmdb, tmp_path, monkeypatch):
    """Checked before any process starts (all in Config.validate), with a message that
    says how to fix it."""
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path, "train.batch_size=6"))
    with pytest.raises(
        ConfigError, match=r"batch_size=6 is the global batch.*split\s+evenly over 4"
    ):
        run_training(cfg, Devices("cpu", [], 4))
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path, "dist.sync_bn=true"))
    with pytest.raises(ConfigError, match="SyncBatchNorm has no CPU implementation"):
        run_training(cfg, Devices("cpu", [], 2))
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path, "dist.strategy=none"))
    with pytest.raises(ConfigError, match="--strategy none trains on one device, but 2"):
        run_training(cfg, Devices("cpu", [], 2))
    cfg = load_config(None, base_overrides(word_lmdb, tmp_path, "dist.strategy=dp"))
    with pytest.raises(ConfigError, match="DataParallel.*needs CUDA GPUs"):
        run_training(cfg, Devices("cpu", [], 2))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(
        ConfigError, match="strategy=dp runs in one process, but this run has 2 processes"
    ):
        run_training(cfg, Devices("cpu", [], 1))
    assert not tmp_path.joinpath("last.pt").exists()


def test_fault_injection_spec(monkeypatch):
    monkeypatch.delenv("CRNN_FAULT_INJECT", raising=False)
    assert FaultInjection.from_env() is None
    monkeypatch.setenv("CRNN_FAULT_INJECT", "1:3:kill")
    assert FaultInjection.from_env() == FaultInjection(1, 3, "kill")
    monkeypatch.setenv("CRNN_FAULT_INJECT", "1:3:explode")
    with pytest.raises(ValueError, match="RANK:STEP:KIND"):
        FaultInjection.from_env()
    with pytest.raises(RuntimeError, match="injected fault .* rank 1 at step 3"):
        FaultInjection(1, 3, "raise").maybe_fire(1, 3)
    FaultInjection(1, 3, "raise").maybe_fire(0, 3)  # other ranks and steps: nothing
    FaultInjection(1, 3, "raise").maybe_fire(1, 2)


@pytest.mark.parametrize("world", ["1", "2"])
def test_a_launched_rank_leaves_without_the_interpreters_teardown(world):
    """A rank that finished leaves with os._exit after flushing what it printed and
    logged: the interpreter's teardown of gloo's threads once aborted a finished rank of
    a CI run (SIGABRT, reported as a failed run). A lone process exits normally."""
    code = (
        "import atexit, logging, sys\n"
        "from crnn.cli.train import leave\n"
        "atexit.register(lambda: print('teardown ran', flush=True))\n"
        "logging.basicConfig(stream=sys.stderr, level=logging.INFO)\n"
        "print('rank output'); logging.getLogger('t').info('rank log')\n"
        "sys.exit(leave(3))\n"
    )
    env = {**ENV, "WORLD_SIZE": world, "RANK": "0"}
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 3
    assert "rank output" in r.stdout and "rank log" in r.stderr
    assert ("teardown ran" in r.stdout) == (world == "1")


def test_failure_message_puts_the_cause_before_its_echoes(tmp_path):
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    def error_file(name: str, message: str, t: float, peer: str) -> str:
        path = tmp_path / name
        path.write_text(
            json.dumps(
                {
                    "message": {
                        "message": message,
                        "extraInfo": {"py_callstack": "", "timestamp": str(int(t))},
                    },
                    "crnn": {"time": t, "peer": peer},
                }
            )
        )
        return str(path)

    # Rank 0 recorded its error first, but it is only the echo of rank 3's death.
    echo = ProcessFailure(
        0, 100, 1, error_file("r0", "RuntimeError: Connection reset by peer", 10.0, "lost")
    )
    stopped = ProcessFailure(1, 101, -15, "<N/A>")
    cause = ProcessFailure(0, 102, -9, "<N/A>")
    msg = describe_failures({0: echo, 1: stopped, 3: cause})
    assert msg.startswith(
        "distributed training failed: rank 3 (local rank 0, pid 102) was killed by signal SIGKILL"
    )
    assert (
        msg.index("rank 3")
        < msg.index("as a consequence")
        < msg.index("rank 0 (local rank 0, pid 100) raised RuntimeError: Connection reset")
    )
    raised = ProcessFailure(1, 103, 1, error_file("r1", "ValueError: bad thing", 12.0, ""))
    assert (
        "rank 1 (local rank 1, pid 103) raised ValueError: bad thing"
        in describe_failures({1: raised, 0: echo}).split(". Then")[0]
    )
    # The survivor timed out: the rank the launcher then killed had hung.
    waited = ProcessFailure(
        0, 104, 1, error_file("r2", "RuntimeError: Timed out waiting 5000ms", 9.0, "timeout")
    )
    hung = ProcessFailure(1, 105, -9, "<N/A>")
    msg = describe_failures({0: waited, 1: hung})
    assert msg.startswith(
        "distributed training failed: rank 1 (local rank 1, pid 105) stopped responding"
    )
    assert "out-of-memory" not in msg and "consequence: rank 0" in msg


def test_the_first_failure_is_the_cause_and_the_launchers_stops_are_echoes(tmp_path):
    """A rank killed by the OOM killer at t, a survivor blocked in a CUDA call that the
    launcher SIGKILLs 30 s later (newer torch reports both), a rank whose data workers
    the launcher's SIGTERM reached first, one its watchdog ended: one cause."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    def killed(local, pid, sig, t):
        f = ProcessFailure(local, pid, sig, "<N/A>")
        f.timestamp = t
        return f

    def recorded(local, pid, code, message, t, peer=""):
        path = tmp_path / f"r{pid}"
        path.write_text(
            json.dumps(
                {
                    "message": {
                        "message": message,
                        "extraInfo": {"py_callstack": "", "timestamp": str(int(t))},
                    },
                    "crnn": {"time": t, "peer": peer},
                }
            )
        )
        return ProcessFailure(local, pid, code, str(path))

    msg = describe_failures({1: killed(1, 11, -9, 100.0), 0: killed(0, 10, -9, 130.0)}, nproc=2)
    cause, _, echo = msg.partition("Then, as a consequence")
    assert "rank 1 (local rank 1, pid 11) was killed by signal SIGKILL" in cause
    assert "rank 0" not in cause
    assert "rank 0 (local rank 0, pid 10) was stopped by the launcher (SIGKILL), having not" in echo
    worker = recorded(
        0, 20, 1, "RuntimeError: DataLoader worker (pid 33) is killed by signal: Terminated.", 101.0
    )
    msg = describe_failures({1: killed(1, 21, -9, 100.0), 0: worker})
    cause, _, echo = msg.partition("Then, as a consequence")
    assert "rank 1" in cause and "rank 0" not in cause
    assert "its data workers got the stop first" in echo
    ended = recorded(
        0,
        30,
        130,
        "stopped by the launcher while blocked for 3 s waiting for a "
        "rank of this machine that had exited (pid 31)",
        101.0,
        "stopped",
    )
    msg = describe_failures({1: killed(1, 31, -9, 100.0), 0: ended})
    assert msg.index("rank 1 (local rank 1, pid 31) was killed") < msg.index("consequence: rank 0")
    assert "rank 0 (local rank 0, pid 30) stopped by the launcher while blocked" in msg
    # torch 2.4's agent lists only the killed rank, not the survivor it stopped.
    msg = describe_failures({1: killed(1, 41, -9, 100.0)}, nproc=2)
    cause, _, echo = msg.partition("Then, as a consequence")
    assert "rank 1 (local rank 1, pid 41) was killed by signal SIGKILL" in cause
    assert "rank 0" not in cause
    assert "rank 0 (local rank 0) was stopped by the launcher after that failure" in echo


def test_nccl_failures_name_the_rank_that_hung_or_crashed_not_the_survivors():
    """On NCCL, survivors block in a CUDA sync: they cannot run Python, are killed after
    the launcher's grace (SIGKILL), or aborted by the NCCL watchdog (SIGABRT), and the
    rank that hung may not be reported at all. Simulated exits, as the agent reports them."""
    import tempfile

    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    with tempfile.TemporaryDirectory() as d:
        err = Path(d) / "r1"
        err.write_text(
            json.dumps(
                {
                    "message": {
                        "message": "RuntimeError: CUDA error: an illegal memory access",
                        "extraInfo": {"py_callstack": "", "timestamp": "10"},
                    },
                    "crnn": {"time": 10.0, "peer": ""},
                }
            )
        )
        crashed = ProcessFailure(1, 201, 1, str(err))
        killed = ProcessFailure(0, 200, -9, "<N/A>")  # SIGKILLed after the grace
        msg = describe_failures({0: killed, 1: crashed}, nproc=2)
    head, _, tail = msg.partition("Then, as a consequence")
    assert "rank 1 (local rank 1, pid 201) raised RuntimeError: CUDA error" in head
    assert "rank 0 (local rank 0, pid 200) was stopped by the launcher (SIGKILL)" in tail
    assert "out-of-memory" not in msg

    # Rank 1 hung outside any collective; rank 0 waited in one until NCCL's watchdog
    # aborted it; the launcher then stopped rank 1, which is not among the failures.
    aborted = ProcessFailure(0, 300, -6, "<N/A>")
    log = (
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600000 milliseconds\n"
    )
    msg = describe_failures({0: aborted}, nproc=2, logs={0: log})
    assert msg.startswith(
        "distributed training failed: rank 1 (local rank 1) stopped responding"
    ), msg
    assert "consequence: rank 0 (local rank 0, pid 300) timed out waiting for a peer" in msg
    # The same abort without the watchdog's words is a crash of its own.
    msg = describe_failures({0: aborted}, nproc=2, logs={0: "terminate called after..."})
    assert msg.startswith(
        "distributed training failed: rank 0 (local rank 0, pid 300) was killed by signal SIGABRT"
    )
    cause, _, echo = msg.partition("Then, as a consequence")
    assert "rank 1" not in cause and "rank 1 (local rank 1) was stopped by the launcher" in echo


# ---- two-process DDP against one process (one launch, several checks) ---------------------


PHASE1_STEPS = 19  # resumed at step 3; 8 steps per epoch: ends in the third epoch
RESUME_AT = 3


@pytest.fixture(scope="module")
def ddp_run(word_lmdb, tmp_path_factory):
    """Two gloo ranks started the way torchrun starts them, each running the Trainer:
    phase 1 resumes a one-process checkpoint (accum 2, micro-batch 4) as 2 ranks x
    micro-batch 4 and trains to PHASE1_STEPS with a validation at the end; phase 2
    trains 2 steps from scratch with 2 ranks x 2 accumulation steps x micro-batch 4."""
    tmp = tmp_path_factory.mktemp("ddp")
    first = one_process(base_overrides(word_lmdb, tmp / "first", "train.accum_steps=2"))
    first.fit(stop_at_step=RESUME_AT)
    spec = {
        "phase1": base_overrides(word_lmdb, tmp / "ddp", f"train.max_steps={PHASE1_STEPS}"),
        "resume": str(tmp / "first" / "last.pt"),
        "phase2": base_overrides(
            word_lmdb, tmp / "acc", "train.batch_size=16", "train.accum_steps=2"
        ),
        "phase2_steps": 2,
        "result": str(tmp / "result"),
    }
    (tmp / "spec.json").write_text(json.dumps(spec))
    logs = [tmp / f"rank{rank}.log" for rank in range(2)]
    worker = [sys.executable, str(ROOT / "tests" / "ddp_worker.py"), str(tmp / "spec.json")]
    texts = launch_ok(
        lambda port: [
            (
                worker,
                {
                    **ENV,
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": "2",
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                },
            )
            for rank in range(2)
        ],
        logs,
    )
    results = [torch.load(f"{spec['result']}-rank{r}.pt", weights_only=False) for r in range(2)]
    return {"tmp": tmp, "logs": texts, "results": results, "lmdb": word_lmdb}


@pytest.mark.slow
def test_ddp_equals_one_process_and_resumes_from_one_process(ddp_run):
    """Two DDP ranks with micro-batches of 4 end where one process does that sees the
    same micro-batches through accumulation (global batch 8 both ways), here after
    resuming a one-process checkpoint in two processes. BatchNorm uses each
    micro-batch's statistics in both, so the parameters agree to float precision."""
    tmp, lmdb = ddp_run["tmp"], ddp_run["lmdb"]
    ref = one_process(
        base_overrides(lmdb, tmp / "ref", "train.accum_steps=2", f"train.max_steps={PHASE1_STEPS}")
    )
    ref.fit()
    r0, r1 = ddp_run["results"]
    expected = {n: p.detach() for n, p in ref.model.named_parameters()}
    assert_same_tensors(r0["params"], expected, rtol=1e-5, atol=1e-6)
    assert_same_tensors(r1["params"], r0["params"], rtol=0, atol=0)  # replicas never diverge
    assert not torch.allclose(
        r0["params"]["rnn.1.proj.weight"],
        one_process(base_overrides(lmdb, tmp / "init")).model.rnn[1].proj.weight,
    )
    ckpt = load_checkpoint(tmp / "ddp" / "last.pt")
    assert ckpt["step"] == PHASE1_STEPS and (ckpt["epoch"], ckpt["step_in_epoch"]) == (2, 3)
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in ckpt["model"])
    assert_same_tensors(ckpt["model"], {**r0["params"], **r0["buffers"]}, rtol=0, atol=0)


@pytest.mark.slow
def test_ddp_ranks_see_disjoint_data_in_a_new_order_each_epoch(ddp_run):
    seen = [r["seen"] for r in ddp_run["results"]]
    assert seen[0].keys() == seen[1].keys()
    steps = sorted(seen[0])
    assert steps[0] == (0, RESUME_AT) and steps[-1] == (2, PHASE1_STEPS - 1)
    for key in steps:
        assert len(seen[0][key]) == len(seen[1][key]) == 4
        assert not set(seen[0][key]) & set(seen[1][key]), f"ranks share samples at {key}"
    epoch1 = [i for (e, _), v in sorted(seen[0].items()) for i in v if e == 1]
    epoch1 += [i for (e, _), v in sorted(seen[1].items()) for i in v if e == 1]
    assert sorted(epoch1) == list(range(64))  # a full epoch: every sample exactly once
    order = {e: [tuple(seen[0][k]) for k in steps if k[0] == e] for e in (1, 2)}
    assert order[2] != order[1][: len(order[2])]  # set_epoch: a new order


@pytest.mark.slow
def test_ddp_validation_is_the_same_on_every_rank_and_only_rank_0_writes(ddp_run):
    r0, r1 = ddp_run["results"]
    assert r0["metrics"] == r1["metrics"] and r0["metrics"]["count"] == 64
    # The confidence temperature was fitted on every validation read, not rank 0's half.
    assert load_checkpoint(ddp_run["tmp"] / "ddp" / "best.pt")["calibration"]["samples"] == 64
    # Every rank evaluated with rank 0's BatchNorm statistics (the saved ones).
    assert_same_tensors(r0["buffers"], r1["buffers"], rtol=0, atol=0)
    log0, log1 = ddp_run["logs"]
    assert "run directory" in log0 and log0.count("saved ") == 1
    # Off a terminal, progress is a log line per interval (no bar), from rank 0 alone.
    assert re.search(r"step \d+/\d+ loss [\d.]+ lr ", log0) and "train:" not in log0
    # One TensorBoard log (rank 0's), with every rank's throughput in it.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = (ddp_run["tmp"] / "ddp" / "tb").iterdir()
    tags = EventAccumulator(str(events)).Reload().Tags()["scalars"]
    assert {"throughput/images_per_s/rank0", "throughput/images_per_s/rank1"} <= set(tags)
    assert {"train/loss", "val/accuracy"} <= set(tags)
    # Rank 1: warnings only, prefixed with its rank, and no progress.
    assert "INFO" not in log1 and "step " not in log1 and "saved" not in log1
    assert all("[rank 1]" in ln for ln in re.findall(r"^\d\d:\d\d:\d\d .*", log1, re.M))


@pytest.mark.slow
def test_ddp_accumulation_all_reduces_once_per_step_and_equals_one_process(ddp_run):
    """2 ranks x 2 accumulation steps x 4 = one process x 4 accumulation steps x 4: the
    same gradients; and DDP all-reduces only on the micro-step that steps (no_sync)."""
    tmp, lmdb = ddp_run["tmp"], ddp_run["lmdb"]
    r0, r1 = ddp_run["results"]
    for r in (r0, r1):
        calls = r["allreduce_calls"]  # per micro-step: the buckets all-reduced
        assert len(calls) == 4
        assert [bool(c) for c in calls] == [False, True, False, True]
        assert [sum(c) for c in calls] == [0, 1, 0, 1]  # the last bucket once per step
    one = one_process(
        base_overrides(lmdb, tmp / "acc1", "train.batch_size=16", "train.accum_steps=4")
    )
    assert_same_tensors(r0["accum_grads"], step_grads(one), rtol=1e-5, atol=1e-7)
    assert_same_tensors(r1["accum_grads"], r0["accum_grads"], rtol=0, atol=0)


# ---- the real command line: faults, Ctrl-C, resume, two nodes -----------------------------


def cli_args(lmdb: Path, out: Path, *extra: str) -> list[str]:
    return ["--gpus", "cpu", "--nproc", "2", "--set", *base_overrides(lmdb, out, *extra)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["raise", "kill"])
def test_a_failing_rank_ends_the_run_with_a_message_naming_it(kind, word_lmdb, tmp_path):
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = subprocess.run(
        train_cmd(*cli_args(word_lmdb, out, "train.max_steps=1000", "train.save_every=2")),
        env={**ENV, "CRNN_FAULT_INJECT": f"1:4:{kind}"},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    wall = time.monotonic() - t0
    assert r.returncode == 1, r.stderr[-3000:]
    error = re.findall(r"distributed training failed: .*", r.stderr)
    assert len(error) == 1, r.stderr[-3000:]
    cause = error[0].split("distributed training failed: ")[1].split(". Then")[0]
    if kind == "raise":
        assert re.match(
            r"rank 1 \(local rank 1, pid \d+\) raised RuntimeError: "
            r"injected fault \(CRNN_FAULT_INJECT\) on rank 1 at step 4",
            cause,
        ), error[0]
    else:
        assert re.match(r"rank 1 \(local rank 1, pid \d+\) was killed by signal SIGKILL", cause), (
            error[0]
        )
    # From the fault to the end of the launcher: seconds, not a hang.
    injected = re.search(r"(\d\d:\d\d:\d\d) \[rank 1\] WARNING .*injecting", r.stderr)
    ended = re.search(r"(\d\d:\d\d:\d\d) ERROR crnn.train: distributed training failed", r.stderr)
    assert injected and ended, r.stderr[-3000:]
    assert (hhmmss(ended[1]) - hhmmss(injected[1])).total_seconds() < 30, (
        injected[0],
        ended[0],
        wall,
    )
    # The checkpoint written before the fault is whole.
    assert load_checkpoint(out / "last.pt")["step"] == 4
    # Each rank's stderr was kept beside the run, the failing rank's last words included.
    assert "injecting" in (out / "logs" / "rank1.stderr").read_text()
    assert "injecting" not in (out / "logs" / "rank0.stderr").read_text()


@pytest.mark.slow
def test_ctrl_c_stops_every_rank_saves_once_and_resumes_in_one_process(word_lmdb, tmp_path):
    """SIGINT to the launcher's process group (what Ctrl-C does): the ranks finish their
    step, rank 0 saves last.pt once, the run exits 130; that checkpoint of a 2-process
    run then resumes in one process exactly (accumulation keeps the micro-batches)."""
    out = tmp_path / "run"
    log_path = tmp_path / "log.txt"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            train_cmd(*cli_args(word_lmdb, out, "train.max_steps=100000")),
            env=ENV,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            done = [int(n) for n in re.findall(r"(\d+)/100000", log_path.read_text())]
            if done and max(done) >= 3:
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        code = proc.wait(timeout=90)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log_path.read_text()
    assert code == 130, text[-3000:]
    assert stop_s < SHUTDOWN_GRACE_S, stop_s
    saved = [ln for ln in text.splitlines() if "saved " in ln]
    assert len(saved) == 1 and "last.pt" in saved[0] and "[rank" not in saved[0], saved
    ckpt = load_checkpoint(out / "last.pt")
    model_from_checkpoint(ckpt)
    stopped = ckpt["step"]
    assert f"stopped at step {stopped}" in text and stopped >= 3
    # Resume in one process (accumulation 2 keeps micro-batches of 4) up to 2 more steps,
    # and compare with one process that never stopped.
    more = [f"train.max_steps={stopped + 2}", "train.accum_steps=2"]
    resumed = one_process(
        base_overrides(word_lmdb, tmp_path / "resumed", *more), resume=out / "last.pt"
    )
    assert resumed.state.step == stopped
    resumed.fit()
    straight = one_process(base_overrides(word_lmdb, tmp_path / "straight", *more))
    straight.fit()
    assert_same_tensors(
        dict(resumed.model.named_parameters()),
        dict(straight.model.named_parameters()),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.slow
def test_two_nodes_on_loopback_with_torchrun(word_lmdb, tmp_path):
    """Two torchrun launches, one process each, meeting at a c10d rendezvous on
    127.0.0.1: the node whose process gets global rank 1 has local rank 0, so only a
    program that tells the two apart leaves that node's output directory empty."""
    from torch.distributed import TCPStore

    logs = [tmp_path / f"node{node}.log" for node in range(2)]
    # The rendezvous store is this test's own, bound to a port the system chose and held
    # throughout, and both nodes only connect to it. (With a port found free and closed
    # again, a test beside this one could take it first: both nodes then joined that
    # test's store as clients and waited there until the timeout, which CI once saw.)
    store = TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=120)
    )

    def nodes(port: int) -> list[tuple[list[str], dict[str, str]]]:
        return [
            (
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nnodes",
                    "2",
                    "--node-rank",
                    str(node),
                    "--nproc-per-node",
                    "1",
                    "--rdzv-backend",
                    "c10d",
                    "--rdzv-id",
                    "crnn-test",
                    "--rdzv-endpoint",
                    f"127.0.0.1:{port}",
                    "--rdzv-conf",
                    "is_host=false",
                    "--local-addr",
                    "127.0.0.1",
                    str(ROOT / "tools" / "train.py"),
                    "--gpus",
                    "cpu",
                    "--set",
                    *base_overrides(word_lmdb, tmp_path / f"out{node}", "train.max_steps=4"),
                ],
                ENV,
            )
            for node in range(2)
        ]

    texts = launch_ok(nodes, logs, tries=1, port=lambda: store.port)
    main = [i for i, t in enumerate(texts) if "run directory" in t]
    assert len(main) == 1, "exactly one node hosts global rank 0"
    other = 1 - main[0]
    assert "world size 2" in texts[main[0]] and "finished 4 steps" in texts[main[0]]
    assert load_checkpoint(tmp_path / f"out{main[0]}" / "last.pt")["step"] == 4
    assert not (tmp_path / f"out{other}").exists(), "global rank 1 (local rank 0) wrote files"
    assert "train:" not in texts[other] and "saved" not in texts[other]


@pytest.mark.slow
def test_bench_parallel_measures_the_trainer_step(tmp_path):
    """The benchmark's single-device rows on the CPU (its DDP rows start processes and
    are run by hand; figures in docs/benchmarks.md)."""
    from benchmarks.parallel import BenchSpec, format_table, rows_to_json, run_benchmark

    spec = BenchSpec(
        batch_size=8,
        width=64,
        steps=1,
        repeats=1,
        warmup=1,
        overrides=TINY_MODEL,
        strategies=["single", "dp"],
        accum_steps=[1, 2],
    )
    rows = run_benchmark(spec, tmp_path)
    assert [(r.strategy, r.grad_checkpoint, r.accum_steps, r.micro_batch) for r in rows] == [
        ("single", False, 1, 8),
        ("single", False, 2, 4),
        ("single", True, 1, 8),
        ("single", True, 2, 4),
    ]  # dp needs CUDA: skipped
    assert all(r.images_per_s > 0 and r.peak_allocated_mib == {} for r in rows)
    table = format_table(rows)
    assert table.count("\n") == 5 and "| single | cpu | on | 2 | 8 (4) |" in table
    assert json.loads(json.dumps(rows_to_json(rows, spec)))["rows"][0]["strategy"] == "single"


def test_auto_data_workers_share_the_cores_between_the_processes_of_a_machine(monkeypatch):
    from crnn.engine.data import num_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(96)))
    assert num_workers("auto", 8) == 11  # 8 GPUs: 11 each (not 8 x 12 = 96 workers)
    assert num_workers("auto", 1) == 16  # capped
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert num_workers("auto") == 16 and num_workers(3) == 3 and num_workers(0) == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert num_workers("auto", 1) == 1 and num_workers("auto", 2) == 1  # never 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert num_workers("auto", 1) == 15  # one H100 box: every core but the loop's


def test_all_reduce_never_changes_the_callers_tensor(monkeypatch):
    """On NCCL the metrics go to the GPU with .to(), which returns the caller's own
    tensor when it is already there; all_reduce then summed into it in place."""
    import torch.distributed as dist

    from crnn.engine.distributed import all_reduce_sum

    monkeypatch.setattr(dist, "all_reduce", lambda t, op=None: t.mul_(2))  # "two ranks"
    mine = torch.tensor([1.0, 2.0])
    for backend in ("nccl", "gloo"):  # (the device is the CPU here: .to() is a no-op)
        info = DistInfo(rank=0, world_size=2, device=torch.device("cpu"), backend=backend)
        assert all_reduce_sum(mine, info).tolist() == [2.0, 4.0]
        assert mine.tolist() == [1.0, 2.0]


def test_bf16_falls_back_to_fp16_with_a_message_on_gpus_without_bfloat16(monkeypatch, caplog):
    from crnn.precision import resolve_amp

    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla V100")
    assert resolve_amp("bf16", gpu) == "fp16"
    assert "Tesla V100 has no bfloat16 support" in caplog.text
    assert resolve_amp("none", gpu) == "none"
    # the CPU runs fp32 whatever train.amp says: train.cpu_bf16 alone picks bf16 there
    assert resolve_amp("bf16", torch.device("cpu")) == "none"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert resolve_amp("bf16", gpu) == "bf16"


@pytest.mark.parametrize("capability, native", [((7, 0), False), ((7, 5), False), ((8, 0), True)])
@pytest.mark.parametrize("has_flag", [True, False])
def test_bf16_emulated_on_volta_and_turing_falls_back_to_fp16(
    monkeypatch, capability, native, has_flag
):
    """torch.cuda.is_bf16_supported() says yes on a V100 (7.0) or T4 (7.5), where bf16
    is only emulated; the fallback must still happen there, with the emulation flag
    (newer PyTorch) and by the compute capability (PyTorch without it)."""
    from crnn.precision import resolve_amp

    if has_flag:

        def supported(including_emulation: bool = True) -> bool:  # as PyTorch defines it
            return native or including_emulation
    else:

        def supported() -> bool:  # older PyTorch: emulation counts
            return True

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: f"GPU {capability}")
    assert resolve_amp("bf16", torch.device("cuda", 0)) == ("bf16" if native else "fp16")


def _chinese_lmdb(root: Path) -> Path:
    """32 rendered lines of 2-6 common Chinese characters (the CJK font fixture)."""
    from PIL import Image, ImageDraw, ImageFont

    from crnn.data.lmdb import LmdbWriter

    fixtures = ROOT / "tests" / "fixtures"
    chars = (fixtures / "cjk200_chars.txt").read_text(encoding="utf-8").split()
    font = ImageFont.truetype(
        str(fixtures / "fonts" / "cjk" / "droid_sans_fallback_cjk200.ttf"), 28
    )
    rng = random.Random(0)
    with LmdbWriter(root) as w:
        for _ in range(32):
            text = "".join(rng.choice(chars) for _ in range(rng.randint(2, 6)))
            img = Image.new("L", (int(font.getlength(text)) + 8, 36), 235)
            ImageDraw.Draw(img).text((4, 2), text, font=font, fill=20)
            buf = io.BytesIO()
            img.save(buf, format="PNG")
            w.add(buf.getvalue(), text, img.size)
    return root


@pytest.mark.slow
def test_ddp_with_the_5530_class_chinese_charset_equals_one_process(tmp_path):
    """The wide classifier of a Chinese line recognizer (5,530 classes, the size this
    project grew from) trains the same in two gloo ranks as in one process with the
    same global batch through accumulation; rank 0's checkpoint holds it unwrapped."""
    lmdb = _chinese_lmdb(tmp_path / "zh")
    zh = ["data.charset=zh5529", "data.max_width=256", "train.max_steps=4"]
    r = subprocess.run(
        train_cmd(*cli_args(lmdb, tmp_path / "ddp", *zh)),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipped" not in r.stderr  # every label is in the charset
    ddp = load_checkpoint(tmp_path / "ddp" / "last.pt")
    assert ddp["step"] == 4 and ddp["model"]["rnn.1.proj.weight"].shape[0] == 5530
    ref = one_process(base_overrides(lmdb, tmp_path / "one", *zh, "train.accum_steps=2"))
    ref.fit()
    expected = {n: p.detach() for n, p in ref.model.named_parameters()}
    assert_same_tensors({n: ddp["model"][n] for n in expected}, expected, rtol=1e-5, atol=1e-6)
