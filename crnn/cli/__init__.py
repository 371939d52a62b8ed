"""Command-line entry points. ``tools/*.py`` and the ``crnn-*`` console scripts call
``main(argv) -> exit code`` here; argument parsing lives here, logic in the library."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

# Exit codes shared by every tool.
EXIT_OK = 0
EXIT_FAILURE = 1  # the job ran but some inputs failed (e.g. unreadable images)
EXIT_USAGE = 2  # bad arguments or configuration: nothing was done
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """Every command's argument parser: ``--version`` prints the package's version."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from crnn import __version__

        self.add_argument("--version", action="version", version=f"crnn-ocr {__version__}")


def setup_logging(verbose: bool = False, rank: int = 0) -> None:
    """Log to stderr; ranks other than 0 log warnings only, prefixed with their rank."""
    level = logging.DEBUG if verbose else logging.INFO
    if rank != 0:
        level = logging.WARNING
    prefix = f"[rank {rank}] " if rank else ""
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def _numbers(what: str, low: float, high: float, example: str, one: str) -> Any:
    """An argparse type: numbers between ``low`` and ``high`` separated by commas."""

    def parse(text: str) -> tuple[float, ...]:
        try:
            out = tuple(float(x) for x in text.split(","))
        except ValueError:
            out = ()
        if not out or not all(low <= x <= high for x in out):
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected {what} between {low:g} and {high:g} separated by commas, "
                f"e.g. {example} (1.0 {one})"
            )
        return out

    return parse


def add_stretch_arg(p: Any) -> None:
    """``--stretch``, ``--zoom``, ``--deslant`` and ``--view-sure`` (predict and serve): the
    widths and zooms each line is read at, from what lean a crop is also read upright, and
    from what confidence a line's read as given is kept without the others."""
    p.add_argument(
        "--stretch",
        type=_numbers("widths", 0.25, 4, "1.0,1.1", "reads a line as given"),
        default=None,
        metavar="W[,W...]",
        help="read each line at these widths, as multiples of its natural width, and keep the "
        "most confident read (default: 1.0,1.1 for a model that writes Chinese, where it "
        "misreads fewer characters at about 1.4 times the time; 1.0, once as given, for others)",
    )
    p.add_argument(
        "--zoom",
        type=_numbers("zooms", 1, 2, "1.0,1.2", "reads a line's whole height"),
        default=None,
        metavar="Z[,Z...]",
        help="also read each line zoomed in: at Z, the central 1/Z of its height enlarged Z "
        "times (at every --stretch width), keeping the most confident of all reads (default: "
        "1.0,1.2 for a model that writes Chinese, where photographed lines in loose boxes read "
        "better, at about twice the time; 1.0, the whole height only, for others)",
    )
    p.add_argument(
        "--deslant",
        type=_lean,
        default=None,
        metavar="DEG",
        help="also read a crop whose writing leans at least DEG degrees (italic and oblique "
        "signs) sheared upright, keeping the most confident read; 0: never (default: 8 for a "
        "model that writes Chinese, where photographed signs read better; 0 for others)",
    )
    p.add_argument(
        "--view-sure",
        type=_confidence,
        default=None,
        metavar="P",
        help="a line whose read as given is at least P confident keeps it, and is not read at "
        "its other widths, zooms and shear (default 0.7: on the Chinese development sets two "
        "lines of 1,439 read otherwise than with all views, one better, one worse, in 17-35 %% "
        "less time than at 0.9; 1: read every view)",
    )


def _bounded(low: float, high: float, expected: str) -> Any:
    """An argparse type: a number from ``low`` to ``high``; else the error says
    ``expected`` (what the option takes, with an example)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    return parse


# --view-sure's confidence and --deslant's degrees.
_confidence = _bounded(0, 1, "a confidence between 0 and 1, e.g. 0.9 (1 reads every view)")
_lean = _bounded(0, 90, "a lean in degrees between 0 and 90, e.g. 8 (0 reads as given)")


def add_scale_out_args(p: Any, what: str) -> None:
    """``--gpus`` and ``--nproc``: ``what`` each process does with its share."""
    p.add_argument(
        "--gpus",
        help=f"run on several GPUs at once (e.g. 0,1: one process each, every one reading its "
        f"share of the inputs; {what}); cpu with --nproc for CPU processes. Under torchrun each "
        "process reads its share the same way",
    )
    p.add_argument("--nproc", type=int, help="with --gpus cpu (or alone): this many CPU processes")
