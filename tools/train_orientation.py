#!/usr/bin/env python3
"""Train the orientation classifier that finds upside-down crops (see --help)."""

import sys
from pathlib import Path

# Runnable from a clone without installing: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.orientation import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
