#!/usr/bin/env python3
"""Read text from images with a trained CRNN (see --help).
The same as the `crnn-predict` command once installed."""

import sys
from pathlib import Path

# Runnable from a clone without installing: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.predict import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
