"""Read text from word, line and page images.

Prints one line per text line: ``path<TAB>text<TAB>confidence``. A word or line image is
one output line; a page (a scan or photo of printed text, a screenshot, a slide, a
receipt: --layout auto finds its lines) gives one output line per text line, in reading
order (columns left to right, lines top to bottom). With --json: a list of {path, text
(the lines joined with newlines), confidence, layout, lines: [{text, confidence, box:
[x0, y0, x1, y1]}]}, plus char_confidences for an image read as one line. --draw DIR
writes each image with its line boxes and reads beside them. Folders are searched
recursively for images and PDFs. A PDF is read page by page (rendered at --dpi; --pages
picks some), each page a result of its own named doc.pdf#page=N ("page": N in JSON).
Unreadable files (not an image, truncated, more than 120 megapixels, an encrypted or
broken PDF) are reported on stderr, the rest are still read, and the exit code is then 1.

Decoding is greedy unless --beam N asks for CTC prefix beam search; --lexicon FILE (one
word per line) snaps each text to the most probable word within --max-edits edits; a
Chinese model's default is a beam of 8 with a language prior (--lm; --lm none: greedy).
Confidence is then the probability of the text summed over its alignments. An .onnx
file written by tools/export.py may be given as the checkpoint: it runs on ONNX Runtime
and PyTorch is then never imported (start-up in a fraction of a second). Without
--checkpoint, the bundled model's .onnx export is used when there is one (and
onnxruntime is installed), else its .pt file.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from crnn.cli import (
    EXIT_USAGE,
    Parser,
    add_scale_out_args,
    setup_logging,
)
from crnn.cli.predict_output import print_reads, write_documents
from crnn.cli.predict_scale import launch_ranks, ray_predict, write_output
from crnn.cli.reading_args import add_reading_args, load_reader
from crnn.data.pdf import DEFAULT_DPI
from crnn.reading.inputs import expand_inputs

log = logging.getLogger("crnn.predict")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="predict.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="IMAGE_OR_FOLDER",
        help="image files, PDFs and/or folders; - reads the list from standard input",
    )
    p.add_argument(
        "--files-from",
        metavar="FILE",
        help="also read the inputs listed in FILE, one path per line (- : standard input)",
    )
    p.add_argument(
        "-c",
        "--checkpoint",
        help="a checkpoint, run directory, release file or exported .onnx file (an "
        ".int8.onnx file is the faster int8 flavour; default: a bundled model, "
        "see --model)",
    )
    p.add_argument(
        "--model",
        choices=("word", "line", "zh"),
        default="word",
        help="without --checkpoint, which bundled model reads: 'word' (default; English "
        "scene-text words, letters and digits, case-insensitive), 'line' (printed English "
        "text lines: printable ASCII with spaces) or 'zh' (printed Chinese lines, 5,530 "
        "classes)",
    )
    add_reading_args(p)
    p.add_argument(
        "--min-confidence",
        type=float,
        metavar="P",
        help="flag reads whose confidence is below P (a last column 'ok' or 'uncertain'; "
        "'uncertain': true|false in JSON) and count them; tools/eval.py shows how accuracy "
        "rises as the least confident reads are left out",
    )
    p.add_argument(
        "--draw",
        metavar="DIR",
        help="write each image into DIR with its line boxes and reads drawn beside them "
        "(DIR/<name>.draw.png)",
    )
    p.add_argument(
        "--dpi",
        type=int,
        default=DEFAULT_DPI,
        help=f"resolution PDF pages are rendered at (default {DEFAULT_DPI}: 10 pt print at ~28 px "
        "a line; raise it for small print)",
    )
    p.add_argument(
        "--pages",
        metavar="SPEC",
        help="which pages of each PDF to read, from 1: e.g. 1-3,5,9- (default: all)",
    )
    p.add_argument("--pdf-password", metavar="PW", help="password of encrypted PDFs")
    p.add_argument(
        "--pdf-text",
        action="store_true",
        help="take a PDF page's text from its text layer where it has one (layout 'text', no "
        "boxes) instead of reading its pixels; pages without one are read (default: always "
        "read the pixels: a scan's text layer is often an old OCR's)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of {path, text, confidence, layout, lines} (see above); "
        "the same as --format json",
    )
    p.add_argument(
        "--format",
        choices=("tsv", "json", "txt", "hocr", "alto"),
        help="what to write: tsv (default: path, text, confidence per line), json, txt (each "
        "input's text), hocr (hOCR 1.2: page/carea/par/line/word, with bbox and x_wconf), "
        "alto (ALTO 4 XML: TextLine/String with HPOS/VPOS/WIDTH/HEIGHT/WC); hocr and alto "
        "are one document per input: with several inputs give --output-dir",
    )
    p.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write one file per input into DIR (NAME.txt, .hocr, .xml, .json or .tsv by "
        "--format) instead of printing",
    )
    p.add_argument(
        "--output",
        metavar="FILE.jsonl",
        help="write the results as JSON lines (one per input, in input order) to this file; "
        "a rerun resumes, skipping inputs already written. Needed with --gpus/--nproc/torchrun",
    )
    add_scale_out_args(p, "results merged in input order into --output")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="read on a Ray cluster (pip install 'crnn-ocr[ray]'): local (one started here), "
        "auto (the one `ray start` runs on this machine) or ray://HOST:10001; with --output "
        "FILE.jsonl or FILE.parquet, written in input order as the reads come (images and "
        "PDF pages); a rerun reads only the inputs the output lacks",
    )
    p.add_argument(
        "--ray-actors",
        type=int,
        default=0,
        metavar="N",
        help="--ray: readers (Ray actors of one CPU each; default 0: one per CPU of the cluster)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def listed_inputs(args: argparse.Namespace) -> list[str]:
    """The inputs as given, with ``-`` and ``--files-from`` read as lists of paths (one
    per line, blank lines and surrounding spaces dropped). ValueError when there is none."""
    items: list[str] = []
    for item in args.inputs:
        items += _lines(sys.stdin) if item == "-" else [item]
    if args.files_from:
        if args.files_from == "-":
            items += _lines(sys.stdin)
        else:
            try:
                with open(args.files_from, encoding="utf-8") as f:
                    items += _lines(f)
            except OSError as e:
                raise ValueError(f"--files-from {args.files_from}: {e.strerror or e}") from None
    if not items:
        raise ValueError(
            "no inputs: name image files, PDFs or folders, - for a list on standard input, or "
            "--files-from FILE"
        )
    return items


def _lines(stream: Any) -> list[str]:
    return [ln.strip() for ln in stream if ln.strip()]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.sharding import Shard, devices_for, single_device

    try:
        devices = devices_for(args.gpus, args.nproc)
        shard = Shard.from_env()
        args.device = args.device if devices else single_device(args.gpus, args.device)
    except ValueError as e:
        log.error("%s", e)
        return EXIT_USAGE
    try:
        files, errors = expand_inputs(listed_inputs(args), args.pages, args.pdf_password)
    except ValueError as e:
        log.error("%s", e)
        return EXIT_USAGE
    if args.ray:
        return ray_predict(args, files, errors)
    if (devices or shard.world > 1) and not args.output:
        log.error("several processes write JSON lines to a file: give --output FILE.jsonl")
        return EXIT_USAGE
    if devices and shard.world == 1:  # the launcher: start the ranks, then merge
        return launch_ranks(
            args, argv if argv is not None else sys.argv[1:], devices, files, errors
        )
    try:  # a CheckpointError is a RuntimeError (caught without importing torch)
        rec = load_reader(args)
    except (FileNotFoundError, RuntimeError, ImportError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    for path, why in errors:
        print(f"error: {path}: {why}", file=sys.stderr)
    if args.output:
        return write_output(args, rec, files, errors, shard)
    if args.format in ("hocr", "alto") and len(files) > 1 and not args.output_dir:
        log.error(
            "--format %s writes one document per input: give --output-dir DIR for %d inputs",
            args.format,
            len(files),
        )
        return EXIT_USAGE
    if args.format == "json":
        args.json = True
    if args.output_dir or args.format in ("txt", "hocr", "alto"):
        return write_documents(args, rec, files, errors, len(files) + len(errors))
    return print_reads(args, rec, files, errors)


if __name__ == "__main__":
    sys.exit(main())
