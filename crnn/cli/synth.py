"""``crnn-synth`` / ``tools/synth.py``: render synthetic text images into an LMDB.

    crnn-synth --out data/synth_train --count 100000 --charset alnum36 --workers 2
    crnn-synth --contact-sheet sheet.png --charset ascii95

The same seed gives the same images (byte-identical LMDB content whatever --workers).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from crnn.cli import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Parser, setup_logging
from crnn.config import ConfigError, load_config
from crnn.data import usable_cores
from crnn.text.alphabet import Charset

log = logging.getLogger("crnn.synth")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="crnn-synth",
        description="Render synthetic word/line images into an LMDB (num-samples, image-%%09d, "
        "label-%%09d, size-%%09d), or a contact sheet of samples.",
    )
    p.add_argument("--out", help="LMDB folder to create")
    p.add_argument(
        "--count", type=int, help="number of samples (default 64 for a contact sheet only)"
    )
    p.add_argument(
        "--charset",
        help="alnum36, alnum62, ascii94, ascii95, a .txt file or 'chars:...' (default: "
        "data.charset)",
    )
    p.add_argument(
        "--fonts",
        action="append",
        default=[],
        metavar="DIR",
        help="extra folder of .ttf/.otf fonts or .ttc/.otc collections, searched recursively "
        "(repeatable)",
    )
    p.add_argument("--no-bundled-fonts", action="store_true", help="use only the --fonts folders")
    p.add_argument("--seed", type=int, help="generator seed (default: train.seed)")
    p.add_argument("--start", type=int, default=0, help="index of the first sample (default 0)")
    p.add_argument("--workers", type=int, default=usable_cores(), help="render processes")
    p.add_argument("--height", type=int, help="image height in pixels (default: data.height)")
    p.add_argument(
        "--rgb", action="store_true", default=None, help="colour images (default: data.rgb)"
    )
    p.add_argument("--clean", action="store_true", help="turn every appearance effect off")
    p.add_argument("--config", help="YAML config (its data.synth section is used)")
    p.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides, e.g. data.synth.p_curve=0.3",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing LMDB at --out")
    p.add_argument(
        "--contact-sheet", metavar="PNG", help="also save a grid of 64 samples with labels"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def usage_error(args: argparse.Namespace) -> str:
    """Why these arguments cannot run (empty when they can)."""
    if not args.out and not args.contact_sheet:
        return "nothing to do: give --out DIR (an LMDB) and/or --contact-sheet FILE.png"
    if args.out and args.count is None:
        return "--out needs --count: how many samples to write (e.g. --count 100000)"
    if args.count is not None and args.count < 1:
        return f"--count must be a positive number of samples, got {args.count}"
    if args.workers < 1:
        return f"--workers must be >= 1, got {args.workers}"
    if args.start < 0:
        return f"--start must be >= 0, got {args.start}"
    return ""


def make_generator(args: argparse.Namespace) -> Any:
    """The generator the config file, overrides and flags describe."""
    from crnn.data.synth import SynthGenerator, effects_off

    cfg = load_config(args.config, args.set)
    synth = cfg.data.synth
    synth.font_dirs = list(synth.font_dirs) + list(args.fonts)
    if args.no_bundled_fonts:
        synth.bundled_fonts = False
    if args.clean:
        synth = effects_off(synth)
    charset = Charset.from_spec(args.charset or cfg.data.charset, cfg.data.case_fold, cfg.data.bidi)
    height = args.height if args.height is not None else cfg.data.height
    rgb = cfg.data.rgb if args.rgb is None else args.rgb
    seed = cfg.train.seed if args.seed is None else args.seed
    gen = SynthGenerator(charset, synth, seed=seed, height=height, rgb=rgb)
    log.info(
        "%d fonts, charset %s (%d drawable characters), seed %d, height %d",
        len(gen.fonts),
        charset.name,
        len(gen.alphabet),
        seed,
        height,
    )
    return gen


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    setup_logging(args.verbose)
    problem = usage_error(args)
    if problem:
        log.error("%s", problem)
        return EXIT_USAGE
    count = 64 if args.count is None else args.count
    # Imported after argument parsing so --help stays fast.
    from crnn.data.synth import FontError
    from crnn.data.synth.export import write_lmdb
    from crnn.data.synth.sheet import contact_sheet

    try:
        gen = make_generator(args)
    except (ConfigError, FontError, FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    try:
        if args.contact_sheet:
            n = min(count, 64)
            from crnn.data.synth.fonts import bundled_font_dir
            from crnn.data.synth.labelfonts import LabelFonts

            # Labels in the generator's own fonts when the bundled ones lack their glyphs.
            mono = bundled_font_dir() / "dejavu" / "DejaVuSansMono-Bold.ttf"
            fonts = LabelFonts(13, [mono, *(f.path for f in gen.fonts)])
            sheet = contact_sheet([gen.render(args.start + i) for i in range(n)], fonts=fonts)
            sheet.save(args.contact_sheet)
            log.info("contact sheet of %d samples saved to %s", n, args.contact_sheet)
        if args.out:
            progress = not args.no_progress and sys.stderr.isatty()
            write_lmdb(
                gen,
                args.out,
                count,
                start=args.start,
                workers=args.workers,
                overwrite=args.overwrite,
                progress=progress,
            )
    except FileExistsError as e:
        log.error("%s", e)
        return EXIT_USAGE
    except KeyboardInterrupt:
        log.error("interrupted; the LMDB holds the samples committed so far")
        return EXIT_INTERRUPTED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
