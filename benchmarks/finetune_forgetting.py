"""Fine-tuning on one narrow domain: how much the domain gains and how much general
reading is lost, for the default recipe (crnn/engine/replay.py) and without each half.

    python benchmarks/finetune_forgetting.py --json docs/bench/finetune_forgetting.json

The domain: 500 training and 100 test lines of till receipts (items, quantities,
prices, totals, dates; one vocabulary, written here) printed by a thermal dot-matrix
printer (each stroke made of dots, faded grey on off-white paper, one face, one
background): what a user fine-tunes on when their own documents look like nothing the
model saw. General reading: 40 lines in each of the four held-out faces of
``benchmarks/zh_vs_peers.py`` and 80 of its photograph-like lines (seeds of their own),
faces and lines no model here trained on, read before and after.

Each arm fine-tunes the same model (``--model``, the bundled ``zh`` by default) for
``--steps`` steps of 32 lines at lr 3e-4 (``train.init_from``, validation on the
domain's test lines, one torch thread), with the arm's settings on top (``ARMS``):
the default (half of each batch from the generator the model learnt from, saved weights
half the starting ones), each half alone, and neither (the domain alone, as other
toolkits fine-tune). ``tests/test_replay.py`` tests the two mechanisms; this measures what they
keep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ITEMS = (
    "可口可乐",
    "矿泉水",
    "牛奶",
    "面包",
    "鸡蛋",
    "苹果",
    "香蕉",
    "大米",
    "食用油",
    "酱油",
    "洗衣液",
    "纸巾",
    "牙膏",
    "方便面",
    "饼干",
    "酸奶",
    "火腿肠",
    "白糖",
    "食盐",
    "啤酒",
    "橙汁",
    "绿茶",
    "咖啡",
    "巧克力",
    "薯片",
    "猪肉",
    "牛肉",
    "鸡腿",
    "西红柿",
    "土豆",
)
UNITS = ("瓶", "袋", "盒", "个", "斤", "包", "罐", "箱", "支", "件")
HEADS = ("合计", "实收", "找零", "应付", "现金", "微信支付", "支付宝", "会员积分", "优惠", "小计")


def receipt_line(r: random.Random) -> str:
    u = r.random()
    if u < 0.6:
        price = f"￥{r.randint(1, 300)}.{r.randrange(100):02d}"
        return f"{r.choice(ITEMS)} {r.randint(1, 12)}{r.choice(UNITS)} {price}"
    if u < 0.85:
        return f"{r.choice(HEADS)}：￥{r.randint(1, 999)}.{r.randrange(100):02d}"
    if u < 0.95:
        day = f"{r.randint(2020, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        return f"{day} {r.randrange(24):02d}:{r.randrange(60):02d}"
    return f"单号：{r.randrange(10**9, 10**10)}"


def thermal(text: str, font_path: str, r: random.Random) -> Image.Image:
    """A thermal dot-matrix print: the text rasterised coarsely, each ink cell a dot,
    faded grey on off-white paper with a little streaking."""
    font = ImageFont.truetype(font_path, 16)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 8, bottom - top + 6
    small = Image.new("L", (w, h), 0)
    ImageDraw.Draw(small).text((4 - left, 3 - top), text, font=font, fill=255)
    cells = np.asarray(small) > 110
    # each cell becomes a 3 x 3 dot
    dot = np.array([[0.3, 0.9, 0.3], [0.9, 1.0, 0.9], [0.3, 0.9, 0.3]], np.float32)
    ink = np.kron(cells.astype(np.float32), dot)
    paper = r.uniform(225, 245)
    level = r.uniform(70, 130)  # faded print
    arr = paper - (paper - level) * ink
    streak = np.random.default_rng(r.randrange(2**32)).normal(0, 4, (1, arr.shape[1]))
    arr = arr + streak + np.random.default_rng(r.randrange(2**32)).normal(0, 3, arr.shape)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")
    return img.filter(ImageFilter.GaussianBlur(0.5))


def write_set(folder: Path, n: int, seed: int, font: str) -> None:
    r = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        text = receipt_line(r)
        thermal(text, font, r).save(folder / f"{i:04d}.png")
        rows.append(f"{i:04d}.png\t{text}")
    (folder / "gt.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")


# The arms: what each sets on top of the fine-tuning command (finetune_args). The default
# is both halves of crnn/engine/replay.py; the last arm is how other toolkits fine-tune.
ARMS = (
    ("default: the generator mixed in, saved weights half the starting ones", ()),
    ("the generator mixed in alone (train.init_share=0)", ("train.init_share=0",)),
    (
        "the receipts alone, saved weights half the starting ones (train.replay=0)",
        ("train.replay=0",),
    ),
    (
        "the receipts alone (train.replay=0 train.init_share=0)",
        ("train.replay=0", "train.init_share=0"),
    ),
)


def general_set(count: int) -> tuple[list, list[str]]:
    """``count`` lines in each of the four held-out faces (``benchmarks/zh_vs_peers.py``'s
    faces, its line maker and renderer, seeds of their own), then ``2 * count``
    photograph-like ones."""
    from benchmarks import zh_vs_peers as zh

    faces = {f.row: zh.locate(f.face) for f in zh.PHOTO_FACES}
    missing = [row for row, p in faces.items() if p is None]
    if missing:
        raise FileNotFoundError(
            f"held-out CJK faces not installed ({', '.join(missing)}): crnn-fonts --install zh"
        )
    covered = set.intersection(*(zh.cmap(p) for p in faces.values()))  # type: ignore[arg-type]
    labels = zh.make_lines(count, 31, covered)
    photo = zh.make_lines(2 * count, 32, covered)
    r = random.Random(33)
    imgs = [
        zh.render_print(t, faces[row], r)
        for row in ("kai", "song", "hei", "mincho")
        for t in labels
    ]  # type: ignore[arg-type]
    imgs += [
        zh.render_photo(t, faces[zh.PHOTO_FACES[i % len(zh.PHOTO_FACES)].row], r)  # type: ignore[arg-type]
        for i, t in enumerate(photo)
    ]
    return imgs, labels * 4 + photo


def cer(rec, imgs: list, labels: list[str]) -> float:
    """Character error rate of a Recognizer (NFKC, whitespace removed)."""
    from benchmarks.zh_vs_peers import norm

    reads = [p.text for p in rec.predict(imgs)]
    edits = sum(Levenshtein.distance(norm(a), norm(t)) for a, t in zip(reads, labels))
    return edits / sum(len(norm(t)) for t in labels)


def domain_set(folder: Path) -> tuple[list[Path], list[str]]:
    rows = [
        ln.split("\t", 1) for ln in (folder / "gt.txt").read_text(encoding="utf-8").splitlines()
    ]
    return [folder / n for n, _ in rows], [t for _, t in rows]


def finetune_args(
    model: str, train: Path, val: Path, out: Path, steps: int, config: str
) -> list[str]:
    """The fine-tuning command every arm runs."""
    return [
        sys.executable,
        str(ROOT / "tools" / "train.py"),
        "--config",
        config,
        "--train",
        str(train),
        "--val",
        str(val),
        "--output-dir",
        str(out),
        "--set",
        f"train.init_from={model}",
        f"train.max_steps={steps}",
        "train.lr=3e-4",
        "train.warmup_steps=20",
        f"train.val_every={steps}",
        "train.save_every=0",
        "data.augment.enabled=false",
        "data.num_workers=0",
        "data.synth.val_size=64",
    ]


def measure(spec: str, domain: tuple, general: tuple, count: int) -> dict[str, float]:
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled(spec) if spec == "zh" else Recognizer.from_checkpoint(spec)
    imgs, labels = general
    faces = 4 * count
    return {
        "domain": cer(rec, *domain),
        "general": cer(rec, imgs, labels),
        "four_faces": cer(rec, imgs[:faces], labels[:faces]),
        "photo": cer(rec, imgs[faces:], labels[faces:]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--model", default="zh", help="the model to fine-tune: zh (the bundled one) or a .pt"
    )
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument(
        "--count", type=int, default=40, help="lines per held-out face (twice as many photographs)"
    )
    ap.add_argument(
        "--config",
        default="crnn_zh_cpu",
        help="the recipe whose generator replay draws with when the model records none",
    )
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from crnn.data.synth.labelfonts import label_font_dir

    work = args.work or Path(tempfile.mkdtemp())
    font = str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf")
    write_set(work / "domain_train", 500, 1, font)
    write_set(work / "domain_test", 100, 2, font)
    domain, general = domain_set(work / "domain_test"), general_set(args.count)
    rows = {"before": measure(args.model, domain, general, args.count)}
    print("before", json.dumps(rows["before"]), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one torch thread, as the tests run
    for i, (arm, sets) in enumerate(ARMS):
        out = work / f"arm{i}"
        cmd = finetune_args(
            args.model, work / "domain_train", work / "domain_test", out, args.steps, args.config
        )
        subprocess.run([*cmd, *sets], check=True, env=env, capture_output=True)
        rows[arm] = measure(str(out / "best.pt"), domain, general, args.count)
        print(arm, json.dumps(rows[arm]), flush=True)
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "steps": args.steps,
            "model": args.model,
            "count": args.count,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1, ensure_ascii=False), encoding="utf-8"
        )
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
