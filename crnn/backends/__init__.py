"""Backends: the one interface between a trained model and the code that runs it.

A :class:`Backend` maps a batch of preprocessed **uint8** images ``(B, C, H, W)`` to
logits ``(B, T, K)`` and says how many of the ``T`` frames an image of a given real
width fills (``output_length``); it carries the ``charset`` and image ``spec`` it was
trained with. Two implementations:

* :class:`crnn.backends.torch.TorchBackend`: a PyTorch CRNN; the uint8 -> float
  normalisation happens inside one module (``Uint8Model``) that ONNX export shares.
* :class:`crnn.backends.onnx.OnnxBackend`: an exported file run by ONNX Runtime; it never
  imports PyTorch, so predicting from an ``.onnx`` file starts in a fraction of a second.

Callers (``Recognizer``, evaluation, the CLIs) never ask which one they hold:
:func:`load_backend` picks by the file.
"""

from __future__ import annotations

import os
from typing import Any, Protocol, runtime_checkable

from crnn.config.image_spec import ImageSpec
from crnn.text.alphabet import Charset


@runtime_checkable
class Backend(Protocol):
    """uint8 ``(B, C, H, W)`` (NumPy array or tensor) -> logits ``(B, T, K)``.

    Logits come back as a tensor for a tensor input and may be either for a NumPy one;
    decoding (``crnn.ctc``) takes both.
    """

    charset: Charset
    spec: ImageSpec
    # Divides the logits before decoding: confidences that match accuracy (1: none).
    temperature: float

    def __call__(self, images: Any) -> Any: ...

    def output_length(self, widths: Any) -> Any:
        """Valid frames for real (unpadded) widths: an int, array or tensor of them."""
        ...


def load_backend(
    path: str | os.PathLike[str],
    device: Any = None,
    amp: str = "none",
    channels_last: bool | None = None,
    threads: int | None = None,
    providers: list[str] | None = None,
    spinning: bool = True,
) -> Backend:
    """The model in ``path``, ready to run.

    ``.onnx`` files run on ONNX Runtime (``threads``, ``providers``, ``spinning``; CPU by
    default; PyTorch is not imported). Anything else is a checkpoint, run directory or release
    file for PyTorch (``device``: default CUDA if available; ``amp``: autocast on CUDA;
    ``channels_last``: see ``TorchBackend``; ``threads``: PyTorch's CPU threads).

    Raises ``CheckpointError`` (a ``RuntimeError``), ``FileNotFoundError`` or
    ``ImportError`` (onnxruntime missing) with a message that says what to do.
    """
    if str(path).endswith(".onnx"):
        from crnn.backends.onnx import OnnxBackend

        if device is not None and str(device) != "cpu":
            import logging

            logging.getLogger(__name__).warning(
                "%s runs with ONNX Runtime on the CPU; --device %s applies to PyTorch checkpoints",
                path,
                device,
            )
        return OnnxBackend(path, providers=providers, threads=threads, spinning=spinning)
    from crnn.backends.torch import TorchBackend

    return TorchBackend.from_checkpoint(
        path, device=device, amp=amp, channels_last=channels_last, threads=threads
    )
