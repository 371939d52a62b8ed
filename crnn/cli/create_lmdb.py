"""Write an LMDB dataset from an image folder and its labels.

gt.txt holds one sample per line: ``relative/path<TAB>label`` (UTF-8), paths relative
to --root. Other projects' label files are read too (--format, detected by default):
PaddleOCR's ``path<TAB>label``; the Synthetic Chinese String Dataset's index lists
``name idx idx ...``, whose numbers are lines of an alphabet file given with --charset
(char_std_5990.txt, GBK and its 'blank' first line included); a folder with one
``NAME.txt`` label beside each image (no --gt). An index list is never stored as digits:
without its alphabet file it is refused. Every file is read once and checked once (a PNG down to
its last byte
without rebuilding its pixels, other formats by decoding them; in one process per core);
lines with a missing or unreadable image or an empty label are reported by line number
and left out, and the rest are written. Exit code 0 when every line was written,
1 when some were left out.

--prepared writes training-ready pixels instead of the files (resized to --height,
default 32, grayscale unless --rgb): training then decodes nothing, several times
fewer CPU cores per image, for an LMDB a few times larger than PNGs at that height.
Only crnn-ocr reads it; keep the image LMDB or folder to share the data.

--quads reads ROOT as a labelled detection set instead (images/ + labels/NAME.txt in
ICDAR/MTWI's x1,y1,...,x4,y4,text, ICDAR's gt_NAME.txt, or PaddleOCR's Label.txt): each
legible line is cut out perspective-corrected, as the reader cuts the lines it finds,
and written; ### lines and vertical lines are left out and counted. With --val-fraction the
split is by image (every line of an image on one side, chosen by the image's file name and
--seed), so no image gives lines to both: --seed 42 --val-fraction 0.1 holds out the images
``configs/det_zh_cpu.yaml``'s detector validates on.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.create_lmdb")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="create_lmdb.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--root", required=True, help="folder the image paths in gt.txt are relative to")
    p.add_argument(
        "--gt",
        help="label file (default: ROOT/gt.txt, or one NAME.txt per image when there is none)",
    )
    p.add_argument(
        "--format",
        default="auto",
        choices=("auto", "gt", "paddle", "index", "per-image"),
        help="how the labels are written: gt (path<TAB>label or path label), paddle "
        "(path<TAB>label, labels may hold spaces), index (name idx idx ...: line numbers of "
        "the --charset file, e.g. the Synthetic Chinese String Dataset's train.txt with "
        "char_std_5990.txt), per-image (NAME.txt beside each image); default auto",
    )
    p.add_argument("--out", required=True, help="output LMDB directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing LMDB at --out")
    p.add_argument(
        "--charset",
        help="also report labels with characters outside this charset (they are still "
        "written); for an index list, the alphabet file its numbers are line numbers of "
        "(char_std_5990.txt: UTF-8 or GBK, line 0 the blank's placeholder)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.0,
        help="hold out about this fraction of the samples into --val-out (chosen by a hash of "
        "the image path: the same split every time, whatever the line order)",
    )
    p.add_argument("--val-out", help="LMDB directory for the held-out samples")
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="with --quads and --val-fraction: the by-image split's seed (the detector's "
        "train.seed holds out its validation images); default 0",
    )
    p.add_argument(
        "--height",
        type=int,
        default=0,
        help="re-encode every image as a PNG of this height, aspect ratio kept (e.g. 32, the "
        "training height: several times smaller); default 0 stores the files as they are",
    )
    p.add_argument(
        "--grayscale", action="store_true", help="with --height: also drop colour (1 channel)"
    )
    p.add_argument(
        "--prepared",
        action="store_true",
        help="store training-ready pixels (uint8, resized to --height, default 32) instead of "
        "image files, so training decodes nothing; grayscale unless --rgb",
    )
    p.add_argument(
        "--rgb", action="store_true", help="with --prepared: keep 3 channels (data.rgb=true)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="processes that read and decode (default 0: one per CPU core)",
    )
    p.add_argument(
        "--encoding",
        default="utf-8",
        help="text encoding of the gt file (default utf-8; lines that do not decode are "
        "reported by number and left out)",
    )
    p.add_argument(
        "--quads",
        action="store_true",
        help="ROOT is a labelled detection set (line quadrilaterals and their texts): write "
        "its lines cut out, perspective-corrected",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.data.create import create_lmdb
    from crnn.text.alphabet import Charset
    from crnn.text.alphabet_files import spec_path

    root = Path(args.root)
    gt = Path(args.gt) if args.gt else None
    if not root.is_dir():
        log.error("--root %s is not a folder", root)
        return EXIT_USAGE
    if args.rgb and not args.prepared:
        log.error("--rgb goes with --prepared (image files keep their colours anyway)")
        return EXIT_USAGE
    if args.prepared and args.grayscale:
        log.error("--prepared is grayscale unless --rgb: leave out --grayscale")
        return EXIT_USAGE
    grayscale = not args.rgb if args.prepared else args.grayscale
    if bool(args.val_fraction) != bool(args.val_out):  # create_lmdb's check, before --quads cuts
        log.error("--val-fraction (in [0, 1)) and --val-out go together")
        return EXIT_USAGE
    val_root = None
    if args.quads:  # split by image while cutting
        if (cut := _cut(root, args.val_fraction, args.seed)) is None:
            return EXIT_USAGE
        root, val_root, gt = *cut, None
    try:
        charset = Charset.from_spec(args.charset) if args.charset else None
        index = args.charset if args.charset and spec_path(args.charset).is_file() else None
        report = create_lmdb(
            root,
            gt,
            args.out,
            args.val_out,
            args.val_fraction,
            charset,
            args.overwrite,
            height=args.height,
            grayscale=grayscale,
            encoding=args.encoding,
            prepared=args.prepared,
            workers=args.workers,
            label_format=args.format,
            index_file=index,
            held_root=val_root,
        )
    except (ValueError, LookupError, FileNotFoundError, FileExistsError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    where = gt or (root / "gt.txt" if report.label_format != "per-image" else root)
    if report.label_format not in ("gt", args.format):
        log.info("labels read as %s (--format %s)", report.label_format, report.label_format)
    for lineno, why in report.bad[:20]:
        if report.label_format == "per-image":
            log.warning("%s: image %d: %s", where, lineno, why)
        else:
            log.warning("%s:%d: %s", where, lineno, why)
    if len(report.bad) > 20:
        log.warning("... and %d more bad lines", len(report.bad) - 20)
    if report.outside_charset:
        log.warning(
            "%d labels hold characters outside charset %s (written; training skips them)",
            report.outside_charset,
            args.charset,
        )
    log.info(
        "wrote %d samples to %s (%d lines left out)",
        report.written,
        Path(args.out).resolve(),
        len(report.bad),
    )
    if args.val_out:
        log.info("wrote %d held-out samples to %s", report.held_out, Path(args.val_out).resolve())
    return EXIT_FAILURE if report.bad else EXIT_OK


_CUT_DIRS: list = []  # --quads' folders of cut lines, removed when the process ends


def _cut(root: Path, val_fraction: float, seed: int) -> tuple[Path, Path | None] | None:
    """--quads: the set's legible lines cut into a temporary folder (images/ + gt.txt),
    and those of ``val_fraction`` of its images (by name and ``seed``) into a second one
    (None without a split); None (and the error logged) when it is no labelled set."""
    import tempfile

    from crnn.data.cut_lines import cut_labelled
    from crnn.data.errors import DataError
    from crnn.data.quads import count_problems, describe_problems, find_labelled, split_by_image

    def folder() -> Path:
        _CUT_DIRS.append(tempfile.TemporaryDirectory(prefix="crnn-lines-"))
        return Path(_CUT_DIRS[-1].name)

    try:
        items = find_labelled(root)
    except DataError as e:
        log.error("%s", e)
        return None
    problems = count_problems(items)
    if problems:
        log.warning("%s: boxes %s", root, describe_problems(problems))
    train, held = split_by_image(items, val_fraction, seed) if val_fraction else (items, [])
    out, val_out = folder(), folder() if val_fraction else None
    for part, where, what in ((train, out, ""), (held, val_out, " held out")):
        if where is None:
            continue
        report = cut_labelled(part, where)
        left = ", ".join(f"{n} {why}" for why, n in report.skipped.most_common())
        log.info(
            "cut %d%s lines from %d images%s",
            report.written,
            what,
            len(part),
            f" (left out: {left})" if left else "",
        )
    return out, val_out


if __name__ == "__main__":
    sys.exit(main())
