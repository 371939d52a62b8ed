"""Timing shared by every benchmark: timed calls with medians, peak memory, CPU
seconds, a quiet-machine wait and the machine's description.

Benchmarks are not the library: nothing under ``crnn/`` imports this folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)


@dataclass
class Timing:
    """Images per second over ``repeats`` runs: median, min, max; and time per call."""

    per_s: list[float]
    ms_per_call: float
    images_per_call: int

    @property
    def median(self) -> float:
        return statistics.median(self.per_s)

    def as_dict(self) -> dict[str, Any]:
        return {
            "images_per_s": round(self.median, 2),
            "min": round(min(self.per_s), 2),
            "max": round(max(self.per_s), 2),
            "runs": [round(v, 2) for v in self.per_s],
            "ms_per_call": round(self.ms_per_call, 3),
            "images_per_call": self.images_per_call,
        }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(
    fn: Callable[[], Any],
    images_per_call: int,
    repeats: int = 5,
    seconds: float = 2.0,
    device: torch.device | None = None,
    warmup: int = 2,
) -> Timing:
    """Run ``fn`` ``warmup`` times, then ``repeats`` timed runs of as many calls as fill
    ``seconds`` (at least one); synchronises CUDA around each run."""
    device = device or torch.device("cpu")
    for _ in range(warmup):
        fn()
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    one = max(time.perf_counter() - t0, 1e-6)
    calls = max(1, int(seconds / one))
    rates, per_call = [], []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        dt = time.perf_counter() - t0
        rates.append(calls * images_per_call / dt)
        per_call.append(dt / calls)
    return Timing(rates, 1000 * statistics.median(per_call), images_per_call)


class PeakMemory:
    """Peak memory of a block: the CUDA allocator's on a GPU, else the process's peak
    resident set, reset at entry (Linux ``/proc/self/clear_refs``; None elsewhere)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.mib: float | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            with contextlib.suppress(OSError):
                Path("/proc/self/clear_refs").write_text("5")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            self.mib = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self.mib = vm_hwm_mib()


def vm_hwm_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def others_busy_cores(interval: float = 2.0) -> float | None:
    """CPU cores kept busy by *other* processes over ``interval`` seconds (Linux
    ``/proc/stat`` minus this process); None where that cannot be read."""

    def busy() -> float:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return (sum(vals) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")

    try:
        t0, b0, m0 = time.monotonic(), busy(), sum(os.times()[:4])
        time.sleep(interval)
        t1, b1, m1 = time.monotonic(), busy(), sum(os.times()[:4])
    except (OSError, ValueError):
        return None
    return max(0.0, (b1 - b0 - (m1 - m0)) / (t1 - t0))


def wait_for_quiet(wait_load: float, timeout_s: float, what: str) -> float:
    """Wait until the machine is quiet (if ``wait_load`` > 0): the 1-minute load
    average below it, or, since this benchmark's own previous figure raises that
    average, other processes using under 0.25 cores; at most ``timeout_s``. Returns the
    load average when measuring starts (recorded with each figure)."""
    load = os.getloadavg()[0]
    if wait_load <= 0:
        return load
    t0 = time.monotonic()
    while load >= wait_load and time.monotonic() - t0 < timeout_s:
        others = others_busy_cores()
        if others is not None and others < 0.25:
            break  # the load is our own
        log.info(
            "load average %.2f, other processes %.2f cores: waiting before %s",
            load,
            others or -1,
            what,
        )
        time.sleep(15)
        load = os.getloadavg()[0]
    if time.monotonic() - t0 >= timeout_s:
        log.warning("machine still busy after %.0f s; measuring %s anyway", timeout_s, what)
    return load


def machine_info(device: torch.device) -> dict[str, Any]:
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, Any] = {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "platform": platform.platform(),
    }
    with contextlib.suppress(ImportError):
        import onnxruntime

        info["onnxruntime"] = onnxruntime.__version__
    with contextlib.suppress(ImportError):
        import PIL

        info["pillow"] = PIL.__version__
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
        info["cudnn"] = torch.backends.cudnn.version()
    return info


def cpu_and_wall(fn: Callable[[], Any]) -> tuple[float, float]:
    """``(CPU seconds of this process, wall seconds)`` that ``fn()`` takes."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0
