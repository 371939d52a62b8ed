"""Accuracy through the command users type, beside the library's figure for the same
images: ``crnn-predict --model M --json FOLDER`` with every other option at its default
(``--layout auto`` included), against ``Recognizer.predict`` (each image read whole, as
``crnn-eval`` and ``--layout line`` read it).

    python benchmarks/predict_path.py --json docs/bench/predict_path.json
    python benchmarks/predict_path.py --sets ic13,zh_real_dev

Sets (those under ``../shared/data`` are skipped where it is absent):

* ``ic13_857``, ``svt_647``, ``iiit5k_train`` (``word``; accuracy after lower-casing and
  keeping ``0-9a-z``, the field's convention), as stored (at most 64 px high) and
  enlarged 3x (bicubic), as crops from photos come;
* ``zh_real_dev`` (``zh``; CER after NFKC, whitespace removed): real photographed lines
  at their own sizes;
* ``lines_en`` (``line``; CER, runs of spaces as one): lines of the generator's printed
  line recipe at a seed training never uses, enlarged 2x (64 px high);
* ``lines_zh`` (``zh``; CER as above): the Chinese benchmark's printed lines
  (``benchmarks/zh_vs_peers.py``: held-out faces, its own sentences), at their own sizes.

Exit 1 when a set's two figures differ by more than ``--max-gap`` points (0.3).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def nfkc(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def spaces(text: str) -> str:
    return " ".join(text.split())


def accuracy(reads: list[str], labels: list[str]) -> float:
    return 100.0 * sum(alnum(r) == alnum(t) for r, t in zip(reads, labels)) / len(labels)


def cer(norm):  # noqa: ANN001, ANN201 (a scorer)
    def score(reads: list[str], labels: list[str]) -> float:
        edits = sum(Levenshtein.distance(norm(r), norm(t)) for r, t in zip(reads, labels))
        return 100.0 * edits / max(1, sum(len(norm(t)) for t in labels))

    return score


def write_set(folder: Path, images: list[Image.Image], labels: list[str]) -> list[Path]:
    (folder / "images").mkdir(parents=True, exist_ok=True)
    paths = []
    for i, img in enumerate(images):
        paths.append(folder / "images" / f"{i:05d}.png")
        img.save(paths[-1])
    (folder / "gt.txt").write_text(
        "".join(f"images/{p.name}\t{t}\n" for p, t in zip(paths, labels)), encoding="utf-8"
    )
    return paths


def gt(folder: Path) -> tuple[list[Path], list[str]]:
    rows = [
        ln.split("\t", 1)
        for ln in (folder / "gt.txt").read_text(encoding="utf-8").splitlines()
        if ln.strip()
    ]
    return [folder / r[0] for r in rows], [r[1] for r in rows]


def real_set(name: str, scale: int, tmp: Path) -> tuple[list[Path], list[str]]:
    paths, labels = gt(SHARED / "real" / name)
    if scale == 1:
        return paths, labels
    big = []
    for p in paths:
        img = Image.open(p).convert("RGB")
        big.append(img.resize((img.width * scale, img.height * scale), Image.BICUBIC))
    return write_set(tmp / f"{name}_{scale}x", big, labels), labels


def lines_en(count: int, seed: int, tmp: Path) -> tuple[list[Path], list[str]]:
    from crnn.config import load_config
    from crnn.data.synth import SynthGenerator
    from crnn.text.alphabet import Charset

    cfg = load_config("crnn_line_en", [])
    gen = SynthGenerator(
        Charset.from_spec(cfg.data.charset), cfg.data.synth, seed=seed, height=cfg.data.height
    )
    images, labels = [], []
    for i in range(count):
        img, text = gen.render(i)
        images.append(img.resize((img.width * 2, img.height * 2), Image.BICUBIC))
        labels.append(text)
    return write_set(tmp / "lines_en", images, labels), labels


def lines_zh(count: int, seed: int, tmp: Path) -> tuple[list[Path], list[str]]:
    from benchmarks import zh_vs_peers as zb
    from crnn.data.synth.fontsets import locate

    faces = [p for p in (locate(f.face) for f in zb.FACES) if p]
    if not faces:
        raise FileNotFoundError(
            "the Chinese benchmark's faces are not installed (benchmarks/zh_vs_peers.py)"
        )
    labels = zb.make_lines(count, seed, set.intersection(*(zb.cmap(p) for p in faces)))
    r = random.Random(f"{seed}:print")
    images = [zb.render_print(t, faces[i % len(faces)], r) for i, t in enumerate(labels)]
    return write_set(tmp / "lines_zh", images, labels), labels


def sets(args: argparse.Namespace, tmp: Path):  # noqa: ANN201 (an iterator of sets)
    """(name, bundled model, scorer, score's unit, a function giving (paths, labels))."""
    if (SHARED / "real").is_dir():
        for name in ("ic13_857", "svt_647", "iiit5k_train"):
            for scale in (1, 3):
                yield (
                    f"{name}@{scale}x",
                    "word",
                    accuracy,
                    "accuracy %",
                    lambda n=name, s=scale: real_set(n, s, tmp),
                )
    if (SHARED / "zh_real_dev").is_dir():
        yield "zh_real_dev", "zh", cer(nfkc), "CER %", lambda: gt(SHARED / "zh_real_dev")
    yield "lines_en@2x", "line", cer(spaces), "CER %", lambda: lines_en(args.count, args.seed, tmp)
    yield "lines_zh", "zh", cer(nfkc), "CER %", lambda: lines_zh(args.count, args.seed, tmp)


def predict_command() -> list[str]:
    exe = shutil.which("crnn-predict")
    return [exe] if exe else [sys.executable, str(ROOT / "tools" / "predict.py")]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sets", default="", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--count", type=int, default=300, help="generated lines per line set")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument(
        "--max-gap", type=float, default=0.3, help="points allowed between the two figures"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from crnn.reading.recognizer import Recognizer

    wanted = [s for s in args.sets.split(",") if s]
    tmp = Path(tempfile.mkdtemp(prefix="predict_path_"))
    rows, failed = [], False
    for name, model, score, unit, make in sets(args, tmp):
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        paths, labels = make()
        library = [p.text for p in Recognizer.bundled(model).predict([str(p) for p in paths])]
        folder = paths[0].parent
        cmd = [*predict_command(), "--model", model, "--json", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        by_path = {str(Path(r["path"]).resolve()): r for r in json.loads(done.stdout)}
        user = [by_path[str(p.resolve())]["text"] for p in paths]
        pages = sum(by_path[str(p.resolve())]["layout"] == "page" for p in paths)
        lib, usr = score(library, labels), score(user, labels)
        gap = abs(lib - usr)
        failed |= gap > args.max_gap
        rows.append(
            {
                "set": name,
                "model": model,
                "images": len(paths),
                "unit": unit,
                "library": lib,
                "crnn_predict": usr,
                "gap_points": gap,
                "taken_for_pages": pages,
                "command": " ".join(["crnn-predict", *cmd[len(predict_command()) :]]).replace(
                    str(tmp), "$TMP"
                ),
            }
        )
        print(
            f"{name:<18} {model:<5} {len(paths):5d} images  {unit:<10}  library {lib:6.2f}  "
            "crnn-predict "
            f"{usr:6.2f}  gap {gap:4.2f}  pages {pages}  {'ok' if gap <= args.max_gap else 'FAIL'}",
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
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
