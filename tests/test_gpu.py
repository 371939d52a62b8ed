"""The GPU tier: what only a CUDA device can show. ``pytest -m gpu`` on a GPU machine
(``dev/gpu_program.py stage1`` runs it with the GPU benchmark rows); skipped without
CUDA. ``CRNN_GPU_DRY_RUN=1`` runs the same tests on the CPU (CUDA-only checks are then
skipped inside them), so that a typo never costs GPU time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import base_overrides, free_port

from crnn.backends.torch import TorchBackend
from crnn.checkpoint import load_checkpoint, model_from_checkpoint
from crnn.config import load_config
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.reading.recognizer import Recognizer

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev() -> torch.device:
    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def cuda_only(dev: torch.device, what: str) -> None:
    if dev.type != "cuda":
        pytest.skip(f"dry run on the CPU: {what} needs CUDA")


@pytest.fixture
def exact_fp32():
    """fp32 as written: cuDNN's convolutions run in TF32 by default (10-bit mantissas),
    which moves a gradient by ~1e-3 of its largest value between two ways of computing
    the same step; the comparisons below are about the arithmetic, not the rounding."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    no_tf32()
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def no_tf32() -> None:
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def overrides(lmdb: Path, out: Path, *extra: str) -> list[str]:
    return base_overrides(lmdb, out, "train.log_images=2", *extra)


def trainer(lmdb: Path, out: Path, dev: torch.device, *extra: str, **kw: Any) -> Trainer:
    return Trainer(load_config(None, overrides(lmdb, out, *extra)), DistInfo(device=dev), **kw)


def step_grads(t: Trainer, freeze_bn: bool = False) -> dict[str, torch.Tensor]:
    """The gradients the optimizer sees at the trainer's next step (on the CPU).

    ``freeze_bn``: BatchNorm normalises with its running statistics, so that splitting
    a batch between ranks (each normalising its own half) changes nothing."""
    seen: dict[str, torch.Tensor] = {}

    def record(*_: Any) -> None:
        seen.update(
            {n: p.grad.detach().float().cpu().clone() for n, p in t.model.named_parameters()}
        )

    hook = t.optimizer.register_step_pre_hook(record)
    t.train_module.train()
    if freeze_bn:
        for m in t.model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.eval()
    t.train_step(t.batches())
    hook.remove()
    return seen


def assert_close_grads(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], rel: float):
    """Each gradient within ``rel`` of the largest reference gradient of its tensor."""
    for n in ref:
        scale = float(ref[n].abs().max()) or 1.0
        torch.testing.assert_close(got[n], ref[n], rtol=0, atol=rel * scale, msg=n)


def test_default_bf16_training_learns(word_lmdb, tmp_path, dev):
    t = trainer(word_lmdb, tmp_path / "r", dev, "train.max_steps=40", "train.val_every=40")
    # (a dry run on the CPU trains fp32: train.amp is a GPU setting, train.cpu_bf16 the CPU's)
    assert t.amp == ("bf16" if dev.type == "cuda" else "none") and t.scaler.is_enabled() is False
    batches = t.batches()
    t.train_module.train()
    losses = [t.train_step(batches) for _ in range(40)]
    first = sum(float(s) / n for s, n in losses[:5]) / 5
    last = sum(float(s) / n for s, n in losses[-5:]) / 5
    assert np.isfinite(last) and last < 0.7 * first, (first, last)


def test_lstms_see_float32_under_cuda_bf16_autocast(dev):
    cuda_only(dev, "cuDNN's RNN autocast cast")
    from crnn.model import CRNN

    m = CRNN(11).to(dev)
    seen = []
    for block in m.rnn:
        block.lstm.register_forward_hook(lambda mod, args, out: seen.append(out[0].dtype))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        m(torch.randn(2, 1, 32, 64, device=dev))
    assert seen == [torch.float32, torch.float32]


def test_fp16_with_grad_scaler_saves_kills_and_resumes(word_lmdb, tmp_path, dev):
    cuda_only(dev, "fp16 autocast with a GradScaler")
    out = tmp_path / "fp16"
    extra = ("train.amp=fp16", "train.max_steps=8", "train.save_every=4")
    t = trainer(word_lmdb, out, dev, *extra)
    assert t.scaler.is_enabled()
    t.fit(stop_at_step=4)
    ckpt = load_checkpoint(out / "last.pt")
    assert ckpt["step"] == 4 and ckpt["scaler"] and "scale" in ckpt["scaler"]
    resumed = trainer(word_lmdb, out, dev, *extra, resume=out / "last.pt")
    assert resumed.scaler.get_scale() == ckpt["scaler"]["scale"]
    assert resumed.fit().step == 8


def test_nccl_collectives_and_ddp_step_at_world_size_one(word_lmdb, tmp_path, dev):
    """NCCL bound to the GPU (device_id), barrier, all-reduce of float64 metrics, and a
    DDP-wrapped step, in a process group of one."""
    cuda_only(dev, "NCCL")
    import torch.distributed as dist

    from crnn.engine.distributed import all_reduce_sum, barrier
    from crnn.engine.parallel import wrap

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
    try:
        info = DistInfo(rank=0, world_size=1, device=dev, backend="nccl")
        barrier(DistInfo(rank=0, world_size=2, device=dev, backend="nccl"))  # the NCCL branch
        metrics = torch.tensor([1.0, 2.0], dtype=torch.float64)
        assert all_reduce_sum(metrics, DistInfo(0, 0, 2, dev, "nccl")).tolist() == [1.0, 2.0]
        t = trainer(word_lmdb, tmp_path / "nccl", dev)
        module, bare = wrap(t.model, strategy="ddp", device=dev, distributed=True)
        assert isinstance(module, torch.nn.parallel.DistributedDataParallel)
        assert info.device == next(bare.parameters()).device
    finally:
        dist.destroy_process_group()


def test_launcher_with_one_gpu(word_lmdb, tmp_path, dev):
    """tools/train.py --gpus 0 (and the CPU in the dry run), start to checkpoint."""
    from conftest import run_tool

    out = tmp_path / "cli"
    gpus = "0" if dev.type == "cuda" else "cpu"
    args = ["--gpus", gpus, "--set", *overrides(word_lmdb, out, "train.max_steps=4")]
    r = run_tool("train", *args, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert load_checkpoint(out / "last.pt")["step"] == 4


def _gloo_rank(rank: int, spec: dict[str, Any]) -> None:
    import torch.distributed as dist

    dev = torch.device(spec["device"])
    no_tf32()
    dist.init_process_group("gloo", init_method=spec["init"], rank=rank, world_size=2)
    try:
        info = DistInfo(rank=rank, world_size=2, device=dev, backend="gloo")
        t = Trainer(load_config(None, spec["overrides"]), info)
        torch.save(step_grads(t, freeze_bn=True), f"{spec['out']}-rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_sharing_the_gpu_equal_one_process(word_lmdb, tmp_path, dev, exact_fp32):
    import torch.multiprocessing as mp

    # fp32: under bf16 each half-batch rounds differently (the DataParallel test's 1e-2)
    cfg = overrides(word_lmdb, tmp_path / "ddp", "train.max_steps=4", "train.amp=none")
    spec = {
        "device": str(dev),
        "init": f"tcp://127.0.0.1:{free_port()}",
        "overrides": cfg,
        "out": str(tmp_path / "params"),
    }
    mp.spawn(_gloo_rank, args=(spec,), nprocs=2, join=True)
    one = step_grads(
        trainer(word_lmdb, tmp_path / "one", dev, "train.max_steps=4", "train.amp=none"), True
    )
    for r in range(2):  # DDP's all-reduced gradients: the same on both ranks
        assert_close_grads(torch.load(f"{spec['out']}-rank{r}.pt"), one, 1e-3)


def test_dataparallel_with_one_device_equals_one_device(word_lmdb, tmp_path, dev):
    cuda_only(dev, "DataParallel")
    import warnings

    plain = step_grads(trainer(word_lmdb, tmp_path / "a", dev, "dist.strategy=none"))
    dp = trainer(word_lmdb, tmp_path / "b", dev, "dist.strategy=dp", device_ids=[0])
    assert isinstance(dp.train_module, torch.nn.DataParallel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads = step_grads(dp)
    assert_close_grads(grads, plain, 1e-2)  # bf16: the same arithmetic, reordered
    # Replicas re-pack their LSTM weights once (flatten_parameters), not with a warning.
    assert not [w for w in caught if "contiguous chunk of memory" in str(w.message)]


def test_channels_last_and_checkpointing_with_accumulation_match_the_plain_step(
    word_lmdb, tmp_path, dev, exact_fp32
):
    ref = step_grads(trainer(word_lmdb, tmp_path / "ref", dev, "train.amp=none"), True)
    variants = (["train.channels_last=true"], ["train.grad_checkpoint=true", "train.accum_steps=2"])
    for i, extra in enumerate(variants):
        t = trainer(word_lmdb, tmp_path / f"v{i}", dev, "train.amp=none", *extra)
        assert_close_grads(step_grads(t, True), ref, 1e-3)


def test_compile_recompiles_a_bounded_number_of_times_over_bucketed_widths(
    word_lmdb, tmp_path, dev
):
    cuda_only(dev, "torch.compile with inductor")
    import torch._dynamo

    torch._dynamo.reset()
    t = trainer(word_lmdb, tmp_path / "c", dev, "train.compile=true", "train.grad_checkpoint=true")
    batches = t.batches()
    t.train_module.train()
    widths = set()
    for _ in range(24):  # several epochs' worth of width buckets
        b = next(batches)
        widths.add(b["images"].shape[-1])
        t.train_step(iter([b]))
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert len(widths) >= 3
    # The CNN alone, one static graph then one for dynamic widths (2 expected; it was 8
    # when the whole model was compiled: the LSTMs and checkpointing broke the graph).
    assert frames <= 4, f"{frames} graphs compiled for {len(widths)} widths"
    assert not torch._dynamo.utils.counters["graph_break"]


def test_per_gpu_memory_tags_reach_tensorboard(word_lmdb, tmp_path, dev):
    cuda_only(dev, "CUDA memory statistics")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    trainer(word_lmdb, out, dev, "train.max_steps=3").fit()
    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "memory/peak_allocated_mib/rank0" in tags and "memory/peak_reserved_mib/rank0" in tags
    assert acc.Scalars("memory/peak_allocated_mib/rank0")[-1].value > 0


def test_a_gpu_checkpoint_loads_on_the_cpu_and_exports_to_onnx(word_lmdb, tmp_path, dev):
    pytest.importorskip("onnxruntime")
    from crnn.backends.onnx import OnnxBackend
    from crnn.export import compare_with_torch, export_onnx

    out = tmp_path / "x"
    trainer(word_lmdb, out, dev, "train.max_steps=3").fit()
    model, charset, spec = model_from_checkpoint(load_checkpoint(out / "last.pt"))
    assert next(model.parameters()).device.type == "cpu"
    path = export_onnx(model, charset, spec, tmp_path / "m.onnx")
    diffs = compare_with_torch(model, OnnxBackend(path), [32, 100], [1, 3])
    assert max(diffs.values()) < 1e-4


def test_recognizer_on_the_gpu_reads_like_the_cpu(word_lmdb, word_folder, tmp_path, dev):
    out = tmp_path / "rec"
    trainer(word_lmdb, out, dev, "train.max_steps=6").fit()
    images = sorted((word_folder / "images").iterdir())[:16]
    on_dev = Recognizer.from_checkpoint(out / "last.pt", device=dev).predict(images)
    on_cpu = Recognizer.from_checkpoint(out / "last.pt", device="cpu").predict(images)
    assert [p.text for p in on_dev] == [p.text for p in on_cpu]
    for a, b in zip(on_dev, on_cpu):
        assert a.confidence == pytest.approx(b.confidence, rel=1e-3, abs=1e-4)


def test_eval_on_the_second_gpu_opens_no_context_on_the_first(word_lmdb, tmp_path, dev):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    import subprocess
    import sys

    out = tmp_path / "ev"
    trainer(word_lmdb, out, dev, "train.max_steps=2").fit()
    # The driver's list of processes holding a context on each GPU (nvidia-smi), matched
    # by UUID: torch.cuda.memory_reserved(0) only sees the caching allocator and would
    # read 0 with a context open there.
    code = f"""
import os, subprocess, torch
from crnn.backends.torch import TorchBackend as T
b = T.from_checkpoint({str(out / "last.pt")!r}, device='cuda:1')
b(torch.zeros(1, 1, 32, 64, dtype=torch.uint8)); torch.cuda.synchronize(1)
uuid = {{i: 'GPU-' + str(torch.cuda.get_device_properties(i).uuid) for i in (0, 1)}}
apps = subprocess.run(['nvidia-smi', '--query-compute-apps=pid,gpu_uuid',
                       '--format=csv,noheader'], capture_output=True, text=True).stdout
rows = [a.split(',') for a in apps.splitlines()]
mine = [r[1].strip() for r in rows if r[0].strip() == str(os.getpid())]
print(uuid[0] in mine, uuid[1] in mine)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    on0, on1 = r.stdout.split()
    if on1 != "True":  # the check could not see this process at all (a PID namespace)
        pytest.skip("nvidia-smi does not list this container's processes")
    assert on0 == "False", "evaluating on cuda:1 opened a context on GPU 0"


def test_a_training_step_waits_for_the_gpu_only_in_ctc_and_the_nan_guard(word_lmdb, tmp_path, dev):
    """PyTorch's CUDA CTC kernel waits for the device itself (it copies its index
    tables from the host: 5 waits forward and 3 backward on torch 2.11, measured on an
    H200 in docs/bench/sync-probe-h200-2026-11-27.json; cuDNN's CTC waits 3 times but
    takes 2.6x as long). Beyond those, one non-logging step may wait once: the NaN guard
    reads the gradient norm. No ``.item()`` per step. A failure names each wait's line."""
    cuda_only(dev, "CUDA sync debugging")
    import torch.nn.functional as F

    t = trainer(word_lmdb, tmp_path / "s", dev, "train.grad_clip=0")
    batches = t.batches()
    t.train_module.train()
    t.train_step(batches)  # warm-up: cuDNN autotuning, allocator
    b = next(batches)
    targets = b["targets"].to(dev)
    logits = torch.randn(len(targets), 25, t.model.num_classes, device=dev, requires_grad=True)

    def bare_ctc() -> None:  # the kernel alone, laid out as the step lays it out
        lp = logits.log_softmax(-1).transpose(0, 1)
        lengths = torch.full((len(targets),), 25, dtype=torch.long)
        F.ctc_loss(lp, targets, lengths, b["target_lengths"], reduction="none").sum().backward()

    in_ctc = len(waits(bare_ctc))
    sites = waits(lambda: t.train_step(iter([b])))
    assert len(sites) <= in_ctc + 1, f"{len(sites)} waits, {in_ctc} of them CTC's:\n" + "\n".join(
        sites
    )


def waits(fn: Any) -> list[str]:
    """Where ``fn`` made the host wait for the GPU: one line of crnn frames per wait."""
    import traceback
    import warnings

    sites: list[str] = []

    def note(message: Any, *_: Any, **__: Any) -> None:
        if "synchroniz" in str(message).lower():
            frames = [f for f in traceback.extract_stack()[:-1] if "/crnn/" in f.filename]
            sites.append(
                " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[::-1][:3])
            )

    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = note
            fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sites


def test_backend_on_the_gpu_uses_autocast_without_changing_texts(word_lmdb, tmp_path, dev):
    cuda_only(dev, "bf16 inference")
    out = tmp_path / "amp"
    trainer(word_lmdb, out, dev, "train.max_steps=6").fit()
    model, charset, spec = model_from_checkpoint(load_checkpoint(out / "last.pt"))
    x = torch.randint(0, 256, (4, 1, 32, 100), dtype=torch.uint8)
    fp32 = TorchBackend(model, charset, spec, dev)(x).float()
    bf16 = TorchBackend(model, charset, spec, dev, amp="bf16")(x).float()
    assert (fp32.argmax(-1) == bf16.argmax(-1)).float().mean() > 0.95


def test_the_detector_trains_on_the_gpu_in_bf16_and_reads_as_on_the_cpu(dev, tmp_path) -> None:
    """task: detect on CUDA: autocast bf16 steps stay finite and move the weights; the
    trained model's map on the GPU matches the CPU's within bf16's precision."""
    from test_det_training import TINY_DET, write_scenes

    from crnn.config import apply_overrides, config_from_dict
    from crnn.engine.det_trainer import DetTrainer

    data = write_scenes(tmp_path / "scenes")
    cfg = apply_overrides(
        config_from_dict({}),
        [
            "task=detect",
            *TINY_DET,
            f'det.train=["{data}"]',
            f'det.val=["{data}"]',
            "data.num_workers=0",
            "train.batch_size=4",
            "train.max_steps=4",
            "train.val_every=4",
            "train.amp=bf16",
            f"train.output_dir={tmp_path / 'run'}",
        ],
    )
    t = DetTrainer(cfg, DistInfo(0, 0, 1, dev))
    before = t.model.prob_head.body[0][0].weight.detach().clone()
    result = t.fit()
    assert result.step == 4 and "hmean" in result.metrics
    assert not torch.equal(before, t.model.prob_head.body[0][0].weight.detach())
    cuda_only(dev, "CPU against GPU maps")
    x = torch.randint(0, 256, (1, 3, 96, 128), dtype=torch.uint8)
    t.model.eval()
    with torch.no_grad():
        gpu = t.model(x.to(dev)).float().cpu()
        cpu = t.model.cpu()(x)
    torch.testing.assert_close(gpu, cpu, atol=2e-3, rtol=0)
