"""The model's input contract: how an image becomes a model input (height, widths,
channels, normalisation), stored in every checkpoint and export. Below data, backends
and checkpoints, which all read it; plain data, no NumPy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImageSpec:
    """How an image becomes a model input; stored in every checkpoint.

    ``mean``/``std`` normalise pixels as ``(p / 255 - mean) / std`` inside the model
    (``crnn.backends.torch.Uint8Model``); ``width_scale`` squeezes (< 1) or stretches the
    width after resizing to the height. This project trains with the defaults (0.5, 0.5,
    1.0: ``[-1, 1]``, the aspect ratio kept); imported models keep their own, e.g.
    Sierkinhane's CRNN (mean 0.588, std 0.193, lines squeezed from 280 to 160 px).
    """

    height: int = 32
    min_width: int = 16
    max_width: int = 128
    width_multiple: int = 4
    rgb: bool = False
    mean: float = 0.5
    std: float = 0.5
    width_scale: float = 1.0

    @property
    def channels(self) -> int:
        return 3 if self.rgb else 1

    @classmethod
    def from_config(cls, data_cfg: Any) -> ImageSpec:
        return cls(
            height=data_cfg.height,
            min_width=data_cfg.min_width,
            max_width=data_cfg.max_width,
            width_multiple=data_cfg.width_multiple,
            rgb=data_cfg.rgb,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "height": self.height,
            "min_width": self.min_width,
            "max_width": self.max_width,
            "width_multiple": self.width_multiple,
            "rgb": self.rgb,
        }
        # Written only when they differ, so files of this project's own models stay
        # readable by older versions.
        for k, default in _OPTIONAL.items():
            if getattr(self, k) != default:
                out[k] = float(getattr(self, k))
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ImageSpec:
        return cls(
            **{k: d[k] for k in ("height", "min_width", "max_width", "width_multiple", "rgb")},
            **{k: float(d[k]) for k in _OPTIONAL if k in d},
        )


# ImageSpec fields that older files lack, with the value they mean there.
_OPTIONAL = {"mean": 0.5, "std": 0.5, "width_scale": 1.0}
