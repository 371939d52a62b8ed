"""A small Python API for applications.

```python
from crnn import Recognizer
rec = Recognizer.from_checkpoint("runs/default/best.pt")
for p in rec.predict(["word.png", pil_image, uint8_array]):
    print(p.text, p.confidence)
```

Images are grouped by their resized width and each group is run unpadded, so a
prediction never depends on which other images share its batch.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from crnn.charset import Charset
from crnn.ctc import Prediction, greedy_decode
from crnn.data.transforms import ImageSource, ImageSpec, normalize, preprocess
from crnn.engine.checkpoint import load_checkpoint, model_from_checkpoint
from crnn.engine.parallel import autocast_for
from crnn.model import CRNN


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Recognizer:
    """Reads text from word or line images with a trained CRNN.

    Args:
        model: the bare CRNN.
        charset, spec: from the same checkpoint as the model.
        device: where to run (default: CUDA if available, else CPU).
        batch_size: images per forward pass.
        amp: ``bf16``/``fp16`` autocast on CUDA, ``none`` for fp32.
    """

    def __init__(
        self,
        model: CRNN,
        charset: Charset,
        spec: ImageSpec,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        amp: str = "none",
    ) -> None:
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.charset = charset
        self.spec = spec
        self.batch_size = batch_size
        self.amp = amp

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], device: str | torch.device | None = None, **kwargs: Any
    ) -> Recognizer:
        """Load a training checkpoint, a run directory (its best.pt) or a release file."""
        ckpt = load_checkpoint(path)
        model, charset, spec = model_from_checkpoint(ckpt, str(path))
        return cls(model, charset, spec, device=device, **kwargs)

    def preprocess(self, image: ImageSource) -> torch.Tensor:
        """One image -> ``(C, H, W)`` uint8; raises ``ImageDecodeError`` for bad input."""
        return preprocess(image, self.spec)

    @torch.inference_mode()
    def predict_tensors(self, images: Sequence[torch.Tensor]) -> list[Prediction]:
        """Predict preprocessed ``(C, H, W)`` uint8 images (see :meth:`preprocess`)."""
        groups: dict[int, list[int]] = defaultdict(list)
        for i, im in enumerate(images):
            groups[im.shape[-1]].append(i)
        out: list[Prediction | None] = [None] * len(images)
        for idx in groups.values():
            for k in range(0, len(idx), self.batch_size):
                chunk = idx[k : k + self.batch_size]
                batch = torch.stack([images[i] for i in chunk]).to(self.device)
                with autocast_for(self.device, self.amp):
                    logits = self.model(normalize(batch))
                for i, p in zip(chunk, greedy_decode(logits, self.charset)):
                    out[i] = p
        return out  # type: ignore[return-value]

    def predict(self, images: ImageSource | Sequence[ImageSource]) -> list[Prediction]:
        """Paths, encoded bytes, PIL images or arrays -> one :class:`Prediction` each.

        A single image (not in a list) gives a list of one.
        """
        if isinstance(images, (str, os.PathLike, bytes, Path)) or not isinstance(images, Sequence):
            images = [images]
        return self.predict_tensors([self.preprocess(im) for im in images])


def bundled_models() -> list[Path]:
    """Release files shipped inside the package (``crnn/assets/models/*.pt``)."""
    folder = Path(__file__).parent / "assets" / "models"
    return sorted(folder.glob("*.pt")) if folder.is_dir() else []


def default_checkpoint() -> Path:
    """The bundled English model, for predicting without training first."""
    models = bundled_models()
    if not models:
        raise FileNotFoundError(
            "no checkpoint given and no bundled model found in crnn/assets/models/; pass "
            "--checkpoint runs/<run>/best.pt (train one with tools/train.py)"
        )
    return models[-1]
