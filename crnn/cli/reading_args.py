"""The reading options every front end that reads takes, parsed in one place:
``crnn-predict`` and ``crnn-eval`` add them with :func:`add_reading_args` and build the
reader with :func:`load_reader`, so that an evaluation reads exactly as a prediction
does (the same defaults, the same views, turns, layout and decoding)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from crnn.cli import add_stretch_arg

log = logging.getLogger("crnn.predict")


def add_reading_args(p: argparse.ArgumentParser, layout: bool = True) -> None:
    """Decoding (beam, prior, lexicon, numerals), views (turns, widths, zooms, lean),
    layout (``layout=False``: where each request says it, the server) and line finding,
    and where the model runs."""
    p.add_argument(
        "--beam",
        type=int,
        default=None,
        metavar="N",
        help="CTC prefix beam search "
        "keeping N prefixes; 0: greedy decoding (default: 8 with a language prior, else 0)",
    )
    p.add_argument(
        "--lm",
        metavar="FILE|none",
        help="language prior for the beam search, which "
        "character follows which: from a word<TAB>count file (UTF-8, one word per line), "
        "or 'none' (default: the bundled Chinese word counts for a model that writes "
        "Chinese, else none)",
    )
    p.add_argument(
        "--lm-weight",
        type=float,
        default=None,
        metavar="W",
        help="nats of image evidence one nat of the prior is worth (default 0.8)",
    )
    p.add_argument(
        "--lexicon",
        metavar="FILE",
        help="word list, one per line: output the most probable word close to what was read",
    )
    p.add_argument(
        "--max-edits",
        type=int,
        default=2,
        help="how many character edits a lexicon word may be from the read text (default 2)",
    )
    p.add_argument(
        "--no-numeral-fix",
        dest="numerals",
        action="store_false",
        help="keep an o that was read inside a number (default: read it as 0, as old-style "
        "figures draw 0 as round as an o: 4,ooo -> 4,000; never inside a word)",
    )
    p.add_argument(
        "--squeeze",
        action="store_true",
        help="cap image widths at the model's training width (as training does) instead of "
        "reading each image whole: better for a word model on long word crops, wrong for lines",
    )
    p.add_argument(
        "--rotate",
        choices=("none", "pages", "auto"),
        default="pages",
        help="pages (default): turn a page over when its lines read more probably upside down, "
        "read an image taller than wide turned 90/270 degrees too, and a crop the orientation "
        "classifier calls upside down turned 180 degrees too; auto: besides, read "
        "every image upside down too (a turn is kept only when it reads far more probably); "
        "none: read everything as given. A turn is 'rotation' in JSON (and a 4th column "
        "with auto)",
    )
    add_stretch_arg(p)
    if layout:
        add_layout_arg(p)
    p.add_argument(
        "--finder",
        choices=("auto", "detector", "classical"),
        default="auto",
        help="how a page's lines are found: auto (default): the learned text detector on "
        "photographs, product and web images and other pictures, the classical page finder "
        "on clean pages, scans and long screenshots (decided from the image: "
        "docs/detection.md); detector or classical: always that one",
    )
    p.add_argument(
        "--detector",
        default="bundled",
        metavar="PATH",
        help="the text detector: bundled (default), an .onnx export or a task: detect "
        "checkpoint, or none (the classical page finder only)",
    )
    p.add_argument(
        "--batch-size", type=int, default=64, help="images per forward pass (default 64)"
    )
    p.add_argument(
        "--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)"
    )
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads for inference (default: all cores)"
    )


def add_layout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--layout",
        choices=("auto", "line", "page"),
        default="auto",
        help="auto (default): read an image as a page only when it holds several stacked "
        "lines of print small against it and they read more probably one by one than the "
        "image read whole; read everything else (a word or line crop of any size, a sign, "
        "a photo) whole, as one line; line: read every image whole; page: always find "
        "lines. An image in which no line is found is read whole, with a warning",
    )


def checkpoint_arg(args: argparse.Namespace) -> str:
    """The model file to read with: the checkpoint named, or a bundled model's (by
    ``--model``, or a bundled model's name given as the checkpoint: word, line, zh)."""
    from crnn.bundled import model_file

    return model_file(args.checkpoint or args.model, args.device)


def load_reader(args: argparse.Namespace, **extra: Any) -> Any:
    """The Recognizer the arguments ask for (:class:`crnn.reading.options.ReadOptions`
    from them; PyTorch is imported only for a PyTorch checkpoint), ``extra``: more of
    ``Recognizer.from_checkpoint``'s options. Raises with a message for the user on bad
    input."""
    from crnn.reading.options import ReadOptions

    ckpt = checkpoint_arg(args)
    rec = ReadOptions.from_args(args).reader(ckpt, **extra)
    if rec.lm is not None and rec.lm_weight > 0 and rec.beam_width > 0:
        log.info(
            "decoding: beam %d, language prior over %d characters, weight %g",
            rec.beam_width,
            rec.lm.covered,
            rec.lm_weight,
        )
    if getattr(rec.backend, "quantization", ""):
        log.info("%s is %s-quantised (see docs/benchmarks.md)", ckpt, rec.backend.quantization)
    if rec.lexicon is not None:
        log.info("lexicon: %d words", len(rec.lexicon))
        if rec.lexicon.skipped:
            log.warning(
                "lexicon: %d words have characters the model cannot write and were left out "
                "(e.g. %s)",
                len(rec.lexicon.skipped),
                ", ".join(repr(w) for w in rec.lexicon.skipped[:3]),
            )
    return rec
