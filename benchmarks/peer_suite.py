"""A peer's own end-to-end checks, replayed through ``crnn-predict --model zh``.

RapidOCR's test suite (``python/tests/``) asserts what its default pipeline reads from its
own test images: a product poster's 18 lines headed 正品促销, a cropped sign, an
upside-down line, white and black text on transparent PNGs, an EXIF-rotated photo, an
all-black image, a grey-plus-alpha array, a letterboxed screenshot, vertical text, short
English labels. The same images are read here with our defaults, one command for all
of them (start-up once), and each of the peer's expectations is checked as it states it:

    python benchmarks/peer_suite.py --files DIR [--json docs/bench/peer_suite.json]

``DIR`` holds the peer's test files (from a checkout of RapidAI/RapidOCR:
``python/tests/test_files``); they are not part of this project and are never trained
on. The expectations below are the facts the peer's tests assert, written out here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]

POSTER = "ch_en_num.jpg"
LETTERBOX_FIRST = (
    "A：：取决于所使用的执行提供者，它可能没有完全支持模型中的所有操作。回落到CPU操作可能会"
    "导致性能速度的下降。此外，即使一个操作是由CUDAeXecution"
)


def _texts(r: dict) -> list[str]:
    if r.get("lines"):
        return [ln["text"] for ln in r["lines"]]
    return [r["text"]] if r.get("text") else []


def _chars(r: dict) -> str:
    lines = r.get("lines") or [r]
    return "".join(c.get("char", c.get("text", "")) for c in lines[0].get("chars", []))


def _first(r: dict) -> str:
    t = _texts(r)
    return t[0] if t else ""


def _norm(s: str) -> str:
    """NFKC, whitespace left out: our Chinese model writes full-width ASCII forms as ASCII
    (its charset's choice, documented), so ``：`` and ``:`` are the same read."""
    return "".join(unicodedata.normalize("NFKC", s).split())


# (file, what the peer asserts, check on our JSON result)
CASES = [
    (
        POSTER,
        "18 lines, the first 正品促销",
        lambda r: len(_texts(r)) in (17, 18) and _first(r) == "正品促销",
    ),
    ("text_rec.jpg", "韩国小馆", lambda r: _norm(_first(r)) == "韩国小馆"),
    ("text_cls.jpg", "upside down: 怪我咯", lambda r: _norm(_first(r)) == "怪我咯"),
    (
        "img_exif_orientation.jpg",
        "EXIF-rotated: 我是中国人",
        lambda r: _norm(_first(r)) == "我是中国人",
    ),
    ("black_font_color_transparent.png", "我是中国人", lambda r: _norm(_first(r)) == "我是中国人"),
    ("white_font_color_transparent.png", "我是中国人", lambda r: _norm(_first(r)) == "我是中国人"),
    ("empty_black.jpg", "nothing", lambda r: not _norm("".join(_texts(r)))),
    ("issue_170.png", "TEST", lambda r: _first(r) == "TEST"),
    (
        "test_letterbox_like.jpg",
        "2 lines, the first a 90-character mixed line",
        lambda r: (
            len(_texts(r)) == 2 and _norm(_first(r)).lower() == _norm(LETTERBOX_FIRST).lower()
        ),
    ),
    (
        "test_without_det.jpg",
        "1 line: 在中国作家协会第三届儿童文学",
        lambda r: len(_texts(r)) == 1 and _norm(_first(r)) == "在中国作家协会第三届儿童文学",
    ),
    (
        "text_vertical_words.png",
        "a column's characters: 已取之時不參一人見而",
        lambda r: _norm(_first(r)).startswith("已取之時不參一人見而"),
    ),
    ("return_word_debug.jpg", "3F1", lambda r: _first(r) == "3F1"),
    ("en.jpg", "the first line 3", lambda r: _first(r) == "3"),
]


def arrays(files: Path) -> list[tuple[str, str, object, object]]:
    """The peer's array inputs: (name, expectation, array, check)."""
    import numpy as np
    from PIL import Image

    poster = np.asarray(Image.open(files / POSTER).convert("RGB"))[:, :, :1]  # (H, W, 1)
    return [
        (
            "two_dim_image.npy",
            "grey + alpha (H, W, 2): TREND PLOT REPORT",
            np.load(files / "two_dim_image.npy"),
            lambda r: len(_texts(r)) == 1 and _first(r) == "TREND PLOT REPORT",
        ),
        (f"{POSTER} as (H, W, 1)", "at least 17 lines", poster, lambda r: len(_texts(r)) >= 17),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=Path, required=True, help="the peer's test_files folder")
    ap.add_argument("--model", default="zh")
    ap.add_argument("--detector", help="crnn-predict's --detector (default: the bundled one)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    paths = [str(args.files / f) for f, _, _ in CASES]
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "crnn.cli.predict", "--model", args.model, "--json", *paths]
    if args.detector:
        cmd[5:5] = ["--detector", args.detector]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    secs = time.perf_counter() - t0
    results = {Path(r["path"]).name: r for r in json.loads(out.stdout)}
    rows = []
    for f, want, check in CASES:
        r = results.get(f, {})
        rows.append({"input": f, "expects": want, "got": _texts(r), "pass": bool(check(r))})
    from crnn.reading.recognizer import Recognizer

    if args.detector:
        from crnn.detect.runtime import load_detector

        rec = Recognizer.bundled(args.model, detector=load_detector(args.detector))
    else:
        rec = Recognizer.bundled(args.model)
    for name, want, arr, check in arrays(args.files):
        page = rec.read_page(arr).to_dict()
        rows.append(
            {"input": name, "expects": want, "got": _texts(page), "pass": bool(check(page))}
        )
    passed = sum(r["pass"] for r in rows)
    for r in rows:
        got = " | ".join(r["got"])[:90]
        print(f"{'pass' if r['pass'] else 'FAIL'}  {r['input']:<34} {r['expects'][:40]:<40} {got}")
    print(f"{passed} of {len(rows)} pass; crnn-predict over {len(CASES)} files: {secs:.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"passed": passed, "of": len(rows), "s": secs, "rows": rows},
                indent=1,
                ensure_ascii=False,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
