"""Benchmark the synthetic text generator: images per second on one CPU core.

    python benchmarks/synth.py                 # alnum36, 32 px, default config
    python benchmarks/synth.py --charset ascii95 --count 5000

Each row renders ``--count`` word images in this one process (no workers), after a
warm-up that fills the per-process glyph cache (as a long-running DataLoader worker
has); the "cold" row times the first images of a fresh generator, cache warm-up
included. Between the two, ``SynthGenerator.warm_up()`` rasterises every glyph
the config can use (its time is printed). CPU time (``time.process_time``) is reported next to
wall time, since on a
shared machine the wall clock also counts other processes.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path

# Runnable as a script from a clone: put the repository root on the path.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import cpu_and_wall  # noqa: E402
from crnn.config import SynthConfig  # noqa: E402
from crnn.data.synth import SynthGenerator, effects_off  # noqa: E402
from crnn.data.synth import render as render_module  # noqa: E402
from crnn.data.synth.export import encode_png  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402


def _time(gen: SynthGenerator, start: int, count: int, png: bool) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to render ``count`` samples from ``start``."""

    def render() -> None:
        for i in range(start, start + count):
            img, _ = gen.render(i)
            if png:
                encode_png(img)

    return cpu_and_wall(render)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--charset", default="alnum36")
    p.add_argument("--height", type=int, default=32)
    p.add_argument("--count", type=int, default=3000, help="images timed per row")
    p.add_argument("--warmup", type=int, default=5000, help="images rendered before timing")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per row; the best is kept")
    args = p.parse_args(argv)

    charset = Charset.from_spec(args.charset)
    default = SynthConfig()
    rows = [
        ("default config (effects on)", default, False),
        ("default config + PNG encode", default, False),
        ("effects off (clean)", effects_off(default), False),
    ]
    for name in ("p_rotate", "p_perspective", "p_curve", "p_blur", "p_noise", "p_jpeg"):
        rows.append(
            (
                f"effects off + {name}=1",
                dataclasses.replace(effects_off(default), **{name: 1.0}),
                False,
            )
        )

    # Cold start: a fresh process-wide glyph cache, the first images of a generator.
    render_module._glyph_cache.cache_clear()
    t0 = time.perf_counter()
    gen = SynthGenerator(charset, default, seed=0, height=args.height)
    init_s = time.perf_counter() - t0
    cold_n = min(args.count, 2000)
    cold_cpu, _ = _time(gen, 0, cold_n, png=False)

    # Warm the glyph cache as a long-running worker (or one forked after warm_up()) has.
    t0 = time.perf_counter()
    n_glyphs = gen.warm_up()
    warm_s = time.perf_counter() - t0
    _time(gen, 0, args.warmup, png=False)

    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"charset {args.charset}, height {args.height}, {len(gen.fonts)} fonts, "
        f"{args.count} images x best of {args.repeat}, single process"
    )
    print(
        f"# generator construction (font scan): {init_s:.2f} s; warm_up(): {n_glyphs} glyphs in "
        f"{warm_s:.1f} s"
    )
    print(
        f"| {'configuration':34s} | {'images/s (CPU)':>14s} | {'ms/image':>8s} | "
        f"{'images/s (wall)':>15s} |"
    )
    print(f"| {'-' * 34} | {'-' * 14}:| {'-' * 8}:| {'-' * 15}:|")
    print(
        f"| {'cold: first ' + str(cold_n) + ' images, default':34s} | {cold_n / cold_cpu:14.0f} | "
        f"{cold_cpu / cold_n * 1e3:8.3f} | {'':>15s} |"
    )
    for i, (label, cfg, _) in enumerate(rows):
        g = SynthGenerator(charset, cfg, seed=0, height=args.height)
        png = "PNG" in label
        best_cpu, best_wall = float("inf"), float("inf")
        for r in range(args.repeat):
            # Fresh indices each run (the glyph cache is warm; images are new).
            cpu, wall = _time(g, 10**6 * (i + 1) + r * args.count, args.count, png)
            best_cpu, best_wall = min(best_cpu, cpu), min(best_wall, wall)
        print(
            f"| {label:34s} | {args.count / best_cpu:14.0f} | {best_cpu / args.count * 1e3:8.3f} | "
            f"{args.count / best_wall:15.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
