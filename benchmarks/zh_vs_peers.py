"""Printed Chinese lines read by our Chinese model, Tesseract 5 (chi_sim) and PaddleOCR's
PP-OCRv4 recognizer, side by side on the same images.

    python benchmarks/zh_vs_peers.py --model zh --json docs/bench/zh_vs_peers.json
    python benchmarks/zh_vs_peers.py --model runs/crnn_zh_cpu/best.pt --count 100

The lines are made here, not by the training generator: pieces of 4-18 characters cut
from the sentences of ``benchmarks/zh_sentences.txt`` (written for this benchmark, not
drawn from the training word list), drawn with Pillow in a font from the allowed
packages that training did not use (``--font``, default WenQuanYi Micro Hei, held out by
``configs/crnn_zh_cpu.yaml``), dark text on a light page, 40-56 px high, then mildly
degraded: a Gaussian blur of 0.3-0.9 px, pixel noise (std 2-8), a JPEG round trip
(quality 60-90). Deterministic per ``--seed``.

Readers: our model (``--model``: ``zh``, a checkpoint, a release or an ``.onnx`` file;
greedy decoding, every line at its own width); Tesseract (``tesseract FILE -
-l chi_sim --psm 7``: one text line, Debian's ``tesseract-ocr-chi-sim``); PP-OCRv4's
recognizer alone (``ch_PP-OCRv4_rec_infer.onnx`` as packaged by
``pip install rapidocr-onnxruntime``, its own preprocessing: height 48, batches of 6).
Texts are compared after NFKC (full-width forms to ASCII, as readers differ in which
they write) and with whitespace removed (Tesseract puts spaces between Chinese
characters). CER = edit distance / label characters over all lines; exact = lines read
exactly; ms/line = wall time of each reader over all lines / lines, on this machine's
cores (Tesseract: one process per line, two at a time).
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import editdistance  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ROOT / "benchmarks" / "zh_sentences.txt"
DEFAULT_FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"


def norm(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def make_lines(count: int, seed: int) -> list[str]:
    """Pieces of 4-18 characters of the benchmark sentences, in order, cut at random
    points (each sentence gives one or more lines; the end punctuation stays on)."""
    r = random.Random(seed)
    sentences = [s.strip() for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    lines: list[str] = []
    while len(lines) < count:
        for s in sentences:
            i = 0
            while i < len(s) and len(lines) < count:
                n = r.randint(4, 18)
                piece = s[i : i + n]
                if len(piece) >= 4 or i == 0:
                    lines.append(piece)
                i += n
            if len(lines) >= count:
                break
    return lines


def render(text: str, font_path: str, r: random.Random) -> Image.Image:
    """A printed line: dark text on a light page, mildly degraded (see the module
    docstring)."""
    size = r.randint(30, 42)
    face = r.randrange(2) if font_path.endswith(".ttc") else 0
    font = ImageFont.truetype(font_path, size, index=face)
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = r.randint(4, 14), r.randint(4, 10)
    paper, ink = r.randint(215, 255), r.randint(0, 60)
    img = Image.new("L", (right - left + 2 * pad_x, bottom - top + 2 * pad_y), paper)
    ImageDraw.Draw(img).text((pad_x - left, pad_y - top), text, font=font, fill=ink)
    img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.3, 0.9)))
    arr = np.asarray(img, dtype=np.float32)
    arr = arr + np.random.default_rng(r.randrange(2**32)).normal(0, r.uniform(2, 8), arr.shape)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=r.randint(60, 90))
    return Image.open(io.BytesIO(buf.getvalue())).convert("L")


def tesseract(path: Path) -> str:
    out = subprocess.run(["tesseract", str(path), "-", "-l", "chi_sim", "--psm", "7"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    return out.stdout


def ppocr_reader() -> tuple[object, str] | None:
    """PP-OCRv4's recognizer from the rapidocr-onnxruntime package, or None."""
    try:
        import rapidocr_onnxruntime
        from rapidocr_onnxruntime.ch_ppocr_rec.text_recognize import TextRecognizer
        from rapidocr_onnxruntime.utils import read_yaml
    except ImportError:
        return None
    base = Path(rapidocr_onnxruntime.__file__).parent
    cfg = read_yaml(str(base / "config.yaml"))["Rec"]
    cfg["model_path"] = str(base / cfg["model_path"])
    version = getattr(rapidocr_onnxruntime, "__version__", "")
    return TextRecognizer(cfg), f"PP-OCRv4 rec ({Path(cfg['model_path']).name}, rapidocr-onnxruntime {version})".replace(" )", ")")


def score(labels: list[str], reads: list[str]) -> dict[str, float]:
    edits = sum(editdistance.eval(norm(p), norm(t)) for p, t in zip(reads, labels))
    chars = sum(len(norm(t)) for t in labels)
    exact = sum(norm(p) == norm(t) for p, t in zip(reads, labels))
    return {"cer": edits / chars, "exact": exact, "lines": len(labels)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="zh", help="'zh' (bundled), a checkpoint, release or .onnx file")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--font", default=DEFAULT_FONT, help="font to draw the lines with (held out from training)")
    ap.add_argument("--no-tesseract", action="store_true")
    ap.add_argument("--no-ppocr", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the rendered lines and gt.txt here")
    args = ap.parse_args()
    from crnn.inference import Recognizer

    labels = make_lines(args.count, args.seed)
    r = random.Random(args.seed)
    images = [render(t, args.font, r) for t in labels]
    tmp = Path(tempfile.mkdtemp()) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, im in enumerate(images):
        paths.append(tmp / f"line_{i:04d}.png")
        im.save(paths[-1])
    (tmp / "gt.txt").write_text("".join(f"{p.name}\t{t}\n" for p, t in zip(paths, labels)), encoding="utf-8")

    rows = []
    rec = Recognizer.bundled(args.model) if args.model in ("zh",) else Recognizer.from_checkpoint(args.model)
    t0 = time.perf_counter()
    ours = [p.text for p in rec.predict(paths)]
    rows.append({"reader": f"crnn-ocr ({args.model})", **score(labels, ours),
                 "ms_per_line": 1000 * (time.perf_counter() - t0) / len(paths), "reads": ours})  # fmt: skip
    if not args.no_tesseract and shutil.which("tesseract"):
        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as ex:
            tess = list(ex.map(tesseract, paths))
        version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        rows.append({"reader": f"{version} chi_sim --psm 7", **score(labels, tess),
                     "ms_per_line": 1000 * (time.perf_counter() - t0) / len(paths), "reads": tess})  # fmt: skip
    paddle = None if args.no_ppocr else ppocr_reader()
    if paddle is not None:
        model, name = paddle
        bgr = [np.repeat(np.asarray(im)[:, :, None], 3, axis=2) for im in images]
        t0 = time.perf_counter()
        out, _ = model(bgr)  # type: ignore[operator]
        reads = [t for t, _ in out]
        rows.append({"reader": name, **score(labels, reads),
                     "ms_per_line": 1000 * (time.perf_counter() - t0) / len(paths), "reads": reads})  # fmt: skip
    print(f"{len(labels)} printed Chinese lines, {Path(args.font).name}, seed {args.seed} "
          f"(lines in {tmp})")  # fmt: skip
    print(f"{'reader':<58} {'CER':>7} {'exact':>11} {'ms/line':>8}")
    for row in rows:
        print(f"{row['reader']:<58} {row['cer']:>7.2%} {row['exact']:>4}/{row['lines']:<6} "
              f"{row['ms_per_line']:>8.1f}")  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
                "font": args.font, "seed": args.seed, "labels": labels}  # fmt: skip
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, ensure_ascii=False, indent=1),
                             encoding="utf-8")  # fmt: skip


if __name__ == "__main__":
    main()
