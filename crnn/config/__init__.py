"""Typed configuration: nested dataclasses, filled from YAML and checked overrides.

``load_config("configs/x.yaml", ["train.lr=3e-4"])`` starts from the defaults
(``schema``, ``synth``), merges the YAML file, then applies ``key=value`` overrides
(``loading``). Every key is checked against the dataclass fields and every value against
the field's type, and :meth:`Config.validate` checks every cross-field rule. ``arch``
holds the network layouts as data (torch-free).
"""

from crnn.config.arch import LAYOUTS, RECURRENT, SHORTCUT, output_length
from crnn.config.errors import ConfigError
from crnn.config.loading import (
    apply_overrides,
    config_from_dict,
    load_config,
    parse_override,
    save_config,
)
from crnn.config.schema import (
    AugmentConfig,
    Config,
    DataConfig,
    DetConfig,
    DistConfig,
    ModelConfig,
    TrainConfig,
    check_choices,
    choices,
)
from crnn.config.synth import SynthConfig

__all__ = [
    "LAYOUTS",
    "RECURRENT",
    "SHORTCUT",
    "AugmentConfig",
    "Config",
    "ConfigError",
    "DataConfig",
    "DetConfig",
    "DetConfig",
    "DistConfig",
    "ModelConfig",
    "SynthConfig",
    "TrainConfig",
    "apply_overrides",
    "check_choices",
    "choices",
    "config_from_dict",
    "load_config",
    "output_length",
    "parse_override",
    "save_config",
]
