"""The console scripts' entry points: each checks that what its command needs is
installed before importing it, so a reader-only install (``pip install crnn-ocr``: ONNX
Runtime, NumPy, Pillow, OpenCV, pypdfium2) says what to install instead of failing with
a traceback. ``pip install 'crnn-ocr[train]'`` adds PyTorch, LMDB, TensorBoard and the
generator's font tools; ``[serve]`` the HTTP server's packages."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable

EXIT_USAGE = 2
TRAIN = ("torch", "lmdb", "tensorboard", "fontTools")
# What each command imports beyond the reader-only install, and the extra that brings it.
NEEDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "train": ("crnn.cli.train", TRAIN, "train"),
    "create_lmdb": ("crnn.cli.create_lmdb", ("lmdb",), "train"),
    "synth": ("crnn.cli.synth", ("fontTools",), "train"),
    "convert": ("crnn.cli.convert_checkpoint", ("torch",), "train"),
    "export": ("crnn.cli.export", ("torch",), "train"),
    "curves": ("crnn.cli.curves", ("tensorboard",), "train"),
    "fonts": ("crnn.cli.fonts", ("fontTools",), "train"),
    "charset": ("crnn.cli.charset", (), ""),
    "predict": ("crnn.cli.predict", (), ""),
    "eval": ("crnn.cli.eval", ("torch",), "train"),
    "serve": ("crnn.cli.serve", ("fastapi", "uvicorn"), "serve"),
}


def missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def run(name: str, argv: list[str] | None = None) -> int:
    module, needs, extra = NEEDS[name]
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:  # answered whatever is installed
        from crnn import __version__

        print(f"crnn-ocr {__version__}")
        return 0
    absent = missing(needs)
    if absent:
        command = f"crnn-{name.replace('_', '-')}"
        print(
            f"{command} needs {', '.join(absent)}, which this install lacks (a reader-only "
            f"`pip install crnn-ocr` reads images without them). Install them with: "
            f"pip install 'crnn-ocr[{extra}]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    main: Callable[[list[str] | None], int] = importlib.import_module(module).main
    return main(argv)


def _entry(name: str) -> Callable[[], int]:
    def entry(argv: list[str] | None = None) -> int:
        return run(name, argv)

    entry.__name__ = name
    return entry


def train(argv: list[str] | None = None) -> int:
    """``crnn-train``; a launched rank ends as :func:`crnn.cli.train.leave` says."""
    code = run("train", argv)
    if code == EXIT_USAGE and missing(TRAIN):
        return code
    from crnn.cli.train import leave

    return leave(code)


predict = _entry("predict")
eval = _entry("eval")  # noqa: A001 (the command's name)
create_lmdb = _entry("create_lmdb")
synth = _entry("synth")
convert = _entry("convert")
export = _entry("export")
curves = _entry("curves")
charset = _entry("charset")
fonts = _entry("fonts")
serve = _entry("serve")
