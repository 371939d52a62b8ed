"""Fine-tuning that keeps a model's general reading: the generator's data in every batch.

Fine-tuning a recognizer on a few hundred lines of one domain (one face, one
background, one vocabulary) teaches it that domain and makes it forget the rest: the
commonest complaint about every CRNN toolkit (cnocr #317, PaddleOCR #8515,
CRNN_Chinese_Characters_Rec #75, chineseocr #155). With ``train.init_from`` and data of
the user's own, a share of every batch (``train.replay``) is drawn from the synthetic
generator, configured as it was when the model learnt to read (the init checkpoint's
``data.synth``, or a release file's ``release.synth``), and the run also validates on a
fixed set of that generator's lines (``general``), so the log shows both figures.
"""

from __future__ import annotations

import logging
from typing import Any

from crnn.config import Config, ConfigError, SynthConfig, config_from_dict

log = logging.getLogger(__name__)

# Share of each batch drawn from the generator when replay is "auto" and on.
AUTO_SHARE = 0.5


def share(cfg: Config, init_ckpt: dict[str, Any] | None = None) -> float:
    """The share of each global batch drawn from the generator (0: no replay).

    ``"auto"``: :data:`AUTO_SHARE` for a fine-tune (``train.init_from``) on data that does
    not already hold the generator, from a checkpoint that records the generator it
    learnt from (``init_ckpt``, when given, is checked for that); else 0."""
    setting = cfg.train.replay
    if setting == "auto":
        own_data = bool(cfg.data.train) and "synth" not in cfg.data.train
        if not (cfg.train.init_from and own_data):
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
    from crnn.checkpoint import load_checkpoint
    from crnn.engine.data import Replay

    init = load_checkpoint(cfg.train.init_from)
    fraction = share(cfg, init)
    if fraction <= 0:
        return None
    log.info(
        "fine-tuning keeps the model's general reading: %.0f %% of every batch comes from "
        "the synthetic generator it learnt from, and validation adds its lines as "
        "'general' (train.replay; 0 turns this off)", 100 * fraction,
    )  # fmt: skip
    return Replay(fraction, synth_config(cfg, init))
