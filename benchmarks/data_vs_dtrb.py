"""Our data path side by side with clovaai's deep-text-recognition-benchmark (DTRB).

    python benchmarks/data_vs_dtrb.py                      # IIIT5K + IC15 train, 5 rounds
    python benchmarks/data_vs_dtrb.py --data DIR [DIR ...] --rounds 3

Both sides start from the same gt.txt folders (one combined gt.txt is written in a
temporary folder) and give the same output, 32 px high grayscale images at most 100 px
wide. The DTRB side is reproduced from its published behaviour (README and
``create_lmdb_dataset.py``/``dataset.py`` as documented, not its code): creation reads
each file, checks it by decoding it to grayscale and writes it with its label, 1,000
per transaction, into a 1 TB map; the loader decodes each PNG to ``L``, resizes it to
100 x 32 (bicubic, no ratio kept), converts it to float in [-1, 1] and concatenates the
batch (192, shuffled), restarting its workers every epoch. Our side is
``tools/create_lmdb.py`` (and ``--prepared``) and the training loader (width buckets,
uint8 batches, persistent workers) with augmentation off, as DTRB has none.

Figures, each the median of ``--rounds`` runs with the systems interleaved in every
round (so a slower minute of a shared machine hits both):

* creation: the whole command as a user types it (interpreter start-up, imports,
  every image), images/s;
* loader, 0 workers: one epoch in this process (one core), images/s;
* loader, 2 workers: the first two epochs including worker start-up, images/s;
* epochs 1-4 with 2 workers: seconds per epoch, for the persistent-worker epoch 2.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = [
    ROOT.parent / "shared/data/real/iiit5k_train",
    ROOT.parent / "shared/data/real/ic15_train",
]
CHARACTERS = "0123456789abcdefghijklmnopqrstuvwxyz"

# ---- the DTRB side, from its documented behaviour ----------------------------------

DTRB_CREATE = r"""
import io, os, sys, lmdb
from PIL import Image
def valid(b):
    try:
        im = Image.open(io.BytesIO(b)).convert("L")  # DTRB: cv2.imdecode(..., GRAYSCALE)
    except Exception:
        return False
    return im.width * im.height > 0
def write(env, cache):
    with env.begin(write=True) as txn:
        for k, v in cache.items():
            txn.put(k, v)
inp, gt, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
env = lmdb.open(out, map_size=1099511627776)
cache, cnt = {}, 1
for line in open(gt, encoding="utf-8").read().split("\n"):
    if not line:
        continue
    path, label = line.split("\t")
    with open(os.path.join(inp, path), "rb") as f:
        b = f.read()
    if not valid(b):
        continue
    cache[b"image-%09d" % cnt] = b
    cache[b"label-%09d" % cnt] = label.encode()
    if cnt % 1000 == 0:
        write(env, cache)
        cache = {}
    cnt += 1
cache[b"num-samples"] = str(cnt - 1).encode()
write(env, cache)
"""


class DtrbDataset(Dataset):
    """LmdbDataset: labels filtered once (length <= 25, lower-cased, charset), images
    decoded to ``L`` per item."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.env: Any = None
        env = lmdb.open(
            root, max_readers=32, readonly=True, lock=False, readahead=False, meminit=False
        )
        with env.begin() as txn:
            n = int(txn.get(b"num-samples"))
            self.index = []
            for i in range(1, n + 1):
                label = txn.get(b"label-%09d" % i).decode("utf-8").lower()
                if len(label) <= 25 and not re.search(f"[^{CHARACTERS}]", label):
                    self.index.append(i)
        env.close()

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> tuple[Image.Image, str]:
        if self.env is None:  # opened in each worker
            self.env = lmdb.open(
                self.root, max_readers=32, readonly=True, lock=False, readahead=False, meminit=False
            )
        i = self.index[k]
        with self.env.begin(write=False) as txn:
            label = txn.get(b"label-%09d" % i).decode("utf-8")
            buf = io.BytesIO()
            buf.write(txn.get(b"image-%09d" % i))
            buf.seek(0)
            img = Image.open(buf).convert("L")
        label = re.sub(f"[^{CHARACTERS}]", "", label.lower())
        return img, label


def dtrb_collate(batch: list[tuple[Image.Image, str]]) -> tuple[torch.Tensor, list[str]]:
    """AlignCollate(imgH=32, imgW=100, keep_ratio_with_pad=False) + ResizeNormalize."""
    import numpy as np

    images, labels = zip(*batch)
    tensors = []
    for img in images:
        img = img.resize((100, 32), Image.BICUBIC)
        t = torch.from_numpy(np.asarray(img, dtype=np.float32).copy()).div_(255).unsqueeze(0)
        tensors.append(t.sub_(0.5).div_(0.5))
    return torch.cat([t.unsqueeze(0) for t in tensors], 0), list(labels)


def dtrb_loader(root: str, workers: int) -> DataLoader:
    return DataLoader(
        DtrbDataset(root),
        batch_size=192,
        shuffle=True,
        num_workers=workers,
        collate_fn=dtrb_collate,
    )


# ---- our side -----------------------------------------------------------------------


def our_loader(root: str, workers: int) -> DataLoader:
    from crnn.config.image_spec import ImageSpec
    from crnn.data.batching import BucketBatchSampler, collate
    from crnn.data.datasets import RecognitionDataset, open_sources
    from crnn.model import CRNN
    from crnn.text.alphabet import Charset

    spec = ImageSpec(height=32, max_width=100)
    ds = RecognitionDataset(
        open_sources([root]), Charset.from_spec("alnum36"), spec, CRNN(37).output_length
    )
    sampler = BucketBatchSampler(len(ds), 192, widths=ds.widths, shuffle=True, seed=0)
    return DataLoader(
        ds,
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=collate,
        persistent_workers=workers > 0,
        prefetch_factor=4 if workers else None,
    )


def epoch(loader: DataLoader, e: int) -> int:
    sampler = getattr(loader, "batch_sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(e)
    n = 0
    for batch in loader:
        n += len(batch[1]) if isinstance(batch, tuple) else len(batch["labels"])
    return n


# ---- measuring ----------------------------------------------------------------------


def combined_gt(folders: list[Path], tmp: Path) -> tuple[Path, Path]:
    """One gt.txt over several folders, paths relative to their common parent."""
    base = Path(os.path.commonpath([str(f.resolve()) for f in folders]))
    lines = []
    for f in folders:
        rel = f.resolve().relative_to(base)
        for line in (f / "gt.txt").read_text(encoding="utf-8").splitlines():
            if line.strip():
                lines.append(f"{rel / line.split(chr(9))[0]}\t{line.split(chr(9), 1)[1]}")
    gt = tmp / "gt.txt"
    gt.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return base, gt


def time_command(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", nargs="+", type=Path, default=DEFAULT_DATA, help="gt.txt folders")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--skip-loader", action="store_true", help="creation figures only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("crnn").setLevel(logging.ERROR)  # the 413 skipped labels, four times
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        base, gt = combined_gt(args.data, tmp)
        n = sum(1 for _ in gt.open())
        create = {
            "dtrb": lambda out: [py, "-c", DTRB_CREATE, str(base), str(gt), out],
            "ours": lambda out: [
                py,
                str(ROOT / "tools/create_lmdb.py"),
                "--root",
                str(base),
                "--gt",
                str(gt),
                "--out",
                out,
                "--overwrite",
            ],
            "ours_prepared": lambda out: [
                py,
                str(ROOT / "tools/create_lmdb.py"),
                "--root",
                str(base),
                "--gt",
                str(gt),
                "--out",
                out,
                "--overwrite",
                "--prepared",
            ],
        }
        res: dict[str, dict[str, list[float]]] = {k: {} for k in create}
        for r in range(args.rounds):
            for name, cmd in create.items():
                out = str(tmp / f"{name}{r}")
                res[name].setdefault("create", []).append(n / time_command(cmd(out)))
        lmdbs = {name: str(tmp / f"{name}0") for name in create}
        for r in range(0 if args.skip_loader else args.rounds):
            for name, root in lmdbs.items():
                make = dtrb_loader if name == "dtrb" else our_loader
                loader = make(root, 0)
                t0 = time.perf_counter()
                k = epoch(loader, r)
                res[name].setdefault("loader_0_workers", []).append(k / (time.perf_counter() - t0))
                if isinstance(loader.dataset, DtrbDataset) and loader.dataset.env is not None:
                    loader.dataset.env.close()  # one environment per LMDB and process
                loader = make(root, 2)  # epoch 1 includes starting the workers
                counts, marks = [], []
                for e in range(4):
                    t0 = time.perf_counter()
                    counts.append(epoch(loader, e))
                    marks.append(time.perf_counter() - t0)
                rate = (counts[0] + counts[1]) / (marks[0] + marks[1])
                res[name].setdefault("loader_2_workers_2_epochs", []).append(rate)
                for e, s in enumerate(marks):
                    res[name].setdefault(f"epoch{e + 1}_s", []).append(s)
                del loader
    figures = {
        name: {k: statistics.median(v) for k, v in rows.items()} for name, rows in res.items()
    }
    print(
        f"# {n} images, {args.rounds} rounds, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}"
    )
    keys = list(figures["dtrb"])
    print(
        "| figure | DTRB | ours | ratio | ours prepared | ratio |\n|---|---:|---:|---:|---:|---:|"
    )
    for k in keys:
        a, b, c = (figures[s][k] for s in ("dtrb", "ours", "ours_prepared"))
        fmt = (lambda v: f"{v:,.0f}") if not k.endswith("_s") else (lambda v: f"{v:.2f}")
        print(f"| {k} | {fmt(a)} | {fmt(b)} | {b / a:.2f} | {fmt(c)} | {c / a:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"images": n, "rounds": res, "medians": figures}, indent=1))


if __name__ == "__main__":
    main()
