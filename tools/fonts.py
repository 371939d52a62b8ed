"""The font sets recipes draw with: what is installed, and installing the rest.
See ``crnn.cli.fonts`` (or --help)."""

import sys
from pathlib import Path

try:
    import crnn  # noqa: F401
except ImportError:  # run from a clone without installing: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crnn.cli.fonts import main

if __name__ == "__main__":
    sys.exit(main())
