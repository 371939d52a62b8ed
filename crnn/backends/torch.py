"""The PyTorch backend, and the one place where uint8 pixels become network inputs.

:func:`normalize` (``x / 127.5 - 1``, to ``[-1, 1]``) is written once, here, and used
inside :class:`Uint8Model`, which training (``crnn.engine.parallel``), evaluation,
prediction and ONNX export (``crnn.export``) all wrap around the CRNN: a model never sees
pixels prepared another way.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch import nn

from crnn.config.image_spec import ImageSpec
from crnn.model import CRNN
from crnn.precision import autocast_for, inference_amp
from crnn.text.alphabet import Charset


def normalize(images: torch.Tensor, mean: float = 0.5, std: float = 0.5) -> torch.Tensor:
    """``uint8`` ``(B, C, H, W)`` -> ``(p / 255 - mean) / std`` as float (same device);
    ``[-1, 1]`` with the defaults, the normalisation this project trains with."""
    if mean == 0.5 and std == 0.5:
        return images.float().div_(127.5).sub_(1.0)
    return images.float().div_(255.0).sub_(mean).div_(std)


class Uint8Model(nn.Module):
    """uint8 images ``(B, C, H, W)`` in, logits ``(B, T, K)`` out: the CRNN with its
    input normalisation (``ImageSpec.mean``/``std``; and, optionally, channels-last
    convolutions) in front."""

    def __init__(
        self, model: nn.Module, channels_last: bool = False, mean: float = 0.5, std: float = 0.5
    ) -> None:
        super().__init__()
        self.model = model
        self.channels_last = channels_last
        self.mean, self.std = float(mean), float(std)

    @classmethod
    def for_spec(cls, model: nn.Module, spec: ImageSpec, channels_last: bool = False) -> Uint8Model:
        return cls(model, channels_last, spec.mean, spec.std)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = normalize(images, self.mean, self.std)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return self.model(x)


def default_device() -> torch.device:
    """CUDA if available (this process's GPU, :func:`reader_device`), else the CPU."""
    return reader_device("cuda" if torch.cuda.is_available() else "cpu")


def reader_device(
    device: str | torch.device, environ: dict[str, str] | None = None
) -> torch.device:
    """``device`` as a reader runs on it: a bare ``cuda`` is this process's GPU, the one
    its launcher names (``LOCAL_RANK``, set by ``torchrun``, SLURM wrappers and
    ``--gpus``), not GPU 0 for every rank of a scaled-out ``crnn-predict``/``crnn-eval``."""
    device = torch.device(device)
    env = os.environ if environ is None else environ
    if device.type == "cuda" and device.index is None and env.get("LOCAL_RANK", "").isdigit():
        return torch.device("cuda", int(env["LOCAL_RANK"]))
    return device


class TorchBackend:
    """A bare CRNN run by PyTorch under ``inference_mode``.

    Args:
        model: the CRNN (moved to ``device`` and put in eval mode).
        charset, spec: from the same checkpoint as the model.
        device: where to run (default: CUDA if available, else CPU). On the CPU, denormal
            floats are flushed to zero for the whole process (``torch.set_flush_denormal``):
            trained LSTMs produce them, and x86 computes on them several times slower; no
            prediction changes.
        amp: ``bf16``/``fp16`` autocast on CUDA, ``none`` for fp32; on a CPU, ``bf16``
            only where it has bfloat16 units (:func:`crnn.precision.inference_amp`).
        channels_last: run the convolutions on channels-last tensors; ``None`` (default)
            does so on the CPU, where oneDNN runs this network 1.4-1.6x faster at batch
            8-64 that way and no slower at batch 1 (docs/benchmarks.md).
    """

    def __init__(
        self,
        model: CRNN,
        charset: Charset,
        spec: ImageSpec,
        device: str | torch.device | None = None,
        amp: str = "none",
        channels_last: bool | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.temperature = temperature
        self.device = reader_device(device) if device is not None else default_device()
        if self.device.type == "cuda" and self.device.index is not None:
            # Else CUDA opens a context on GPU 0 as well (memory there, for nothing).
            torch.cuda.set_device(self.device)
        self.model = model.to(self.device).eval()
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)
        if channels_last is None:
            channels_last = self.device.type == "cpu"
        if channels_last:
            self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.module = Uint8Model.for_spec(self.model, spec, channels_last)
        self.charset = charset
        self.spec = spec
        self.amp = inference_amp(amp, self.device)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike[str],
        device: str | torch.device | None = None,
        threads: int | None = None,
        **kwargs: Any,
    ) -> TorchBackend:
        """A training checkpoint, run directory (its best.pt) or release file."""
        from crnn.checkpoint import ModelBundle, load_checkpoint

        if threads:
            torch.set_num_threads(threads)
        ckpt = load_checkpoint(path)
        model, charset, spec = ModelBundle.from_checkpoint(ckpt, str(path))
        temperature = float(ckpt.get("calibration", {}).get("temperature", 1.0))
        return cls(model, charset, spec, device=device, temperature=temperature, **kwargs)

    @torch.inference_mode()
    def __call__(self, images: Any) -> torch.Tensor:
        """uint8 ``(B, C, H, W)`` (array or tensor) -> logits ``(B, T, K)`` on the device."""
        x = images if isinstance(images, torch.Tensor) else torch.from_numpy(np.asarray(images))
        x = x.to(self.device, non_blocking=True)
        with autocast_for(self.device, self.amp):
            return self.module(x)

    def output_length(self, widths: Any) -> Any:
        return self.model.output_length(widths)
