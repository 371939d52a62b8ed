"""Evaluate a checkpoint, or its ONNX export, on labelled datasets.

DATA may be LMDB directories, folders holding LMDBs, or image folders with a gt.txt.
Prints one row per dataset: word accuracy in the --mode the header states, the
case-insensitive alphanumeric accuracy (the field's convention for IIIT5K/SVT/IC13/IC15:
lower-case, keep 0-9a-z, exact match), CER, NED and images/s. Labels with characters the
model cannot write are kept and count as errors.

Every image is read as crnn-predict reads it, with the same options and defaults (the
bundled name word, line or zh may stand for the checkpoint): the views, turns, page
finding, blank check and decoding (--beam, --lexicon, --lm: a Chinese model's beam and
language prior by default), so the table's figures are what predict gives. --batched
decodes padded DataLoader batches instead, as training's validation does: faster, but
without any of predict's reading steps.

Modes (--mode): charset (default: exact match with the label as the model's charset
writes it, e.g. lower-cased for a case-folding charset), alnum (the benchmarks'
convention), caseless (case-insensitive, punctuation kept), exact (case-sensitive,
punctuation kept; parseq's strictest). --errors DIR writes every wrong read
(errors.tsv), a breakdown by label length and by confused characters (summary.md) and a
picture of the worst (worst_errors.png).
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
    eval_det,
    setup_logging,
)
from crnn.cli.reading_args import add_reading_args
from crnn.config import TrainConfig, choices
from crnn.ctc.lm import default_beam, resolve_prior
from crnn.text.metrics import MODES

log = logging.getLogger("crnn.eval")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="eval.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "checkpoint",
        help="checkpoint file, run directory, release file, or an .onnx export (ONNX Runtime)",
    )
    p.add_argument("data", nargs="+", help="datasets to evaluate (one table row each)")
    p.add_argument(
        "--amp",
        choices=choices(TrainConfig, "amp"),
        default="none",
        help="--batched: autocast on CUDA",
    )
    add_reading_args(p)
    p.add_argument(
        "--batched",
        action="store_true",
        help="decode the data in padded batches from a DataLoader, as training's validation "
        "does: faster, but without predict's views, turns, page finding or blank check, so "
        "its figures are not the ones users get (default: every image read as "
        "crnn-predict reads it, with the options above)",
    )
    p.add_argument("--workers", type=int, default=2, help="--batched: DataLoader workers")
    p.add_argument(
        "--mode",
        choices=tuple(MODES),
        default="charset",
        help="how a read counts as right (see above; default charset)",
    )
    p.add_argument(
        "--errors",
        metavar="DIR",
        help="write errors.tsv, summary.md and worst_errors.png per dataset here",
    )
    p.add_argument(
        "--font",
        action="append",
        default=[],
        metavar="FILE_OR_DIR",
        help="font for the labels and reads in worst_errors.png (repeatable; default: the "
        "model's training fonts, the bundled ones, then any system font with the glyphs)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument(
        "--end-to-end",
        metavar="MODEL",
        help="a detector's evaluation read end to end with this recognizer (zh, word, line "
        "or a checkpoint): order-free character precision, recall and F1 besides hmean",
    )
    add_scale_out_args(p, "the counts are added, so the table is one process's")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def format_table(rows: list[dict[str, Any]], mode: str = "charset") -> str:
    key, meaning = MODES[mode]
    covs = list(rows[0].get("accuracy_at_coverage", {})) if rows else []
    # Alnum accuracy means nothing for labels that are not Latin script (Chinese lines):
    # the column is left out when no row has it, and a row without it shows "-".
    alnum = any("alnum_accuracy" in r for r in rows) and key != "alnum_accuracy"

    def pct(r: dict[str, Any], k: str) -> str:
        return f"{r[k]:>7.2%}" if k in r else f"{'-':>7}"

    head = (
        f"{'dataset':<24} {'n':>6} {'acc':>7} "
        + (f"{'alnum':>7} " if alnum else "")
        + f"{'CER':>7} {'NED':>7} {'ECE':>6} "
        + "".join(f"{'@' + c:>7}" for c in covs if c != "100%")
        + f" {'img/s':>8} {'bad':>5}"
    )
    lines = [
        f"acc: {meaning} (--mode {mode}); ECE: calibration error of the confidence; "
        "@N%: accuracy of the N % most confident reads",
        head,
        "-" * len(head),
    ]
    for r in rows:
        at = r.get("accuracy_at_coverage", {})
        lines.append(
            f"{str(r['dataset'])[:24]:<24} {int(r['count']):>6} {pct(r, key)} "
            + (f"{pct(r, 'alnum_accuracy')} " if alnum else "")
            + f"{r['cer']:>7.4f} {r['ned']:>7.4f} "
            f"{r.get('calibration_error', 0.0):>6.3f} "
            + "".join(f"{at[c]:>7.1%}" for c in covs if c != "100%")
            + f" {r['images_per_s']:>8.0f} {int(r['bad_images']):>5}"
        )
    return "\n".join(lines)


def _normalizer(mode: str, charset: Any) -> Any:
    """``(batch, predictions) -> (labels, texts)`` as ``mode`` compares them."""
    from crnn.text.metrics import alnum_normalize

    def pick(batch: dict[str, Any], preds: list[Any]) -> tuple[list[str], list[str]]:
        texts = [p.text for p in preds]
        if mode == "charset":
            return batch["labels"], texts
        raw = batch["raw_labels"]
        if mode == "alnum":
            return [alnum_normalize(t) for t in raw], [alnum_normalize(t) for t in texts]
        if mode == "caseless":
            return [t.lower() for t in raw], [t.lower() for t in texts]
        return list(raw), texts

    return pick


def _label_fonts(args: argparse.Namespace) -> Any:
    """Fonts for the error pictures: --font, then the training fonts the checkpoint's
    config names (a training .pt), then the defaults of ``LabelFonts``."""
    from crnn.data.synth.labelfonts import LabelFonts

    preferred = list(args.font)
    if str(args.checkpoint).endswith(".pt") or Path(args.checkpoint).is_dir():
        try:
            from crnn.checkpoint import load_checkpoint

            cfg = load_checkpoint(args.checkpoint).get("config") or {}
            preferred += list(cfg.get("data", {}).get("synth", {}).get("font_dirs", []))
        except (RuntimeError, ValueError, OSError):
            pass
    return LabelFonts(13, preferred)


def load_for_eval(args: argparse.Namespace) -> tuple[Any, Any]:
    """What reads: the Recognizer predict would build from these options (``lexicon``
    inside it), or with ``--batched`` the bare Backend and the lexicon."""
    if not args.batched:
        from crnn.cli.reading_args import load_reader

        args.model = None
        return load_reader(args), None
    from crnn.backends import load_backend
    from crnn.cli.reading_args import checkpoint_arg
    from crnn.ctc import Lexicon

    args.model = None
    backend = load_backend(checkpoint_arg(args), device=args.device, amp=args.amp)
    lexicon = Lexicon.from_file(args.lexicon, backend.charset) if args.lexicon else None
    set_decoding(args, backend.charset)
    return backend, lexicon


def set_decoding(args: argparse.Namespace, charset: Any) -> None:
    """``args.prior`` (the language prior and its weight, as predict resolves them) and
    ``args.beam`` (its default: a beam with a prior, else greedy)."""
    args.prior = resolve_prior(args.lm, args.lm_weight, charset)
    args.beam = default_beam(args.beam, *args.prior)


def evaluate_path(
    reader: Any, path: str, args: argparse.Namespace, lexicon: Any, shard: Any = None
) -> dict[str, Any]:
    """``path`` read and scored (this process's share of it, with ``shard``), as the sums
    a table row is computed from (:func:`row`), and its error report (one process only).
    ``reader``: a Recognizer, every image read as crnn-predict reads it; or with
    ``--batched`` a Backend, padded loader batches decoded as validation does."""
    from crnn.data.datasets import RecognitionDataset, open_sources
    from crnn.reports.errors import Calibration, ErrorCollector

    backend = reader if args.batched else reader.backend
    ds = RecognitionDataset(
        open_sources([path]),
        backend.charset,
        backend.spec,
        backend.output_length,
        evaluation=True,
        squeeze=args.squeeze,
    )
    world, rank = (shard.world, shard.rank) if shard is not None else (1, 0)
    errors, pick, calib = ErrorCollector(), _normalizer(args.mode, backend.charset), Calibration()

    def observe(batch: dict[str, Any], preds: list[Any]) -> None:
        labels, texts = pick(batch, preds)
        calib.add(preds, [t == lbl for t, lbl in zip(texts, labels)])
        if args.errors:
            errors.add(batch, preds, labels, texts)

    if args.batched:
        res = _batched(backend, ds, args, lexicon, world, rank, observe)
    else:
        from tqdm import tqdm

        from crnn.reading.labelled import read_labelled

        share = len(range(rank, len(ds), world))
        with tqdm(
            total=share,
            unit="image",
            desc=Path(path).name or path,
            disable=share < 2 or not sys.stderr.isatty(),
            leave=False,
        ) as bar:
            res = read_labelled(reader, ds, args.layout, world, rank, observe, bar.update)
    if res.bad_images:
        log.warning("%s: %d images could not be read and were left out:", path, res.bad_images)
        for msg in res.bad_examples:
            log.warning("  %s", msg)
        if res.bad_images > len(res.bad_examples):
            log.warning("  ... and %d more", res.bad_images - len(res.bad_examples))
    name = Path(path).name or path
    if args.errors:
        out = Path(args.errors) / name
        if getattr(args, "_fonts", None) is None:
            args._fonts = _label_fonts(args)
        errors.write(out, f"{name}, {MODES[args.mode][1]}", fonts=args._fonts)
        log.info("%s: %d errors written to %s", name, len(errors.errors), out)
    return {
        "dataset": name,
        "path": str(path),
        "sums": res.sums.sums,
        "pairs": calib.pairs,
        "images_per_s": res.images_per_s,
        "bad_images": res.bad_images,
        "skipped_empty_labels": ds.skipped.get("empty", 0),
    }


def _batched(
    backend: Any,
    ds: Any,
    args: argparse.Namespace,
    lexicon: Any,
    world: int,
    rank: int,
    observe: Any,
) -> Any:
    """``--batched``: the loader path training's validation takes."""
    from crnn.evaluation import evaluate, make_eval_loader

    loader = make_eval_loader(
        ds, args.batch_size, args.workers, widths=ds.widths, world_size=world, rank=rank
    )
    return evaluate(
        backend,
        loader,
        beam_width=args.beam,
        lexicon=lexicon,
        max_edits=args.max_edits,
        observe=observe,
        numerals=args.numerals,
        lm=args.prior[0],
        lm_weight=args.prior[1],
    )


def merged_rows(ranks: list[list[dict[str, Any]]], mode: str) -> tuple[list[dict[str, Any]], bool]:
    """The table's rows from every process's parts, each dataset's parts paired by its
    path (not by position: a dataset one node could not open would have merged its
    images into the next one's row), in the order rank 0 read them; and whether some
    process is missing a dataset (named in the log: its row counts only the others)."""
    order: list[str] = []
    by_path: dict[str, list[dict[str, Any]]] = {}
    for parts in ranks:
        for part in parts:
            if part["path"] not in by_path:
                order.append(part["path"])
            by_path.setdefault(part["path"], []).append(part)
    lost = False
    for path in order:
        if len(by_path[path]) < len(ranks):
            lost = True
            log.error(
                "%s: read by %d of %d processes (the others could not open it): its row "
                "counts only their shares",
                path,
                len(by_path[path]),
                len(ranks),
            )
    return [row(by_path[path], mode) for path in order], lost


def row(parts: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """A table row from the sums of one dataset's parts (one per process): the same
    numbers whichever way the images were shared out."""
    from crnn.reports.errors import Calibration
    from crnn.text.metrics import TextMetrics

    metrics, calib = TextMetrics(), Calibration()
    for part in parts:
        metrics.sums = {k: metrics.sums[k] + float(part["sums"][k]) for k in metrics.sums}
        calib.pairs.extend((float(c), bool(k)) for c, k in part["pairs"])
    first = parts[0]
    return {
        "dataset": first["dataset"],
        "path": first["path"],
        "mode": mode,
        **metrics.compute(),
        "images_per_s": sum(p["images_per_s"] for p in parts),
        "bad_images": sum(p["bad_images"] for p in parts),
        "skipped_empty_labels": first["skipped_empty_labels"],
        "calibration_error": calib.ece(),
        "accuracy_at_coverage": calib.accuracy_at_coverage(),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    if eval_det.is_detector(args.checkpoint):  # a text detector: crnn/cli/eval_det.py
        return eval_det.evaluate_detector_cli(args)
    from crnn.data.errors import DataError
    from crnn.sharding import (
        Shard,
        devices_for,
        read_part_jsons,
        single_device,
        spawn,
        strip_flags,
        wait_for_parts,
        write_part_json,
    )

    try:
        devices, shard = devices_for(args.gpus, args.nproc), Shard.from_env()
        args.device = args.device if devices else single_device(args.gpus, args.device)
    except ValueError as e:
        log.error("%s", e)
        return EXIT_USAGE
    if (devices or shard.world > 1) and args.errors:
        log.error("--errors writes its report from one process: leave out --gpus/--nproc")
        return EXIT_USAGE
    run_id = os.environ.get("CRNN_RUN_ID") or os.environ.get("TORCHELASTIC_RUN_ID", "run")
    parts_at = args.json or f".crnn-eval-{run_id}.json"
    if devices and shard.world == 1:  # the launcher: the ranks write parts, this merges
        run_id = f"{os.getpid()}"
        os.environ["CRNN_RUN_ID"], os.environ["CRNN_PARENT_MERGES"] = run_id, "1"
        parts_at = args.json or f".crnn-eval-{run_id}.json"
        codes = spawn(
            "crnn.cli.eval", strip_flags(argv if argv is not None else sys.argv[1:]), devices
        )
        if any(c not in (EXIT_OK, EXIT_FAILURE) for c in codes):
            log.error("evaluation processes exited with %s", codes)
            return max(codes)
        rows, lost = merged_rows(read_part_jsons(parts_at, len(devices)), args.mode)
        return report(rows, args, failed=max(codes) == EXIT_FAILURE or lost)
    try:  # a CheckpointError is a RuntimeError
        reader, lexicon = load_for_eval(args)
    except (RuntimeError, ValueError, OSError, ImportError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    states, failed = [], False
    for path in args.data:
        try:
            states.append(evaluate_path(reader, path, args, lexicon, shard))
        except (FileNotFoundError, DataError) as e:
            log.error("%s: %s", path, e)
            failed = True
    if shard.world == 1:
        return report([row([st], args.mode) for st in states], args, failed)
    write_part_json(parts_at, shard, states)
    if shard.rank != 0 or os.environ.get("CRNN_PARENT_MERGES"):
        return EXIT_FAILURE if failed else EXIT_OK
    wait_for_parts(parts_at, shard.world)
    rows, lost = merged_rows(read_part_jsons(parts_at, shard.world), args.mode)
    return report(rows, args, failed or lost)


def report(rows: list[dict[str, Any]], args: argparse.Namespace, failed: bool) -> int:
    """Print the table (and write --json); the exit code."""
    if rows:
        print(format_table(rows, args.mode))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        log.info("wrote %s", args.json)
    # Unreadable images were reported and left out; the exit code says so (as predict's).
    unreadable = any(r["bad_images"] for r in rows)
    return EXIT_FAILURE if failed or unreadable or not rows else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
