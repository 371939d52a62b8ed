"""Whole pages read by crnn-ocr (its page reader with the bundled line and Chinese
models), Tesseract 5 (``--psm 3``, ``eng`` / ``chi_sim``) and RapidOCR (PaddleOCR's
PP-OCRv4 text detector + recognizer), side by side on the same pages.

    python benchmarks/pages_vs_peers.py --json docs/bench/pages_vs_peers.json
    python benchmarks/pages_vs_peers.py --pages 4 --zh-model runs/crnn_zh_cpu/best.pt
    python benchmarks/pages_vs_peers.py --langs zh --zh-faces dev --no-tesseract --no-rapidocr

The pages are drawn here (English: EB Garamond and Carlito, Debian's ``fonts-ebgaramond``
and ``fonts-crosextra-carlito``, faces the English models never trained on; Chinese: LXGW
WenKai, BabelStone Han, WenQuanYi Micro Hei and Hanazono Mincho, which the Chinese recipe
held out until its stage 7 and has trained on since, or with ``--zh-faces dev`` the
Chinese development set's AR PL UMing and UKai, which no stage trained on: a development
page set, see ``benchmarks/zh_sets.py``), with text written for the benchmarks
(``benchmarks/en_sentences.txt``, ``benchmarks/zh_sentences.txt``): 10-18 lines each, a
heading, one column or two, sometimes a picture and a rule. Two kinds per language:

* ``clean``: a screenshot, dark or light text on a flat, sometimes coloured background;
* ``scan``: a page scanned or photographed square-on: tilted up to 3 degrees, unevenly
  lit, blurred, noisy and JPEG-compressed.

Scores: the page's CER, with the lines in reading order (the read and the truth each
joined into one string, whitespace removed, NFKC), the share of the truth's lines found
exactly among the read lines, and seconds per page on this machine's cores (all readers
in one process per page; Tesseract as a subprocess).
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
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from benchmarks.zh_sets import DEV_FACES  # noqa: E402
from crnn.data.synth.fontsets import SetFace, locate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EN_FACES = (
    SetFace("EBGaramond12-Regular.otf", "fonts-ebgaramond", "serif"),
    SetFace("Carlito-Regular.ttf", "fonts-crosextra-carlito", "sans"),
)
ZH_FACES = (
    SetFace("LXGWWenKai-Regular.ttf", "fonts-lxgw-wenkai", "kai"),
    SetFace("BabelStoneHan.ttf", "fonts-babelstone-han", "song"),
    SetFace("wqy-microhei.ttc", "fonts-wqy-microhei", "hei", "WenQuanYi Micro Hei"),
    SetFace("HanaMinA.ttf", "fonts-hanazono", "mincho"),
)


def norm(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def sentences(lang: str) -> list[str]:
    path = ROOT / "benchmarks" / ("en_sentences.txt" if lang == "en" else "zh_sentences.txt")
    return [
        s.strip()
        for s in path.read_text(encoding="utf-8").splitlines()
        if s.strip() and not s.startswith("#")
    ]


_NO_LINE_START = set("，。、；：！？）」』》〉】,.;:!?)")


def wrap(text: str, font: ImageFont.FreeTypeFont, width: int, lang: str) -> list[str]:
    """Lines of at most ``width`` pixels: at spaces for English, anywhere for Chinese,
    except that closing punctuation never starts a line (it hangs past the margin, as
    Chinese typesetting does)."""
    units = text.split(" ") if lang == "en" else list(text)
    sep = " " if lang == "en" else ""
    lines, cur = [], ""
    for u in units:
        cand = cur + sep + u if cur else u
        if font.getlength(cand) <= width or not cur or (lang == "zh" and u in _NO_LINE_START):
            cur = cand
        else:
            lines.append(cur)
            cur = u
    if cur:
        lines.append(cur)
    return lines


def load(face_path: str, size: int) -> ImageFont.FreeTypeFont:
    file, _, index = face_path.partition("#")
    return ImageFont.truetype(file, size, index=int(index or 0))


def make_page(lang: str, kind: str, face: str, r: random.Random) -> tuple[Image.Image, list[str]]:
    """A page and its lines in reading order."""
    size = r.randint(22, 30)
    font, head = load(face, size), load(face, int(size * 1.5))
    two_cols = r.random() < 0.5
    w = 1240
    margin, gutter = 60, 60
    col_w = (w - 2 * margin - (gutter if two_cols else 0)) // (2 if two_cols else 1)
    pool = sentences(lang)
    start = r.randrange(len(pool))
    text_lines: list[list[str]] = [[] for _ in range(2 if two_cols else 1)]
    per_col = r.randint(6, 9) if two_cols else r.randint(10, 16)
    k = start
    for col in text_lines:
        while len(col) < per_col:
            col.extend(wrap(pool[k % len(pool)], font, col_w, lang))
            k += 1
        del col[per_col:]
    heading = pool[(start + 7) % len(pool)][: 22 if lang == "zh" else 36].strip()
    lh = int(size * 1.6)
    top = margin + int(size * 2.6)
    h = top + per_col * lh + margin + (260 if r.random() < 0.35 else 0)
    dark_bg = kind == "clean" and r.random() < 0.3
    if kind == "clean" and r.random() < 0.5:
        bg = (
            tuple(r.randint(0, 80) for _ in range(3))
            if dark_bg
            else tuple(r.randint(200, 255) for _ in range(3))
        )
    else:
        bg = (20, 24, 30) if dark_bg else (250, 250, 248)
    ink = (235, 235, 225) if dark_bg else tuple(r.randint(0, 60) for _ in range(3))
    img = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(img)
    d.text((margin, margin), heading, font=head, fill=ink)
    if r.random() < 0.5:
        d.line(
            (margin, top - int(size * 0.6), w - margin, top - int(size * 0.6)), fill=ink, width=2
        )
    for c, col in enumerate(text_lines):
        x = margin + c * (col_w + gutter)
        for i, line in enumerate(col):
            d.text((x, top + i * lh), line, font=font, fill=ink)
    if h > top + per_col * lh + margin + 10:  # a picture under the text
        rng = np.random.default_rng(r.randrange(2**32))
        pic = Image.fromarray((rng.random((40, 90, 3)) * 255).astype(np.uint8)).resize((420, 200))
        img.paste(pic.filter(ImageFilter.GaussianBlur(3)), (margin, top + per_col * lh + 30))
    truth = [heading] + [ln for col in text_lines for ln in col]
    if kind == "scan":
        img = scan(img, r)
    return img, truth


def scan(img: Image.Image, r: random.Random) -> Image.Image:
    """A page as a scanner or a phone square-on gives it."""
    img = img.rotate(r.uniform(-3, 3), Image.BICUBIC, expand=True, fillcolor=(250, 250, 248))
    w, h = img.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = r.uniform(0, w), r.uniform(0, h)
    light = 1.0 - r.uniform(0.1, 0.35) * np.clip(np.hypot((xx - cx) / w, (yy - cy) / h), 0, 1)
    arr = np.asarray(img, np.float32) * light[:, :, None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(r.uniform(0.4, 1.0))
    )
    arr = np.asarray(img, np.float32) + np.random.default_rng(r.randrange(2**32)).normal(
        0, r.uniform(3, 8), (h, w, 1)
    )
    buf = io.BytesIO()
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(
        buf, "JPEG", quality=r.randint(50, 85)
    )
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def score(read_lines: list[str], truth: list[str]) -> tuple[int, int, int]:
    """(edits, characters, truth lines found exactly) for one page."""
    got = norm("".join(read_lines))
    want = norm("".join(truth))
    found = {norm(x) for x in read_lines}
    return Levenshtein.distance(got, want), len(want), sum(norm(t) in found for t in truth)


def tesseract(path: Path, lang: str) -> list[str]:
    out = subprocess.run(
        ["tesseract", str(path), "-", "-l", "eng" if lang == "en" else "chi_sim", "--psm", "3"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def rapidocr() -> object | None:
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    return RapidOCR()


def rapid_read(engine: object, img: Image.Image) -> list[str]:
    result, _ = engine(np.asarray(img)[:, :, ::-1].copy())  # type: ignore[operator]
    return [text for _, text, _ in (result or [])]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=6, help="pages per language and kind (default 6)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--en-model", default="line", help="'line' (bundled) or a checkpoint/.onnx")
    ap.add_argument("--zh-model", default="zh", help="'zh' (bundled) or a checkpoint/.onnx")
    ap.add_argument("--no-tesseract", action="store_true")
    ap.add_argument("--no-rapidocr", action="store_true")
    ap.add_argument(
        "--turn",
        type=int,
        choices=(0, 90, 180, 270),
        default=0,
        help="turn every page this many degrees clockwise before it is read (default 0)",
    )
    ap.add_argument(
        "--rotate",
        choices=("none", "pages", "auto"),
        default="pages",
        help="crnn-ocr's Recognizer(rotate=...): pages (the default) turns pages read upside down",
    )
    ap.add_argument(
        "--stretch",
        help="crnn-ocr's Recognizer(stretch=...), widths like 1.0,1.1 (default: the "
        "Recognizer's, 1.0,1.1 for the Chinese model)",
    )
    ap.add_argument(
        "--zoom",
        help="crnn-ocr's Recognizer(zoom=...), zooms like 1.0,1.2 "
        "(default: the Recognizer's, 1.0,1.2 for the Chinese model)",
    )
    ap.add_argument(
        "--layout",
        choices=("page", "auto"),
        default="page",
        help="crnn-ocr's read_page(layout=...): page (the default here: every image a page) "
        "or auto (what crnn-predict does: its finder decision, the detector's included)",
    )
    ap.add_argument("--langs", default="en,zh", help="which languages' pages (default en,zh)")
    ap.add_argument(
        "--zh-faces",
        choices=("recipe", "dev"),
        default="recipe",
        help="the Chinese pages' faces: recipe (the four named above, training faces since "
        "stage 7) or dev (the development set's AR PL UMing and UKai, never trained on)",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the pages and their truth here")
    args = ap.parse_args()
    langs = [x for x in args.langs.split(",") if x]
    if not langs or set(langs) - {"en", "zh"}:
        ap.error(f"--langs {args.langs!r}: expected en, zh or en,zh")
    from crnn.reading.recognizer import Recognizer

    stretch = None if args.stretch is None else [float(w) for w in args.stretch.split(",")]
    zoom = None if args.zoom is None else [float(z) for z in args.zoom.split(",")]

    def model(spec: str) -> Recognizer:
        if spec in ("line", "zh", "word"):
            return Recognizer.bundled(spec, rotate=args.rotate, stretch=stretch, zoom=zoom)
        return Recognizer.from_checkpoint(spec, rotate=args.rotate, stretch=stretch, zoom=zoom)

    specs = {"en": args.en_model, "zh": args.zh_model}
    ours = {lang: model(specs[lang]) for lang in langs}
    wanted = {
        "en": EN_FACES,
        "zh": tuple(DEV_FACES.values()) if args.zh_faces == "dev" else ZH_FACES,
    }
    faces = {lang: [locate(f) for f in wanted[lang]] for lang in langs}
    missing = sorted({f.package for lang in langs for f in wanted[lang] if locate(f) is None})
    if missing:
        sys.exit(f"fonts missing for the pages: apt-get install {' '.join(missing)}")
    tmp = Path(tempfile.mkdtemp()) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    readers = ["crnn-ocr"]
    if not args.no_tesseract and shutil.which("tesseract"):
        readers.append("tesseract --psm 3")
    engine = None if args.no_rapidocr else rapidocr()
    if engine is not None:
        readers.append("RapidOCR PP-OCRv4 det+rec")
    rows = []
    for lang in langs:
        for kind in ("clean", "scan"):
            r = random.Random(f"{args.seed}:{lang}:{kind}")
            pages = []
            for i in range(args.pages):
                face = faces[lang][i % len(faces[lang])]
                img, truth = make_page(lang, kind, face, r)  # type: ignore[arg-type]
                if args.turn:
                    img = img.rotate(-args.turn, expand=True)
                path = tmp / f"{lang}_{kind}_{i:02d}.png"
                img.save(path)
                path.with_suffix(".txt").write_text("\n".join(truth) + "\n", encoding="utf-8")
                pages.append((path, img, truth))
            for reader in readers:
                edits = chars = exact = lines = 0
                t0 = time.perf_counter()
                for path, img, truth in pages:
                    if reader == "crnn-ocr":
                        read = [
                            ln.text for ln in ours[lang].read_page(img, layout=args.layout).lines
                        ]
                    elif reader.startswith("tesseract"):
                        read = tesseract(path, lang)
                    else:
                        read = rapid_read(engine, img)
                    e, c, x = score(read, truth)
                    edits, chars, exact, lines = edits + e, chars + c, exact + x, lines + len(truth)
                secs = (time.perf_counter() - t0) / len(pages)
                rows.append(
                    {
                        "lang": lang,
                        "kind": kind,
                        "reader": reader,
                        "cer": edits / chars,
                        "lines_exact": exact / lines,
                        "s_per_page": secs,
                        "pages": len(pages),
                    }
                )
                print(
                    f"{lang} {kind:<5} {reader:<28} CER {edits / chars:7.2%}  lines exact "
                    f"{exact / lines:6.1%}  {secs:6.2f} s/page",
                    flush=True,
                )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "seed": args.seed,
            "pages": args.pages,
            "turn": args.turn,
            "rotate": args.rotate,
            "zh_faces": args.zh_faces,
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
