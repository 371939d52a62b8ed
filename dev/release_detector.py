"""Bundle a trained detector: its ``.onnx`` (what the reader loads) and a slim ``.pt``
beside it (what ``train.init_from=det_zh`` fine-tunes), named ``det_zh-<first 8 hex of
the .onnx's SHA-256>``, with the post-processing chosen on its validation images
(``benchmarks/det_tune.py``) in both.

    python dev/release_detector.py /work/det_runs/stage2/last.pt \\
        --thresh 0.3 --box-thresh 0.4 --unclip-ratio 1.5 [--replace]

``--replace`` removes the other ``det_zh-*`` files from ``crnn/assets/models`` (the
reader loads the one it finds). ``--out DIR`` writes the pair into ``DIR`` instead, a
candidate to measure (``benchmarks/det_vs_peers.py --detector DIR/det_zh-*.onnx``)
before it is bundled.

    python dev/release_detector.py crnn/assets/models/det_zh-0e071a53.pt --restamp \
        --thresh 0.3 --box-thresh 0.3 --unclip-ratio 1.5 --replace

``--restamp`` keeps a bundled detector's weights and graph exactly (no new export) and
writes new post-processing into its ``.onnx`` metadata and its ``.pt``, under the new
name that its ``.onnx`` now hashes to.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crnn.cli.export import main as export_main  # noqa: E402
from crnn.io import sha256_file  # noqa: E402

MODELS = ROOT / "crnn" / "assets" / "models"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("--thresh", type=float, required=True)
    p.add_argument("--box-thresh", type=float, required=True)
    p.add_argument("--unclip-ratio", type=float, required=True)
    p.add_argument("--replace", action="store_true")
    p.add_argument("--out", type=Path, help="write into this folder, not the bundled models")
    p.add_argument(
        "--restamp",
        action="store_true",
        help="CHECKPOINT is a bundled .pt: keep its .onnx beside it, change the options only",
    )
    args = p.parse_args(argv)
    post = {"thresh": args.thresh, "box_thresh": args.box_thresh, "unclip_ratio": args.unclip_ratio}
    if args.restamp:
        return restamp(Path(args.checkpoint), post, args.replace)
    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    if ckpt.get("kind") != "detector":
        raise SystemExit(f"{args.checkpoint} is not a detector checkpoint")
    slim = {
        "kind": "detector",
        "hparams": ckpt["hparams"],
        "limit_side": ckpt.get("limit_side", 960),
        "model": ckpt["model"],
        "postprocess": post,
        "step": ckpt.get("step"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        pt = Path(tmp) / "det.pt"
        torch.save(slim, pt)
        onnx = Path(tmp) / "det.onnx"
        if export_main([str(pt), "-o", str(onnx)]) != 0:
            return 1
        name = install(onnx, pt, args.replace, args.out or MODELS)
    print(f"wrote {name}.onnx and {name}.pt into {args.out or MODELS}")
    return 0


def install(onnx: Path, pt: Path, replace: bool, folder: Path = MODELS) -> str:
    """Move a detector's ``.onnx`` and ``.pt`` into ``folder`` (the bundled models) under
    the name its ``.onnx`` hashes to (``replace``: the other ``det_zh-*`` files removed
    first)."""
    name = f"det_zh-{sha256_file(onnx)[:8]}"
    folder.mkdir(parents=True, exist_ok=True)
    if replace:
        for old in folder.glob("det_zh-*"):
            old.unlink()
    shutil.move(onnx, folder / f"{name}.onnx")
    shutil.move(pt, folder / f"{name}.pt")
    return name


def restamp(pt: Path, post: dict, replace: bool) -> int:
    """New post-processing for the bundle ``pt`` and its ``.onnx`` beside it."""
    import json

    import onnx

    from crnn.backends.onnx import META_PREFIX

    src = pt.with_suffix(".onnx")
    graph = onnx.load(str(src))
    key = META_PREFIX + "postprocess"
    for prop in graph.metadata_props:
        if prop.key == key:
            prop.value = json.dumps(post)
    ckpt = torch.load(pt, map_location="cpu", weights_only=True)
    ckpt["postprocess"] = post
    with tempfile.TemporaryDirectory() as tmp:
        onnx_out = Path(tmp) / "det.onnx"
        onnx.save(graph, str(onnx_out))
        pt_out = Path(tmp) / "det.pt"
        torch.save(ckpt, pt_out)
        name = install(onnx_out, pt_out, replace)
    print(f"restamped {src.stem} as {name}: {post}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
