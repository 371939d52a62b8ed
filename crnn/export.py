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

``onnx`` is optional (``pip install 'crnn-ocr[onnx]'``; ``onnxruntime`` is a dependency); they are
imported only here, on first use. Running an exported file needs neither PyTorch nor
this module: see :mod:`crnn.backends.onnx`.

:func:`quantize_int8` writes a second flavour of the file with int8 convolutions and
linear layers (static quantisation, calibrated on images): about twice as fast on CPUs
with int8 dot products (AVX-512 VNNI, AVX-VNNI, ARM dot product), at a small cost in
agreement with the float model that :func:`agreement` measures. It is never chosen
silently: the file says ``crnn_ocr.quantization = int8-static`` and predict logs it.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crnn import __version__
from crnn.backends.onnx import META_PREFIX, OnnxBackend, require_onnx
from crnn.backends.torch import Uint8Model
from crnn.config.image_spec import ImageSpec
from crnn.io import atomic_write
from crnn.model import CRNN
from crnn.text.alphabet import Charset

OPSET = 17
INPUT_DOC = (
    "uint8 (batch, channels, height, width), pixel values 0..255; normalised to [-1, 1] "
    "inside the graph. Resize to the image spec's height keeping the aspect ratio."
)
OUTPUT_DOC = (
    "float32 logits (batch, time steps, classes); class 0 is the CTC blank, class i is "
    "charset chars[i - 1]; softmax over the last axis for probabilities"
)


def export_onnx(
    model: CRNN,
    charset: Charset,
    spec: ImageSpec,
    path: str | os.PathLike[str],
    opset: int = OPSET,
    temperature: float = 1.0,
) -> Path:
    """Write ``model`` as an ONNX file with dynamic batch and width and the charset and
    image spec in its metadata (see the module docstring), and the confidence
    ``temperature`` (``crnn.reading.calibration``). Returns the path."""
    onnx, _ = require_onnx()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The same module that training and inference put in front of the CRNN; eval mode:
    # BatchNorm must use its running statistics.
    wrapper = Uint8Model.for_spec(model, spec).eval()
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
        "temperature": repr(float(temperature)),
        "input": INPUT_DOC,
        "output": OUTPUT_DOC,
        "version": __version__,
    }
    doc = f"crnn-ocr {model.hparams['arch']} text recognizer. Input: {INPUT_DOC}"
    return _write_described(onnx, proto, path, meta, doc)


def compare_with_torch(
    model: CRNN,
    onnx_model: OnnxBackend,
    widths: list[int],
    batch_sizes: list[int],
    seed: int = 0,
) -> dict[tuple[int, int], float]:
    """Max absolute logit difference between PyTorch and ONNX Runtime on random uint8
    images, per ``(batch size, width)``."""
    wrapper = Uint8Model.for_spec(model, onnx_model.spec).eval()
    gen = torch.Generator().manual_seed(seed)
    c, h = onnx_model.spec.channels, onnx_model.spec.height
    out = {}
    for b in batch_sizes:
        for w in widths:
            x = torch.randint(0, 256, (b, c, h, w), dtype=torch.uint8, generator=gen)
            with torch.inference_mode():
                ref = wrapper(x).numpy()
            got = onnx_model(x).numpy()
            if got.shape != ref.shape:
                raise RuntimeError(f"ONNX gave {got.shape}, PyTorch {ref.shape} at {(b, w)}")
            out[(b, w)] = float(np.abs(got - ref).max())
    return out


def int8_path(path: str | os.PathLike[str]) -> Path:
    """Where the int8 flavour of ``model.onnx`` goes: ``model.int8.onnx``."""
    p = Path(path)
    return p.with_name(f"{p.stem}.int8{p.suffix or '.onnx'}")


def width_batches(images: Iterable[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """Group ``(C, H, W)`` uint8 images of equal width into ``(B, C, H, W)`` batches of
    at most ``batch_size`` (no padding, so each image is seen as it is)."""
    groups: dict[tuple[int, ...], list[np.ndarray]] = defaultdict(list)
    for im in images:
        groups[tuple(im.shape)].append(np.asarray(im, dtype=np.uint8))
    out = []
    for ims in groups.values():
        for k in range(0, len(ims), batch_size):
            out.append(np.stack(ims[k : k + batch_size]))
    return out


def quantize_int8(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    calibration: Iterable[np.ndarray],
    per_channel: bool = True,
    batch_size: int = 16,
) -> Path:
    """Write an int8 flavour of the float ONNX file ``src`` to ``dst``.

    Static quantisation with ONNX Runtime: convolutions and linear layers get int8
    weights (per output channel) and uint8 activations whose ranges (min/max) are
    measured on ``calibration``, preprocessed ``(C, H, W)`` uint8 images like those the
    model will read (a few hundred suffice). The LSTMs stay float32. The operator
    format (QLinearConv...) runs faster here than QDQ pairs; dynamic quantisation turns
    convolutions into ConvInteger, which ONNX Runtime runs ~5x slower than float.

    The metadata is copied and ``crnn_ocr.quantization`` set to ``int8-static``.
    """
    onnx, _ = require_onnx()
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    batches = width_batches(calibration, batch_size)
    if not batches:
        raise ValueError("int8 quantisation needs calibration images; got none")

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self._it, None)
            return None if x is None else {"images": x}

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        quant_pre_process(str(src), str(pre))
        quantize_static(
            str(pre),
            str(out),
            _Reader(),
            quant_format=QuantFormat.QOperator,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            # 7-bit weights: x86 CPUs without VNNI (AVX2, AVX-512 before Cascade Lake)
            # multiply uint8 x int8 with 16-bit intermediate sums that saturate at full
            # range (ONNX Runtime's documented U8S8 overflow); measured on an AVX2 EPYC
            # (tests/test_speed.py), 67 % of texts agreed with fp32 at 8 bits.
            reduce_range=True,
            # The MinMax calibrator keeps a min and a max per tensor and batch, so memory
            # stays small (CalibMaxIntermediateOutputs would drop batches unmeasured).
            op_types_to_quantize=["Conv", "MatMul", "Gemm"],
        )
        proto = onnx.load(str(out))
        meta = {p.key: p.value for p in onnx.load(str(src)).metadata_props}
        meta[META_PREFIX + "quantization"] = "int8-static"
        del proto.metadata_props[:]
        for k, v in meta.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = k, v
        proto.doc_string = "int8 (static, per-channel) " + onnx.load(str(src)).doc_string
        atomic_write(dst, lambda f: f.write(proto.SerializeToString()))
    return dst


def agreement(
    reference: Any, candidate: Any, images: Iterable[np.ndarray], batch_size: int = 32
) -> dict[str, float]:
    """How far ``candidate`` (e.g. the int8 model) is from ``reference`` (the float one).

    Both are callables on uint8 ``(B, C, H, W)`` batches returning logits (``OnnxBackend``
    instances). Returns ``images``, ``text_agreement`` (fraction of images whose greedy
    text is identical), ``max_abs_logit_error``/``mean_abs_logit_error`` (logit units),
    ``logit_range`` (mean per-frame max minus min logit of the reference, for scale) and
    ``max_prob_error`` (largest softmax difference of any class in any frame).
    """
    from crnn.ctc import greedy_decode, log_softmax_np

    charset = reference.charset
    n = same = 0
    max_err = sum_err = n_vals = rng_sum = n_frames = 0.0
    max_prob = 0.0
    for batch in width_batches(images, batch_size):
        ref = np.asarray(reference(batch), dtype=np.float32)
        got = np.asarray(candidate(batch), dtype=np.float32)
        err = np.abs(got - ref)
        max_err = max(max_err, float(err.max()))
        sum_err += float(err.sum())
        n_vals += err.size
        rng_sum += float((ref.max(-1) - ref.min(-1)).sum())
        n_frames += ref.shape[0] * ref.shape[1]
        dp = np.abs(np.exp(log_softmax_np(got)) - np.exp(log_softmax_np(ref)))
        max_prob = max(max_prob, float(dp.max()))
        for a, b in zip(greedy_decode(ref, charset), greedy_decode(got, charset)):
            same += a.text == b.text
            n += 1
    return {
        "images": float(n),
        "text_agreement": same / max(n, 1),
        "max_abs_logit_error": max_err,
        "mean_abs_logit_error": sum_err / max(n_vals, 1),
        "logit_range": rng_sum / max(n_frames, 1),
        "max_prob_error": max_prob,
    }


DET_INPUT_DOC = (
    "uint8 (batch, 3, height, width) RGB, pixel values 0..255, height and width multiples "
    "of 32; normalised inside the graph."
)
DET_OUTPUT_DOC = (
    "float32 (batch, 1, height, width): each pixel's probability of lying in a line's kernel."
)


def export_detector_onnx(
    model: torch.nn.Module,
    path: str | os.PathLike[str],
    limit_side: int,
    opset: int = OPSET,
    postprocess: dict[str, Any] | None = None,
) -> Path:
    """Write the detector (:class:`crnn.model.dbnet.DBNet`) in eval mode, the probability
    map alone, with dynamic batch, height and width, and its hyper-parameters, read scale
    and post-processing options (``crnn.detect.postprocess.DetOptions`` fields, chosen on
    its validation images) in the metadata (``crnn_ocr.kind = detector``). Returns the
    path."""
    onnx, _ = require_onnx()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    dummy = torch.full((1, 3, 128, 160), 128, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.onnx.export(
            model,
            (dummy,),
            str(path),
            dynamo=False,
            input_names=["images"],
            output_names=["prob"],
            dynamic_axes={
                "images": {0: "batch", 2: "height", 3: "width"},
                "prob": {0: "batch", 2: "height", 3: "width"},
            },
            opset_version=opset,
            do_constant_folding=True,
        )
    proto = onnx.load(str(path))
    meta = {
        "kind": "detector",
        "model_config": json.dumps(model.hparams),
        "limit_side": str(int(limit_side)),
        "postprocess": json.dumps(postprocess or {}),
        "input": DET_INPUT_DOC,
        "output": DET_OUTPUT_DOC,
        "version": __version__,
    }
    return _write_described(
        onnx, proto, path, meta, f"crnn-ocr DBNet text line detector. Input: {DET_INPUT_DOC}"
    )


def _write_described(onnx: Any, proto: Any, path: Path, meta: dict[str, str], doc: str) -> Path:
    """An exported graph with crnn-ocr's metadata (``crnn_ocr.*``), doc string and
    producer, checked and written atomically: recognizer and detector alike."""
    del proto.metadata_props[:]
    for k, v in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = META_PREFIX + k, v
    proto.doc_string = doc
    proto.producer_name = "crnn-ocr"
    proto.producer_version = __version__
    onnx.checker.check_model(proto)
    return atomic_write(path, lambda f: f.write(proto.SerializeToString()))
