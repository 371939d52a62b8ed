"""Fine-tuning that keeps a model's general reading: the generator's data in every batch.

Fine-tuning a recognizer on a few hundred lines of one domain (one face, one
background, one vocabulary) teaches it that domain and makes it forget the rest: the
commonest complaint about every CRNN toolkit (cnocr #317, PaddleOCR #8515,
CRNN_Chinese_Characters_Rec #75, chineseocr #155). With ``train.init_from`` and data of
the user's own, a share of every batch (``train.replay``) is drawn from the synthetic
generator, configured as it was when the model learnt to read (the init checkpoint's
``data.synth``, or a release file's ``release.synth``), and the run also validates on a
fixed set of that generator's lines (``general``), so the log shows both figures.

Second, the weights a fine-tune validates and saves are a mix of the ones it started
from and the trained ones (``train.init_share``; WiSE-FT, Wortsman et al., "Robust
fine-tuning of zero-shot models", CVPR 2022): training moves the weights towards the
domain, and half the way back keeps most of what was learnt there and most of what the
model knew (docs/benchmarks.md, "Fine-tuning without forgetting", for the figures).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import torch

from crnn.config import Config, ConfigError, SynthConfig, config_from_dict
from crnn.text.alphabet import Charset

log = logging.getLogger(__name__)

# Share of each batch drawn from the generator when replay is "auto" and on.
AUTO_SHARE = 0.5
# Share of the starting weights in the saved ones when train.init_share is "auto" and on.
AUTO_INIT_SHARE = 0.5


def share(cfg: Config, init_ckpt: dict[str, Any] | None = None) -> float:
    """The share of each global batch drawn from the generator (0: no replay).

    ``"auto"``: :data:`AUTO_SHARE` for a fine-tune (``train.init_from``) on data that does
    not already hold the generator, from a checkpoint that records the generator it
    learnt from (``init_ckpt``, when given, is checked for that); else 0."""
    setting = cfg.train.replay
    if setting == "auto":
        if not _fine_tuning_own_data(cfg):
            return 0.0
        if init_ckpt is not None and recorded_synth(init_ckpt) is None:
            log.info(
                "train.init_from records no generator settings, so fine-tuning does not mix "
                "the generator in (train.replay=0.5 mixes this run's data.synth in)"
            )
            return 0.0
        return AUTO_SHARE
    if "synth" in (cfg.data.train or ["synth"]) and float(setting) > 0:
        raise ConfigError(
            f"train.replay={setting} mixes the generator into data that already holds it "
            f"(data.train={cfg.data.train or ['synth']}): set the generator's share with "
            "data.train_ratios instead, or train.replay=0"
        )
    return float(setting)


def recorded_synth(ckpt: dict[str, Any]) -> SynthConfig | None:
    """The generator settings a checkpoint learnt from: its run config's ``data.synth``,
    or a release file's ``release.synth``; None when it records neither."""
    if isinstance(ckpt.get("config"), dict) and isinstance(ckpt["config"].get("data"), dict):
        return config_from_dict({"data": ckpt["config"]["data"]}).data.synth
    synth = ckpt.get("release", {}).get("synth")
    if isinstance(synth, dict):
        return config_from_dict({"data": {"synth": synth}}).data.synth
    return None


def synth_config(cfg: Config, init_ckpt: dict[str, Any] | None) -> SynthConfig:
    """The generator settings the init checkpoint learnt from (:func:`recorded_synth`);
    the run's own ``data.synth`` when it records none."""
    found = recorded_synth(init_ckpt) if init_ckpt is not None else None
    if found is None:
        log.info("train.init_from records no generator settings: replay draws with data.synth")
        return cfg.data.synth
    return found


def plan(cfg: Config) -> Any:
    """The run's replay (a ``crnn.engine.data.Replay``: share and generator settings), or
    None when it does not replay."""
    if share(cfg) <= 0:
        return None
    from crnn.engine.data import Replay
    from crnn.engine.state import load_init

    init = load_init(cfg.train.init_from)
    fraction = share(cfg, init)
    if fraction <= 0:
        return None
    log.info(
        "fine-tuning keeps the model's general reading: %.0f %% of every batch comes from "
        "the synthetic generator it learnt from, and validation adds its lines as "
        "'general' (train.replay; 0 turns this off)",
        100 * fraction,
    )
    return Replay(fraction, synth_config(cfg, init))


def _fine_tuning_own_data(cfg: Config) -> bool:
    return bool(cfg.train.init_from) and bool(cfg.data.train) and "synth" not in cfg.data.train


class WeightMix:
    """The weights a fine-tune validates and saves: ``share`` of the ``init_from``
    weights and ``1 - share`` of the trained ones (``source``: the model, or its EMA),
    BatchNorm statistics included. :meth:`refresh` recomputes them from ``source``."""

    def __init__(
        self, source: torch.nn.Module, init: dict[str, torch.Tensor], share: float
    ) -> None:
        self.source, self.share = source, share
        self.model = copy.deepcopy(source).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        device = next(source.parameters()).device
        self.init = {k: v.detach().to(device) for k, v in init.items()}

    @torch.no_grad()
    def refresh(self) -> torch.nn.Module:
        trained = self.source.state_dict()
        for name, w in self.model.state_dict().items():
            src = trained[name]
            if w.is_floating_point():
                # src + share * (init - src), in the weight's dtype and memory format
                w.copy_(torch.lerp(src, self.init[name].to(src.dtype), self.share))
            else:
                w.copy_(src)
        return self.model


def weight_mix(cfg: Config, source: torch.nn.Module, charset: Charset) -> WeightMix | None:
    """The run's :class:`WeightMix` (``train.init_share``), or None when it does not mix:
    "auto" mixes on a fine-tune of your own data from a model with the run's charset
    (a charset that grew has classifier rows that start random: those would be halved)."""
    setting = cfg.train.init_share
    if setting == "auto" and not _fine_tuning_own_data(cfg):
        return None
    share_ = AUTO_INIT_SHARE if setting == "auto" else float(setting)
    if share_ <= 0:
        return None
    if not cfg.train.init_from:
        raise ConfigError(
            f"train.init_share={setting} mixes the starting weights into the saved ones, but "
            "the run starts from nothing: set train.init_from, or train.init_share=0"
        )
    from crnn.checkpoint import init_state_dict, is_native
    from crnn.engine.state import load_init

    ckpt = load_init(cfg.train.init_from)
    if is_native(ckpt) and Charset.from_dict(ckpt["charset"]).chars != charset.chars:
        if setting == "auto":
            log.info(
                "train.init_from has another charset, so the saved weights are the trained "
                "ones alone (train.init_share mixes only models of the same charset)"
            )
            return None
        raise ConfigError(
            f"train.init_share={setting}: {cfg.train.init_from} has another charset than this "
            "run, and the classifier rows of new characters start random; mixing would halve "
            "them. Fine-tune with the model's own charset, or train.init_share=0"
        )
    mix = WeightMix(source, init_state_dict(ckpt, source, charset, cfg.train.init_from), share_)  # type: ignore[arg-type]
    log.info(
        "fine-tuning keeps the model's general reading: the weights validated and saved are "
        "%.0f %% the ones it started from, %.0f %% the trained ones (train.init_share; 0 "
        "turns this off)",
        100 * share_,
        100 * (1 - share_),
    )
    return mix
