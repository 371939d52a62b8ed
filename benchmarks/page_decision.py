"""How often ``--layout auto`` (the default of ``crnn-predict``, ``Recognizer.read_pages``
and the server) takes a crop for a page, and whether it still takes every page for one.

    python benchmarks/page_decision.py --json docs/bench/page_decision.json
    python benchmarks/page_decision.py --sets zh_real_dev --sheet /tmp/pages.png

Crops (each should be read whole, as one line):

* ``../shared/data/real`` (IIIT5K train, IC15 train, IC13-857, SVT-647; stored at most
  64 px high): at 1x and enlarged 2x, 3x and 4x (bicubic), as real crops come;
* ``../shared/data/zh_real_dev``: real photographed Chinese lines at their own sizes
  (34-1,124 px high);
* the generator's word, English line and Chinese line recipes (``crnn_en_cpu``,
  ``crnn_line_en_cpu``, ``crnn_zh_cpu_stage3`` with stage 6's photograph settings), drawn
  49-160 px high with their photograph effects;
* the Chinese benchmark's printed and photograph-like lines
  (``benchmarks/zh_vs_peers.py``), at their own sizes.

Pages (each should be found to be a page): those of ``benchmarks/pages_vs_peers.py``, in
both languages, clean and scanned.

Each image goes through ``Recognizer.plan_page`` with the bundled model a user would read
it with (``word`` for the English crops, ``line`` for English lines and pages, ``zh``),
as ``crnn-predict`` does: the line finder's geometry names page candidates
(``candidates``), which are then read both ways (``crnn.layout.reads_better_as_page``).

Sets under ``../shared/data`` are skipped where it is absent. Exit 1 when a crop set has
more than ``--max-pages`` % taken for pages or a page is not.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from crnn.layout import choose_layout  # noqa: E402
from crnn.reading.recognizer import Recognizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
REAL = ("iiit5k_train", "ic15_train", "ic13_857", "svt_647")
RECIPES = {
    "synth_word": ("crnn_en_cpu", []),
    "synth_line_en": ("crnn_line_en_cpu", []),
    "synth_zh": (
        "crnn_zh_cpu_stage3",
        ["data.synth.p_rotate=0.5", "data.synth.p_level_box=0.6", "data.synth.max_clip=0.2"],
    ),
}


def gt_files(folder: Path) -> list[Path]:
    lines = (folder / "gt.txt").read_text(encoding="utf-8").splitlines()
    return [folder / ln.split("\t", 1)[0] for ln in lines if ln.strip()]


def real_crops(name: str, scale: int) -> Iterator[Image.Image]:
    for path in gt_files(SHARED / "real" / name):
        img = Image.open(path).convert("L")
        if scale != 1:
            img = img.resize((img.width * scale, img.height * scale), Image.BICUBIC)
        yield img


def zh_real() -> Iterator[Image.Image]:
    for path in gt_files(SHARED / "zh_real_dev"):
        yield Image.open(path).convert("L")


def synth_crops(recipe: str, count: int, seed: int) -> Iterator[Image.Image]:
    from crnn.config import load_config
    from crnn.data.synth import SynthGenerator
    from crnn.text.alphabet import Charset

    config, overrides = RECIPES[recipe]
    cfg = load_config(config, overrides)
    charset = Charset.from_spec(cfg.data.charset, cfg.data.case_fold, cfg.data.bidi)
    heights = (64, 96, 160)
    gens = [
        SynthGenerator(charset, cfg.data.synth, seed=seed + h, height=h, rgb=True) for h in heights
    ]
    for i in range(count):
        yield gens[i % len(gens)].render(i)[0].convert("L")


def zh_bench_lines(kind: str, count: int, seed: int) -> Iterator[Image.Image]:
    from benchmarks import zh_vs_peers as zb
    from crnn.data.synth.fontsets import locate

    faces = [locate(f.face) for f in zb.PHOTO_FACES]
    faces = [f for f in faces if f]
    labels = zb.make_lines(count, seed, set.intersection(*(zb.cmap(p) for p in faces)))
    r = random.Random(f"{seed}:{kind}")
    draw = zb.render_photo if kind == "photo" else zb.render_print
    for i, text in enumerate(labels):
        yield draw(text, faces[i % len(faces)], r).convert("L")


def pages(lang: str, kind: str, count: int, seed: int) -> Iterator[Image.Image]:
    from benchmarks import pages_vs_peers as pb
    from crnn.data.synth.fontsets import locate

    faces = [locate(f) for f in (pb.EN_FACES if lang == "en" else pb.ZH_FACES)]
    r = random.Random(f"{seed}:{lang}:{kind}")
    for i in range(count):
        yield pb.make_page(lang, kind, faces[i % len(faces)], r)[0].convert("L")  # type: ignore[arg-type]


def all_sets(args: argparse.Namespace) -> Iterator[tuple[str, str, str, object]]:
    """(name, what it should be, the bundled model a user reads it with, images) for each
    set that can be had here."""
    if (SHARED / "real").is_dir():
        for name in REAL:
            for scale in (1, 2, 3, 4):
                yield f"{name}@{scale}x", "line", "word", lambda n=name, s=scale: real_crops(n, s)
    if (SHARED / "zh_real_dev").is_dir():
        yield "zh_real_dev", "line", "zh", zh_real
    for recipe, model in zip(RECIPES, ("word", "line", "zh")):
        yield recipe, "line", model, lambda r=recipe: synth_crops(r, args.count, args.seed)
    for kind in ("print", "photo"):
        yield (
            f"zh_bench_{kind}",
            "line",
            "zh",
            lambda k=kind: zh_bench_lines(k, args.count, args.seed),
        )
    for lang in ("en", "zh"):
        for kind in ("clean", "scan"):
            yield (
                f"pages_{lang}_{kind}",
                "page",
                "line" if lang == "en" else "zh",
                lambda a=lang, k=kind: pages(a, k, args.pages, args.seed),
            )


def sheet(images: list[tuple[str, Image.Image]], path: Path, width: int = 600) -> None:
    """The wrongly decided images, one under the other with their set's name."""
    tiles = []
    for name, img in images:
        s = width / img.width
        tile = Image.new("RGB", (width, max(1, int(img.height * s)) + 16), "white")
        tile.paste(img.convert("RGB").resize((width, max(1, int(img.height * s)))), (0, 16))
        ImageDraw.Draw(tile).text((2, 2), name, fill=(200, 0, 0))
        tiles.append(tile)
    out = Image.new("RGB", (width, max(1, sum(t.height + 4 for t in tiles))), "white")
    y = 0
    for t in tiles:
        out.paste(t, (0, y))
        y += t.height + 4
    out.save(path)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sets", default="", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--count", type=int, default=600, help="generator and benchmark lines per set")
    ap.add_argument("--pages", type=int, default=12, help="pages per language and kind")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument(
        "--max-pages", type=float, default=0.5, help="%% of a crop set allowed to be pages"
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--sheet", type=Path, help="draw the wrongly decided images here (PNG)")
    args = ap.parse_args()
    logging.getLogger("crnn").setLevel(logging.ERROR)  # "no text lines found" on many crops
    wanted = [s for s in args.sets.split(",") if s]
    rows, wrong, failed = [], [], False
    readers: dict[str, Recognizer] = {}
    for name, want, model, make in all_sets(args):
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        rec = readers.setdefault(model, Recognizer.bundled(model))
        n = bad = candidates = 0
        t0 = time.perf_counter()
        for img in make():  # type: ignore[operator]
            candidates += choose_layout(np.asarray(img.convert("L")))[0] == "page"
            got = rec.plan_page(img)[0].layout
            n += 1
            if got != want:
                bad += 1
                if len(wrong) < 60:
                    wrong.append((f"{name} #{n - 1}", img))
        share = 100.0 * bad / max(1, n)
        ok = share <= args.max_pages if want == "line" else bad == 0
        failed |= not ok
        rows.append(
            {
                "set": name,
                "should_be": want,
                "model": model,
                "images": n,
                "page_candidates": candidates,
                "wrong": bad,
                "wrong_pct": share,
                "ms_per_image": 1000 * (time.perf_counter() - t0) / max(1, n),
            }
        )
        print(
            f"{name:<20} {want:<5} {model:<5} {n:5d} images  {candidates:4d} candidates  "
            f"{bad:4d} wrong ({share:5.2f} %)  {'ok' if ok else 'FAIL'}",
            flush=True,
        )
    if args.sheet and wrong:
        sheet(wrong, args.sheet)
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "seed": args.seed,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
