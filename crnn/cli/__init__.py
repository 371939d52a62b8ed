"""Command-line entry points. ``tools/*.py`` and the ``crnn-*`` console scripts call
``main(argv) -> exit code`` here; argument parsing lives here, logic in the library."""

from __future__ import annotations

import logging
import sys
from typing import Any

# Exit codes shared by every tool.
EXIT_OK = 0
EXIT_FAILURE = 1  # the job ran but some inputs failed (e.g. unreadable images)
EXIT_USAGE = 2  # bad arguments or configuration: nothing was done
EXIT_INTERRUPTED = 130


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


def add_scale_out_args(p: Any, what: str) -> None:
    """``--gpus`` and ``--nproc``: ``what`` each process does with its share."""
    p.add_argument(
        "--gpus",
        help=f"run on several GPUs at once (e.g. 0,1: one process each, every one reading its "
        f"share of the inputs; {what}); cpu with --nproc for CPU processes. Under torchrun each "
        "process reads its share the same way",
    )
    p.add_argument("--nproc", type=int, help="with --gpus cpu (or alone): this many CPU processes")
