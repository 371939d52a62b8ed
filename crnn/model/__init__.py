"""The CRNN network: images ``(B, C, H, W)`` -> logits ``(B, T, K)``, batch first, always.

No loss and no decoding live here (see ``crnn.ctc``): DataParallel scatters inputs
and gathers outputs along dim 0, so a batch-first output is the only layout that
comes back from several GPUs in the right order.

The layouts:

* ``crnn`` -- Shi, Bai & Yao (2015), as in meijieru/crnn.pytorch: 7 conv layers
  (BatchNorm after conv 2, 4, 6), two BiLSTMs each followed by a linear layer, the
  second of which is the classifier. ~8.3 M parameters for 37 classes.
* ``vgg`` -- clovaai/deep-text-recognition-benchmark's None-VGG-BiLSTM-CTC: the same
  widths with BatchNorm (bias-free convs) at conv 4 and 5, height average-pooled,
  two BiLSTM+linear blocks, then a separate linear classifier ``fc``.
* ``crnn_s8`` -- ``crnn`` with its third pooling also halving the width: a time step
  every 8 px (for CJK lines, whose characters are about as wide as the line is high),
  and a linear shortcut from the conv features to the logits beside the LSTMs, so that
  thousands of classes learn from the start.
* ``crnn_s4`` -- ``crnn_s8``'s network with its third pooling keeping the width, as in
  ``crnn``: a time step every 4 px, the same weights (a ``crnn_s8`` checkpoint loads as
  it is).
* ``dense`` -- the ``crnn`` CNN and a linear classifier ``fc`` on its features, no
  LSTM (chineseocr's ``lstmFlag=False`` model).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from crnn.config import LAYOUTS, RECURRENT, SHORTCUT, output_length

# Layouts whose second BiLSTM's projection is the classifier (vgg and dense have an fc).
_LSTM_CLASSIFIER = ("crnn", *SHORTCUT)


def _compiling() -> bool:
    """Inside torch.compile's tracing (Dynamo), where flatten_parameters must not run."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling()) if is_compiling is not None else False


class BiLSTM(nn.Module):
    """A bidirectional LSTM followed by a linear projection; batch first."""

    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(in_features, hidden, bidirectional=True, batch_first=True)
        self.proj = nn.Linear(2 * hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, in)`` -> ``(B, T, out)``."""
        if x.is_cuda and not _compiling():
            # DataParallel's replicas get the weights as separate copies; cuDNN wants one
            # contiguous chunk and would re-pack them on every call with a warning.
            self.lstm.flatten_parameters()
        y, _ = self.lstm(x)
        return self.proj(y)


@contextlib.contextmanager
def _frozen_bn_stats(module: nn.Module) -> Iterator[None]:
    """Recompute a checkpointed segment without updating BatchNorm statistics a second
    time: momentum 0 leaves the running mean/var as they are, and the batch counter is
    put back afterwards. The batch statistics used for the output are unaffected."""
    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [
        (m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone())
        for m in bns
    ]
    for m in bns:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, (momentum, count) in zip(bns, saved):
            m.momentum = momentum
            if count is not None:
                m.num_batches_tracked.copy_(count)


def _checkpoint_contexts(segment: nn.Module) -> tuple[Any, Any]:
    """``context_fn`` of a checkpointed segment: nothing special on the forward pass,
    frozen BatchNorm statistics on the recomputation. A module-level function bound with
    ``functools.partial``, not a lambda: torch.compile (Dynamo) rejects a lambda created
    inside the frame it traces."""
    return contextlib.nullcontext(), _frozen_bn_stats(segment)


class CRNN(nn.Module):
    """Convolutional recurrent network for line/word recognition.

    Args:
        num_classes: classifier width, the charset's characters plus the CTC blank.
        in_channels: 1 for grayscale, 3 for RGB input.
        channels: the 7 conv widths.
        hidden: LSTM hidden size per direction.
        arch: ``"crnn"``, ``"vgg"``, ``"crnn_s8"``, ``"crnn_s4"`` or ``"dense"`` (see the
            module docstring).

    ``forward`` takes normalised images ``(B, C, H, W)`` (H a multiple of 16, >= 32)
    and returns logits ``(B, T, num_classes)`` with ``T = output_length(W)``.
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int = 1,
        channels: Sequence[int] = (64, 128, 256, 256, 512, 512, 512),
        hidden: int = 256,
        arch: str = "crnn",
    ) -> None:
        super().__init__()
        if arch not in LAYOUTS:
            raise ValueError(f"unknown arch {arch!r}; expected one of {', '.join(LAYOUTS)}")
        if len(channels) != 7:
            raise ValueError(f"channels needs 7 conv widths, got {list(channels)}")
        self.arch = arch
        self.num_classes = num_classes
        # Plain-typed hyper-parameters: enough to rebuild this network from a checkpoint.
        self.hparams: dict[str, Any] = {
            "arch": arch,
            "channels": [int(c) for c in channels],
            "hidden": int(hidden),
            "in_channels": int(in_channels),
            "num_classes": int(num_classes),
        }
        self.grad_checkpoint = False
        # Segments end at each pooling layer: the unit of activation checkpointing.
        segments: list[nn.Sequential] = []
        current = nn.Sequential()
        c_in = in_channels
        for layer in LAYOUTS[arch]:
            if layer[0] == "conv":
                _, i, k, p, bn, bias = layer
                current.add_module(f"conv{i}", nn.Conv2d(c_in, channels[i], k, 1, p, bias=bias))
                if bn:
                    current.add_module(f"bn{i}", nn.BatchNorm2d(channels[i]))
                current.add_module(f"relu{i}", nn.ReLU(inplace=True))
                c_in = channels[i]
            else:
                _, k, s, p = layer
                current.add_module(f"pool{len(segments)}", nn.MaxPool2d(k, s, p))
                segments.append(current)
                current = nn.Sequential()
        segments.append(current)
        # One flat Sequential keeps state_dict keys simple (cnn.conv0.weight, cnn.bn2.weight...).
        self.cnn = nn.Sequential()
        self._segment_names: list[list[str]] = []
        for seg in segments:
            self._segment_names.append([])
            for name, m in seg.named_children():
                self.cnn.add_module(name, m)
                self._segment_names[-1].append(name)
        self.fc: nn.Module | None = None
        # crnn_s8 and crnn_s4: a shortcut from the conv features to the logits, beside the LSTMs.
        # With thousands of classes the LSTMs alone pass the CNN too little gradient at
        # first and a model reads only blanks for thousands of steps; with the shortcut
        # it leaves that plateau within a few hundred (docs/training/zh.md).
        self.skip: nn.Module | None = None
        if arch in SHORTCUT:
            self.skip = nn.Linear(c_in, num_classes)
        if arch in _LSTM_CLASSIFIER:
            self.rnn = nn.Sequential(
                BiLSTM(c_in, hidden, hidden), BiLSTM(hidden, hidden, num_classes)
            )
        elif arch == "vgg":
            self.rnn = nn.Sequential(BiLSTM(c_in, hidden, hidden), BiLSTM(hidden, hidden, hidden))
            self.fc = nn.Linear(hidden, num_classes)
        else:  # dense: no recurrence, an empty Sequential passes the features through
            self.rnn = nn.Sequential()
            self.fc = nn.Linear(c_in, num_classes)

    def _run_segment(self, names: list[str], x: torch.Tensor) -> torch.Tensor:
        for n in names:
            x = self.cnn._modules[n](x)  # type: ignore[misc]
        return x

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` -> conv features ``(B, T, C')``."""
        x = images
        for names in self._segment_names:
            if self.grad_checkpoint and self.training and torch.is_grad_enabled():
                seg = nn.Sequential(*(self.cnn._modules[n] for n in names))  # type: ignore[misc]
                x = checkpoint(
                    self._run_segment,
                    names,
                    x,
                    use_reentrant=False,
                    context_fn=functools.partial(_checkpoint_contexts, seg),
                )
            else:
                x = self._run_segment(names, x)
        # Height is 1 at H=32; taller inputs are averaged over height.
        x = x.squeeze(2) if x.shape[2] == 1 else x.mean(dim=2)
        return x.transpose(1, 2)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` float -> logits ``(B, T, num_classes)``.

        The recurrent part always runs in float32, outside any autocast: under CUDA
        autocast, cuDNN's RNN path (``_cudnn_rnn_cast_reflatten`` in ATen's
        AutocastRNN) casts to float16 whatever the autocast dtype, so with bf16 (the
        default, which runs without a GradScaler) the LSTM gradients would be fp16 and
        unscaled, and could underflow. The LSTMs are a small share of the FLOPs."""
        return self.head(self.features(images))

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """Conv features ``(B, T, C')`` -> logits ``(B, T, num_classes)``: the LSTMs (in
        fp32, see :meth:`forward`) and the classifier."""
        with torch.autocast(features.device.type, enabled=False):
            x = self.rnn(features.float())
        if self.fc is not None:
            x = self.fc(x)
        if self.skip is not None:
            x = x + self.skip(features).float()
        return x

    def output_length(self, width: int | torch.Tensor) -> int | torch.Tensor:
        """Time steps ``T`` produced for an input (or a real, unpadded) width."""
        return output_length(width, self.arch)

    def min_width_for(self, steps: int, multiple: int = 1) -> int:
        """The smallest input width (a multiple of ``multiple``) giving ``>= steps`` time steps."""
        w = multiple
        while self.output_length(w) < steps:
            w += multiple
        return w


def build_model(model_cfg: Any, num_classes: int, in_channels: int) -> CRNN:
    """A :class:`CRNN` from a ``ModelConfig`` or a dict with its keys (``CRNN.hparams``)."""
    get = model_cfg.get if isinstance(model_cfg, dict) else lambda k: getattr(model_cfg, k)
    return CRNN(
        num_classes=num_classes,
        in_channels=in_channels,
        channels=list(get("channels")),
        hidden=int(get("hidden")),
        arch=str(get("arch")),
    )


def classifier_name(arch: str) -> str:
    """State-dict prefix of the layer whose rows are the classes (``K`` rows)."""
    return "rnn.1.proj" if arch in _LSTM_CLASSIFIER else "fc"


def hparams_from_state_dict(state_dict: dict[str, Any], arch: str) -> dict[str, Any]:
    """:attr:`CRNN.hparams` read off the weight shapes of a (prefix-free) state_dict.

    Raises ``KeyError`` naming the first weight a model of ``arch`` needs and lacks."""
    return {
        "arch": arch,
        "channels": [int(state_dict[f"cnn.conv{i}.weight"].shape[0]) for i in range(7)],
        "hidden": int(state_dict["rnn.0.lstm.weight_hh_l0"].shape[1]) if arch in RECURRENT else 0,
        "in_channels": int(state_dict["cnn.conv0.weight"].shape[1]),
        "num_classes": int(state_dict[f"{classifier_name(arch)}.weight"].shape[0]),
    }
