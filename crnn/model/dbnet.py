"""The text detector: a DBNet (Liao et al., 2020) sized for reading on a CPU.

``(B, 3, H, W)`` uint8 RGB (H and W multiples of 32) -> maps at the input's resolution:
in training ``(B, 3, H, W)`` (probability, threshold, approximate binary map), in eval
``(B, 1, H, W)`` (the probability map alone, all that reading needs and all that ONNX
export keeps). Normalisation lives inside the module, so the exported graph takes the
same bytes.

The backbone is MobileNetV2-style inverted residuals (depthwise 3x3 between 1x1
expansions) at strides 4, 8, 16 and 32, trained from scratch (no weights can be
downloaded); a feature pyramid brings every stride to 1/4, concatenated; the head is
DBNet's (3x3 conv, two 2x transposed convs, sigmoid). No loss lives here
(``crnn.detect.loss``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# Approximate binarisation's steepness k (the paper's 50).
DB_K = 50.0


def conv_bn(
    cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: bool = True
) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise (with the stride), 1x1 project; a shortcut when the
    shape stays."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        self.block = nn.Sequential(
            conv_bn(cin, mid, 1),
            conv_bn(mid, mid, 3, stride, groups=mid),
            conv_bn(mid, cout, 1, act=False),
        )
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.shortcut else y


class Backbone(nn.Module):
    """Features at strides 4, 8, 16, 32 with ``widths`` channels; ``depths`` blocks each."""

    def __init__(self, widths: list[int], depths: list[int], expand: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            conv_bn(3, widths[0] // 2, 3, 2), conv_bn(widths[0] // 2, widths[0], 3, 2)
        )
        stages = []
        cin = widths[0]
        for i, (w, d) in enumerate(zip(widths, depths)):
            blocks = []
            for j in range(d):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(InvertedResidual(cin, w, stride, expand))
                cin = w
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.ModuleList(stages)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        out = []
        for stage in self.stages:
            x = stage(x)
            out.append(x)
        return out


class FPN(nn.Module):
    """DBNet's neck: 1x1 laterals, top-down sums, 3x3 smoothing to ``inner // 4`` each,
    every level upsampled to stride 4 and concatenated (``inner`` channels)."""

    def __init__(self, widths: list[int], inner: int) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(w, inner, 1, bias=False) for w in widths)
        self.smooth = nn.ModuleList(
            nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in widths
        )

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        lat = [conv(f) for conv, f in zip(self.lateral, feats)]
        for i in range(len(lat) - 1, 0, -1):
            lat[i - 1] = lat[i - 1] + F.interpolate(
                lat[i], size=lat[i - 1].shape[-2:], mode="nearest"
            )
        size = lat[0].shape[-2:]
        outs = [
            F.interpolate(s(x), size=size, mode="nearest") if i else s(x)
            for i, (s, x) in enumerate(zip(self.smooth, lat))
        ]
        return torch.cat(outs, dim=1)


class Head(nn.Module):
    """3x3 conv, BN, ReLU, then two 2x transposed convs up to the input's size; one map."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        mid = max(cin // 4, 8)
        self.body = nn.Sequential(
            conv_bn(cin, mid, 3),
            nn.ConvTranspose2d(mid, mid, 2, 2, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.ConvTranspose2d(mid, 1, 2, 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class DBNet(nn.Module):
    """The detector (see the module docstring). ``hparams`` rebuilds it:
    ``DBNet(**model.hparams)``."""

    def __init__(
        self,
        widths: list[int] | None = None,
        depths: list[int] | None = None,
        expand: int = 4,
        inner: int = 64,
    ) -> None:
        super().__init__()
        widths = list(widths or [24, 48, 96, 160])
        depths = list(depths or [1, 2, 3, 2])
        if len(widths) != 4 or len(depths) != 4:
            raise ValueError(f"DBNet needs 4 stage widths and depths, got {widths} and {depths}")
        self.hparams: dict[str, Any] = {
            "widths": widths,
            "depths": depths,
            "expand": expand,
            "inner": inner,
        }
        self.backbone = Backbone(widths, depths, expand)
        self.neck = FPN(widths, inner)
        self.prob_head = Head(inner)
        self.thresh_head = Head(inner)
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1) * 255.0, persistent=False)
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1) * 255.0, persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # Text covers a small share of an image: start the maps' logits there (-2 -> 0.12),
        # as a detector's classifier bias starts at its prior.
        last = self.prob_head.body[-1]
        nn.init.constant_(last.bias, -2.0)  # type: ignore[arg-type]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = (images.float() - self.mean) / self.std
        feats = self.neck(self.backbone(x))
        prob = torch.sigmoid(self.prob_head(feats))
        if not self.training:
            return prob
        thresh = torch.sigmoid(self.thresh_head(feats))
        binary = torch.sigmoid(DB_K * (prob - thresh))
        return torch.cat([prob, thresh, binary], dim=1)


def build_detector(hparams: dict[str, Any] | None = None) -> DBNet:
    return DBNet(**(hparams or {}))


def deepen_from(model: DBNet, state: dict[str, torch.Tensor], hparams: dict[str, Any]) -> int:
    """Load the weights ``state`` of a shallower detector of ``hparams`` into ``model``,
    which computes the same function: the same widths, expansion and neck, and in each
    backbone stage the old blocks first and more blocks after them. An added block keeps
    the stage's shape (stride 1, a shortcut), and its projection's BatchNorm starts at
    zero scale and shift, so it starts as the identity and learns from there (a
    zero-initialised residual). Returns how many blocks were added; ``ValueError``, naming
    both shapes, where ``model`` is not such a deepening of ``hparams``."""
    old, new = hparams, model.hparams
    same = all(old[k] == new[k] for k in ("widths", "expand", "inner"))
    if not same or any(a > b for a, b in zip(old["depths"], new["depths"])):
        raise ValueError(
            f"a detector of {new} is not a deepening of one of {old}: the same widths, "
            "expand and inner, and no fewer blocks in any stage"
        )
    ours = model.state_dict()
    for name, value in state.items():
        if name not in ours or ours[name].shape != value.shape:
            raise ValueError(f"{name}: the weights do not fit a detector of {new}")
        ours[name] = value
    added = 0
    for i, (was, now) in enumerate(zip(old["depths"], new["depths"])):
        for j in range(was, now):
            bn = model.backbone.stages[i][j].block[2][1]  # type: ignore[index]
            ours[f"backbone.stages.{i}.{j}.block.2.1.weight"] = torch.zeros_like(bn.weight)
            ours[f"backbone.stages.{i}.{j}.block.2.1.bias"] = torch.zeros_like(bn.bias)
            added += 1
    model.load_state_dict(ours)
    return added
