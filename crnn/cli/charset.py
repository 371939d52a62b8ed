"""Build a charset file from the labels of your data.

Reads every label of the given LMDBs and gt.txt image folders, normalises it as training
does (Unicode NFC; lower-cased with --case-fold), counts each character and writes the
alphabet as a charset file (one character per line, in code-point order), ready for
--set data.charset=FILE. Prints how many labels and characters there are, the rarest
characters, and, with --min-count, which labels a charset without the rare characters
would drop (training skips and counts those). --counts writes every character's count.

    tools/charset.py data/lmdb/train data/lmdb/val -o charsets/mine.txt
    tools/charset.py data/zh_lines --min-count 3 -o zh.txt --counts zh_counts.tsv

Exit codes: 0 written, 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.text.alphabet")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="charset.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("data", nargs="+", help="LMDB directories or image folders with a gt.txt")
    p.add_argument("-o", "--out", required=True, help="the charset file to write")
    p.add_argument(
        "--min-count",
        type=int,
        default=1,
        help="leave out characters seen fewer times (default 1: keep all)",
    )
    p.add_argument("--case-fold", action="store_true", help="lower-case labels first")
    p.add_argument("--counts", metavar="FILE", help="also write 'char<TAB>count' per character")
    p.add_argument("--show", type=int, default=20, help="rare characters to list (default 20)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.data.datasets import open_sources
    from crnn.data.errors import DataError
    from crnn.text.alphabet import build_charset, write_charset_file
    from crnn.text.bidi import MIRROR, has_rtl

    out = Path(args.out)
    if out.exists() and not args.overwrite:
        log.error("%s exists; pass --overwrite to replace it", out)
        return EXIT_USAGE
    try:
        labels = [lbl for src in open_sources(args.data) for lbl in src.labels()]
    except (FileNotFoundError, DataError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    report = build_charset(labels, min_count=args.min_count, case_fold=args.case_fold)
    if not report.chars:
        log.error(
            "no characters left (%d labels read; --min-count %d)", len(labels), args.min_count
        )
        return EXIT_USAGE
    write_charset_file(report.chars, out)
    log.info(
        "%d labels, %d distinct characters; wrote %d to %s (use --set data.charset=%s)",
        len(labels),
        len(report.counts),
        len(report.chars),
        out,
        out,
    )
    rare = sorted(report.counts.items(), key=lambda kv: (kv[1], kv[0]))[: args.show]
    log.info("rarest: %s", ", ".join(f"{c!r} x{n}" for c, n in rare))
    if report.dropped_chars:
        log.warning(
            "left out %d characters seen fewer than %d times: %d labels hold them and training "
            "will skip them (e.g. %s)",
            len(report.dropped_chars),
            args.min_count,
            len(report.dropped_labels),
            ", ".join(repr(x) for x in report.dropped_labels[:5]),
        )
    if has_rtl(report.chars):
        log.info(
            "the charset holds right-to-left characters: models trained with it read lines "
            "in visual order and answer in logical order (data.bidi, auto; see README, "
            "'Right-to-left scripts')"
        )
        lone = sorted(c for c in report.chars if c in MIRROR and MIRROR[c] not in report.chars)
        if lone:
            log.warning(
                "brackets without their pair: %s. Right to left, '(' is drawn (and read) as "
                "')': add %s to the charset file so that labels holding them can be encoded",
                ", ".join(map(repr, lone)),
                ", ".join(repr(MIRROR[c]) for c in lone),
            )
    if args.counts:
        rows = sorted(report.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        Path(args.counts).write_text("".join(f"{c}\t{n}\n" for c, n in rows), encoding="utf-8")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
