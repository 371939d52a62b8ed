"""Command-line entry points. ``tools/*.py`` and the ``crnn-*`` console scripts call
``main(argv) -> exit code`` here; argument parsing lives here, logic in the library."""

from __future__ import annotations

import logging
import sys

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
