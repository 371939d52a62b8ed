"""The CPU training step, ours side by side with clovaai's deep-text-recognition-benchmark
(DTRB) on the same word images, in one run.

    python benchmarks/step_vs_dtrb.py                          # IIIT5K + IC15 train words
    python benchmarks/step_vs_dtrb.py --batches 4 --rounds 5 --json docs/bench/step_vs_dtrb.json

Both sides train the same network, DTRB's None-VGG-BiLSTM-CTC (our ``vgg`` arch: VGG
widths 64-512, two BiLSTMs of 256, 8.4 M parameters for 37 classes) on the same
``--batches`` batches of 192 words (DTRB's batch size) drawn at random from the real
training crops; only the way each trains differs. The DTRB side is rebuilt from its
documented behaviour (README and ``train.py``'s defaults, not its code): every word
resized to 100 x 32 (bicubic, ratio not kept), float in [-1, 1], NCHW; Adadelta (lr 1,
rho 0.95, eps 1e-8), gradient clipping 5, ``CTCLoss(zero_infinity=True)`` on
``log_softmax(2).permute(1, 0, 2)`` with every input length the full 26 frames. Ours:
the trainer's own pieces (``crnn.engine.parallel.wrap``: uint8 in, channels-last,
per-sample CTC input lengths from the real widths), each word at its own aspect ratio
(32 px high, at most 100 px wide, as DTRB's cap), the batches cut from the same words
sorted by width (``BucketBatchSampler``'s rule), AdamW, clipping 5.

Data preparation is not timed for either (both loaders run in worker processes beside
the step in training; ``benchmarks/data_vs_dtrb.py`` measures them). Each round times
every batch once per side, the sides alternating batch by batch so a slower second of
a shared machine hits both; the figure is the median over ``--rounds`` of images per
second, and the ratio ours / DTRB of the same round. A third row trains our CPU recipe's
network (``configs/crnn_en_cpu.yaml``: half the channels, LSTMs of 128, 2.1 M
parameters) our way, for what a CPU user trains.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from benchmarks.data_vs_dtrb import combined_gt  # noqa: E402
from crnn.data.image import ImageSpec, preprocess_array  # noqa: E402
from crnn.data.transforms import pad_batch  # noqa: E402
from crnn.engine.parallel import wrap  # noqa: E402
from crnn.model import CRNN  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
DEFAULT_DATA = [DATA / "iiit5k_train", DATA / "ic15_train"]
BATCH = 192
DTRB_CHANNELS = (64, 128, 256, 256, 512, 512, 512)
CPU_CHANNELS = (32, 64, 128, 128, 256, 256, 256)
OUR_SPEC = ImageSpec(height=32, max_width=100)


def words(folders: list[Path], charset: Charset, count: int, seed: int) -> list[tuple[Path, str]]:
    """``count`` (image, label) pairs at random from the folders, labels of 1-25
    characters the charset encodes (DTRB's filter)."""
    with tempfile.TemporaryDirectory() as tmp:
        base, gt = combined_gt(folders, Path(tmp))
        rows = [line.split("\t", 1) for line in gt.read_text(encoding="utf-8").splitlines()]
    ok = []
    for path, label in rows:
        text = charset.normalize(label)
        if 1 <= len(text) <= 25 and not charset.unknown_chars(text):
            ok.append((base / path, text))
    pick = np.random.default_rng(seed).permutation(len(ok))[:count]
    return [ok[i] for i in pick]


def targets(labels: list[str], charset: Charset) -> tuple[torch.Tensor, torch.Tensor]:
    enc = [charset.encode(t) for t in labels]
    lengths = torch.tensor([len(e) for e in enc])
    out = torch.zeros(len(enc), int(lengths.max()), dtype=torch.long)
    for i, e in enumerate(enc):
        out[i, : len(e)] = torch.tensor(e)
    return out, lengths


def dtrb_image(path: Path) -> torch.Tensor:
    """DTRB's input: squashed to 100 x 32 (bicubic, ratio not kept), float in [-1, 1]."""
    im = np.asarray(Image.open(path).convert("L").resize((100, 32), Image.BICUBIC), np.float32)
    return torch.from_numpy(im[None]).div_(255).sub_(0.5).div_(0.5)


def our_image(path: Path) -> torch.Tensor:
    """Ours, as training reads it: uint8, the ratio kept, the width capped at 100 px."""
    return torch.from_numpy(preprocess_array(path, OUR_SPEC, inference=False))


def dtrb_batches(rows: list[tuple[Path, str]], charset: Charset) -> list[tuple[Any, ...]]:
    out = []
    for b in range(0, len(rows), BATCH):
        chunk = rows[b : b + BATCH]
        x = torch.stack([dtrb_image(p) for p, _ in chunk])
        out.append((x, *targets([t for _, t in chunk], charset)))
    return out


def our_batches(rows: list[tuple[Path, str]], charset: Charset) -> list[tuple[Any, ...]]:
    imgs = [our_image(p) for p, _ in rows]
    order = np.argsort([im.shape[-1] for im in imgs], kind="stable")  # the same words, by width
    out = []
    for b in range(0, len(rows), BATCH):
        idx = order[b : b + BATCH]
        images, widths = pad_batch([imgs[i] for i in idx])
        out.append((images, widths, *targets([rows[i][1] for i in idx], charset)))
    return out


class DtrbStep:
    def __init__(self, model: CRNN) -> None:
        self.model = model.train()
        self.opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-8)
        self.ctc = torch.nn.CTCLoss(zero_infinity=True)

    def __call__(self, x: torch.Tensor, tgt: torch.Tensor, lengths: torch.Tensor) -> None:
        preds = self.model(x).log_softmax(2)
        sizes = torch.full((x.shape[0],), preds.shape[1], dtype=torch.long)
        flat = torch.cat([tgt[i, : lengths[i]] for i in range(len(lengths))])
        cost = self.ctc(preds.permute(1, 0, 2), flat, sizes, lengths)
        self.model.zero_grad()
        cost.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
        self.opt.step()


class OurStep:
    def __init__(self, model: CRNN) -> None:
        self.module, self.bare = wrap(
            model, strategy="none", device=torch.device("cpu"), channels_last=True
        )
        self.module.train()
        self.opt = torch.optim.AdamW(self.bare.parameters(), lr=1e-3, weight_decay=1e-4)

    def __call__(
        self, images: torch.Tensor, widths: torch.Tensor, tgt: torch.Tensor, lengths: torch.Tensor
    ) -> None:
        self.module(images, widths, tgt, lengths).mean().backward()
        torch.nn.utils.clip_grad_norm_(self.bare.parameters(), 5.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, nargs="+", default=DEFAULT_DATA, help="gt.txt folders")
    ap.add_argument(
        "--batches", type=int, default=4, help="batches of 192 words per side (default 4)"
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    missing = [str(d) for d in args.data if not (d / "gt.txt").is_file()]
    if missing:
        ap.error(f"no gt.txt in {', '.join(missing)}: give word-crop folders with --data")
    charset = Charset.from_spec("alnum36")
    rows = words(args.data, charset, args.batches * BATCH, seed=0)
    k = charset.num_classes
    torch.manual_seed(0)
    sides = {
        "dtrb": (
            DtrbStep(CRNN(k, channels=DTRB_CHANNELS, hidden=256, arch="vgg")),
            dtrb_batches(rows, charset),
        ),
        "ours": (
            OurStep(CRNN(k, channels=DTRB_CHANNELS, hidden=256, arch="vgg")),
            our_batches(rows, charset),
        ),
        "ours_cpu_model": (
            OurStep(CRNN(k, channels=CPU_CHANNELS, hidden=128, arch="crnn")),
            our_batches(rows, charset),
        ),
    }
    for step, batches in sides.values():  # warm-up: oneDNN primitives, allocator
        step(*batches[0])
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        spent = dict.fromkeys(sides, 0.0)
        for b in range(len(rows) // BATCH):
            for name, (step, batches) in sides.items():
                t0 = time.perf_counter()
                step(*batches[b])
                spent[name] += time.perf_counter() - t0
        for name in sides:
            rates[name].append(len(rows) / spent[name])
    med = {name: statistics.median(r) for name, r in rates.items()}
    ratio = {
        name: statistics.median(a / d for a, d in zip(r, rates["dtrb"]))
        for name, r in rates.items()
    }
    mean_w = float(np.mean([float(b[1].float().mean()) for b in sides["ours"][1]]))
    padded_w = float(np.mean([b[0].shape[-1] for b in sides["ours"][1]]))
    print(
        f"{len(rows)} words from {', '.join(d.name for d in args.data)}; batches of {BATCH}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}; "
        f"ours: mean width {mean_w:.0f} px, padded to {padded_w:.0f} (DTRB: 100)"
    )
    print(f"{'side':<16}{'images/s':>10}{'min-max':>16}{'x DTRB':>8}")
    for name, r in rates.items():
        print(f"{name:<16}{med[name]:>10.1f}{f'{min(r):.1f}-{max(r):.1f}':>16}{ratio[name]:>8.2f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "words": len(rows),
                    "batch": BATCH,
                    "rounds": args.rounds,
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                    "mean_width": round(mean_w, 1),
                    "padded_width": round(padded_w, 1),
                    "images_per_s": {n: round(v, 2) for n, v in med.items()},
                    "runs": {n: [round(v, 2) for v in r] for n, r in rates.items()},
                    "ratio_to_dtrb": {n: round(v, 3) for n, v in ratio.items()},
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
