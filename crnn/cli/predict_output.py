"""What ``crnn-predict`` writes in one process: each read printed (TSV), as a JSON record
or drawn; one document per input (``--format txt/hocr/alto``, ``--output-dir``); the
closing counts and the exit code."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from crnn.cli import EXIT_FAILURE, EXIT_OK
from crnn.reading.inputs import read_inputs
from crnn.reading.results import page_result

log = logging.getLogger("crnn.predict")


def progress(items: Any, total: int) -> Any:
    """A progress bar on standard error over many inputs, where it is a terminal (a pipe or
    a log file gets none)."""
    from tqdm import tqdm

    return tqdm(
        items, total=total, unit="image", disable=total < 2 or not sys.stderr.isatty(), leave=False
    )


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


def print_reads(args: argparse.Namespace, rec: Any, files: list[str], errors: list[Any]) -> int:
    """Every input read and printed as it comes (TSV lines, or one JSON list at the end),
    an unreadable one reported on standard error without stopping the rest."""
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
