"""ONNX export: one file that a consumer can run with nothing else.

The graph (opset 17, exported with PyTorch's TorchScript-based exporter):

* input ``images``: **uint8** ``(B, C, H, W)``, pixel values 0..255, ``C`` 1 (grayscale)
  or 3 (RGB), ``H`` the image spec's height (32), batch ``B`` and width ``W`` dynamic.
  The normalisation to ``[-1, 1]`` (``x / 127.5 - 1``) happens inside the graph, so a
  consumer only decodes, converts to grayscale and resizes to the height keeping the
  aspect ratio; no constants to get wrong. Pad a batch on the right by repeating each
  image's last column (as ``crnn.data.transforms.pad_batch`` does), or run one width
  at a time.
* output ``logits``: float32 ``(B, T, K)``, ``T = floor(W / 4) + 1`` for the ``crnn``
  layout and ``floor(W / 4) - 1`` for ``vgg`` (``CRNN.output_length``), ``K`` =
  characters + 1. Class 0 is the CTC
  blank; class ``i`` is ``charset[i - 1]``. Softmax over ``K`` gives probabilities;
  greedy decoding is arg-max per frame, merge repeats, drop blanks.
* metadata (``metadata_props``, strings): ``crnn_ocr.charset`` (JSON: ``chars`` in class
  order, ``case_fold``, ``name``), ``crnn_ocr.image`` (JSON image spec),
  ``crnn_ocr.model_config``, ``crnn_ocr.blank`` (``"0"``), ``crnn_ocr.input``,
  ``crnn_ocr.output``, ``crnn_ocr.version``.

``onnx`` and ``onnxruntime`` are optional (``pip install 'crnn-ocr[onnx]'``); they are
imported only here, on first use.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crnn import __version__
from crnn.charset import Charset
from crnn.data.transforms import ImageSpec, normalize
from crnn.model import CRNN

OPSET = 17
META_PREFIX = "crnn_ocr."
INPUT_DOC = (
    "uint8 (batch, channels, height, width), pixel values 0..255; normalised to [-1, 1] "
    "inside the graph. Resize to the image spec's height keeping the aspect ratio."
)
OUTPUT_DOC = (
    "float32 logits (batch, time steps, classes); class 0 is the CTC blank, class i is "
    "charset chars[i - 1]; softmax over the last axis for probabilities"
)


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


class _UInt8Model(nn.Module):
    """uint8 images in, logits out: the normalisation becomes part of the graph."""

    def __init__(self, model: CRNN) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images.float() / 127.5 - 1.0)


def export_onnx(
    model: CRNN,
    charset: Charset,
    spec: ImageSpec,
    path: str | os.PathLike[str],
    opset: int = OPSET,
) -> Path:
    """Write ``model`` as an ONNX file with dynamic batch and width and the charset and
    image spec in its metadata (see the module docstring). Returns the path."""
    onnx, _ = require_onnx()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    wrapper = _UInt8Model(model).eval()  # eval: BatchNorm must use its running statistics
    width = max(spec.min_width, min(100, spec.max_width))
    # Batch 1: the LSTM export is then free of any batch-size constant.
    dummy = torch.full((1, spec.channels, spec.height, width), 128, dtype=torch.uint8)
    with warnings.catch_warnings():
        # The TorchScript-based exporter is deprecated in favour of the torch.export-based
        # one (dynamo=True), which needs the onnxscript package and takes ~30 s for this
        # model; this one needs nothing beyond torch and onnx and takes ~1 s. Its
        # warnings: Python-level shape checks (the feature map's height is fixed by H)
        # and an LSTM batch-size caution; compare_with_torch verifies the result over
        # several batch sizes and widths.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.onnx.export(
            wrapper,
            (dummy,),
            str(path),
            dynamo=False,
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "batch", 3: "width"}, "logits": {0: "batch", 1: "steps"}},
            opset_version=opset,
            do_constant_folding=True,
        )
    proto = onnx.load(str(path))
    meta = {
        "charset": json.dumps(charset.to_dict(), ensure_ascii=False),
        "image": json.dumps(spec.to_dict()),
        "model_config": json.dumps(model.hparams),
        "blank": "0",
        "input": INPUT_DOC,
        "output": OUTPUT_DOC,
        "version": __version__,
    }
    del proto.metadata_props[:]
    for k, v in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = META_PREFIX + k, v
    proto.doc_string = f"crnn-ocr {model.hparams['arch']} text recognizer. Input: {INPUT_DOC}"
    proto.producer_name = "crnn-ocr"
    proto.producer_version = __version__
    onnx.checker.check_model(proto)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        onnx.save(proto, str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


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


class OnnxModel:
    """An exported model run by ONNX Runtime, callable like the PyTorch one but on
    **uint8** batches: ``(B, C, H, W)`` uint8 -> logits ``(B, T, K)`` float32 (CPU tensor).

    Args:
        path: an ``.onnx`` file written by :func:`export_onnx`.
        providers: ONNX Runtime execution providers (default: CPU).
        threads: intra-op threads (default: ONNX Runtime's choice).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        providers: list[str] | None = None,
        threads: int | None = None,
    ) -> None:
        _, ort = require_onnx(runtime_only=True)
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"ONNX file {str(self.path)!r} not found")
        self.session = ort.InferenceSession(
            str(self.path), opts, providers=providers or ["CPUExecutionProvider"]
        )
        meta = read_metadata(self.session)
        self.charset = Charset.from_dict(meta["charset"])
        self.spec = ImageSpec.from_dict(meta["image"])
        self.model_config: dict[str, Any] = meta.get("model_config", {})

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if images.dtype != torch.uint8:
            raise TypeError(f"OnnxModel takes uint8 images, got {images.dtype}")
        (logits,) = self.session.run(["logits"], {"images": images.cpu().numpy()})
        return torch.from_numpy(logits)


def compare_with_torch(
    model: CRNN,
    onnx_model: OnnxModel,
    widths: list[int],
    batch_sizes: list[int],
    seed: int = 0,
) -> dict[tuple[int, int], float]:
    """Max absolute logit difference between PyTorch and ONNX Runtime on random uint8
    images, per ``(batch size, width)``."""
    model = model.eval()
    gen = torch.Generator().manual_seed(seed)
    c, h = onnx_model.spec.channels, onnx_model.spec.height
    out = {}
    for b in batch_sizes:
        for w in widths:
            x = torch.randint(0, 256, (b, c, h, w), dtype=torch.uint8, generator=gen)
            with torch.inference_mode():
                ref = model(normalize(x)).numpy()
            got = onnx_model(x).numpy()
            if got.shape != ref.shape:
                raise RuntimeError(f"ONNX gave {got.shape}, PyTorch {ref.shape} at {(b, w)}")
            out[(b, w)] = float(np.abs(got - ref).max())
    return out
