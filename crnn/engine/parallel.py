"""Wrapping a model for one device, DataParallel or DDP, and unwrapping it again.

The module that gets wrapped is :class:`CTCTrainModule`: it normalises the uint8
batch (``crnn.backends.torch.Uint8Model``, the same module inference and export use), runs the
CRNN under autocast and computes the per-sample CTC loss *inside*
the replica. Under DataParallel each GPU then returns ``(B_i,)`` losses instead of
``(B_i, T, K)`` logits, so nothing large is gathered on GPU 0 (the usual DP memory
imbalance). Every tensor argument is batch first, so DP's dim-0 scatter splits them
consistently (targets are padded ``(B, S)``, not concatenated).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from crnn.backends.torch import Uint8Model
from crnn.ctc.loss import ctc_loss_per_sample
from crnn.model import CRNN
from crnn.precision import autocast_for

log = logging.getLogger(__name__)


class CTCTrainModule(nn.Module):
    """``(images uint8, widths, targets, target_lengths) -> per-sample loss (B,)``.

    Args:
        model: the CRNN (possibly ``torch.compile``-d) that maps ``(B, C, H, W)`` to
            ``(B, T, K)``.
        output_length: maps real widths to valid frames (``CRNN.output_length``).
        amp: ``bf16``, ``fp16`` or ``none``; autocast is entered here, inside each
            replica, and the loss itself is computed in fp32.
    """

    def __init__(
        self, model: nn.Module, output_length: Any, amp: str = "none", channels_last: bool = False
    ) -> None:
        super().__init__()
        self.net = Uint8Model(model, channels_last)
        self.output_length = output_length
        self.amp = amp

    def forward(
        self,
        images: torch.Tensor,
        widths: torch.Tensor,
        targets: torch.Tensor,
        target_lengths: torch.Tensor,
    ) -> torch.Tensor:
        with autocast_for(images.device, self.amp):
            logits = self.net(images)
        input_lengths = self.output_length(widths).clamp(max=logits.shape[1])
        return ctc_loss_per_sample(logits, targets, input_lengths, target_lengths)


def unwrap(module: nn.Module) -> nn.Module:
    """Peel DDP/DP (``.module``), ``torch.compile`` (``._orig_mod``),
    :class:`CTCTrainModule` (``.net``), :class:`CompiledCNN` and ``Uint8Model``
    (``.model``) in any order, down to the bare network."""
    while True:
        if isinstance(module, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            module = module.module
        elif hasattr(module, "_orig_mod"):
            module = module._orig_mod  # type: ignore[assignment]
        elif isinstance(module, CTCTrainModule):
            module = module.net
        elif isinstance(module, CompiledCNN):
            module = module.model
        elif isinstance(module, Uint8Model):
            module = module.model
        else:
            return module


class CompiledCNN(nn.Module):
    """The CRNN with its CNN (``features``) under ``torch.compile`` and the rest eager.

    Dynamo cannot trace the LSTMs: compiling the whole model splits the graph there,
    and every width then compiles two graphs instead of one. Widths vary from batch to
    batch; after the second one the CNN is recompiled once for dynamic widths.

    With activation checkpointing, compile's own recomputation (the partitioner's
    ``activation_memory_budget``, where this PyTorch has it) replaces
    ``torch.utils.checkpoint``, whose custom ``context_fn`` Dynamo cannot always trace:
    the same memory saving inside one graph, BatchNorm statistics updated once. The
    bare model keeps no compiled attribute, so copies of it (the EMA) stay plain."""

    def __init__(self, model: CRNN) -> None:
        super().__init__()
        import torch._functorch.config as functorch_config

        self.model = model
        if model.grad_checkpoint and hasattr(functorch_config, "activation_memory_budget"):
            functorch_config.activation_memory_budget = 0.5
            model.grad_checkpoint = False
        self._features = torch.compile(model.features)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.head(self._features(images))


def wrap(
    model: CRNN,
    *,
    strategy: str,
    device: torch.device,
    device_ids: list[int] | None = None,
    distributed: bool = False,
    amp: str = "none",
    sync_bn: bool = False,
    compile: bool = False,
    channels_last: bool = False,
    grad_checkpoint: bool = False,
) -> tuple[nn.Module, CRNN]:
    """Prepare ``model`` for training; returns ``(train_module, bare_model)``.

    ``train_module`` computes per-sample losses (see :class:`CTCTrainModule`);
    ``bare_model`` is the plain CRNN to save, evaluate and export.

    Args:
        strategy: ``none`` (one device), ``dp`` (DataParallel over ``device_ids``,
            parameters on ``device_ids[0]``) or ``ddp`` (one process per device).
        distributed: a process group is initialised (required for ``ddp``).
    """
    bare = model
    bare.grad_checkpoint = grad_checkpoint
    if strategy == "ddp" and distributed and sync_bn:
        bare = nn.SyncBatchNorm.convert_sync_batchnorm(bare)  # type: ignore[assignment]
    if strategy == "dp":
        if not device_ids:
            raise ValueError("DataParallel needs device_ids (the GPUs to use)")
        # DataParallel requires the parameters on device_ids[0].
        device = torch.device("cuda", device_ids[0])
    bare.to(device)
    if channels_last:
        bare.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    net: nn.Module = CompiledCNN(bare) if compile else bare
    train_module: nn.Module = CTCTrainModule(net, bare.output_length, amp, channels_last)
    if strategy == "dp":
        train_module = nn.DataParallel(
            train_module, device_ids=device_ids, output_device=device_ids[0]
        )
    elif strategy == "ddp" and distributed:
        train_module = nn.parallel.DistributedDataParallel(
            train_module,
            device_ids=[device.index] if device.type == "cuda" else None,
            # Each sample's loss uses every parameter; no unused-parameter search.
            find_unused_parameters=False,
            gradient_as_bucket_view=True,
        )
    return train_module, bare
