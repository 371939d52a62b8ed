"""Draw a training run's curves (loss, validation CER, ...) as one PNG.

Reads the TensorBoard event files tools/train.py wrote into the run directory and draws a
panel per scalar, for a model card, a report or an issue, where a picture is read and a
TensorBoard is not:

    tools/curves.py runs/crnn_zh_cpu                  # -> runs/crnn_zh_cpu/curves.png
    tools/curves.py runs/a -o a.png --tags train/loss val/synth_val/cer

Exit codes: 0 written, 2 bad input (no event files, none of the tags; nothing written).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.reports.curves")


def build_parser() -> argparse.ArgumentParser:
    from crnn.reports.curves import DEFAULT_TAGS

    p = Parser(
        prog="curves.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", help="a run directory (with tb/) or a tb/ folder")
    p.add_argument("-o", "--out", help="the PNG to write (default RUN/curves.png)")
    p.add_argument(
        "--tags",
        nargs="+",
        default=list(DEFAULT_TAGS),
        help=f"scalars to draw, one panel each, those logged (default: {' '.join(DEFAULT_TAGS)})",
    )
    p.add_argument(
        "--title", default=None, help="a line above the panels (default: the run's name)"
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.reports.curves import draw_curves, read_scalars

    run = Path(args.run)
    try:
        series = read_scalars(run, args.tags)
        if not series:
            raise ValueError(f"{run} logged none of {', '.join(args.tags)}")
        img = draw_curves(series, args.title if args.title is not None else run.resolve().name)
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    out = Path(args.out) if args.out else (run.parent if run.name == "tb" else run) / "curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    log.info("wrote %s (%s)", out, ", ".join(f"{t}: {len(v)} points" for t, v in series.items()))
    return EXIT_OK
