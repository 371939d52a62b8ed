"""The detector's training through the engine: a tiny run learns, checkpoints describe
themselves, resume is exact, the export reads as PyTorch does, the sampler is a function
of the step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from crnn.config import apply_overrides, config_from_dict
from crnn.data.detection import StepSampler
from crnn.engine.det_trainer import DetTrainer
from crnn.engine.distributed import DistInfo

TINY_DET = [
    "det.widths=[8,8,16,16]",
    "det.depths=[1,1,1,1]",
    "det.expand=2",
    "det.inner=16",
    "det.crop=64",
    "det.limit_side=128",
]


def write_scenes(folder: Path, n: int = 8, seed: int = 0) -> Path:
    """``n`` light images with 2-3 dark bars each (text lines to a detector), labelled
    ICDAR-style in labels/, corners in MTWI's order; one don't-care."""
    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    (folder / "labels").mkdir()
    for i in range(n):
        img = Image.new("RGB", (128, 96), tuple(int(v) for v in rng.integers(180, 255, 3)))
        draw = ImageDraw.Draw(img)
        rows = []
        for k in range(int(rng.integers(2, 4))):
            x0, y0 = int(rng.integers(4, 40)), 6 + 30 * k
            x1, y1 = x0 + int(rng.integers(40, 80)), y0 + int(rng.integers(12, 20))
            draw.rectangle([x0, y0, x1, y1], fill=(20, 20, 20))
            text = "###" if (i == 0 and k == 0) else f"line{k}"
            rows.append(f"{x0},{y0},{x0},{y1},{x1},{y1},{x1},{y0},{text}")
        img.save(folder / "images" / f"img_{i}.png")
        (folder / "labels" / f"img_{i}.txt").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture
def det_overrides(tmp_path: Path) -> list[str]:
    data = write_scenes(tmp_path / "scenes")
    return [
        "task=detect",
        *TINY_DET,
        f'det.train=["{data}"]',
        f'det.val=["{data}"]',
        "data.num_workers=0",
        "train.batch_size=4",
        "train.max_steps=6",
        "train.val_every=3",
        "train.log_every=1",
        "train.warmup_steps=2",
        "train.lr=3e-3",
        "train.cpu_bf16=false",
        f"train.output_dir={tmp_path / 'run'}",
    ]


def _trainer(overrides: list[str], resume: Path | None = None) -> DetTrainer:
    cfg = apply_overrides(config_from_dict({}), overrides)
    return DetTrainer(cfg, DistInfo(0, 0, 1, torch.device("cpu")), resume=resume)


def test_a_tiny_detector_run_validates_and_saves_a_self_describing_checkpoint(
    det_overrides, tmp_path
):
    t = _trainer(det_overrides)
    result = t.fit()
    assert result.step == 6
    assert set(result.metrics) == {"precision", "recall", "hmean"}
    ckpt = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    assert ckpt["kind"] == "detector" and ckpt["hparams"]["widths"] == [8, 8, 16, 16]
    assert ckpt["limit_side"] == 128 and ckpt["best"]["metric"] == "hmean"
    assert (tmp_path / "run" / "tb").is_dir()


def test_detector_resume_continues_exactly(det_overrides, tmp_path):
    base = [*det_overrides, "train.val_every=100", "train.save_every=3"]
    full = _trainer([*base, f"train.output_dir={tmp_path / 'full'}"])
    full.fit()
    part = _trainer([*base, f"train.output_dir={tmp_path / 'part'}"])
    assert part.fit(stop_at_step=3).step == 3
    resumed = _trainer(
        [*base, f"train.output_dir={tmp_path / 'part'}"], resume=tmp_path / "part" / "last.pt"
    )
    assert resumed.state.step == 3
    resumed.fit()
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_a_detector_fine_tune_averages_its_weights_from_the_start_and_resumes_exactly(
    det_overrides, tmp_path
):
    """train.ema_decay on a detector: the checkpoint's "model" (validated, best.pt,
    released) is the average, "model_raw" the trained weights; a fine-tune's average
    starts at the weights it starts from with its full decay; resume keeps both."""
    first = _trainer([*det_overrides, "train.max_steps=2", "train.val_every=100"])
    first.fit()
    start = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["model"]
    base = [
        *det_overrides,
        f"train.init_from={tmp_path / 'run' / 'last.pt'}",
        "train.ema_decay=0.9",
        "train.val_every=100",
        "train.save_every=3",
    ]
    full = _trainer([*base, f"train.output_dir={tmp_path / 'full'}"])
    full.fit()
    ckpt = torch.load(tmp_path / "full" / "last.pt", weights_only=True)
    raw, avg = ckpt["model_raw"], ckpt["model"]
    name = next(k for k, v in raw.items() if v.is_floating_point() and "running" not in k)
    trained = full.model.state_dict()
    torch.testing.assert_close(raw[name], trained[name], rtol=0, atol=0)
    # Six steps at decay 0.9 from the fine-tune's start: at least 0.9^6 = 53 % of it stays
    # (a warmed-up average would hold under 1 % of it: decay 1/10 at the first step).
    moved, kept = (raw[name] - start[name]).norm(), (avg[name] - start[name]).norm()
    assert moved > 0 and kept < 0.6 * moved
    assert not torch.equal(avg[name], raw[name])
    torch.testing.assert_close(full.trained.state_dict()[name], avg[name], rtol=0, atol=0)
    part = _trainer([*base, f"train.output_dir={tmp_path / 'part'}"])
    assert part.fit(stop_at_step=3).step == 3
    resumed = _trainer(
        [*base, f"train.output_dir={tmp_path / 'part'}"], resume=tmp_path / "part" / "last.pt"
    )
    resumed.fit()
    for m in ("model", "model_raw"):
        last = torch.load(tmp_path / "part" / "last.pt", weights_only=True)[m]
        for key, value in ckpt[m].items():
            torch.testing.assert_close(last[key], value, rtol=0, atol=0, msg=f"{m} {key}")


def test_the_sampler_is_a_function_of_the_step_whatever_the_split():
    one = StepSampler(10, 8, world=1, rank=0, accum=1, seed=3)
    it = iter(one)
    steps = [[next(it) for _ in range(8)] for _ in range(3)]
    # Two ranks x two accumulation steps draw the same global batch between them.
    parts = [iter(StepSampler(10, 8, world=2, rank=r, accum=2, seed=3)) for r in (0, 1)]
    got = []
    for _ in range(3):
        step = []
        for _m in range(2):
            for r in (0, 1):
                step += [next(parts[r]) for _ in range(2)]
        got.append(step)
    assert got == steps
    # Resuming at step 2 draws step 2's keys; each epoch visits every image once.
    assert [next(iter(StepSampler(10, 8, 1, 0, 1, 3, start_step=2))) for _ in range(1)] == steps[2][
        :1
    ]
    assert sorted(k[0] for k in (steps[0] + steps[1])[:10]) == list(range(10))


def test_train_cli_takes_a_detect_config(det_overrides, tmp_path):
    from crnn.cli.train import main

    sets = [o for o in det_overrides if not o.startswith("train.output_dir")]
    rc = main(
        [
            "--set",
            *sets,
            "train.max_steps=2",
            "--output-dir",
            str(tmp_path / "cli"),
            "--gpus",
            "cpu",
        ]
    )
    assert rc == 0 and (tmp_path / "cli" / "last.pt").is_file()


def test_train_cli_fine_tunes_the_bundled_detector_by_name(det_overrides, tmp_path):
    """crnn-train --set train.init_from=det_zh (docs/detection.md): the CLI took det_zh
    for a missing file and stopped before the detector's trainer could find it."""
    from crnn.cli.train import main
    from crnn.detect.runtime import bundled_detector_checkpoint

    if bundled_detector_checkpoint() is None:
        pytest.skip("this installation bundles no detector checkpoint")
    tiny = {o.split("=")[0] for o in TINY_DET} - {"det.crop", "det.limit_side"}
    sets = [
        o
        for o in det_overrides
        if not o.startswith("train.output_dir") and o.split("=")[0] not in tiny
    ]
    out = tmp_path / "tuned"
    argv = ["--set", *sets, "train.max_steps=1", "train.init_from=det_zh"]
    assert main([*argv, "--output-dir", str(out), "--gpus", "cpu"]) == 0
    assert torch.load(out / "last.pt", weights_only=True)["kind"] == "detector"


def test_exported_detector_reads_as_pytorch_and_finds_the_bars(det_overrides, tmp_path):
    """Trained on the bars for 200 steps (about 13 s), it learns to find them (hmean 0.69
    when written); exported, ONNX Runtime and PyTorch give the same map, and the ONNX
    detector finds lines in reading order."""
    pytest.importorskip("onnx")
    from crnn.cli.export import main as export_main
    from crnn.detect.runtime import OnnxDetector, TorchDetector

    t = _trainer(
        [
            *det_overrides,
            "det.crop=96",
            "train.max_steps=200",
            "train.val_every=200",
            "train.lr=1e-2",
            "train.warmup_steps=5",
        ]
    )
    assert t.fit().metrics["hmean"] > 0.3
    out = tmp_path / "det.onnx"
    assert export_main([str(tmp_path / "run" / "last.pt"), "-o", str(out)]) == 0
    onnx_det, torch_det = OnnxDetector(out), TorchDetector(tmp_path / "run" / "last.pt")
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 96, 128), dtype=np.uint8)
    np.testing.assert_allclose(onnx_det.prob_map(x), torch_det.prob_map(x), atol=1e-4)
    img = np.asarray(Image.open(tmp_path / "scenes" / "images" / "img_3.png").convert("RGB"))
    found = onnx_det.find(img)
    assert len(found) >= 1
    tops = [d.quad[:, 1].min() for d in found]
    assert tops == sorted(tops)
    # crnn-eval takes the detector (its .onnx) and a labelled set: one row of ICDAR figures.
    from crnn.cli.eval import main as eval_main

    report = tmp_path / "eval.json"
    assert eval_main([str(out), str(tmp_path / "scenes"), "--json", str(report)]) == 0
    (row,) = json.loads(report.read_text())
    assert row["images"] == 8 and 0 < row["hmean"] <= 1 and row["recall"] > 0.2


@pytest.mark.slow
def test_detector_ddp_on_two_cpu_ranks_equals_one_process_with_accumulation(
    det_overrides, tmp_path
):
    """`crnn-train --gpus cpu --nproc 2` (two gloo ranks, micro-batch 2) ends where one
    process does that sees the same micro-batches through accumulation (global batch 4
    both ways); rank 0 alone saves, with no module. prefix."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    base = [o for o in det_overrides if not o.startswith(("train.output_dir", "train.val_every"))]
    base += ["train.val_every=100", "train.max_steps=4"]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "crnn.cli.train",
        "--gpus",
        "cpu",
        "--nproc",
        "2",
        "--output-dir",
        str(tmp_path / "ddp"),
        "--set",
        *base,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one = _trainer([*base, "train.accum_steps=2", f"train.output_dir={tmp_path / 'one'}"])
    one.fit()
    ddp = torch.load(tmp_path / "ddp" / "last.pt", weights_only=True)
    assert ddp["step"] == 4 and not any(k.startswith("module.") for k in ddp["model"])
    # Parameters agree; BatchNorm's running statistics are rank 0's own micro-batches'.
    for name, p in one.model.named_parameters():
        torch.testing.assert_close(ddp["model"][name], p.detach(), rtol=1e-4, atol=1e-5, msg=name)
    init = _trainer([*base, f"train.output_dir={tmp_path / 'init'}"]).model
    assert not torch.allclose(
        ddp["model"]["prob_head.body.0.0.weight"], init.prob_head.body[0][0].weight
    )


@pytest.mark.slow
def test_sigterm_to_the_process_group_saves_the_detector_and_stops(det_overrides, tmp_path):
    """A scheduler's SIGTERM reaches the DataLoader workers too: they ignore it, the loop
    saves last.pt and the run exits as interrupted (130), resumable."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    sets = [
        o
        for o in det_overrides
        if not o.startswith(("train.output_dir", "data.num_workers", "train.max_steps"))
    ]
    cmd = [
        sys.executable,
        "-m",
        "crnn.cli.train",
        "--output-dir",
        str(tmp_path / "run"),
        "--set",
        *sets,
        "data.num_workers=1",
        "train.max_steps=100000",
        "train.val_every=100000",
    ]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = ""
    for line in proc.stderr:  # the loop is running once a step is logged
        seen += line
        if " step 3 loss" in line:
            break
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, seen + rest
    assert "DataLoader worker" not in rest
    assert torch.load(tmp_path / "run" / "last.pt", weights_only=True)["step"] >= 3


def test_a_detector_fine_tunes_from_a_detector_checkpoint(det_overrides, tmp_path):
    from crnn.data.errors import DataError

    first = _trainer([*det_overrides, "train.max_steps=2", "train.val_every=100"])
    first.fit()
    ckpt = tmp_path / "run" / "last.pt"
    saved = torch.load(ckpt, weights_only=True)["model"]
    tuned = _trainer(
        [*det_overrides, f"train.init_from={ckpt}", f"train.output_dir={tmp_path / 'tuned'}"]
    )
    assert tuned.state.step == 0  # a new run, from the checkpoint's weights
    for name, value in tuned.model.state_dict().items():
        torch.testing.assert_close(value, saved[name], rtol=0, atol=0, msg=name)
    # Another network's weights are refused, naming both shapes: wider, or shallower.
    with pytest.raises(DataError, match=r"det\.widths"):
        _trainer([*det_overrides, "det.widths=[8,16,16,16]", f"train.init_from={ckpt}"])
    deep = [*det_overrides, "det.depths=[1,2,3,2]", f"train.output_dir={tmp_path / 'deep'}"]
    deep_ckpt = tmp_path / "deep" / "last.pt"
    _trainer([*deep, "train.max_steps=1"]).fit()
    with pytest.raises(DataError, match="may be larger"):
        _trainer([*det_overrides, f"train.init_from={deep_ckpt}"])
    with pytest.raises(DataError, match="no such file"):
        _trainer([*det_overrides, f"train.init_from={tmp_path / 'missing.pt'}"])


def test_a_detector_grows_deeper_from_a_shallower_checkpoint_as_the_same_function(
    det_overrides, tmp_path
):
    """``train.init_from`` with larger ``det.depths`` (configs/det_zh_cpu_stage4.yaml):
    the old blocks load, each added block starts as the identity, so the grown network
    maps images as the checkpoint did, and the added blocks then learn."""
    _trainer([*det_overrides, "train.max_steps=3", "train.val_every=100"]).fit()
    ckpt = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    from crnn.model.dbnet import build_detector

    old = build_detector(ckpt["hparams"])
    old.load_state_dict(ckpt["model"])
    grown = _trainer(
        [
            *det_overrides,
            "det.depths=[1,2,3,2]",
            f"train.init_from={tmp_path / 'run' / 'last.pt'}",
            f"train.output_dir={tmp_path / 'grown'}",
            "train.max_steps=2",
            "train.val_every=100",
        ]
    )
    assert grown.model.hparams["depths"] == [1, 2, 3, 2]
    images = torch.randint(0, 256, (2, 3, 64, 96), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(grown.model.eval()(images), old.eval()(images))
    added = "backbone.stages.2.2.block.2.1.weight"  # stage 3's third block, new
    assert float(grown.model.state_dict()[added].abs().sum()) == 0.0
    grown.model.train()
    grown.fit()
    assert float(grown.model.state_dict()[added].abs().sum()) > 0.0  # it learns


def test_a_detector_run_fits_its_schedule_into_a_time_budget(det_overrides, tmp_path, monkeypatch):
    """``--time-budget`` (train.time_budget_min) decides a detector run's max_steps as it
    does a recognizer's (crnn.engine.budget), on a simulated clock, and the checkpoint
    keeps the decision for --resume."""
    from test_trainer import SimClock

    from crnn.engine import budget

    clock = SimClock(step_s=0.1)
    monkeypatch.setattr(budget, "clock", clock)
    t = _trainer(
        [
            *det_overrides,
            "train.max_steps=200",  # without a budget; the budget plans about 57
            "train.val_every=40",
            "train.log_every=50",
            "train.time_budget_min=0.1",
        ]
    )
    t.step_callbacks.append(clock.tick)
    result = t.fit()
    decided = t.state.budget
    assert decided and decided["max_steps"] == result.step == t.cfg.train.max_steps < 200
    assert 0.1 * 60 * 0.9 <= clock.now <= 0.1 * 60
    ckpt = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert ckpt["budget"] == decided and ckpt["config"]["train"]["max_steps"] == result.step


def test_a_detector_exported_with_its_batchnorms_folded_is_recovered_exactly(
    det_overrides, tmp_path
):
    """dev/det_weights_from_onnx.py: the folded convolutions back in a DBNet whose
    BatchNorms give the graph's function (checked against ONNX Runtime inside), with
    running statistics of real crops (near-identity batch statistics in training)."""
    pytest.importorskip("onnx")
    import importlib.util

    from crnn.export import export_detector_onnx
    from crnn.model.dbnet import build_detector

    torch.manual_seed(0)
    net = build_detector(
        {"widths": [8, 8, 16, 16], "depths": [1, 1, 1, 1], "expand": 2, "inner": 16}
    )
    with torch.no_grad():  # BatchNorms that fold into something other than the identity
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5), m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2.0)
    net.eval()
    onnx_file = export_detector_onnx(net, tmp_path / "det.onnx", limit_side=128)
    spec = importlib.util.spec_from_file_location(
        "det_weights_from_onnx", Path(__file__).parents[1] / "dev" / "det_weights_from_onnx.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "recovered.pt"
    assert script.main([str(onnx_file), str(tmp_path / "scenes"), str(out), "--crops", "4"]) == 0
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["kind"] == "detector" and ckpt["limit_side"] == 128
    again = build_detector(ckpt["hparams"])
    again.load_state_dict(ckpt["model"])
    x = torch.randint(0, 256, (1, 3, 64, 96), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(x), net(x), atol=1e-4, rtol=0)


def test_the_bundled_detector_ships_the_checkpoint_that_fine_tunes_from_det_zh(
    det_overrides, tmp_path
):
    """``train.init_from=det_zh`` starts from the ``.pt`` bundled beside the detector's
    ``.onnx``, which computes what the ``.onnx`` does."""
    from crnn.detect.runtime import OnnxDetector, bundled_detector_checkpoint, bundled_detector_path
    from crnn.model.dbnet import build_detector

    pt = bundled_detector_checkpoint()
    assert pt is not None and pt.stem == bundled_detector_path().stem
    ckpt = torch.load(pt, weights_only=True)
    net = build_detector(ckpt["hparams"])
    net.load_state_dict(ckpt["model"])
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 96, 128), dtype=np.uint8)
    with torch.no_grad():
        ours = net.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, OnnxDetector(bundled_detector_path()).prob_map(x), atol=1e-4)
    full = [
        o
        for o in det_overrides
        if not o.startswith(("det.widths", "det.depths", "det.expand", "det.inner"))
    ]
    tuned = _trainer([*full, "train.init_from=det_zh"])
    for name, value in tuned.model.state_dict().items():
        torch.testing.assert_close(value, ckpt["model"][name], rtol=0, atol=0, msg=name)


def test_training_crops_and_validation_enlarge_a_small_image_as_reading_does(
    det_overrides, tmp_path
):
    """det.enlarge: a small image's lines come to the network at the size reading gives
    them (long side to det.limit_side, up by at most det.enlarge), in training crops and in
    validation; 1 (the default) never enlarges."""
    from crnn.data.detection import DetAugment, augment

    image = np.full((40, 60, 3), 255, np.uint8)
    quad = np.array([[[10, 10], [50, 10], [50, 20], [10, 20]]], np.float32)
    fixed = dict(crop=128, limit_side=120, min_log2_scale=0.0, max_log2_scale=0.0, rotate_p=0)
    widths = {}
    for enlarge in (1.0, 4.0):
        aug = DetAugment(enlarge=enlarge, **fixed)
        _, moved = augment(image, quad, np.random.default_rng(0), aug)
        widths[enlarge] = float(moved[0, :, 0].max() - moved[0, :, 0].min())
    assert widths == {1.0: 40.0, 4.0: 80.0}  # 60 px to 120: twice, within the most (4)
    t = _trainer([*det_overrides, "det.limit_side=256", "det.enlarge=1.5"])
    assert t.aug.enlarge == 1.5
    seen = []

    def prob(x: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(x.shape))
        return torch.zeros(len(x), 1, *x.shape[2:])

    t.trained.forward = prob  # type: ignore[method-assign]
    t.validate()
    assert seen and all(max(s[2:]) == 192 for s in seen)  # 128 px images, 1.5 times
    with pytest.raises(Exception, match="det.enlarge"):
        _trainer([*det_overrides, "det.enlarge=0.5"])
