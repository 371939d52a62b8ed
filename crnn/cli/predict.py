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
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from crnn.cli import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Parser,
    add_scale_out_args,
    setup_logging,
)
from crnn.cli.reading_args import add_reading_args, load_reader
from crnn.data.pdf import DEFAULT_DPI
from crnn.reading.inputs import expand_inputs, read_inputs
from crnn.reading.results import page_result

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


def progress(items: Any, total: int) -> Any:
    """A progress bar on standard error over many inputs, where it is a terminal (a pipe or
    a log file gets none)."""
    from tqdm import tqdm

    return tqdm(
        items, total=total, unit="image", disable=total < 2 or not sys.stderr.isatty(), leave=False
    )


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
    results: list[dict[str, object]] = [{"path": p, "error": why} for p, why in errors]
    n_inputs, counts = len(files) + len(errors), {"uncertain": 0, "reads": 0, "drawn": 0}
    for f, page in progress(
        read_inputs(rec, files, args.layout, args.dpi, args.pdf_password, args.pdf_text), len(files)
    ):
        if isinstance(page, Exception):
            errors.append((f, str(page)))
            print(f"error: {page}", file=sys.stderr)
            results.append({"path": f, "error": str(page)})
            continue
        emit(args, f, page, results, counts)
    if args.json:
        json.dump(results, sys.stdout, ensure_ascii=False, indent=1)
        print()
    return finish(args, errors, n_inputs, counts)


def emit(
    args: argparse.Namespace, f: str, page: Any, results: list[Any], counts: dict[str, int]
) -> None:
    """One image's output: its drawing, its JSON record or its printed lines."""
    floor = args.min_confidence
    if args.draw:
        from crnn.reports.pages import draw_read

        draw_read(f, page, args.draw, args.dpi, args.pdf_password)
        counts["drawn"] += 1
    if args.json:
        results.append(page_result(page, f, args.rotate == "auto", floor))
    for line in page.lines:
        if not args.json:
            turn = f"\t{line.rotation}" if args.rotate == "auto" else ""
            flag = "" if floor is None else ("\tuncertain" if line.confidence < floor else "\tok")
            print(f"{f}\t{line.text}\t{line.confidence:.4f}{turn}{flag}", flush=False)
        counts["uncertain"] += floor is not None and line.confidence < floor
        counts["reads"] += 1


def write_documents(
    args: argparse.Namespace, rec: Any, files: list[str], errors: list[Any], n_inputs: int
) -> int:
    """--format txt/hocr/alto or --output-dir: one document per input, printed or
    written as ``DIR/<name><suffix>``."""
    from crnn.reading.writers import SUFFIX, document, page_size

    fmt = args.format or ("json" if args.json else "tsv")
    out = Path(args.output_dir) if args.output_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    counts = {"uncertain": 0, "reads": 0, "drawn": 0}
    for f, page in progress(
        read_inputs(rec, files, args.layout, args.dpi, args.pdf_password, args.pdf_text), len(files)
    ):
        if isinstance(page, Exception):
            errors.append((f, str(page)))
            print(f"error: {page}", file=sys.stderr)
            continue
        if args.draw:
            from crnn.reports.pages import draw_read

            draw_read(f, page, args.draw, args.dpi, args.pdf_password)
            counts["drawn"] += 1
        size = page_size(page) or input_size(args, f)
        doc = document(page, fmt, f, size, args.rotate == "auto", args.min_confidence)
        if out is None:
            sys.stdout.write(doc)
        else:
            name = Path(f.replace("#page=", "_page")).name
            (out / (name + SUFFIX[fmt])).write_text(doc, encoding="utf-8")
    if out is not None:
        log.info(
            "wrote %d files into %s", len(files) - len([e for e in errors if e[0] in files]), out
        )
    return finish(args, errors, n_inputs, counts)


def input_size(args: argparse.Namespace, f: str) -> tuple[int, int]:
    """An input's ``(width, height)`` as it is read (a PDF page at --dpi)."""
    from crnn.data.image import load_image
    from crnn.data.pdf import page_sizes, split_ref

    ref = split_ref(f)
    if ref is not None:
        return page_sizes(ref[0], args.dpi, args.pdf_password)[ref[1] - 1]
    return load_image(f).size


def finish(
    args: argparse.Namespace, errors: list[Any], n_inputs: int, counts: dict[str, int]
) -> int:
    sys.stdout.flush()
    if args.draw:
        log.info("drew %d images with their lines into %s", counts["drawn"], args.draw)
    if args.min_confidence is not None:
        log.info(
            "%d of %d reads below --min-confidence %g",
            counts["uncertain"],
            counts["reads"],
            args.min_confidence,
        )
    if errors:
        log.warning("%d of %d inputs could not be read", len(errors), n_inputs)
        return EXIT_FAILURE
    return EXIT_OK


def write_output(
    args: argparse.Namespace, rec: Any, files: list[str], errors: list[Any], shard: Any
) -> int:
    """This process's share of ``files`` as JSON lines into its part of ``--output``
    (resuming: what a previous run wrote is skipped); the merging process then writes
    ``--output`` in input order."""
    from crnn.sharding import JsonlParts, merge_jsonl, wait_for_parts

    parts = JsonlParts(args.output, shard)
    done = parts.done_keys()
    todo = [f for _, f in shard.pick(files) if f not in done]
    if done:
        log.info("resuming %s: %d inputs already read", args.output, len(done))
    counts = {"uncertain": 0, "reads": 0, "drawn": 0}
    bad = list(errors) if shard.rank == 0 else []
    for path, why in bad:
        parts.write({"path": path, "error": why})
    for f, page in read_inputs(rec, todo, args.layout, args.dpi, args.pdf_password, args.pdf_text):
        if isinstance(page, Exception):
            bad.append((f, str(page)))
            print(f"error: {page}", file=sys.stderr)
            parts.write({"path": f, "error": str(page)})
            continue
        record: list[Any] = []
        emit(argparse.Namespace(**{**vars(args), "json": True}), f, page, record, counts)
        parts.write(record[0])
    parts.finish()
    if shard.rank == 0 and not os.environ.get("CRNN_PARENT_MERGES"):
        wait_for_parts(args.output, shard.world)
        n = merge_jsonl(args.output, shard.world, [p for p, _ in errors] + files)
        log.info("wrote %d results to %s", n, args.output)
    return finish(args, bad, len(files) + len(errors), counts)


def ray_predict(args: argparse.Namespace, files: list[str], errors: list[Any]) -> int:
    """--ray: the inputs (images and PDF pages) read on a Ray cluster
    (crnn.reading.ray_reader), their rows written to --output (JSON lines or Parquet,
    crnn.reading.row_files) in input order as they come; a rerun skips the inputs the
    output already holds."""
    import dataclasses

    from crnn.reading.options import ReadOptions
    from crnn.reading.ray_reader import read_on_ray
    from crnn.reading.row_files import open_rows

    if not args.output:
        log.error("--ray writes its rows to a file: give --output FILE.jsonl or FILE.parquet")
        return EXIT_USAGE
    try:
        import ray  # noqa: F401
    except ImportError:
        log.error("--ray needs Ray: pip install 'crnn-ocr[ray]'")
        return EXIT_USAGE
    try:
        sink = open_rows(args.output)
    except (ValueError, OSError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    total = len(files) + len(errors)
    if sink.done:
        log.info("resuming %s: %d inputs already read", args.output, len(sink.done))
    bad = [(path, why) for path, why in errors if path not in sink.done]
    files = [f for f in files if f not in sink.done]
    options = dataclasses.asdict(ReadOptions.from_args(args))
    options = {k: v for k, v in options.items() if k not in ("layout", "threads", "device")}
    counts = {"uncertain": 0, "reads": 0, "drawn": 0}
    try:
        for path, why in bad:
            sink.write({"path": path, "error": why})
        if files:
            rows = read_on_ray(
                files,
                args.checkpoint or args.model,
                args.ray,
                args.layout,
                args.ray_actors,
                dpi=args.dpi,
                **options,
            )
            for row in progress(rows, len(files)):
                if row["error"]:
                    bad.append((row["path"], row["error"]))
                    print(f"error: {row['error']}", file=sys.stderr)
                else:
                    counts["reads"] += 1
                sink.write(row)
    finally:
        sink.close()  # what was read stays written, interrupted or not
    log.info("wrote %d results to %s", total, args.output)
    return finish(args, bad, total, counts)


def launch_ranks(
    args: argparse.Namespace,
    argv: list[str],
    devices: list[str],
    files: list[str],
    errors: list[Any],
) -> int:
    """Start one process per device on its share of the inputs; merge their parts."""
    from crnn.sharding import merge_jsonl, spawn, strip_flags

    child = strip_flags(argv)
    log.info(
        "reading %d inputs with %d processes (%s)", len(files), len(devices), ", ".join(devices)
    )
    os.environ["CRNN_PARENT_MERGES"] = "1"
    try:
        codes = spawn("crnn.cli.predict", child, devices)
    finally:
        os.environ.pop("CRNN_PARENT_MERGES", None)
    n = merge_jsonl(args.output, len(devices), [p for p, _ in errors] + files)
    log.info("wrote %d results to %s", n, args.output)
    if any(c not in (EXIT_OK, EXIT_FAILURE) for c in codes):
        log.error(
            "processes exited with %s: rerun the same command to read what they missed", codes
        )
        return max(codes)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
