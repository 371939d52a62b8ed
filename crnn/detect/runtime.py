"""The detector at read time, without PyTorch: an exported ``.onnx`` run by ONNX
Runtime (``crnn-export`` writes it from a ``task: detect`` checkpoint), or a training
checkpoint run by PyTorch where torch is installed. Both give :meth:`find`: an RGB image
-> line quadrilaterals in reading order.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from crnn.detect.detector import LIMIT_SIDE, READ_ENLARGE, READ_PYRAMID, detect
from crnn.detect.order import reading_order
from crnn.detect.postprocess import DEFAULT_OPTIONS, Detection, DetOptions

DETECTOR_PREFIX = "det_zh-"


class OnnxDetector:
    """A detector exported to ONNX (``crnn_ocr.kind = detector`` in its metadata)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        threads: int | None = None,
        spinning: bool = True,
        opts: DetOptions = DEFAULT_OPTIONS,
    ) -> None:
        from crnn.backends.onnx import META_PREFIX, require_onnx, session_options

        _, ort = require_onnx(runtime_only=True)
        self.path = Path(path)
        self.session = ort.InferenceSession(
            str(path),
            sess_options=session_options(threads, spinning),
            providers=["CPUExecutionProvider"],
        )
        meta = {
            k[len(META_PREFIX) :]: v
            for k, v in self.session.get_modelmeta().custom_metadata_map.items()
            if k.startswith(META_PREFIX)
        }
        if meta.get("kind") != "detector":
            raise ValueError(
                f"{path} is not a crnn-ocr detector (no crnn_ocr.kind = detector in its "
                "metadata); export one with crnn-export RUN/best.pt"
            )
        self.limit_side = int(meta.get("limit_side", LIMIT_SIDE))
        self.opts = options_of(json.loads(meta.get("postprocess") or "{}"), opts)

    def prob_map(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(None, {"images": batch})[0]

    def find(self, image: np.ndarray) -> list[Detection]:
        """Lines of an ``(H, W, 3)`` uint8 RGB image, in reading order."""
        return reading_order(
            detect(
                image,
                self.prob_map,
                self.opts,
                self.limit_side,
                enlarge=READ_ENLARGE,
                pyramid=READ_PYRAMID,
            )
        )


class TorchDetector(OnnxDetector):
    """A ``task: detect`` checkpoint (or release file) run by PyTorch on the CPU."""

    def __init__(self, path: str | os.PathLike[str], opts: DetOptions = DEFAULT_OPTIONS) -> None:
        import torch

        from crnn.model.dbnet import build_detector

        ckpt: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("kind") != "detector":
            raise ValueError(
                f"{path} is not a detector checkpoint (train one with crnn-train --config "
                "det_zh_cpu)"
            )
        self.path = Path(path)
        self.model = build_detector(ckpt["hparams"]).eval()
        self.model.load_state_dict(ckpt["model"])
        self.limit_side = int(ckpt.get("limit_side", LIMIT_SIDE))
        self.opts = options_of(ckpt.get("postprocess") or {}, opts)

    def prob_map(self, batch: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.model(torch.from_numpy(batch)).numpy()


def options_of(saved: dict[str, Any], given: DetOptions) -> DetOptions:
    """The model's own post-processing options (saved with it), unless the caller gave
    others than the defaults."""
    if given != DEFAULT_OPTIONS or not saved:
        return given
    fields = {k: v for k, v in saved.items() if k in DetOptions.__dataclass_fields__}
    return dataclasses.replace(DEFAULT_OPTIONS, **fields)


def load_detector(path: str | os.PathLike[str], **options: Any) -> OnnxDetector:
    """``.onnx`` -> :class:`OnnxDetector`; a ``.pt`` file or run directory ->
    :class:`TorchDetector` (its best.pt)."""
    p = Path(path)
    if p.is_dir():
        p = p / "best.pt"
    if not p.exists():
        raise FileNotFoundError(
            f"no detector at {p}: pass an .onnx export or a task: detect checkpoint"
        )
    if p.suffix == ".onnx":
        return OnnxDetector(p, **options)
    return TorchDetector(p, **{k: v for k, v in options.items() if k == "opts"})


def bundled_detector_path() -> Path | None:
    """The bundled detector's ``.onnx`` (``crnn/assets/models/det_zh-*.onnx``), if any."""
    folder = Path(__file__).resolve().parent.parent / "assets" / "models"
    found = sorted(folder.glob(f"{DETECTOR_PREFIX}*.onnx"))
    return found[-1] if found else None


def bundled_detector_checkpoint() -> Path | None:
    """The bundled detector's PyTorch checkpoint (the ``.pt`` beside its ``.onnx``): what
    ``train.init_from=det_zh`` fine-tunes. None when none is bundled."""
    path = bundled_detector_path()
    pt = None if path is None else path.with_suffix(".pt")
    return pt if pt is not None and pt.is_file() else None


class LazyDetector:
    """A detector loaded on its first :meth:`find`: a command that reads only word crops
    never pays for the session (about 40 ms)."""

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        self.path = Path(path)
        self.options = options
        self._detector: OnnxDetector | None = None

    @property
    def loaded(self) -> OnnxDetector:
        if self._detector is None:
            self._detector = load_detector(self.path, **self.options)
        return self._detector

    def find(self, image: np.ndarray) -> list[Detection]:
        return self.loaded.find(image)


def bundled_detector(**options: Any) -> LazyDetector | None:
    """The bundled detector (loaded when first used), or None when none is bundled."""
    path = bundled_detector_path()
    return None if path is None else LazyDetector(path, **options)
