"""Every read of a fixed set of images, as ``crnn-predict --format json`` gives it, in
one file: run it before and after a change that must not change what users read, and
compare the two files (``--compare A B`` names each image whose read differs).

    python benchmarks/read_snapshot.py --out before.json
    python benchmarks/read_snapshot.py --out after.json
    python benchmarks/read_snapshot.py --compare before.json after.json

The set: the bundled samples (words, lines, Chinese lines), the first ``--count`` crops
of each real word set and of ``zh_real_dev`` under ``../shared/data`` where present, and
``--web`` whole web images of ``zh_web_train`` (the detector's validation images first).
Exit status 0, or 1 when the compared files differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def listed(folder: Path, count: int) -> list[str]:
    gt = folder / "gt.txt"
    if not gt.exists():
        return []
    names = [line.split("\t", 1)[0] for line in gt.read_text(encoding="utf-8").splitlines()]
    return [str(folder / n) for n in names[:count] if n]


def web_images(count: int) -> list[str]:
    root = SHARED / "zh_web_train"
    if not (root / "images").is_dir() or count <= 0:
        return []
    sys.path.insert(0, str(ROOT))
    from crnn.data.quads import find_labelled, split_by_image

    _, val = split_by_image(find_labelled(root), 0.1, 42)
    return [str(item.image) for item in val[:count]]


def sets(count: int, web: int) -> dict[str, tuple[str, list[str]]]:
    data = ROOT / "data"
    words = listed(data / "samples", 100)
    for name in ("ic13_857", "svt_647", "iiit5k_train", "ic15_train"):
        words += listed(SHARED / "real" / name, count)
    return {
        "word": ("word", words),
        "line": ("line", listed(data / "lines", 100)),
        "zh": ("zh", listed(data / "zh_lines", 100) + listed(SHARED / "zh_real_dev", count)),
        "zh-web": ("zh", web_images(web)),
    }


def snapshot(count: int, web: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name, (model, paths) in sets(count, web).items():
        if not paths:
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(paths) + "\n")
        cmd = [sys.executable, "-m", "crnn.cli.predict", "--model", model, "--format", "json"]
        got = subprocess.run(
            [*cmd, "--files-from", f.name], capture_output=True, text=True, cwd=ROOT
        )
        reads = json.loads(got.stdout or "[]")
        for r in reads:
            out[f"{name}:{r['path']}"] = r
        print(f"{name}: {len(reads)} of {len(paths)} read (exit {got.returncode})", flush=True)
    return out


def fields_apart(x: object, y: object, where: str = "") -> list[tuple[str, object, object]]:
    """Where two reads differ: each differing leaf's path, and its two values."""
    if isinstance(x, dict) and isinstance(y, dict):
        out = []
        for k in sorted(set(x) | set(y)):
            out += fields_apart(x.get(k), y.get(k), f"{where}.{k}")
        return out
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [
            d for i, (u, v) in enumerate(zip(x, y)) for d in fields_apart(u, v, f"{where}[{i}]")
        ]
    return [] if x == y else [(where or ".", x, y)]


def compare(a: Path, b: Path) -> int:
    one, two = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    differ = [k for k in sorted(set(one) | set(two)) if one.get(k) != two.get(k)]
    for key in differ:
        print(key)
        for where, x, y in fields_apart(one.get(key), two.get(key)):
            print(f"  {where}: {json.dumps(x, ensure_ascii=False)[:120]}")
            print(f"  {' ' * len(where)}  {json.dumps(y, ensure_ascii=False)[:120]}")
    print(f"{len(differ)} of {len(set(one) | set(two))} reads differ")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--count", type=int, default=100, help="crops of each real set")
    ap.add_argument("--web", type=int, default=20, help="whole web images")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("--out FILE or --compare A B")
    reads = snapshot(args.count, args.web)
    args.out.write_text(json.dumps(reads, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"{len(reads)} reads written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
