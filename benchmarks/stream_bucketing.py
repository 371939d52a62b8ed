"""What width bucketing of the generator's stream saves: the trainer's own optimizer
step on batches drawn at random, sorted by the labels' width guesses, and sorted by the
widths the images came out at, side by side in one run.

    python benchmarks/stream_bucketing.py                          # configs/crnn_zh_cpu.yaml
    python benchmarks/stream_bucketing.py --config configs/crnn_cpu.yaml --batches 40

The generator is endless, so batches used to be random draws of its lines: with lines of
1 to 12 characters a batch is padded to its longest line. ``guessed``
(``MixedBatchSampler(width_hints=...)``): each window of 50 batches is sorted by the
lines' label widths before it is drawn. ``drawn`` (what training does,
``width_sorted_windows``): each window of 50 random batches is drawn, then sorted by
the images' widths. This script renders ``--batches`` global batches of each kind in
this process first (rendering is not timed), then times ``Trainer.train_step`` on
them, the kinds interleaved in blocks of 5 steps so all see the same machine load,
and prints pixels per batch, the padding share and images per second of each, and
the ratios to random batches. Same model, optimizer and batch size for all.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

# Runnable as a script from a clone: put the repository root on the path.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from crnn.config import load_config  # noqa: E402
from crnn.data.batching import MixedBatchSampler, collate, width_sorted_windows  # noqa: E402
from crnn.engine.data import SORT_WINDOW  # noqa: E402
from crnn.engine.distributed import DistInfo  # noqa: E402
from crnn.engine.trainer import Trainer  # noqa: E402

BLOCK = 5


def draw(
    ds: Any, sampler: MixedBatchSampler, count: int, sort: bool = False
) -> list[dict[str, Any]]:
    it = iter(sampler)
    drawn = ([ds[k] for k in next(it)] for _ in range(count))
    if sort:  # as the trainer does (engine/data.py), windows of SORT_WINDOW batches
        return list(width_sorted_windows(drawn, SORT_WINDOW, 0, 0, sampler.seed))
    return [collate(b) for b in drawn]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default="configs/crnn_zh_cpu.yaml")
    ap.add_argument(
        "--batches", type=int, default=50, help="global batches of each kind (default 50)"
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    out = Path("/tmp/crnn-stream-bucketing")
    cfg = load_config(
        args.config, [f"train.output_dir={out}", "data.num_workers=0", "dist.strategy=none"]
    )
    trainer = Trainer(cfg, DistInfo())
    ds = trainer.data.dataset
    part = ds.parts[0]  # type: ignore[attr-defined]
    bs, seed = cfg.train.batch_size, cfg.train.seed
    kinds = {
        "random": MixedBatchSampler([None], [1.0], bs, seed=seed),
        "guessed": MixedBatchSampler([None], [1.0], bs, seed=seed, width_hints=[part.width_hint]),
        "drawn": MixedBatchSampler([None], [1.0], bs, seed=seed),
    }
    batches = {k: draw(ds, s, args.batches, sort=k == "drawn") for k, s in kinds.items()}
    times: dict[str, float] = dict.fromkeys(kinds, 0.0)
    for k in kinds:  # warm-up: allocator, oneDNN primitives for several widths
        for b in batches[k][:3]:
            trainer.train_step(iter([b]))
    for start in range(0, args.batches, BLOCK):
        for k in kinds:
            chunk = batches[k][start : start + BLOCK]
            t0 = time.perf_counter()
            for b in chunk:
                trainer.train_step(iter([b]))
            times[k] += time.perf_counter() - t0
    rows = {}
    for k in kinds:
        w = [b["widths"] for b in batches[k]]
        padded = sum(int(x.max()) * len(x) for x in w)
        used = sum(int(x.sum()) for x in w)
        rows[k] = {
            "padded_width": round(padded / sum(len(x) for x in w), 1),
            "mean_width": round(used / sum(len(x) for x in w), 1),
            "padding_share": round(1 - used / padded, 4),
            "step_s": round(times[k] / args.batches, 4),
            "images_per_s": round(args.batches * bs / times[k], 1),
        }
    ratios = {k: round(rows[k]["images_per_s"] / rows["random"]["images_per_s"], 3) for k in rows}
    print(
        f"{args.config}: {args.batches} global batches of {bs} per kind, torch "
        f"{torch.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}"
    )
    print(
        f"{'batches':<10}{'mean width':>12}{'padded to':>11}{'padding':>9}"
        f"{'s/step':>8}{'images/s':>10}"
    )
    for k, r in rows.items():
        print(
            f"{k:<10}{r['mean_width']:>12}{r['padded_width']:>11}{r['padding_share']:>9.1%}"
            f"{r['step_s']:>8.3f}{r['images_per_s']:>10}"
        )
    print(
        f"images per second over random batches: guessed {ratios['guessed']:.2f}x, drawn "
        f"{ratios['drawn']:.2f}x"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "config": args.config,
                    "rows": rows,
                    "ratios": ratios,
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
