"""Recover a trainable detector checkpoint from an exported detector ``.onnx``.

The first bundled detector (``det_zh-0e071a53.onnx``) shipped without its PyTorch
checkpoint, which lived in a run folder outside the repository and was lost with the
development machine. Its export folded every BatchNorm into the convolution before it
(``torch.onnx``'s eval peephole): this script puts the folded weights back into a
:class:`crnn.model.dbnet.DBNet` and re-derives BatchNorms that give the same function in
eval mode *and* near-identity batch statistics in training mode:

- each folded convolution keeps its folded kernel (no bias) ``y = W x``;
- its BatchNorm gets the running mean ``m`` and variance ``v`` of ``y`` measured on
  training crops, ``gamma = sqrt(v + eps)`` and ``beta = m + b`` (``b`` the folded
  bias), so ``gamma (y - m) / sqrt(v + eps) + beta = y + b`` exactly.

The threshold head is not in the exported graph (inference needs only the probability
map): it starts from its initial weights and relearns in a few hundred steps.

    python dev/det_weights_from_onnx.py crnn/assets/models/det_zh-0e071a53.onnx \
        ../shared/data/zh_web_train /work/det_runs/det_zh-0e071a53.pt

The result is checked against ONNX Runtime on a real image (printed: the largest
difference of the probability maps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

from crnn.config import Config
from crnn.data.detection import DetAugment, augment, read_rgb
from crnn.data.quads import find_labelled
from crnn.engine.det_trainer import detector_bundle
from crnn.model.dbnet import build_detector


def conv_order(model: nn.Module) -> list[nn.Module]:
    """The convolutions of an eval-mode forward pass, in the order they run."""
    order: list[nn.Module] = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: order.append(m))
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))
    ]
    with torch.no_grad():
        model(torch.zeros(1, 3, 64, 64, dtype=torch.uint8))
    for h in hooks:
        h.remove()
    return order


def bn_after(model: nn.Module) -> dict[nn.Module, nn.BatchNorm2d]:
    """Each convolution followed by a BatchNorm in its Sequential -> that BatchNorm."""
    out = {}
    for m in model.modules():
        if isinstance(m, nn.Sequential):
            kids = list(m)
            for a, b in zip(kids, kids[1:]):
                if isinstance(a, (nn.Conv2d, nn.ConvTranspose2d)) and isinstance(b, nn.BatchNorm2d):
                    out[a] = b
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("onnx_file")
    p.add_argument("images", help="a labelled folder to measure BatchNorm statistics on")
    p.add_argument("out", help="the detector checkpoint (.pt) to write")
    p.add_argument("--crops", type=int, default=96)
    args = p.parse_args(argv)

    graph = onnx.load(args.onnx_file)
    meta = {m.key: m.value for m in graph.metadata_props}
    hparams = json.loads(meta["crnn_ocr.model_config"])
    limit_side = int(meta.get("crnn_ocr.limit_side", 960))
    inits = {i.name: numpy_helper.to_array(i) for i in graph.graph.initializer}
    nodes = [n for n in graph.graph.node if n.op_type in ("Conv", "ConvTranspose")]
    bns = [n for n in graph.graph.node if n.op_type == "BatchNormalization"]

    torch.manual_seed(0)  # the threshold head, which the graph does not hold
    model = build_detector(hparams).eval()
    convs = conv_order(model)
    if len(convs) != len(nodes):
        raise SystemExit(f"{len(nodes)} convolutions in the graph, {len(convs)} in DBNet")
    following = bn_after(model)
    folded: list[tuple[nn.Module, nn.BatchNorm2d, torch.Tensor]] = []
    with torch.no_grad():
        for conv, node in zip(convs, nodes):
            w = torch.from_numpy(inits[node.input[1]].copy())
            if tuple(w.shape) != tuple(conv.weight.shape):
                raise SystemExit(f"{node.name}: {tuple(w.shape)} vs {tuple(conv.weight.shape)}")
            conv.weight.copy_(w)
            bias = (
                torch.from_numpy(inits[node.input[2]].copy())
                if len(node.input) > 2 and node.input[2]
                else None
            )
            bn = following.get(conv)
            if conv.bias is not None:
                conv.bias.copy_(bias)
            elif bias is not None:
                if bn is None:
                    raise SystemExit(f"{node.name} has a bias and no BatchNorm to hold it")
                folded.append((conv, bn, bias))
            elif bn is not None:
                # A BatchNorm the export kept (after a transposed convolution).
                node_bn = next(b for b in bns if b.input[0] == node.output[0])
                g, beta, mean, var = (torch.from_numpy(inits[x].copy()) for x in node_bn.input[1:])
                bn.weight.copy_(g), bn.bias.copy_(beta)
                bn.running_mean.copy_(mean), bn.running_var.copy_(var)
        for _conv, bn, bias in folded:  # the identity first: y + b
            bn.weight.fill_(1.0), bn.running_mean.zero_(), bn.running_var.fill_(1.0 - bn.eps)
            bn.bias.copy_(bias)

    # Statistics of every folded convolution's output on training crops.
    items = find_labelled(args.images)
    rng = np.random.default_rng(0)
    aug = DetAugment(limit_side=limit_side)
    sums: dict[nn.Module, list[torch.Tensor]] = {c: [] for c, _, _ in folded}
    hooks = [
        c.register_forward_hook(lambda m, i, o: sums[m].append(o.detach())) for c, _, _ in folded
    ]
    stats: dict[nn.Module, tuple[torch.Tensor, torch.Tensor, int]] = {}
    with torch.no_grad():
        for k in range(args.crops):
            item = items[rng.integers(len(items))]
            crop, _ = augment(read_rgb(str(item.image)), item.quads, rng, aug)
            model(torch.from_numpy(crop).permute(2, 0, 1)[None].contiguous())
            for c, outs in sums.items():
                o = outs.pop()
                s, s2, n = stats.get(c, (0.0, 0.0, 0))
                stats[c] = (
                    s + o.sum(dim=(0, 2, 3)),
                    s2 + (o.double() ** 2).sum(dim=(0, 2, 3)),
                    n + o.numel() // o.shape[1],
                )
            if k % 16 == 0:
                print(f"crop {k}/{args.crops}", file=sys.stderr)
    for h in hooks:
        h.remove()
    with torch.no_grad():
        for conv, bn, bias in folded:
            s, s2, n = stats[conv]
            mean = (s.double() / n).float()
            var = (s2 / n - (s.double() / n) ** 2).clamp_min(1e-6).float()
            bn.running_mean.copy_(mean)
            bn.running_var.copy_(var)
            bn.weight.copy_(torch.sqrt(var + bn.eps))
            bn.bias.copy_(mean + bias)

    # The same function as the graph?
    import onnxruntime as ort

    image = np.ascontiguousarray(read_rgb(str(items[0].image))[:640, :640])
    x = torch.from_numpy(image).permute(2, 0, 1)[None].contiguous()
    with torch.no_grad():
        ours = model(x).numpy()
    sess = ort.InferenceSession(args.onnx_file, providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    diff = float(np.abs(ours - theirs).max())
    print(f"largest difference of the probability maps against ONNX Runtime: {diff:.2e}")
    if diff > 1e-3:
        raise SystemExit("the recovered network does not compute the graph's function")

    cfg = Config()
    cfg.task = "detect"
    cfg.det.limit_side = limit_side
    bundle = detector_bundle(model, cfg)
    bundle["postprocess"] = json.loads(meta.get("crnn_ocr.postprocess", "{}"))
    bundle["recovered_from"] = Path(args.onnx_file).name
    torch.save(bundle, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
