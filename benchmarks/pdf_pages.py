"""Scanned pages in a PDF, read through the command users type: ``crnn-predict doc.pdf
--json`` with its default options (and ``--model``), one result per page, scored by page
CER against the pages' text; the same PDF with every page upside down beside it.

    python benchmarks/pdf_pages.py --json docs/bench/pdf_pages.json

The pages are the page benchmark's (``benchmarks/pages_vs_peers.py``: faces neither
bundled model trained on, scanned: tilted, unevenly lit, blurred, noisy, JPEG), saved as
images in a PDF at 200 dpi, as a scanner writes one; the PDF has no text layer.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pages_vs_peers import EN_FACES, ZH_FACES, make_page, score  # noqa: E402
from crnn.data.synth.fontsets import locate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def read_pdf(pdf: Path, model: str) -> tuple[list[dict], float]:
    exe = shutil.which("crnn-predict")
    cmd = [exe] if exe else [sys.executable, str(ROOT / "tools" / "predict.py")]
    t0 = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--model", model, "--json", str(pdf)],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    if done.returncode:
        sys.exit(f"crnn-predict failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout), time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=5, help="pages per PDF (default 5)")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pdf_pages_"))
    rows = []
    for lang, model, faces in (("en", "line", EN_FACES), ("zh", "zh", ZH_FACES)):
        r = random.Random(f"{args.seed}:{lang}")
        pages = [
            make_page(lang, "scan", locate(faces[i % len(faces)]), r) for i in range(args.pages)
        ]  # type: ignore[arg-type]
        for turn in (0, 180):
            imgs = [img.convert("L").rotate(-turn, expand=True) for img, _ in pages]
            pdf = tmp / f"{lang}_scan_{turn}.pdf"
            imgs[0].save(pdf, "PDF", resolution=200, save_all=True, append_images=imgs[1:])
            results, secs = read_pdf(pdf, model)
            edits = chars = exact = lines = 0
            for res, (_, truth) in zip(results, pages):
                e, c, x = score(res["text"].split("\n"), truth)
                edits, chars, exact, lines = edits + e, chars + c, exact + x, lines + len(truth)
            row = {
                "lang": lang,
                "turn": turn,
                "pages": len(results),
                "in_order": [r_["page"] for r_ in results],
                "cer": edits / chars,
                "lines_exact": exact / lines,
                "s_per_page": secs / len(results),
            }
            rows.append(row)
            print(
                f"{lang} turned {turn:>3}: {len(results)} results (pages {row['in_order']}), "
                "page CER "
                f"{row['cer']:6.2%}, lines exact {row['lines_exact']:6.1%}, "
                f"{row['s_per_page']:.2f} s/page "
                "(command included)",
                flush=True,
            )
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "seed": args.seed,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
