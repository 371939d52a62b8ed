"""Fine-tuning on one narrow domain, with and without the generator mixed in: how much the
domain gains and how much general reading is lost.

    python benchmarks/finetune_forgetting.py --model crnn/assets/models/crnn_zh-XXXX.pt \\
        --steps 400 --json docs/bench/finetune_forgetting.json

The domain: 500 training and 200 test lines of till receipts (items, quantities,
prices, totals, dates; one vocabulary, written here) printed by a thermal dot-matrix
printer (each stroke made of dots, faded grey on off-white paper, one face, one
background): what a user fine-tunes on when their own documents look like nothing the
model saw. General reading: the out-of-distribution rows of ``benchmarks/zh_vs_peers.py``
(four held-out faces and the photograph row), read before and after.

Each arm fine-tunes the same model for ``--steps`` steps of 32 lines at lr 3e-4
(``train.init_from``, validation on the domain's test lines): ``train.replay=0`` (the
domain alone, as every other toolkit fine-tunes) and the default ``train.replay=auto``
(half of each batch from the generator the model learnt from).
"""

from __future__ import annotations

import argparse
import json
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
ITEMS = ("可口可乐", "矿泉水", "牛奶", "面包", "鸡蛋", "苹果", "香蕉", "大米", "食用油", "酱油",
         "洗衣液", "纸巾", "牙膏", "方便面", "饼干", "酸奶", "火腿肠", "白糖", "食盐", "啤酒",
         "橙汁", "绿茶", "咖啡", "巧克力", "薯片", "猪肉", "牛肉", "鸡腿", "西红柿", "土豆")  # fmt: skip
UNITS = ("瓶", "袋", "盒", "个", "斤", "包", "罐", "箱", "支", "件")
HEADS = ("合计", "实收", "找零", "应付", "现金", "微信支付", "支付宝", "会员积分", "优惠", "小计")


def receipt_line(r: random.Random) -> str:
    u = r.random()
    if u < 0.6:
        return f"{r.choice(ITEMS)} {r.randint(1, 12)}{r.choice(UNITS)} ￥{r.randint(1, 300)}.{r.randrange(100):02d}"
    if u < 0.85:
        return f"{r.choice(HEADS)}：￥{r.randint(1, 999)}.{r.randrange(100):02d}"
    if u < 0.95:
        return f"{r.randint(2020, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randrange(24):02d}:{r.randrange(60):02d}"
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


def read_folder(spec: str, folder: Path) -> float:
    """CER of a model on a folder with gt.txt (NFKC, whitespace removed)."""
    from crnn.inference import Recognizer

    rec = Recognizer.from_checkpoint(spec)
    rows = [ln.split("\t", 1) for ln in (folder / "gt.txt").read_text(encoding="utf-8").splitlines()]
    reads = [p.text for p in rec.predict([folder / n for n, _ in rows])]
    from benchmarks.zh_vs_peers import norm

    edits = sum(Levenshtein.distance(norm(p), norm(t)) for p, (_, t) in zip(reads, rows))
    return edits / sum(len(norm(t)) for _, t in rows)


def general(spec: str, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "zh_vs_peers.py"), "--model", spec,
                        "--count", str(count), "--no-tesseract", "--no-ppocr", "--json", f"{tmp}/g.json"],
                       capture_output=True, text=True, check=True)  # fmt: skip
        data = json.loads(Path(f"{tmp}/g.json").read_text(encoding="utf-8"))
    return {r["row"]: r["cer"] for r in data["rows"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the model to fine-tune (a .pt checkpoint or release)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--count", type=int, default=100, help="lines per row of the general benchmark")
    ap.add_argument("--config", default="crnn_zh_cpu", help="the recipe whose generator replay draws "
                    "with when the model records none")  # fmt: skip
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from crnn.data.synth.labelfonts import label_font_dir

    work = args.work or Path(tempfile.mkdtemp())
    font = str(label_font_dir() / "crnn-ocr-LabelCJK-Regular.otf")
    write_set(work / "domain_train", 500, 1, font)
    write_set(work / "domain_test", 200, 2, font)
    rows = {"before": {"domain": read_folder(args.model, work / "domain_test"), **general(args.model, args.count)}}
    for arm, replay in (("domain alone (train.replay=0)", "0"), ("with replay (train.replay=0.5)", "0.5")):
        out = work / f"run_replay_{replay}"
        cmd = [sys.executable, str(ROOT / "tools" / "train.py"), "--config", args.config,
               "--train", str(work / "domain_train"), "--val", str(work / "domain_test"), "--output-dir", str(out),
               "--set", f"train.init_from={args.model}", f"train.replay={replay}", f"train.max_steps={args.steps}",
               "train.lr=3e-4", "train.warmup_steps=20", f"train.val_every={args.steps}", "train.save_every=0",
               "data.augment.enabled=false"]  # fmt: skip
        subprocess.run(cmd, check=True)
        best = str(out / "best.pt")  # the averaged weights, validated at the last step
        rows[arm] = {"domain": read_folder(best, work / "domain_test"), **general(best, args.count)}
        print(arm, json.dumps(rows[arm]), flush=True)
    print(json.dumps(rows, indent=1))
    if args.json:
        meta = {"command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
                "steps": args.steps, "model": args.model}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
