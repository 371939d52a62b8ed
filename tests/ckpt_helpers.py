"""Helpers shared by the checkpoint, export and inference tests."""

from __future__ import annotations

import logging

import torch
from torch import nn

from crnn import checkpoint as ck
from crnn.config.image_spec import ImageSpec
from crnn.model import CRNN
from crnn.text.alphabet import Charset

TINY = {"channels": [8, 16, 16, 32, 32, 32, 32], "hidden": 16}


def randomise(module: nn.Module, seed: int) -> nn.Module:
    """Known random weights: seeded default init, plus BatchNorm statistics and affine
    parameters far from their defaults (so a swapped or skipped BN layer shows)."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.weight.data = 1 + 0.3 * torch.randn(n, generator=g)
            m.bias.data = 0.3 * torch.randn(n, generator=g)
            m.running_mean.data = 0.5 * torch.randn(n, generator=g)
            m.running_var.data = 0.5 + torch.rand(n, generator=g)
            m.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=g)))
        elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            m.bias.data = 0.1 * torch.randn(m.bias.shape, generator=g)
    return module.eval()


def tiny_model(arch: str = "crnn", num_classes: int = 37, seed: int = 0) -> CRNN:
    torch.manual_seed(seed)
    return randomise(CRNN(num_classes, arch=arch, **TINY), seed)


def native_checkpoint(model: CRNN, charset: Charset, **extra: object) -> dict:
    """A crnn-ocr checkpoint dict for ``model`` (plus any extra top-level entries)."""
    return {**ck.ModelBundle(model, charset, ImageSpec()).header(), **extra}


def run_main(main, *argv, capsys) -> tuple[int, str, str]:
    """A CLI's ``main()`` in-process (cheaper than a subprocess; the shims get their own
    subprocess tests): exit code, stdout, stderr. The root logger is put back the way
    pytest had it, since the CLIs configure logging with ``force=True``."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        rc = main([str(a) for a in argv])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    out = capsys.readouterr()
    return rc, out.out, out.err
