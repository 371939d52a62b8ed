"""Write an LMDB dataset from an image folder and a gt.txt.

gt.txt holds one sample per line: ``relative/path<TAB>label`` (UTF-8), paths relative
to --root. Every image is decoded once to check it; lines with a missing or
unreadable image or an empty label are reported by line number and left out, and the
rest are written. Exit code 0 when every line was written, 1 when some were left out.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import zlib
from pathlib import Path

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, setup_logging

log = logging.getLogger("crnn.create_lmdb")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="create_lmdb.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--root", required=True, help="folder the image paths in gt.txt are relative to")
    p.add_argument("--gt", help="ground-truth file (default: ROOT/gt.txt)")
    p.add_argument("--out", required=True, help="output LMDB directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing LMDB at --out")
    p.add_argument(
        "--charset",
        help="also report labels with characters outside this charset (they are still written)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.0,
        help="hold out about this fraction of the samples into --val-out (chosen by a hash of "
        "the image path: the same split every time, whatever the line order)",
    )
    p.add_argument("--val-out", help="LMDB directory for the held-out samples")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def held_out(rel_path: str, fraction: float) -> bool:
    """Whether a sample belongs to the held-out split (stable across runs and orders)."""
    return zlib.crc32(rel_path.encode("utf-8")) % 1_000_000 < fraction * 1_000_000


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from PIL import Image
    from tqdm import tqdm

    from crnn.charset import Charset
    from crnn.data.lmdb import LmdbWriter

    root = Path(args.root)
    gt = Path(args.gt) if args.gt else root / "gt.txt"
    if not root.is_dir():
        log.error("--root %s is not a folder", root)
        return EXIT_USAGE
    if not gt.is_file():
        log.error("ground-truth file %s not found (expected lines 'relative/path<TAB>label')", gt)
        return EXIT_USAGE
    charset = None
    if args.charset:
        try:
            charset = Charset.from_spec(args.charset)
        except ValueError as e:
            log.error("%s", e)
            return EXIT_USAGE
    if not 0.0 <= args.val_fraction < 1.0 or bool(args.val_fraction) != bool(args.val_out):
        log.error("--val-fraction (in [0, 1)) and --val-out go together")
        return EXIT_USAGE
    lines = gt.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    bad: list[tuple[int, str]] = []
    outside = 0
    try:
        writer = LmdbWriter(args.out, overwrite=args.overwrite)
        val_writer = LmdbWriter(args.val_out, overwrite=args.overwrite) if args.val_out else None
    except FileExistsError as e:
        log.error("%s", e)
        return EXIT_USAGE
    with writer, val_writer or contextlib.nullcontext():
        for lineno, line in enumerate(tqdm(lines, desc="create_lmdb", unit="img"), start=1):
            if not line.strip():
                continue
            rel, sep, label = line.partition("\t")
            if not sep:
                rel, sep, label = line.partition(" ")
            if not sep or not label.strip():
                bad.append((lineno, f"empty label in {line[:80]!r}"))
                continue
            path = root / rel
            try:
                data = path.read_bytes()
                with Image.open(path) as im:
                    im.load()
                    size = im.size
            except FileNotFoundError:
                bad.append((lineno, f"image {rel!r} not found"))
                continue
            except Exception as e:  # noqa: BLE001 -- any decoder failure means a bad image
                bad.append((lineno, f"image {rel!r} cannot be decoded ({e})"))
                continue
            if charset is not None and charset.unknown_chars(label):
                outside += 1
            if val_writer is not None and held_out(rel, args.val_fraction):
                val_writer.add(data, label, size)
            else:
                writer.add(data, label, size)
        count = writer.count
    for lineno, why in bad[:20]:
        log.warning("%s:%d: %s", gt, lineno, why)
    if len(bad) > 20:
        log.warning("... and %d more bad lines", len(bad) - 20)
    if outside:
        log.warning(
            "%d labels hold characters outside charset %s (written; training skips them)",
            outside,
            args.charset,
        )
    log.info(
        "wrote %d samples to %s (%d lines left out)", count, Path(args.out).resolve(), len(bad)
    )
    if val_writer is not None:
        log.info("wrote %d held-out samples to %s", val_writer.count, Path(args.val_out).resolve())
    return EXIT_FAILURE if bad else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
