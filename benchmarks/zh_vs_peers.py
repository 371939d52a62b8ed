"""Chinese lines that the measured model never trained on, read by our Chinese model(s),
Tesseract 5 (chi_sim) and PaddleOCR's PP-OCRv4 recognizer, side by side on the same images.

    python benchmarks/zh_vs_peers.py --json docs/bench/zh_vs_peers.json
    python benchmarks/zh_vs_peers.py --model zh --model runs/crnn_zh_cpu/best.pt --no-tesseract

Every row is out of distribution for a model trained by ``configs/crnn_zh_cpu.yaml``:

* **Faces held out of training, one style per row** (leave-one-style-out): LXGW WenKai
  (Kai, a brush face), BabelStone Han (Song/Ming), WenQuanYi Micro Hei (Hei; its ancestor
  Droid Sans Fallback is held out too) and Hanazono Mincho (a Japanese Ming design). The
  recipe's ``exclude_fonts`` leaves all of them out; a model trained on any of them is
  reported with a warning (``--trained-on``). No rounded or display CJK face is among the
  font packages the recipes may use, so there is no such row.
* **Text the generator never produces**: pieces of 4-30 characters cut from the sentences
  of ``benchmarks/zh_sentences.txt``, written for this benchmark in six registers (news,
  technical, classical, dialogue with quotes, numbers and dates, mixed Latin and
  full-width forms), never used in training.
* **Photograph-like lines** (the ``photo`` row): the same kind of text in the held-out
  faces, composited on textured, coloured, unevenly lit backgrounds, with perspective,
  blur, low resolution, noise and JPEG, by code in this file that shares nothing with the
  training generator's effects (its own backgrounds, lighting, warps and blurs).

Printed rows: dark text on a light page as a scan or a phone photo of a page gives it
(a font of 28-44 px, tilted up to 1.2 degrees, toner up to half a pixel heavier or lighter
40 % of the time, blur 0.3-1.1 px, resampled to 55-100 %, noise std 3-9, JPEG quality 40-88).
Deterministic per ``--seed``.

Readers: ours (``--model``, repeatable: ``zh`` for the bundled model, a checkpoint, a
release or an ``.onnx`` file; greedy decoding, every line at its own width); Tesseract
(``tesseract FILE - -l chi_sim --psm 7``, one text line, Debian's
``tesseract-ocr-chi-sim``); PP-OCRv4's recognizer alone (``ch_PP-OCRv4_rec_infer.onnx``
as packaged by ``pip install rapidocr-onnxruntime``, its own preprocessing: height 48,
batches of 6). Texts are compared after NFKC (full-width forms to ASCII, as readers
differ in which they write) and with whitespace removed (Tesseract puts spaces between
Chinese characters). CER = edit distance / label characters over a row's lines; exact =
lines read exactly; ms/line = wall time of a reader over the row / lines, on this
machine's cores (Tesseract: one process per line, two at a time).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from crnn.data.synth.fontsets import SetFace, locate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ROOT / "benchmarks" / "zh_sentences.txt"


@dataclass(frozen=True)
class Face:
    row: str  # the row's name
    face: SetFace


# One face per style, none of which configs/crnn_zh_cpu.yaml trains on.
FACES = (
    Face("kai", SetFace("LXGWWenKai-Regular.ttf", "fonts-lxgw-wenkai", "Kai (brush)")),
    Face("song", SetFace("BabelStoneHan.ttf", "fonts-babelstone-han", "Song/Ming")),
    Face(
        "hei",
        SetFace("wqy-microhei.ttc", "fonts-wqy-microhei", "Hei (sans)", "WenQuanYi Micro Hei"),
    ),
    Face("mincho", SetFace("HanaMinA.ttf", "fonts-hanazono", "Mincho (Japanese Ming)")),
)
# Faces both the first bundled model and the recipe train on, for the release check
# "without losing on the faces it knew" (rows by name only: they measure memory).
KNOWN = (
    Face(
        "known-sans",
        SetFace(
            "NotoSansCJK-Regular.ttc", "fonts-noto-cjk", "Hei (trained on)", "Noto Sans CJK SC"
        ),
    ),
    Face(
        "known-serif",
        SetFace(
            "NotoSerifCJK-Regular.ttc", "fonts-noto-cjk", "Song (trained on)", "Noto Serif CJK SC"
        ),
    ),
    Face(
        "known-zenhei",
        SetFace("wqy-zenhei.ttc", "fonts-wqy-zenhei", "Hei (trained on)", "WenQuanYi Zen Hei"),
    ),
)
# The photograph row draws in these faces in turn (Droid Sans Fallback: also held out).
PHOTO_FACES = (
    *FACES,
    Face("droid", SetFace("DroidSansFallbackFull.ttf", "fonts-droid-fallback", "Hei (sans)")),
)


def norm(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def load_font(path: str, size: int) -> ImageFont.FreeTypeFont:
    file, _, index = path.partition("#")
    return ImageFont.truetype(file, size, index=int(index or 0))


def cmap(path: str) -> set[int]:
    from fontTools.ttLib import TTFont

    file, _, index = path.partition("#")
    with TTFont(file, lazy=True, fontNumber=int(index or 0)) as tt:
        return set(tt.getBestCmap())


def sentences() -> list[tuple[str, str]]:
    """(register, sentence) pairs of the benchmark's own text."""
    out, register = [], ""
    for line in SENTENCES.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("# register:"):
            register = line.split(":", 1)[1].strip()
        elif line and not line.startswith("#"):
            out.append((register, line))
    return out


def make_lines(count: int, seed: int, covered: set[int]) -> list[str]:
    """``count`` pieces of 4-30 characters cut from the sentences at random points (a
    sentence of up to 30 characters is also taken whole), registers interleaved; only
    pieces whose every character each face draws (``covered``)."""
    r = random.Random(seed)
    pool = sentences()
    r.shuffle(pool)
    out: list[str] = []
    while len(out) < count:
        for _, s in pool:
            if len(s) <= 30 and r.random() < 0.3:
                piece = s
            else:
                n = r.randint(4, 30)
                i = r.randrange(max(1, len(s) - n + 1))
                piece = s[i : i + n].strip()
            if len(piece) >= 4 and all(ord(c) in covered for c in piece if not c.isspace()):
                out.append(piece)
            if len(out) >= count:
                break
    return out


def render_print(text: str, font_path: str, r: random.Random) -> Image.Image:
    """A printed line as a scan or a phone photo of a page gives it: dark text on a
    light page, a slight tilt, uneven toner, blur, resampling, noise and JPEG."""
    font = load_font(font_path, r.randint(28, 44))
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = r.randint(4, 16), r.randint(3, 10)
    paper, ink = r.randint(200, 250), r.randint(10, 80)
    img = Image.new("L", (right - left + 2 * pad_x, bottom - top + 2 * pad_y), paper)
    ImageDraw.Draw(img).text((pad_x - left, pad_y - top), text, font=font, fill=ink)
    img = img.rotate(r.uniform(-1.2, 1.2), Image.BICUBIC, expand=False, fillcolor=paper)
    if r.random() < 0.4:  # toner: strokes a little heavier or lighter than the face
        toner = img.filter(
            ImageFilter.MinFilter(3) if r.random() < 0.5 else ImageFilter.MaxFilter(3)
        )
        img = Image.blend(img, toner, r.uniform(0.3, 0.6))
    img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.3, 1.1)))
    w, h = img.size
    scale = r.uniform(0.55, 1.0)  # the page scanned or photographed at a lower resolution
    img = img.resize((max(8, round(w * scale)), max(8, round(h * scale))), Image.BILINEAR)
    arr = np.asarray(img, dtype=np.float32)
    arr = arr + np.random.default_rng(r.randrange(2**32)).normal(0, r.uniform(3, 9), arr.shape)
    return _jpeg(Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L"), r.randint(40, 88))


def render_vertical(text: str, font_path: str, r: random.Random) -> Image.Image:
    """A vertical column as signs, spines and classical print set it: each character
    upright and centred in its own square cell, top to bottom (spaces dropped), with the
    scan effects of :func:`render_print`."""
    size = r.randint(28, 44)
    font = load_font(font_path, size)
    chars = [c for c in text if not c.isspace()]
    step = size + int(size * r.uniform(0.05, 0.3))
    pad_x, pad_y = r.randint(4, 14), r.randint(4, 14)
    paper, ink = r.randint(200, 250), r.randint(10, 80)
    img = Image.new("L", (size + 2 * pad_x, len(chars) * step - (step - size) + 2 * pad_y), paper)
    d = ImageDraw.Draw(img)
    for k, c in enumerate(chars):
        d.text((pad_x + size / 2, pad_y + k * step + size / 2), c, font=font, fill=ink, anchor="mm")
    img = img.rotate(r.uniform(-0.8, 0.8), Image.BICUBIC, expand=False, fillcolor=paper)
    img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.3, 1.0)))
    scale = r.uniform(0.6, 1.0)
    img = img.resize(
        (max(8, round(img.width * scale)), max(8, round(img.height * scale))), Image.BILINEAR
    )
    arr = np.asarray(img, dtype=np.float32)
    arr = arr + np.random.default_rng(r.randrange(2**32)).normal(0, r.uniform(3, 8), arr.shape)
    return _jpeg(Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L"), r.randint(50, 90))


# ---- the photograph row: backgrounds, light, warps and blurs of its own ----------------


def _fractal(rng: np.random.Generator, h: int, w: int, octaves: int = 5) -> np.ndarray:
    """Fractal value noise in [0, 1] (sums of bicubically enlarged random grids)."""
    out = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        gh, gw = 2 + 2**o, 2 + int(2**o * w / max(h, 1))
        grid = Image.fromarray(rng.random((gh, gw)).astype(np.float32), "F")
        out += amp * np.asarray(grid.resize((w, h), Image.BICUBIC), np.float32)
        total += amp
        amp *= 0.55
    out /= total
    return (out - out.min()) / (float(out.max() - out.min()) or 1.0)


def _background(rng: np.random.Generator, h: int, w: int, base: np.ndarray) -> np.ndarray:
    """A coloured, textured surface ``(h, w, 3)`` around the colour ``base``."""
    kind = rng.integers(5)
    if kind == 0:  # plaster / concrete
        t = _fractal(rng, h, w)[:, :, None]
        tint = rng.normal(0, 18, 3)
        return base + (t - 0.5) * 70 + tint * t
    if kind == 1:  # wood grain: warped stripes
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        warp = _fractal(rng, h, w, 3) * 12
        period = rng.uniform(5, 14)
        t = 0.5 + 0.5 * np.sin((y + warp * 3 + x * rng.uniform(-0.05, 0.05)) / period * 2 * math.pi)
        return base + ((t - 0.5) * rng.uniform(25, 60))[:, :, None] * np.array([1.0, 0.8, 0.55])
    if kind == 2:  # bokeh: blurred discs of several colours (a street behind a sign)
        img = Image.new("RGB", (w, h), tuple(int(v) for v in np.clip(base, 0, 255)))
        d = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(6, 20))):
            c = np.clip(base + rng.normal(0, 60, 3), 0, 255).astype(int)
            rad = rng.uniform(0.2, 0.8) * h
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            d.ellipse((cx - rad, cy - rad, cx + rad, cy + rad), fill=tuple(int(v) for v in c))
        return np.asarray(img.filter(ImageFilter.GaussianBlur(h * 0.25)), np.float32)
    if kind == 3:  # brushed metal: streaks along x and a sheen
        streak = np.asarray(
            Image.fromarray(rng.random((h, max(2, w // 40))).astype(np.float32), "F").resize(
                (w, h), Image.BILINEAR
            ),
            np.float32,
        )
        sheen = np.linspace(-1, 1, w, dtype=np.float32)[None, :] ** 2
        return base + ((streak - 0.5) * 40 - sheen * 35)[:, :, None]
    # tiles / bricks: a grid of slightly different blocks with dark joints
    out = np.repeat(np.repeat(rng.normal(0, 14, (h // 8 + 2, w // 16 + 2)), 8, 0), 16, 1)[:h, :w]
    joints = np.zeros((h, w), np.float32)
    joints[::8, :] = 1
    joints[:, ::16] = 1
    return base + (out - joints * 45)[:, :, None]


def _colours(r: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """Background and text colours at least 110 grey levels apart in luminance."""
    luma = np.array([0.299, 0.587, 0.114])
    while True:
        bg = np.array([r.uniform(0, 255) for _ in range(3)])
        fg = np.array([r.uniform(0, 255) for _ in range(3)])
        if abs(float(bg @ luma) - float(fg @ luma)) >= 110:
            return bg, fg


def _quad_warp(img: Image.Image, r: random.Random, margin: int) -> Image.Image:
    """A random perspective view and a small rotation (PIL's quad transform) of an image
    with ``margin`` px of background around its content; the margin is cut away after."""
    w, h = img.size
    j = 0.08 * (h - 2 * margin)
    rot = math.radians(r.uniform(-4, 4))
    pts = []
    for x, y in (
        (margin, margin),
        (margin, h - margin),
        (w - margin, h - margin),
        (w - margin, margin),
    ):
        dx, dy = x - w / 2, y - h / 2
        rx = dx * math.cos(rot) - dy * math.sin(rot) + w / 2
        ry = dx * math.sin(rot) + dy * math.cos(rot) + h / 2
        pts += [rx + r.uniform(-j, j) * 2, ry + r.uniform(-j, j)]
    return img.transform((w - 2 * margin, h - 2 * margin), Image.QUAD, tuple(pts), Image.BICUBIC)


def render_photo(text: str, font_path: str, r: random.Random) -> Image.Image:
    """A photograph-like line (see the module docstring): RGB."""
    rng = np.random.default_rng(r.randrange(2**32))
    font = load_font(font_path, r.randint(36, 60))
    left, top, right, bottom = font.getbbox(text)
    tw, th = right - left, bottom - top
    m = th // 2  # background beyond the crop, so the warp never shows an edge
    pad_x, pad_y = int(th * r.uniform(0.25, 0.8)) + m, int(th * r.uniform(0.25, 0.6)) + m
    w, h = tw + 2 * pad_x, th + 2 * pad_y
    bg_c, fg_c = _colours(r)
    bg = np.clip(_background(rng, h, w, bg_c), 0, 255)
    img = Image.fromarray(bg.astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    xy = (pad_x - left, pad_y - top)
    if r.random() < 0.3:  # a shadow behind the letters
        sh = Image.new("L", (w, h), 0)
        ImageDraw.Draw(sh).text((xy[0] + 2, xy[1] + 2), text, font=font, fill=170)
        img = Image.composite(
            Image.new("RGB", (w, h), (20, 20, 20)), img, sh.filter(ImageFilter.GaussianBlur(1.5))
        )
        d = ImageDraw.Draw(img)
    stroke = r.choice((0, 0, 0, 1, 2))
    stroke_c = tuple(int(v) for v in np.clip(255 - fg_c, 0, 255))
    d.text(
        xy,
        text,
        font=font,
        fill=tuple(int(v) for v in fg_c),
        stroke_width=stroke,
        stroke_fill=stroke_c,
    )
    img = _quad_warp(img, r, m)
    w, h = img.size
    arr = np.asarray(img, np.float32)
    # Uneven light: a spot of light and a fall-off across the surface, plus a glare.
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = r.uniform(-0.2, 1.2) * w, r.uniform(-0.5, 1.5) * h
    dist = np.sqrt(((xx - cx) / w) ** 2 + ((yy - cy) / (h * 2)) ** 2)
    light = 1.0 - r.uniform(0.2, 0.55) * np.clip(dist, 0, 1)
    arr = arr * light[:, :, None]
    if r.random() < 0.3:
        gx, gy = r.uniform(0, w), r.uniform(0, h)
        glare = np.exp(-(((xx - gx) / (0.15 * w)) ** 2 + ((yy - gy) / (0.6 * h)) ** 2))
        arr = arr + r.uniform(40, 100) * glare[:, :, None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    # Blur: out of focus (Gaussian) or a shaken camera (a short line kernel).
    if r.random() < 0.3:
        n = 3
        k = np.zeros((n, n), np.float32)
        if r.random() < 0.5:
            k[n // 2, :] = 1
        else:
            np.fill_diagonal(k, 1)
        img = img.filter(ImageFilter.Kernel((n, n), k.ravel().tolist(), scale=float(k.sum())))
    else:
        img = img.filter(ImageFilter.GaussianBlur(r.uniform(0.3, 1.1)))
    # Low resolution: a line 20-36 px high, as text a few metres from a phone.
    target_h = r.randint(20, 36)
    img = img.resize((max(8, round(w * target_h / h)), target_h), Image.BILINEAR)
    arr = np.asarray(img, np.float32) + rng.normal(0, r.uniform(2, 7), (target_h, img.width, 3))
    return _jpeg(Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB"), r.randint(35, 80))


def _jpeg(img: Image.Image, quality: int) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    out = Image.open(io.BytesIO(buf.getvalue()))
    out.load()
    return out


# ---- readers ----------------------------------------------------------------------------


def tesseract(path: Path) -> str:
    out = subprocess.run(
        ["tesseract", str(path), "-", "-l", "chi_sim", "--psm", "7"],
        capture_output=True,
        text=True,
        check=False,
    )
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
    from importlib.metadata import version

    name = (
        f"PP-OCRv4 rec ({Path(cfg['model_path']).name}, rapidocr-onnxruntime "
        f"{version('rapidocr-onnxruntime')})"
    )
    return TextRecognizer(cfg), name


def line_edits(labels: list[str], reads: list[str]) -> tuple[list[int], list[int]]:
    """Each line's edit distance and length, after the benchmark's normalisation (NFKC,
    whitespace removed); ``ValueError`` where the two lists differ in length."""
    if len(labels) != len(reads):
        raise ValueError(f"{len(reads)} reads for {len(labels)} labels")
    edits = [Levenshtein.distance(norm(p), norm(t)) for p, t in zip(reads, labels)]
    return edits, [len(norm(t)) for t in labels]


def score(labels: list[str], reads: list[str]) -> dict[str, float]:
    edits, chars = line_edits(labels, reads)
    n_edits, n_chars = sum(edits), sum(chars)
    exact = sum(e == 0 for e in edits)
    return {
        "cer": n_edits / n_chars,
        "exact": exact,
        "lines": len(labels),
        "edits": n_edits,
        "chars": n_chars,
    }


def load_ours(spec: str):  # noqa: ANN201 (a Recognizer)
    from crnn.reading.recognizer import Recognizer

    if spec in ("zh",):
        return Recognizer.bundled(spec)
    if not Path(spec).exists():
        sys.exit(f"--model: checkpoint {spec!r} not found")
    return Recognizer.from_checkpoint(spec)


def seen_rows(spec: str, faces: dict[str, tuple[Face, str | None]]) -> list[str] | None:
    """The rows whose faces the model at ``spec`` trained on (from a training checkpoint's
    config, or a release file's ``release.fonts``); None when the file does not say."""
    if spec == "zh":
        from crnn.reading.recognizer import bundled_models

        spec = str(bundled_models(".pt", "zh")[-1])
    elif spec.endswith(".onnx"):  # an export beside its release file says what that says
        spec = str(Path(spec).with_suffix(".pt"))
        if not Path(spec).exists():
            return None
    import torch

    from crnn.config import config_from_dict
    from crnn.data.synth.fontsets import configured_fonts

    ckpt = torch.load(spec, map_location="cpu", weights_only=True)
    fonts = ckpt.get("release", {}).get("fonts")
    if fonts is None and "synth" in ckpt.get("release", {}):  # a release records its generator
        fonts = configured_fonts(
            config_from_dict({"data": {"synth": ckpt["release"]["synth"]}}).data.synth
        )
    if fonts is None and "config" in ckpt:
        fonts = configured_fonts(config_from_dict(ckpt["config"]).data.synth)
    if fonts is None:
        return None
    names = {Path(f).name for f in fonts}
    return [row for row, (_, p) in faces.items() if p and Path(p).name in names]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--model",
        action="append",
        help="'zh' (bundled, the default), a checkpoint, "
        "release or .onnx file; repeat to read the same lines with several models",
    )
    ap.add_argument("--count", type=int, default=150, help="lines per row (default 150)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument(
        "--rows",
        default="kai,song,hei,mincho,photo",
        help="rows to run, comma-separated; also known-sans, known-serif, known-zenhei: "
        "faces the bundled models trained on (memory, not reading; for release checks)",
    )
    ap.add_argument("--no-tesseract", action="store_true")
    ap.add_argument("--no-ppocr", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep each row's images and gt.txt under this folder")
    args = ap.parse_args()
    models = args.model or ["zh"]
    ours = [(m, load_ours(m)) for m in models]  # a bad path fails before any drawing

    wanted = [s.strip() for s in args.rows.split(",") if s.strip()]
    faces = {f.row: (f, locate(f.face)) for f in PHOTO_FACES}
    missing = sorted({f.face.package for f, p in faces.values() if p is None})
    if missing:
        sys.exit(f"fonts missing for the benchmark's rows: install {' '.join(missing)}")
    for m, _ in ours:
        seen = seen_rows(m, faces)
        if seen is None:
            print(f"note: {m} does not record its training fonts; its rows may not be unseen")
        elif seen:
            print(
                f"WARNING: {m} trained on the faces of rows {', '.join(seen)}: those rows "
                "measure memory, not reading"
            )
    covered = set.intersection(*(cmap(p) for _, p in faces.values() if p))
    labels = make_lines(args.count, args.seed, covered)
    photo_labels = make_lines(args.count, args.seed + 1, covered)

    rows: list[tuple[str, str, list[Image.Image], list[str]]] = []
    for f in (*FACES, *KNOWN):
        if f.row in wanted:
            r = random.Random(f"{args.seed}:{f.row}")
            path = faces[f.row][1] if f.row in faces else locate(f.face)
            if path is None:
                sys.exit(f"fonts missing for row {f.row}: install {f.face.package}")
            rows.append(
                (
                    f.row,
                    f"{f.face.style}: {f.face.file}",
                    [render_print(t, path, r) for t in labels],
                    labels,
                )
            )  # type: ignore[arg-type]
    if "photo" in wanted:
        r = random.Random(f"{args.seed}:photo")
        imgs = [
            render_photo(t, faces[PHOTO_FACES[i % len(PHOTO_FACES)].row][1], r)  # type: ignore[arg-type]
            for i, t in enumerate(photo_labels)
        ]
        rows.append(("photo", "photograph-like, held-out faces", imgs, photo_labels))

    tmp = Path(tempfile.mkdtemp()) if args.keep is None else args.keep
    paths: dict[str, list[Path]] = {}
    for name, _, imgs, labs in rows:
        d = tmp / name
        d.mkdir(parents=True, exist_ok=True)
        paths[name] = [d / f"{i:04d}.png" for i in range(len(imgs))]
        for p, im in zip(paths[name], imgs):
            im.save(p)
        (d / "gt.txt").write_text(
            "".join(f"{p.name}\t{t}\n" for p, t in zip(paths[name], labs)), encoding="utf-8"
        )

    readers: list[tuple[str, object]] = [(f"crnn-ocr ({m})", ("ours", rec)) for m, rec in ours]
    if not args.no_tesseract and shutil.which("tesseract"):
        version = subprocess.run(
            ["tesseract", "--version"], capture_output=True, text=True
        ).stdout.split("\n")[0]
        readers.append((f"{version} chi_sim --psm 7", ("tesseract", None)))
    paddle = None if args.no_ppocr else ppocr_reader()
    if paddle is not None:
        readers.append((paddle[1], ("ppocr", paddle[0])))

    results = []
    for reader, (kind, obj) in readers:
        for name, desc, imgs, labs in rows:
            t0 = time.perf_counter()
            if kind == "ours":
                reads = [p.text for p in obj.predict(imgs)]  # type: ignore[attr-defined]
            elif kind == "tesseract":
                with ThreadPoolExecutor(2) as ex:
                    reads = list(ex.map(tesseract, paths[name]))
            else:
                bgr = [np.asarray(im.convert("RGB"))[:, :, ::-1].copy() for im in imgs]
                out, _ = obj(bgr)  # type: ignore[operator]
                reads = [t for t, _ in out]
            ms = 1000 * (time.perf_counter() - t0) / len(imgs)
            results.append(
                {
                    "reader": reader,
                    "row": name,
                    "row_desc": desc,
                    **score(labs, reads),
                    "ms_per_line": ms,
                    "reads": reads,
                }
            )

    face_rows = [f.row for f in FACES if f.row in wanted]
    print(f"{args.count} lines per row, seed {args.seed} (images in {tmp})")
    print(f"{'reader':<58} {'row':<12} {'CER':>7} {'exact':>9} {'ms/line':>8}")
    for reader, _ in readers:
        mine = [x for x in results if x["reader"] == reader]
        for x in mine:
            print(
                f"{reader:<58} {x['row']:<12} {x['cer']:>7.2%} {x['exact']:>4}/{x['lines']:<4} "
                f"{x['ms_per_line']:>8.1f}"
            )
        faces_only = [x for x in mine if x["row"] in face_rows]
        if faces_only:
            cer = sum(x["edits"] for x in faces_only) / sum(x["chars"] for x in faces_only)
            ex = sum(x["exact"] for x in faces_only)
            n = sum(x["lines"] for x in faces_only)
            print(f"{reader:<58} {'faces':<12} {cer:>7.2%} {ex:>4}/{n:<4}")
            results.append({"reader": reader, "row": "faces", "cer": cer, "exact": ex, "lines": n})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "seed": args.seed,
            "count": args.count,
            "faces": {f.row: faces[f.row][1] for f in PHOTO_FACES},
            "labels": labels,
            "photo_labels": photo_labels,
        }
        args.json.write_text(
            json.dumps({"meta": meta, "rows": results}, ensure_ascii=False, indent=1),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
