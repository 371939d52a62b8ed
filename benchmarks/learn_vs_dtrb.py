"""Does our faster CPU step cost accuracy? Ours and DTRB's way, trained side by side on
the same words from the same initial weights, read the dev sets after every
``--eval-every`` steps: accuracy after the same number of images, and images/s of that run.

    python benchmarks/learn_vs_dtrb.py --steps 1400 --eval-every 200 --json
    docs/bench/learn_vs_dtrb.json

``benchmarks/step_vs_dtrb.py`` times the two ways of training (its docstring lists what
differs: DTRB's 100 x 32 resize without keeping the ratio, float input, Adadelta, CTC
over all 26 frames; ours: each word at its own ratio, uint8 in, channels-last, CTC over
each word's own frames, AdamW). Here both train our CPU recipe's network
(``configs/crnn_en_cpu.yaml``, 2.1 M parameters: DTRB's 8.4 M VGG net would take hours on
two cores) from one seed, on one shuffled sequence of the real training crops (IIIT5K +
IC15 train, no augmentation on either side): every 8 batches both sides have trained on
the same words, DTRB's in random batches, ours re-dealt by width as our trainer's
bucketing does; at those points each reads IC13-857 and SVT-647 with its own
preprocessing and greedy decoding. The sides step alternately, so a
slower second of a shared machine hits both.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.step_vs_dtrb import (  # noqa: E402
    CPU_CHANNELS,
    DATA,
    DEFAULT_DATA,
    DtrbStep,
    OurStep,
    dtrb_image,
    our_image,
    targets,
    words,
)
from crnn.backends.torch import normalize  # noqa: E402
from crnn.ctc.decode import greedy_decode  # noqa: E402
from crnn.data.transforms import pad_batch  # noqa: E402
from crnn.model import CRNN  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402
from crnn.text.metrics import TextMetrics  # noqa: E402

DEV = [DATA / "ic13_857", DATA / "svt_647"]
WINDOW = 8  # batches whose words our side re-deals by width


class Side:
    """One way of training: its images (prepared once), its step and its reading."""

    def __init__(
        self, name: str, step: Any, model: CRNN, rows: list[tuple[Path, str]], dtrb: bool
    ) -> None:
        self.name, self.step, self.model, self.dtrb = name, step, model, dtrb
        prep = dtrb_image if dtrb else our_image
        self.images = [prep(p) for p, _ in rows]
        self.spent = 0.0

    def batch(self, idx: list[int], labels: list[str], charset: Charset) -> tuple[Any, ...]:
        tgt = targets(labels, charset)
        if self.dtrb:
            return (torch.stack([self.images[i] for i in idx]), *tgt)
        return (*pad_batch([self.images[i] for i in idx]), *tgt)

    def train(self, batch: tuple[Any, ...]) -> None:
        t0 = time.perf_counter()
        self.step(*batch)
        self.spent += time.perf_counter() - t0

    @torch.no_grad()
    def read(self, images: list[torch.Tensor], charset: Charset) -> list[str]:
        self.model.eval()
        out: list[str] = []
        for b in range(0, len(images), 128):
            chunk = images[b : b + 128]
            if self.dtrb:
                logits = self.model(torch.stack(chunk))
                preds = greedy_decode(logits, charset)
            else:
                x, widths = pad_batch(chunk)
                logits = self.model(normalize(x))  # as the trainer's Uint8Model
                preds = greedy_decode(logits, charset, self.model.output_length(widths))
            out += [p.text for p in preds]
        self.model.train()
        return out


def window(
    order: list[int], rng: np.random.Generator, batch: int, ours: list[torch.Tensor]
) -> list[tuple[list[int], list[int]]]:
    """The next ``WINDOW`` batches of words: DTRB's in random order, ours the same words
    sorted by width and cut into batches (``BucketBatchSampler``'s rule), in random order.
    At the end of each window both sides have trained on the same images."""
    while len(order) < WINDOW * batch:
        order += rng.permutation(len(ours)).tolist()
    words_, order[:] = order[: WINDOW * batch], order[WINDOW * batch :]
    dtrb = [words_[b : b + batch] for b in range(0, len(words_), batch)]
    by_width = sorted(words_, key=lambda i: ours[i].shape[-1])
    mine = [by_width[b : b + batch] for b in range(0, len(by_width), batch)]
    return list(zip(dtrb, [mine[i] for i in rng.permutation(len(mine))]))


def make_sides(rows: list[tuple[Path, str]], charset: Charset) -> list[Side]:
    """DTRB's way and ours, each with the CPU recipe's network from the same seed."""
    sides = []
    for name, dtrb in (("dtrb", True), ("ours", False)):
        torch.manual_seed(0)  # the same initial weights on both sides
        model = CRNN(charset.num_classes, channels=CPU_CHANNELS, hidden=128, arch="crnn")
        step = DtrbStep(model) if dtrb else OurStep(model)
        sides.append(Side(name, step, model, rows, dtrb))
    return sides


def evaluate(
    side: Side, dev: dict[str, tuple[list[torch.Tensor], list[str]]], charset: Charset
) -> dict[str, Any]:
    got = {}
    for name, (images, labels) in dev.items():
        m = TextMetrics()
        m.update(side.read(images, charset), labels)
        r = m.compute()
        got[name] = {"accuracy": round(r["alnum_accuracy"], 4), "cer": round(r["cer"], 4)}
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--data", type=Path, nargs="+", default=DEFAULT_DATA, help="training gt.txt folders"
    )
    ap.add_argument(
        "--dev", type=Path, nargs="+", default=DEV, help="gt.txt folders read after each stretch"
    )
    ap.add_argument(
        "--steps", type=int, default=1400, help="training steps per side (default 1400)"
    )
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument(
        "--eval-every", type=int, default=200, help=f"steps, a multiple of {WINDOW} (default 200)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.eval_every <= 0 or args.eval_every % WINDOW:
        ap.error(
            f"--eval-every {args.eval_every}: give a multiple of {WINDOW} (both sides have seen "
            f"the same words only at the end of each {WINDOW} batches)"
        )
    missing = [str(d) for d in args.data + args.dev if not (d / "gt.txt").is_file()]
    if missing:
        ap.error(f"no gt.txt in {', '.join(missing)}: give word-crop folders with --data/--dev")
    charset = Charset.from_spec("alnum36")
    rows = words(args.data, charset, 10**9, seed=0)
    sides = make_sides(rows, charset)
    dev_rows = {d.name: words([d], charset, 10**9, seed=0) for d in args.dev}
    dev = {n: ([dtrb_image(p) for p, _ in r], [t for _, t in r]) for n, r in dev_rows.items()}
    dev_ours = {n: ([our_image(p) for p, _ in r], [t for _, t in r]) for n, r in dev_rows.items()}
    rng = np.random.default_rng(1)
    order: list[int] = []
    plan: list[tuple[list[int], list[int]]] = []  # per step: DTRB's batch, our batch
    curve: list[dict[str, Any]] = []
    print(
        f"{len(rows)} training words; batches of {args.batch}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.machine()}"
    )
    for step in range(1, args.steps + 1):
        if not plan:
            plan = window(order, rng, args.batch, sides[1].images)
        dtrb_idx, our_idx = plan.pop(0)
        for side, idx in zip(sides, (dtrb_idx, our_idx)):
            side.train(side.batch(idx, [rows[i][1] for i in idx], charset))
        if step % args.eval_every == 0 or step == args.steps:
            row = {"step": step, "images": step * args.batch}
            for side in sides:
                row[side.name] = evaluate(side, dev if side.dtrb else dev_ours, charset)
                row[side.name]["images_per_s"] = round(step * args.batch / side.spent, 1)
            curve.append(row)
            print(
                f"step {step:>5} ({step * args.batch:,} images): "
                + "; ".join(
                    f"{s.name} "
                    + ", ".join(
                        f"{n} {row[s.name][n]['accuracy']:.1%} (CER {row[s.name][n]['cer']:.3f})"
                        for n in dev
                    )
                    + f", {row[s.name]['images_per_s']} img/s"
                    for s in sides
                ),
                flush=True,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "training_words": len(rows),
                    "batch": args.batch,
                    "steps": args.steps,
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                    "curve": curve,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
