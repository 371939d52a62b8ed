"""bf16 on the CPU only where it is measured faster (train.cpu_bf16)."""

from __future__ import annotations

import logging
import random

import pytest
import torch

from crnn.config import load_config
from crnn.engine import cpu_precision
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.precision import autocast_for, cpu_bf16_units

AVX2 = "flags\t\t: fpu sse2 avx avx2 fma\n"
BF16 = "flags\t\t: fpu sse2 avx avx2 avx512f avx512_bf16 amx_bf16\n"
CPU = torch.device("cpu")


def timed(costs: dict[str, float]):
    """A probe whose steps take ``costs[amp]`` seconds (by the clock the timing reads)."""
    clock = {"t": 0.0}

    def step(amp: str) -> None:
        clock["t"] += costs[amp]

    return lambda: step, clock


def test_units_come_from_the_cpus_flags() -> None:
    assert cpu_bf16_units(AVX2) == [] and cpu_bf16_units(BF16) == ["amx_bf16", "avx512_bf16"]


@pytest.mark.parametrize(
    ("cpuinfo", "costs", "want"),
    [
        (AVX2, {"none": 1.0, "bf16": 0.1}, "none"),  # emulated: not even timed
        (BF16, {"none": 1.0, "bf16": 0.6}, "bf16"),  # 1.6x: kept
        (BF16, {"none": 1.0, "bf16": 0.95}, "none"),  # within the noise: fp32
    ],
)
def test_auto_keeps_bf16_only_where_the_cpu_has_units_and_it_is_faster(
    monkeypatch, cpuinfo: str, costs: dict[str, float], want: str
) -> None:
    make, clock = timed(costs)
    monkeypatch.setattr(cpu_precision.time, "perf_counter", lambda: clock["t"])
    assert cpu_precision.decide("auto", CPU, make, cpuinfo) == want
    assert cpu_precision.decide(True, CPU, make, AVX2) == "bf16"
    assert cpu_precision.decide(False, CPU, make, BF16) == "none"
    assert cpu_precision.decide("auto", CPU, make, BF16, distributed=True) == "none"


def test_bf16_on_the_cpu_autocasts_the_cnn_and_training_runs(tiny_overrides, caplog) -> None:
    with autocast_for(CPU, "bf16"):
        assert torch.nn.Linear(4, 4)(torch.ones(1, 4)).dtype == torch.bfloat16
    with autocast_for(CPU, "none"):
        assert torch.nn.Linear(4, 4)(torch.ones(1, 4)).dtype == torch.float32
    with caplog.at_level(logging.INFO, logger="crnn"):
        t = Trainer(
            load_config(None, [*tiny_overrides, "train.cpu_bf16=true", "train.max_steps=2"]),
            DistInfo(),
        )
    assert t.amp == "bf16" and t.train_module.amp == "bf16"
    before = {k: v.clone() for k, v in t.model.state_dict().items()}
    t.fit()
    assert any(not torch.equal(before[k], v) for k, v in t.model.state_dict().items())
    assert all(
        torch.isfinite(v).all() for v in t.model.state_dict().values() if v.is_floating_point()
    )


def test_the_probe_leaves_the_run_as_it_found_it(tiny_overrides) -> None:
    """Weights, BatchNorm statistics, gradients and the random states are as before the
    probe, so a run that timed bf16 and kept fp32 trains as one that never timed."""
    t = Trainer(load_config(None, [*tiny_overrides, "train.cpu_bf16=false"]), DistInfo())
    before = {k: v.clone() for k, v in t.model.state_dict().items()}
    rng = torch.get_rng_state(), random.getstate()
    step = cpu_precision.probe(t)
    step("none")
    step("bf16")
    assert all(torch.equal(before[k], v) for k, v in t.model.state_dict().items())
    assert all(p.grad is None for p in t.model.parameters())
    assert torch.equal(torch.get_rng_state(), rng[0]) and random.getstate() == rng[1]


def test_a_reader_on_a_cpu_without_bf16_units_reads_in_fp32(monkeypatch, caplog) -> None:
    """crnn-eval --amp bf16 on an AVX2-only CPU: emulated bf16, many times slower and
    rounded differently; the reader says so and reads in fp32. Where the CPU has the
    units, bf16 is kept; fp16 has no CPU autocast at all."""
    import logging

    from crnn import precision
    from crnn.backends import load_backend
    from crnn.reading.recognizer import default_checkpoint

    def backend(amp: str):  # noqa: ANN202
        return load_backend(default_checkpoint(prefer_onnx=False), device="cpu", amp=amp)

    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda cpuinfo=None: [])
    assert backend("bf16").amp == "none" and "no bfloat16 units" in caplog.text
    assert backend("fp16").amp == "none" and "fp16 autocast is for CUDA" in caplog.text
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda cpuinfo=None: ["avx512_bf16"])
    assert backend("bf16").amp == "bf16"
