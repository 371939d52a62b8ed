"""Train the orientation classifier that tells upside-down crops from upright ones
(crnn/reading/orientation.py), on real crops and generated lines, each seen both ways, and write
it as ONNX:

    tools/train_orientation.py --real ../shared/data/real/iiit5k_train
    ../shared/data/real/ic15_train \\
        --synth configs/crnn_en.yaml:6000 configs/crnn_zh.yaml:8000 -o crnn/assets/models

A share of every source (--holdout) is kept out of training and reported: accuracy, and
at each threshold how many upright crops would be called turned and how many turned ones
caught (JSON beside the model with --json). Never train it on a set you measure on.

Exit codes: 0 written, 2 bad input (a folder without gt.txt, a bad --synth entry).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.reading.orientation")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="train_orientation.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--real", nargs="*", default=[], help="folders of crops with a gt.txt (labels unused)"
    )
    p.add_argument(
        "--synth",
        nargs="*",
        default=[],
        metavar="RECIPE:COUNT",
        help="generated lines: a recipe whose data.synth draws them, and how many",
    )
    p.add_argument("-o", "--out", required=True, help="folder for orient-<hash>.onnx")
    p.add_argument(
        "--holdout", type=float, default=0.1, help="share of each source held out (default 0.1)"
    )
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument(
        "--minutes", type=float, default=0.0, help="stop after this many minutes (0: no cap)"
    )
    p.add_argument(
        "--channels",
        default="8,16,32,64,96",
        help="the five convolutions' widths (default 8,16,32,64,96)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the held-out report here")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.engine import orientation as orient

    rng = random.Random(args.seed)
    sources = {}
    try:
        for folder in args.real:
            sources[Path(folder).name] = orient.real_crops(folder)
        for i, entry in enumerate(args.synth):
            recipe, _, count = entry.rpartition(":")
            if not recipe or not count.isdigit():
                raise ValueError(
                    f"--synth {entry!r}: expected RECIPE:COUNT, e.g. configs/crnn_zh.yaml:8000"
                )
            name = f"synth:{Path(recipe).stem}"
            sources[name if name not in sources else f"{name}:{i}"] = orient.synthetic_lines(
                recipe, int(count), args.seed + i
            )
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    if not any(sources.values()):
        log.error("no crops: give --real folders or --synth recipes")
        return EXIT_USAGE
    train, held = [], {}
    for name, images in sources.items():
        rng.shuffle(images)
        k = round(len(images) * args.holdout)
        held[name], rest = images[:k], images[k:]
        train += rest
        log.info("%s: %d crops, %d held out", name, len(images), k)
    channels = tuple(int(c) for c in args.channels.split(","))
    model = orient.train_classifier(
        orient.both_ways(train, rng),
        epochs=args.epochs,
        seed=args.seed,
        minutes=args.minutes,
        channels=channels,
    )
    from crnn.reading.orientation import OrientationClassifier

    path = orient.export_classifier(model, args.out)
    result = orient.report(OrientationClassifier(path), held)
    for name, r in result.items():
        log.info(
            "held out %s: %d crops, accuracy %.4f; upright called turned %s; turned caught %s",
            name,
            r["crops"],
            r["accuracy"],
            r["upright_called_turned"],
            r["turned_caught"],
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"model": path.name, "args": vars(args), "held_out": result}, indent=1)
        )
    log.info("wrote %s", path)
    return EXIT_OK
