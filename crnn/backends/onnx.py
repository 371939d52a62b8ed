"""The ONNX Runtime backend: an exported model, run without PyTorch.

:class:`OnnxBackend` loads a file written by :func:`crnn.export.export_onnx` (or its int8
flavour, :func:`crnn.export.quantize_int8`), reads the charset, image spec and model
config from its metadata and maps uint8 batches to logits. Together with
``crnn.data.image`` (decoding and resizing) and ``crnn.ctc`` (decoding) it is everything
``tools/predict.py`` needs to answer from an ``.onnx`` file, and none of it imports
``torch``: on a small CPU the PyTorch import alone takes 1.5-3 s, most of a command's
time for one image.

``onnxruntime`` is a dependency of crnn-ocr, imported on first use (an environment without it
gets a message saying how to install it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from crnn.config import output_length
from crnn.config.image_spec import ImageSpec
from crnn.text.alphabet import Charset

META_PREFIX = "crnn_ocr."


class OnnxUnavailableError(ImportError):
    """onnx or onnxruntime is not installed."""


def require_onnx(runtime_only: bool = False) -> tuple[Any, Any]:
    """``(onnx, onnxruntime)`` modules (``onnx`` is ``None`` when ``runtime_only``), or
    :class:`OnnxUnavailableError` saying how to install them."""
    missing = []
    onnx = ort = None
    if not runtime_only:
        try:
            import onnx
        except ImportError:
            missing.append("onnx")
    try:
        import onnxruntime as ort
    except ImportError:
        missing.append("onnxruntime")
    if missing:
        raise OnnxUnavailableError(
            f"ONNX support needs the {' and '.join(missing)} package"
            f"{'s' if len(missing) > 1 else ''}, which {'are' if len(missing) > 1 else 'is'} "
            "not installed. Install them with: pip install 'crnn-ocr[onnx]' "
            "(or: pip install onnx onnxruntime)"
        )
    return onnx, ort


def read_metadata(session_or_path: Any) -> dict[str, Any]:
    """The crnn-ocr metadata of an exported file (``charset``/``image``/``model_config``
    parsed from JSON), from a path or an ``onnxruntime.InferenceSession``."""
    if isinstance(session_or_path, (str, os.PathLike)):
        _, ort = require_onnx(runtime_only=True)
        session_or_path = ort.InferenceSession(
            str(session_or_path), providers=["CPUExecutionProvider"]
        )
    raw = session_or_path.get_modelmeta().custom_metadata_map
    out: dict[str, Any] = {
        k[len(META_PREFIX) :]: v for k, v in raw.items() if k.startswith(META_PREFIX)
    }
    if "charset" not in out or "image" not in out:
        raise ValueError(
            "this ONNX file has no crnn-ocr metadata (crnn_ocr.charset, crnn_ocr.image); "
            "export it with tools/export.py"
        )
    for k in ("charset", "image", "model_config"):
        if k in out:
            out[k] = json.loads(out[k])
    return out


def session_options(threads: int | None = None, spinning: bool = True) -> Any:
    """ONNX Runtime session options used for every crnn-ocr model.

    Full graph optimisation (ONNX Runtime's default, stated so it stays so), ``threads``
    intra-op threads (default: ONNX Runtime's choice, one per physical core), and
    denormal floats flushed to zero: trained LSTM weights drive gates into denormals,
    which x86 computes on several times slower (the trainer flushes them too).
    ``spinning=False``: the intra-op threads sleep between runs instead of spinning on
    their core (ONNX Runtime's default), for a process that shares its cores (the server:
    docs/benchmarks.md, "Serving under load").
    """
    _, ort = require_onnx(runtime_only=True)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.set_denormal_as_zero", "1")
    if not spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


class OnnxBackend:
    """An exported model run by ONNX Runtime, callable like the PyTorch one but on
    **uint8** batches: ``(B, C, H, W)`` uint8 -> logits ``(B, T, K)`` float32.

    A NumPy batch gives NumPy logits; a (CPU) tensor gives a tensor, for code written
    against the PyTorch model.

    Args:
        path: an ``.onnx`` file written by :func:`crnn.export.export_onnx`.
        providers: ONNX Runtime execution providers (default: CPU).
        threads: intra-op threads (default: ONNX Runtime's choice).
        spinning: whether idle intra-op threads spin (see :func:`session_options`).

    ``quantization`` is ``""`` for the float model, else how the file was quantised
    (``"int8-static"``, see :func:`crnn.export.quantize_int8`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        providers: list[str] | None = None,
        threads: int | None = None,
        spinning: bool = True,
    ) -> None:
        _, ort = require_onnx(runtime_only=True)
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"ONNX file {str(self.path)!r} not found")
        self.session = ort.InferenceSession(
            str(self.path),
            session_options(threads, spinning),
            providers=providers or ["CPUExecutionProvider"],
        )
        meta = read_metadata(self.session)
        self.charset = Charset.from_dict(meta["charset"])
        self.spec = ImageSpec.from_dict(meta["image"])
        if "model_config" not in meta:
            raise ValueError(
                f"{self.path} has no crnn_ocr.model_config metadata, so its time steps per "
                "image width are unknown; re-export it with tools/export.py"
            )
        self.model_config: dict[str, Any] = meta["model_config"]
        self.quantization: str = meta.get("quantization", "")
        self.temperature = float(meta.get("temperature", 1.0))
        self.device = "cpu"

    def output_length(self, widths: Any) -> Any:
        """Valid frames for real widths (int, array or tensor), from the model's layout."""
        return output_length(widths, self.model_config["arch"])

    def __call__(self, images: Any) -> Any:
        """``(B, C, H, W)`` uint8 (NumPy or tensor) -> ``(B, T, K)`` float32 logits."""
        is_tensor = hasattr(images, "detach")
        arr = images.detach().cpu().numpy() if is_tensor else np.asarray(images)
        if arr.dtype != np.uint8:
            raise TypeError(
                f"OnnxBackend takes uint8 images (pixel values 0..255), got {arr.dtype}; "
                "pass the output of preprocessing, not normalised floats"
            )
        (logits,) = self.session.run(["logits"], {"images": np.ascontiguousarray(arr)})
        if is_tensor:
            import torch  # a tensor came in, so PyTorch is already imported

            return torch.from_numpy(logits)
        return logits
