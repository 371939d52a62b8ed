"""``crnn-predict`` over many processes and machines: a rank's share of the inputs into
its part of ``--output`` (``--gpus``/``--nproc``, torchrun, SLURM; rank 0 merges in input
order), the launcher that starts one process per device, and ``--ray`` (a Ray cluster's
readers into JSON lines or Parquet). Every one resumes: a rerun reads only what its output
lacks."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from crnn.cli.predict_output import emit, finish, log, progress
from crnn.reading.inputs import read_inputs


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
