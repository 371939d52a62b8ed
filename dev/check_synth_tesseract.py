"""Independent-reader check of the synthetic generator: can Tesseract read its images?

    python dev/check_synth_tesseract.py            # 500 clean word images, seed 0

Renders clean samples (effects off: horizontal, dark text on a flat light background,
dictionary words in mixed case) and runs Tesseract on each as one text line
(``--psm 7``). Reports the fraction read exactly, ignoring case, and exits 1 below
``--min-accuracy`` (0.95). A label that does not match its pixels (a wrong glyph, a
clipped letter, a tofu box) shows up here as a misread that a human would also make.

Needs the ``tesseract`` program (Debian: ``apt-get install tesseract-ocr``); without it
the check is skipped with exit code 0 and a message. This is a check of the generator,
not a unit test: it takes about half a minute.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    import crnn  # noqa: F401
except ImportError:  # run from a clone without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import ImageOps

from crnn.cli import setup_logging
from crnn.config import SynthConfig
from crnn.data.synth import SynthGenerator, effects_off
from crnn.text.alphabet import Charset

log = logging.getLogger("crnn.check_synth_tesseract")


def clean_word_config(effects: bool = False) -> SynthConfig:
    """Dictionary words only (mixed case, no attached punctuation), effects off unless
    ``effects``."""
    cfg = SynthConfig() if effects else effects_off(SynthConfig())
    return dataclasses.replace(
        cfg,
        p_word=1.0,
        p_number=0.0,
        p_date=0.0,
        p_price=0.0,
        p_code=0.0,
        p_random=0.0,
        p_line=0.0,
        p_punct=0.0,
    )


def run_tesseract(paths: list[Path], workdir: Path, tag: str) -> list[str]:
    """Tesseract's single-line reading of each image, in order (one batch call)."""
    listing = workdir / f"list-{tag}.txt"
    listing.write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # one core per batch; batches run side by side
    out = subprocess.run(
        ["tesseract", str(listing), "stdout", "--psm", "7"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    pages = out.split("\f")  # a form feed separates pages
    if len(pages) != len(paths):
        raise RuntimeError(f"tesseract returned {len(pages)} pages for {len(paths)} images")
    return [p.strip() for p in pages]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--height", type=int, default=48, help="render height in pixels")
    p.add_argument("--charset", default="alnum62")
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel tesseract runs"
    )
    p.add_argument("--min-accuracy", type=float, default=0.95)
    p.add_argument("--keep", help="folder to save the misread images in")
    p.add_argument(
        "--with-effects",
        action="store_true",
        help="default appearance effects on (for information: a harder set, no threshold "
        "is meant for it)",
    )
    args = p.parse_args(argv)
    setup_logging()

    if shutil.which("tesseract") is None:
        log.warning(
            "SKIPPED: the tesseract program is not installed (apt-get install tesseract-ocr)"
        )
        return 0
    gen = SynthGenerator(
        Charset.from_spec(args.charset),
        clean_word_config(args.with_effects),
        seed=args.seed,
        height=args.height,
    )
    with tempfile.TemporaryDirectory(prefix="synth-tess-") as tmp:
        work = Path(tmp)
        paths, labels, fonts = [], [], []
        for i in range(args.count):
            img, label, meta = gen.render_with_meta(i)
            # A margin in the paper's tone: Tesseract's line finder wants room around text.
            img = ImageOps.expand(img, border=args.height // 4, fill=img.getpixel((0, 0)))
            path = work / f"{i:05d}.png"
            img.save(path)
            paths.append(path)
            labels.append(label)
            fonts.append(Path(meta.font).name)
        n = max(1, args.workers)
        batches = [paths[k::n] for k in range(n)]
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(run_tesseract, batches, [work] * n, [str(k) for k in range(n)]))
        read = [""] * len(paths)
        for k, batch in enumerate(results):
            read[k::n] = batch
        wrong = [
            (i, labels[i], read[i], fonts[i])
            for i in range(len(paths))
            if read[i].lower() != labels[i].lower()
        ]
        if args.keep and wrong:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for i, *_ in wrong:
                shutil.copy(paths[i], keep / paths[i].name)
    accuracy = 1.0 - len(wrong) / len(paths)
    for i, label, got, font in wrong[:30]:
        print(f"  #{i:<5d} label {label!r:22s} tesseract {got!r:22s} {font}")
    print(
        f"Tesseract read {len(paths) - len(wrong)}/{len(paths)} "
        f"{'synthetic words with effects' if args.with_effects else 'clean synthetic words'} "
        "exactly "
        f"(case-insensitive): {accuracy:.1%} (threshold {args.min_accuracy:.0%}; charset "
        f"{args.charset}, height {args.height}, seed {args.seed}, {len(gen.fonts)} fonts)"
    )
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
