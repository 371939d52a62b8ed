"""Export a checkpoint to ONNX and check it against PyTorch.

The ONNX model takes uint8 images (batch, channels, 32, width) with dynamic batch and
width, normalises them inside, and returns logits (batch, steps, classes); the charset
and image spec travel in its metadata (see docs/checkpoints.md). After writing, the file
is run with ONNX Runtime on random images of several widths and batch sizes and
compared with PyTorch.

With --int8, an int8 flavour is written beside it (model.onnx -> model.int8.onnx):
static quantisation calibrated on --calibration-images images (from --calibration
data, or synthetic ones), then compared with the float file on as many other images:
the share of identical greedy texts and the logit error are logged, and the exit code
is 1 when the agreement is below --min-agreement. It is about twice as fast on CPUs
with int8 dot products (see docs/benchmarks.md); predict uses it only when given it.

Exit codes: 0 written and checked, 1 written but ONNX and PyTorch (or int8 and float)
disagree beyond the tolerance, 2 bad input or onnx/onnxruntime not installed (nothing
written).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Parser, setup_logging

log = logging.getLogger("crnn.export")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="export.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("checkpoint", help="checkpoint file, run directory or release file")
    p.add_argument("-o", "--out", required=True, help="output .onnx file")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (default 17)")
    p.add_argument(
        "--check-widths",
        type=_int_list,
        default=[32, 100, 257, 400],
        help="image widths to compare ONNX Runtime with PyTorch on (default 32,100,257,400)",
    )
    p.add_argument(
        "--check-batch-sizes",
        type=_int_list,
        default=[1, 3],
        help="batch sizes to compare on (default 1,3)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=1e-4,
        help="largest allowed absolute logit difference (default 1e-4)",
    )
    p.add_argument("--no-check", action="store_true", help="skip the comparison")
    p.add_argument(
        "--int8",
        action="store_true",
        help="also write an int8-quantised flavour, OUT with .int8.onnx as its suffix",
    )
    p.add_argument(
        "--calibration",
        action="append",
        metavar="DATA",
        help="LMDB or image folder to calibrate and check the int8 model on (repeatable; "
        "default: synthetic images)",
    )
    p.add_argument(
        "--calibration-images",
        type=int,
        default=256,
        metavar="N",
        help="images to calibrate on, and as many others to check on (default 256)",
    )
    p.add_argument(
        "--min-agreement",
        type=float,
        default=0.97,
        help="least share of images whose int8 text equals the float one (default 0.97)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from crnn.backends.onnx import OnnxBackend, OnnxUnavailableError, require_onnx
    from crnn.checkpoint import CheckpointError, load_checkpoint, model_from_checkpoint
    from crnn.export import compare_with_torch, export_onnx, int8_path

    out = Path(args.out)
    for target in (out, int8_path(out)) if args.int8 else (out,):
        if target.exists() and not args.overwrite:
            log.error("%s exists; pass --overwrite to replace it", target)
            return EXIT_USAGE
    try:
        require_onnx()
        if detector_checkpoint(args.checkpoint) is not None:
            return _export_detector(args, out)
        ckpt = load_checkpoint(args.checkpoint)
        model, charset, spec = model_from_checkpoint(ckpt, args.checkpoint)
    except (OnnxUnavailableError, CheckpointError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    model.eval()
    temperature = float(ckpt.get("calibration", {}).get("temperature", 1.0))
    export_onnx(model, charset, spec, out, opset=args.opset, temperature=temperature)
    log.info("wrote %s (%.1f MB)", out, out.stat().st_size / 1e6)
    if args.no_check:
        return EXIT_OK if not args.int8 else _int8(args, out, charset, spec)
    diffs = compare_with_torch(model, OnnxBackend(out), args.check_widths, args.check_batch_sizes)
    worst = max(diffs.values())
    for (b, w), d in diffs.items():
        log.info("batch %d, width %d: max |ONNX - PyTorch| = %.2e", b, w, d)
    if worst > args.tolerance:
        log.error(
            "ONNX Runtime and PyTorch differ by up to %.2e (tolerance %.0e); the file was "
            "written but should not be trusted",
            worst,
            args.tolerance,
        )
        return EXIT_FAILURE
    log.info("ONNX Runtime matches PyTorch (max |difference| %.2e <= %.0e)", worst, args.tolerance)
    return EXIT_OK if not args.int8 else _int8(args, out, charset, spec)


def detector_checkpoint(path: str) -> dict | None:
    """The file as a detector checkpoint (``kind: detector``), else None."""
    import torch

    p = Path(path)
    p = p / "best.pt" if p.is_dir() else p
    if p.suffix != ".pt" or not p.is_file():
        return None
    ckpt = torch.load(p, map_location="cpu", weights_only=True)
    return ckpt if isinstance(ckpt, dict) and ckpt.get("kind") == "detector" else None


def _export_detector(args: argparse.Namespace, out: Path) -> int:
    """A detector checkpoint as ONNX, checked against PyTorch on two image sizes."""
    import numpy as np
    import torch

    from crnn.detect.runtime import OnnxDetector
    from crnn.export import export_detector_onnx
    from crnn.model.dbnet import build_detector

    ckpt = detector_checkpoint(args.checkpoint)
    assert ckpt is not None
    model = build_detector(ckpt["hparams"])
    model.load_state_dict(ckpt["model"])
    model.eval()
    post = ckpt.get("postprocess") or {}
    export_detector_onnx(
        model, out, int(ckpt.get("limit_side", 960)), opset=args.opset, postprocess=post
    )
    log.info("wrote %s (%.1f MB)", out, out.stat().st_size / 1e6)
    if args.no_check:
        return EXIT_OK
    onnx_model = OnnxDetector(out)
    rng = np.random.default_rng(0)
    worst = 0.0
    for h, w in ((96, 160), (320, 224)):
        x = rng.integers(0, 256, (1, 3, h, w), dtype=np.uint8)
        with torch.no_grad():
            ref = model(torch.from_numpy(x)).numpy()
        worst = max(worst, float(np.abs(onnx_model.prob_map(x) - ref).max()))
    if worst > args.tolerance:
        log.error(
            "ONNX Runtime and PyTorch differ by up to %.2e (tolerance %.0e)", worst, args.tolerance
        )
        return EXIT_FAILURE
    log.info("ONNX Runtime matches PyTorch (max |difference| %.2e <= %.0e)", worst, args.tolerance)
    return EXIT_OK


def _int8(args: argparse.Namespace, out: Path, charset: object, spec: object) -> int:
    from crnn.backends.onnx import OnnxBackend
    from crnn.data.datasets import sample_images
    from crnn.export import agreement, int8_path, quantize_int8

    dst = int8_path(out)
    n = args.calibration_images
    calib = sample_images(charset, spec, n, args.calibration, offset=0)  # type: ignore[arg-type]
    check = sample_images(charset, spec, n, args.calibration, offset=n)  # type: ignore[arg-type]
    quantize_int8(out, dst, calib)
    log.info(
        "wrote %s (%.1f MB), calibrated on %d images", dst, dst.stat().st_size / 1e6, len(calib)
    )
    a = agreement(OnnxBackend(out), OnnxBackend(dst), check)
    log.info(
        "int8 vs float on %d other images: %.1f %% identical texts, logit error max %.3f "
        "mean %.4f (mean logit range per frame %.1f), largest probability change %.3f",
        int(a["images"]),
        100 * a["text_agreement"],
        a["max_abs_logit_error"],
        a["mean_abs_logit_error"],
        a["logit_range"],
        a["max_prob_error"],
    )
    if a["text_agreement"] < args.min_agreement:
        log.error(
            "the int8 model reads %.1f %% of the images like the float one, below "
            "--min-agreement %.1f %%: calibrate on data like yours (--calibration DATA) or "
            "keep the float model",
            100 * a["text_agreement"],
            100 * args.min_agreement,
        )
        return EXIT_FAILURE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
