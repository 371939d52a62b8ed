#!/usr/bin/env python3
"""Train a CRNN (see --help). The same as the `crnn-train` command once installed."""

import sys
from pathlib import Path

# Runnable from a clone without installing: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.train import leave, main  # noqa: E402

if __name__ == "__main__":
    sys.exit(leave(main()))
