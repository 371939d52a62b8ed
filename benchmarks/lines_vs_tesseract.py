"""Our line model against Tesseract 5 on the same held-out synthetic text lines.

    python benchmarks/lines_vs_tesseract.py --model runs/crnn_line_en_cpu/best.pt
    python benchmarks/lines_vs_tesseract.py --model line --count 1000 --json
    docs/bench/lines_vs_tesseract.json
    python benchmarks/lines_vs_tesseract.py --model old.onnx new.onnx --no-tesseract   # two of ours

Several ``--model`` files are read on the same lines in the same run (a retrained model
against the one it would replace); ``--no-tesseract`` leaves Tesseract out.

The lines come from the generator with the settings of ``configs/crnn_line_en.yaml``
(1-12 words and numbers, up to 80 characters, printed-text effects on) and a seed that
training never uses (``--seed``, default 20261122; training draws from seed 0's stream,
the validation set from its own), rendered 32 px high, as the model reads them. Both
readers get the same PNG files; Tesseract (``tesseract FILE - --psm 7``: one text line,
its LSTM engine, the ``eng`` model of Debian's ``tesseract-ocr-eng``) also gets each
image enlarged 3x with Lanczos, since it is tuned for text 20-40 px high and 32 px lines
hold letters of 10-15 px. Character error rate (edit distance / label characters,
summed over the bucket) by label length: 1-10, 11-30, 31-60, 61+ characters; spaces
count, runs of spaces are one, ends are stripped on both sides.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from crnn.checkpoint.format import CheckpointError  # noqa: E402
from crnn.config import load_config  # noqa: E402
from crnn.data.synth import SynthGenerator  # noqa: E402
from crnn.reports.errors import length_bucket  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = ((1, 10), (11, 30), (31, 60), (61, 10**9))


def bucket(n: int) -> str:
    return length_bucket(n, BUCKETS)


def clean(text: str) -> str:
    return " ".join(text.split())


def tesseract(path: Path, scale: int) -> str:
    src = path
    if scale != 1:
        im = Image.open(path)
        src = path.with_name(f"{path.stem}_x{scale}.png")
        im.resize((im.width * scale, im.height * scale), Image.LANCZOS).save(src)
    out = subprocess.run(
        ["tesseract", str(src), "-", "--psm", "7"], capture_output=True, text=True, check=False
    )
    return clean(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--model",
        required=True,
        nargs="+",
        help="checkpoints, release or .onnx files, or 'line' (each read on the same lines)",
    )
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--config", default=str(ROOT / "configs" / "crnn_line_en.yaml"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the rendered lines and gt.txt here")
    ap.add_argument("--no-tesseract", action="store_true", help="read with our model(s) only")
    args = ap.parse_args()
    if not args.no_tesseract and shutil.which("tesseract") is None:
        sys.exit("tesseract not found: apt install tesseract-ocr tesseract-ocr-eng")
    from crnn.reading.recognizer import Recognizer

    # Every model is loaded before any line is drawn: a wrong path fails at once.
    try:
        recs = [
            Recognizer.bundled("line") if m == "line" else Recognizer.from_checkpoint(m)
            for m in args.model
        ]
    except (CheckpointError, FileNotFoundError) as e:
        sys.exit(f"--model: {e}")
    cfg = load_config(args.config, [])
    charset = Charset.from_spec(cfg.data.charset)
    gen = SynthGenerator(charset, cfg.data.synth, seed=args.seed, height=cfg.data.height)
    tmp = Path(tempfile.mkdtemp()) if args.keep is None else args.keep
    (tmp / "images").mkdir(parents=True, exist_ok=True)
    paths, labels = [], []
    for i in range(args.count):
        img, text = gen.render(i)
        p = tmp / "images" / f"{i:05d}.png"
        img.save(p)
        paths.append(p)
        labels.append(clean(text))
    (tmp / "gt.txt").write_text("".join(f"images/{p.name}\t{t}\n" for p, t in zip(paths, labels)))
    readers: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    # A row per model, named by its file; by the path as given where two files share a
    # name (runs/a/best.pt, runs/b/best.pt), so that no row overwrites another.
    short = [Path(m).name for m in args.model]
    names = short if len(set(short)) == len(short) else args.model
    for rec, label in zip(recs, names):
        name = "crnn-ocr" if len(args.model) == 1 else f"crnn-ocr {label}"
        t0 = time.perf_counter()
        readers[name] = [clean(r.text) for r in rec.predict([str(p) for p in paths])]
        seconds[name] = time.perf_counter() - t0
    for scale in () if args.no_tesseract else (1, 3):
        name = "Tesseract 5 (as is)" if scale == 1 else f"Tesseract 5 ({scale}x larger)"
        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as ex:
            readers[name] = list(ex.map(lambda p, s=scale: tesseract(p, s), paths))
        seconds[name] = time.perf_counter() - t0
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, reads in readers.items():
        sums: dict[str, list[int]] = {}
        for label, read in zip(labels, reads):
            b = bucket(len(label))
            s = sums.setdefault(b, [0, 0, 0, 0])
            s[0] += Levenshtein.distance(read, label)
            s[1] += len(label)
            s[2] += read == label
            s[3] += 1
        total = [sum(v[k] for v in sums.values()) for k in range(4)]
        sums["all"] = total
        table[name] = {
            b: {"cer": v[0] / max(v[1], 1), "line_acc": v[2] / v[3], "lines": v[3]}
            for b, v in sums.items()
        }
    order = [bucket(lo) for lo, _ in BUCKETS] + ["all"]
    tess_version = (
        ""
        if args.no_tesseract
        else "; "
        + subprocess.run(
            ["tesseract", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0]
    )
    print(
        f"# {args.count} lines, seed {args.seed}, {platform.machine()}; model "
        f"{' '.join(args.model)}{tess_version}"
    )
    counts = next(iter(table.values()))
    print(
        "| CER (line accuracy) | "
        + " | ".join(f"{b} chars ({int(counts[b]['lines']) if b in counts else 0})" for b in order)
        + " |"
    )
    print("|---|" + "---:|" * len(order))
    for name, rows in table.items():
        cells = [
            f"{rows[b]['cer']:.3f} ({rows[b]['line_acc']:.0%})" if b in rows else "-" for b in order
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nseconds for {args.count} lines (crnn-ocr: one process, model loaded; "
        "Tesseract: 2 processes at a time): "
        + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items())
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "seconds": seconds,
                    "table": table,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
