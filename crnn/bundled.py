"""The models bundled with the package (``crnn/assets/models``): their names, release
files, and which one a reader loads by default. No PyTorch, no model."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

# Release files shipped inside the package (data shipped with it, so reading it by the
# module's location is right).
MODELS_DIR = Path(__file__).parent / "assets" / "models"


# The bundled models by name: release files are named <prefix><sha256[:8]>.pt/.onnx.
BUNDLED = {"word": "crnn_en-", "line": "crnn_line_en-", "zh": "crnn_zh-"}


def bundled_models(suffix: str = ".pt", model: str | None = None) -> list[Path]:
    """Release files shipped inside the package (``crnn/assets/models/*<suffix>``), of
    one bundled ``model`` (``"word"``, ``"line"``, ``"zh"``) or all."""
    if not MODELS_DIR.is_dir():
        return []
    prefix = "" if model is None else BUNDLED[model]
    return sorted(MODELS_DIR.glob(f"{prefix}*{suffix}"))


def prefers_onnx(device: Any) -> bool:
    """Whether a bundled model should be read through its ONNX export on ``device``:
    yes unless it names a GPU (ONNX Runtime runs the export on the CPU)."""
    return not str(device or "").startswith("cuda")


def default_checkpoint(prefer_onnx: bool = True, model: str = "word") -> Path:
    """A bundled model, for predicting without training first: ``"word"`` (the
    default; case-insensitive letters and digits of scene-text words), ``"line"``
    (printed English lines: printable ASCII with spaces) or ``"zh"`` (printed Chinese
    lines).

    Its ONNX export (float32; never the ``.int8.onnx`` flavour) when one is bundled,
    ``prefer_onnx`` holds and ``onnxruntime`` is installed: ONNX Runtime answers without
    importing PyTorch, which dominates a one-image command's time. Else the ``.pt``
    release file.
    """
    if model not in BUNDLED:
        raise ValueError(f"unknown bundled model {model!r}: expected one of {', '.join(BUNDLED)}")
    if prefer_onnx and importlib.util.find_spec("onnxruntime") is not None:
        onnx = [p for p in bundled_models(".onnx", model) if not p.name.endswith(".int8.onnx")]
        if onnx:
            return onnx[-1]
    models = bundled_models(".pt", model)
    if not models:
        raise FileNotFoundError(
            f"no bundled {model} model found in crnn/assets/models/; pass "
            "--checkpoint runs/<run>/best.pt (train one with tools/train.py)"
        )
    return models[-1]


def model_file(model: str, device: Any = None) -> str:
    """The file a reader loads for ``model``: a bundled model's (``word``, ``line``,
    ``zh``; its ONNX export unless ``device`` names a GPU) or ``model`` itself, a
    checkpoint or ``.onnx`` path (a file of that name wins over the bundled name)."""
    if model in BUNDLED and not Path(model).exists():
        return str(default_checkpoint(prefers_onnx(device), model))
    return str(model)
