"""Convert checkpoints: prefixes, release files, and weights from other projects.

Modes:
  single   strip module./_orig_mod. from the weight keys (single-GPU names)
  dp       prefix the weight keys with module. (for tools that expect DataParallel names)
  release  training checkpoint -> inference file (weights, model config, charset, image
           spec; optimizer and the rest dropped), named OUT_STEM-<sha256[:8]>.pt
  average  the weighted mean of several checkpoints of one model (a run's kept steps,
           train.keep_every; or runs fine-tuned from one start) -> a release file
  import   another project's CRNN weights (meijieru/crnn.pytorch, chineseocr's LSTM and
           dense models, Sierkinhane/CRNN_Chinese_Characters_Rec, clovaai
           None-VGG-BiLSTM-CTC) -> a crnn-ocr checkpoint for predict, eval and
           train.init_from, with the preprocessing that project used

Examples:
  convert_checkpoint.py release runs/en/best.pt -o models/crnn_en.pt --fp16
  convert_checkpoint.py average runs/zh --last 4 -o models/zh_avg.pt --fp16
  convert_checkpoint.py average runs/zh/last.pt models/crnn_zh.pt --shares 3,7 -o soup.pt
  convert_checkpoint.py import crnn.pth --layout meijieru \\
      --alphabet 0123456789abcdefghijklmnopqrstuvwxyz -o crnn_meijieru.pt
  convert_checkpoint.py import ocr-lstm.pth --layout chineseocr --charset keys.py -o zh.pt
  convert_checkpoint.py import checkpoint_9_acc_0.97.pth --layout sierkinhane \\
      --charset lib/config/alphabets.py -o zh_sierkinhane.pt

Exit codes: 0 done, 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from crnn.cli import EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.convert_checkpoint")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="convert_checkpoint.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="mode", required=True, metavar="MODE")

    def add(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.add_argument("src", help="input file (a checkpoint or a state_dict saved by torch.save)")
        sp.add_argument("-o", "--out", required=True, help="output file")
        sp.add_argument("--overwrite", action="store_true", help="replace an existing output")
        sp.add_argument("-v", "--verbose", action="store_true")
        return sp

    add("single", "strip module./_orig_mod. from the weight keys")
    add("dp", "prefix the weight keys with module. (DataParallel/DDP names)")
    sp = add("release", "make an inference-only release file named OUT_STEM-<sha256[:8]>.pt")
    sp.add_argument("--fp16", action="store_true", help="store float weights as float16")
    help = "the weighted mean of checkpoints of one model, as a release file"
    sp = sub.add_parser("average", help=help, description=help)
    sp.add_argument(
        "src",
        nargs="+",
        help="two or more checkpoints of one model (training checkpoints: "
        "their EMA weights where the run kept one; release files; kept steps); a run "
        "directory stands for the steps it kept (steps/step-*.pt, train.keep_every)",
    )
    sp.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="average only the last N files (e.g. a run directory's last N kept steps)",
    )
    sp.add_argument(
        "-o", "--out", required=True, help="release file to write, named OUT_STEM-<sha256[:8]>.pt"
    )
    sp.add_argument(
        "--shares",
        help="one part per file, comma-separated, scaled to sum to 1 "
        "(e.g. 3,7: 30 %% of the first); default equal shares",
    )
    sp.add_argument("--fp16", action="store_true", help="store float weights as float16")
    sp.add_argument("-v", "--verbose", action="store_true")
    sp = add("import", "import another project's CRNN weights as a crnn-ocr checkpoint")
    from crnn.checkpoint.foreign import FOREIGN_LAYOUTS

    sp.add_argument(
        "--layout",
        choices=("auto", *FOREIGN_LAYOUTS),
        default="auto",
        help="; ".join(f"{k}: {v}" for k, v in FOREIGN_LAYOUTS.items())
        + " (default auto: recognised from the key names and the file's top-level keys)",
    )
    alpha = sp.add_mutually_exclusive_group(required=True)
    alpha.add_argument(
        "--alphabet",
        help="the model's characters in class order, without the blank (class 0); "
        "e.g. 0123456789abcdefghijklmnopqrstuvwxyz",
    )
    alpha.add_argument(
        "--charset",
        help="the alphabet as a file: chineseocr's keys.py or Sierkinhane's alphabets.py (the "
        "string is read, never executed; FILE.py#NAME picks a variable), a file with one "
        "character per line (UTF-8 or GBK; a first line such as 'blank' is the blank's "
        "placeholder; FILE+space adds PaddleOCR's space class), or a built-in name",
    )
    sp.add_argument(
        "--case-fold",
        choices=("auto", "yes", "no"),
        default="auto",
        help="lower-case labels before comparing (auto: when the alphabet has no capitals)",
    )
    sp.add_argument(
        "--visual-order",
        action="store_true",
        help="the model was trained on right-to-left labels in visual order (reversed, "
        "as drawn), so predictions are turned back to logical order; default: it "
        "writes labels as they were stored",
    )
    sp.add_argument("--min-width", type=int, default=16, help="stored image spec (default 16)")
    sp.add_argument("--max-width", type=int, default=128, help="stored image spec (default 128)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn import checkpoint as ck
    from crnn.config.image_spec import ImageSpec
    from crnn.io import atomic_save
    from crnn.text.alphabet import Charset

    out = Path(args.out)
    if args.mode == "average":
        return average(args.src, out, args.shares, args.fp16, args.last)
    src = Path(args.src)
    if out.exists() and not args.overwrite and args.mode != "release":
        log.error("%s exists; pass --overwrite to replace it", out)
        return EXIT_USAGE
    try:
        obj = ck.load_checkpoint(src)
        if args.mode in ("single", "dp"):
            converted = ck.convert_prefixes(obj, args.mode, str(src))
            n = len(ck.extract_state_dict(converted, str(src)))
            atomic_save(converted, out)
            log.info("wrote %s (%d weight keys, %s names)", out, n, args.mode)
        elif args.mode == "release":
            final = ck.save_release(obj, out, fp16=args.fp16, source=str(src))
            log.info("wrote release file %s (%.1f MB)", final, final.stat().st_size / 1e6)
            print(final)
        else:
            fold = {"auto": None, "yes": True, "no": False}[args.case_fold]
            if args.alphabet is not None:
                charset = Charset(args.alphabet, fold, "imported", args.visual_order)
            else:
                charset = Charset.from_spec(args.charset, fold, args.visual_order)
            spec = ImageSpec(min_width=args.min_width, max_width=args.max_width)
            ckpt = ck.import_state_dict(obj, charset, args.layout, spec, str(src))
            atomic_save(ckpt, out)
            mc = ckpt["model_config"]
            log.info(
                "imported %s (%s layout) as a crnn-ocr checkpoint %s: arch %s, %d classes, "
                "hidden %d",
                src,
                ckpt["imported"]["layout"],
                out,
                mc["arch"],
                mc["num_classes"],
                mc["hidden"],
            )
    except (ck.CheckpointError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    return EXIT_OK


def average(sources: list[str], out: Path, shares: str | None, fp16: bool, last: int | None) -> int:
    """The ``average`` mode: load, check, average, release."""
    from crnn import checkpoint as ck
    from crnn.checkpoint.average import expand_sources

    try:
        sources = expand_sources(sources, last)
        parts = ck.parse_shares(shares, len(sources))
        loaded = [(src, ck.load_checkpoint(src)) for src in sources]
        final = ck.save_release(ck.average_checkpoints(loaded, parts), out, fp16=fp16)
    except (ck.CheckpointError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    mix = ", ".join(f"{Path(s).name} {w:.0%}" for s, w in zip(sources, parts))
    log.info("wrote release file %s: the mean of %s", final, mix)
    print(final)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
