#!/usr/bin/env python3
"""Write an LMDB dataset from an image folder and a gt.txt (see --help).
The same as the `crnn-create-lmdb` command once installed."""

import sys
from pathlib import Path

# Runnable from a clone without installing: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.create_lmdb import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
