"""What a wide charset costs: 37 classes (alnum36) against 5,531 (a Chinese line
recognizer), for 32 x 100 words and 32 x 320 lines, on this machine's CPU (or a GPU
with ``--device cuda``).

    python benchmarks/wide_charset.py                   # CPU, batch 32, 5 repeats
    python benchmarks/wide_charset.py --json docs/bench/wide_charset.json

Rows, each images per second (median of ``--repeats`` timed runs after a warm-up):

* ``train step``: forward, CTC loss, backward and AdamW on the default CRNN (fp32);
* ``CTC loss``: ``log_softmax`` + ``F.ctc_loss`` forward and backward on fixed logits;
* ``forward``: the model alone, no grad (PyTorch fp32);
* ``ONNX Runtime``: the exported model (CPU);
* ``greedy decode`` and ``beam decode (10)``: :func:`crnn.ctc.decode` on the model's
  logits (NumPy), confidences included, as ``tools/predict.py`` runs them.

The classifier is the only part that grows with the charset: 2 x 256 -> K weights
(1.4 M more parameters at 5,531 classes, on 8.3 M).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from crnn.backends.torch import Uint8Model  # noqa: E402
from crnn.ctc import decode  # noqa: E402
from crnn.ctc.loss import ctc_loss  # noqa: E402
from crnn.data.image import ImageSpec  # noqa: E402
from crnn.model import CRNN  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

SHAPES = {"word 32x100": 100, "line 32x320": 320}


def rate(fn: Callable[[], Any], images: int, repeats: int, seconds: float) -> float:
    fn()
    t0 = time.perf_counter()
    fn()
    calls = max(1, int(seconds / max(time.perf_counter() - t0, 1e-6)))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rates.append(calls * images / (time.perf_counter() - t0))
    return statistics.median(rates)


def charset_of(classes: int) -> Charset:
    if classes == 37:
        return Charset.from_spec("alnum36")
    return Charset("".join(chr(0x4E00 + i) for i in range(classes - 1)))


def measure(
    classes: int,
    width: int,
    batch: int,
    device: str,
    repeats: int,
    seconds: float,
    beam: int,
    model_kw: dict[str, Any],
) -> dict[str, float]:
    torch.manual_seed(0)
    charset = charset_of(classes)
    model = CRNN(charset.num_classes, **model_kw).to(device)
    wrapped = Uint8Model(model).to(device)
    images = torch.randint(0, 256, (batch, 1, 32, width), dtype=torch.uint8, device=device)
    t = model.output_length(width)
    targets = torch.randint(1, classes, (batch, 10), device=device)
    lengths = torch.full((batch,), t, dtype=torch.long, device=device)
    tlen = torch.full((batch,), 10, dtype=torch.long, device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out: dict[str, float] = {}

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = ctc_loss(wrapped(images), targets, lengths, tlen)
        loss.backward()
        opt.step()
        sync()

    model.train()
    out["train step"] = rate(step, batch, repeats, seconds)
    logits = torch.randn(batch, t, classes, device=device, requires_grad=True)

    def loss_only() -> None:
        ctc_loss(logits, targets, lengths, tlen).backward()
        sync()

    out["CTC loss"] = rate(loss_only, batch, repeats, seconds)
    model.eval()
    with torch.no_grad():
        out["forward"] = rate(lambda: (wrapped(images), sync()), batch, repeats, seconds)
        real = wrapped(images).float().cpu().numpy()
    out["greedy decode"] = rate(lambda: decode(real, charset), batch, repeats, seconds)
    out[f"beam decode ({beam})"] = rate(
        lambda: decode(real, charset, beam_width=beam), batch, repeats, seconds
    )
    if device == "cpu":
        try:
            from crnn.backends.onnx import OnnxBackend
            from crnn.export import export_onnx

            with tempfile.TemporaryDirectory() as d:
                path = export_onnx(model, charset, ImageSpec(max_width=width), Path(d) / "m.onnx")
                backend = OnnxBackend(path)
                arr = images.cpu().numpy()
                out["ONNX Runtime"] = rate(lambda: backend(arr), batch, repeats, seconds)
        except ImportError as e:  # onnx missing: say so in the table
            print(f"ONNX row skipped: {e}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="per timed run")
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--channels", help="conv widths, e.g. 8,16,16,32,32,32,32 (a smoke test)")
    ap.add_argument("--hidden", type=int, help="LSTM width (a smoke test)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    model_kw: dict[str, Any] = {}
    if args.channels:
        model_kw["channels"] = [int(c) for c in args.channels.split(",")]
    if args.hidden:
        model_kw["hidden"] = args.hidden
    results: dict[str, dict[str, dict[str, float]]] = {}
    for shape, width in SHAPES.items():
        for classes in (37, 5531):
            print(f"measuring {classes} classes, {shape} ...", file=sys.stderr)
            results.setdefault(shape, {})[str(classes)] = measure(
                classes,
                width,
                args.batch,
                args.device,
                args.repeats,
                args.seconds,
                args.beam,
                model_kw,
            )
    print(
        f"# {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"device {args.device}, batch {args.batch}, images/s (median of {args.repeats})"
    )
    for shape, by_k in results.items():
        print(f"\n{shape}\n\n| | 37 classes | 5,531 classes | ratio |\n|---|---:|---:|---:|")
        for row in by_k["37"]:
            a, b = by_k["37"][row], by_k["5531"].get(row, float("nan"))
            print(f"| {row} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "results": results}, indent=1
            )
        )


if __name__ == "__main__":
    main()
