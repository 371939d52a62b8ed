#!/usr/bin/env python3
"""Build a charset file from your labels (see --help). The same as `crnn-charset`."""

import sys
from pathlib import Path

# Runnable from a clone without installing: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.charset import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
