"""The generator's legibility floor (``data.synth.min_legibility``): what it takes out of
a recipe and what it costs.

    python benchmarks/legibility_floor.py --config configs/crnn_zh_cpu_stage3.yaml \\
        --set data.synth.p_rotate=0.5 data.synth.p_level_box=0.6 data.synth.max_clip=0.2 \\
        --model zh --floors 0.3 0.4 0.5 --sheet docs/images/legibility_floor.png

Renders ``--count`` lines of the recipe (seed ``--seed``) without the floor, scores each
(crnn/data/synth/legibility.py) and reads it with ``--model``: the share of lines under
each floor and their mean line CER against the rest's. Then renders the same indices with
each floor: the share redrawn, the share still under it after the redraws, the model's
mean line CER on the set, and the generator's CPU time per line (the second pass over
the indices, glyph caches warm). ``--sheet`` draws the
lowest-scoring lines with their scores, for judging by eye where legible ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from crnn.config import load_config  # noqa: E402
from crnn.data.synth import SynthGenerator  # noqa: E402
from crnn.data.synth.legibility import legibility  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402


def render_all(gen: SynthGenerator, count: int) -> tuple[list, list[str], list, float]:
    for i in range(count):  # glyph caches warm, as in a long-running loader worker
        gen.render(i)
    t0 = time.process_time()
    out = [gen.render_with_meta(i) for i in range(count)]
    cpu = (time.process_time() - t0) / count
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], cpu


def scores(gen: SynthGenerator, count: int) -> list[float]:
    """Each line's legibility as first drawn (before any redraw)."""
    res = []
    for i in range(count):
        r = random.Random(f"crnn-synth:{gen.seed}:{i}")
        text, font = gen._text_and_font(r)
        img, clean, _, _ = gen._draw(r, text, font)
        res.append(legibility(img, clean))
    return res


def line_cers(rec, imgs: list, labels: list[str]) -> np.ndarray:
    reads = [p.text for p in rec.predict(imgs)]
    return np.array([Levenshtein.distance(a, t) / max(1, len(t)) for a, t in zip(reads, labels)])


def sheet(imgs: list, score: list[float], cer: np.ndarray, n: int, path: Path) -> None:
    order = np.argsort(score)[:n]
    w = 640
    out = Image.new("RGB", (w, 40 * len(order)), "white")
    d = ImageDraw.Draw(out)
    for k, i in enumerate(order):
        im = imgs[i].convert("RGB")
        if im.width > 500:
            im = im.resize((500, im.height))
        out.paste(im, (0, 40 * k + 4))
        d.text((510, 40 * k + 12), f"{score[i]:.2f}  CER {cer[i]:.2f}", fill=(200, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    out.save(path)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", required=True)
    ap.add_argument(
        "--set", nargs="*", default=[], help="config overrides, as tools/train.py --set"
    )
    ap.add_argument("--model", default="zh", help="the reader: a bundled name (zh, en) or a .pt")
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--floors", type=float, nargs="+", default=[0.4])
    ap.add_argument("--sheet", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from crnn.reading.recognizer import Recognizer

    cfg = load_config(args.config, args.set)
    cs = Charset.from_spec(cfg.data.charset, cfg.data.case_fold, cfg.data.bidi)
    rec = (
        Recognizer.from_checkpoint(args.model)
        if args.model.endswith(".pt")
        else Recognizer.bundled(args.model)
    )

    def generator(floor: float) -> SynthGenerator:
        synth = dataclasses.replace(cfg.data.synth, min_legibility=floor)
        return SynthGenerator(cs, synth, seed=args.seed, height=cfg.data.height, rgb=cfg.data.rgb)

    base = generator(0.0)
    imgs, labels, _, cpu0 = render_all(base, args.count)
    score = scores(base, args.count)
    cer = line_cers(rec, imgs, labels)
    s = np.array(score)
    rows: list[dict] = [
        {
            "floor": 0.0,
            "mean_line_cer": round(float(cer.mean()), 4),
            "ms_per_line": round(cpu0 * 1e3, 3),
        }
    ]
    print(f"no floor: mean line CER {cer.mean():.3f}, {cpu0 * 1e3:.2f} ms CPU per line")
    for floor in args.floors:
        under = s < floor
        gen = generator(floor)
        imgs2, labels2, metas, cpu = render_all(gen, args.count)
        assert labels2 == labels, "the floor changed a label"
        redrawn = np.array(["redrawn" in m.effects for m in metas])
        still = sum(m.legibility < floor for m in metas)
        cer2 = line_cers(rec, imgs2, labels2)
        row = {
            "floor": floor,
            "under": round(float(under.mean()), 4),
            "cer_under": round(float(cer[under].mean()), 4) if under.any() else None,
            "cer_rest": round(float(cer[~under].mean()), 4),
            "redrawn": round(float(redrawn.mean()), 4),
            "still_under": round(still / args.count, 4),
            "mean_line_cer": round(float(cer2.mean()), 4),
            "ms_per_line": round(cpu * 1e3, 3),
        }
        rows.append(row)
        print(json.dumps(row))
    if args.sheet:
        sheet(imgs, score, cer, 30, args.sheet)
        print(f"wrote {args.sheet}")
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "config": args.config,
            "set": args.set,
            "model": args.model,
            "count": args.count,
            "seed": args.seed,
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
