"""A small Python API for applications.

```python
from crnn import Recognizer
rec = Recognizer.from_checkpoint("runs/default/best.pt")   # or a release file
for text, confidence in rec.predict(["word.png", pil_image, uint8_array]):
    print(text, confidence)

rec = Recognizer.from_checkpoint("crnn_en-1a2b3c4d.pt", beam_width=10, lexicon="words.txt")
rec = Recognizer.from_onnx("crnn_en.onnx")                 # ONNX Runtime, no PyTorch model
```

Images are grouped by their resized width and each group is run unpadded, so a
prediction never depends on which other images share its batch.

With an ONNX model this module imports no PyTorch (preprocessing is
``crnn.data.image``, decoding ``crnn.ctc``, the model ``crnn.runtime``): reading one
image from the command line then takes a fraction of a second instead of the
1.5-3 s that ``import torch`` alone costs on a small CPU.
"""

from __future__ import annotations

import importlib.util
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crnn.charset import Charset
from crnn.ctc import Lexicon, Prediction, decode
from crnn.data.image import ImageSource, ImageSpec, preprocess_array
from crnn.runtime import OnnxModel

if TYPE_CHECKING:
    import torch

    from crnn.model import CRNN


def default_device() -> torch.device:
    """CUDA if available, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Recognizer:
    """Reads text from word or line images with a trained CRNN.

    Args:
        model: the bare CRNN, or an :class:`crnn.runtime.OnnxModel` (see :meth:`from_onnx`).
        charset, spec: from the same checkpoint as the model.
        device: where to run (default: CUDA if available, else CPU); PyTorch models only.
            On the CPU, denormal floats are flushed to zero for the whole process
            (``torch.set_flush_denormal``): trained LSTMs produce them, and x86 computes
            on them several times slower; no prediction changes.
        batch_size: images per forward pass.
        amp: ``bf16``/``fp16`` autocast on CUDA, ``none`` for fp32.
        beam_width: 0 for greedy decoding (the default), else CTC prefix beam search with
            this many prefixes (see ``crnn.ctc.prefix_beam_search``).
        lexicon: a word list (a file with one word per line, words, or a
            :class:`crnn.ctc.Lexicon`): each text is snapped to the most probable word
            within ``max_edits`` edits, if there is one.
        max_edits: how far a lexicon word may be from the decoded text.
        channels_last: run the convolutions on channels-last tensors (PyTorch models);
            ``None`` (default) does so on the CPU, where oneDNN runs this network 1.4-1.6x
            faster at batch 8-64 that way and no slower at batch 1 (docs/benchmarks.md).
    """

    def __init__(
        self,
        model: CRNN | Any,
        charset: Charset,
        spec: ImageSpec,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        amp: str = "none",
        beam_width: int = 0,
        lexicon: Lexicon | str | os.PathLike[str] | Sequence[str] | None = None,
        max_edits: int = 2,
        channels_last: bool | None = None,
    ) -> None:
        self.torch_model = not isinstance(model, OnnxModel)
        self.channels_last = False
        if self.torch_model:
            import torch

            self.device: Any = torch.device(device) if device is not None else default_device()
            self.model = model.to(self.device).eval()
            if self.device.type == "cpu":
                torch.set_flush_denormal(True)
            self.channels_last = (
                self.device.type == "cpu" if channels_last is None else channels_last
            )
            if self.channels_last:
                self.model.to(memory_format=torch.channels_last)
        else:  # ONNX Runtime picks its device through its execution providers
            self.device = "cpu"
            self.model = model
        self.charset = charset
        self.spec = spec
        self.batch_size = batch_size
        self.amp = amp
        if beam_width < 0:
            raise ValueError(f"beam_width must be >= 0 (0: greedy), got {beam_width}")
        self.beam_width = beam_width
        if lexicon is not None and not isinstance(lexicon, Lexicon):
            if isinstance(lexicon, (str, os.PathLike)):
                lexicon = Lexicon.from_file(lexicon, charset)
            else:
                lexicon = Lexicon(lexicon, charset)
        self.lexicon = lexicon
        self.max_edits = max_edits

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], device: str | torch.device | None = None, **kwargs: Any
    ) -> Recognizer:
        """Load a training checkpoint, a run directory (its best.pt) or a release file."""
        from crnn.engine.checkpoint import load_checkpoint, model_from_checkpoint

        ckpt = load_checkpoint(path)
        model, charset, spec = model_from_checkpoint(ckpt, str(path))
        return cls(model, charset, spec, device=device, **kwargs)

    @classmethod
    def from_onnx(
        cls,
        path: str | os.PathLike[str],
        providers: list[str] | None = None,
        threads: int | None = None,
        **kwargs: Any,
    ) -> Recognizer:
        """Run an ONNX file written by ``tools/export.py`` with ONNX Runtime; its charset
        and image spec come from the file's metadata. Needs ``onnxruntime``, not PyTorch."""
        model = OnnxModel(path, providers=providers, threads=threads)
        return cls(model, model.charset, model.spec, **kwargs)

    def preprocess(self, image: ImageSource) -> Any:
        """One image -> ``(C, H, W)`` uint8: a tensor for a PyTorch model, a NumPy array
        for an ONNX one. Raises ``ImageDecodeError`` for bad input."""
        arr = preprocess_array(image, self.spec)
        if self.torch_model:
            import torch

            return torch.from_numpy(arr)
        return arr

    def predict_tensors(self, images: Sequence[Any]) -> list[Prediction]:
        """Predict preprocessed ``(C, H, W)`` uint8 images (tensors or arrays, see
        :meth:`preprocess`)."""
        groups: dict[int, list[int]] = defaultdict(list)
        for i, im in enumerate(images):
            groups[im.shape[-1]].append(i)
        out: list[Prediction | None] = [None] * len(images)
        for idx in groups.values():
            for k in range(0, len(idx), self.batch_size):
                chunk = idx[k : k + self.batch_size]
                if self.torch_model:
                    logits = self._torch_logits([images[i] for i in chunk])
                else:  # ONNX: uint8 in, normalised inside
                    logits = self.model(np.stack([np.asarray(images[i]) for i in chunk]))
                preds = decode(
                    logits,
                    self.charset,
                    beam_width=self.beam_width,
                    lexicon=self.lexicon,
                    max_edits=self.max_edits,
                )
                for i, p in zip(chunk, preds):
                    out[i] = p
        return out  # type: ignore[return-value]

    def _torch_logits(self, images: list[Any]) -> torch.Tensor:
        import torch

        from crnn.data.transforms import normalize
        from crnn.engine.parallel import autocast_for

        with torch.inference_mode():
            batch = torch.stack([torch.as_tensor(im) for im in images]).to(self.device)
            x = normalize(batch)
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with autocast_for(self.device, self.amp):
                return self.model(x)

    def predict(self, images: ImageSource | Sequence[ImageSource]) -> list[Prediction]:
        """Paths, encoded bytes, PIL images or arrays -> one :class:`Prediction` each
        (``text``, ``confidence``, ``char_confidences``; unpacks as ``text, confidence``).

        A single image (not in a list) gives a list of one.
        """
        if isinstance(images, (str, os.PathLike, bytes, Path)) or not isinstance(images, Sequence):
            images = [images]
        return self.predict_tensors([self.preprocess(im) for im in images])


# Release files shipped inside the package (data shipped with it, so reading it by the
# module's location is right).
MODELS_DIR = Path(__file__).parent / "assets" / "models"


def bundled_models(suffix: str = ".pt") -> list[Path]:
    """Release files shipped inside the package (``crnn/assets/models/*<suffix>``)."""
    return sorted(MODELS_DIR.glob(f"*{suffix}")) if MODELS_DIR.is_dir() else []


def default_checkpoint(prefer_onnx: bool = True) -> Path:
    """The bundled English model, for predicting without training first.

    Its ONNX export (float32; never the ``.int8.onnx`` flavour) when one is bundled,
    ``prefer_onnx`` holds and ``onnxruntime`` is installed: ONNX Runtime answers without
    importing PyTorch, which dominates a one-image command's time. Else the ``.pt``
    release file.
    """
    if prefer_onnx and importlib.util.find_spec("onnxruntime") is not None:
        onnx = [p for p in bundled_models(".onnx") if not p.name.endswith(".int8.onnx")]
        if onnx:
            return onnx[-1]
    models = bundled_models()
    if not models:
        raise FileNotFoundError(
            "no checkpoint given and no bundled model found in crnn/assets/models/; pass "
            "--checkpoint runs/<run>/best.pt (train one with tools/train.py)"
        )
    return models[-1]
