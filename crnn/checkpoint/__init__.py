"""Checkpoints: the format and its one header owner (``format``), release files
(``release``), weights from other layouts or charsets (``foreign``), and the weighted
mean of several checkpoints of one model (``average``).

Below the training engine: predicting, evaluating and exporting load checkpoints from
here without importing ``crnn.engine``. Training state (optimizer, RNG, best metric)
and saving during training live in ``crnn.engine.state``.
"""

from crnn.checkpoint.average import average_checkpoints, parse_shares
from crnn.checkpoint.foreign import (
    FOREIGN_LAYOUTS,
    CharsetAdaptation,
    adapt_to_charset,
    detect_layout,
    import_state_dict,
    init_state_dict,
    map_foreign_keys,
)
from crnn.checkpoint.format import (
    FORMAT,
    PREFIXES,
    VERSION,
    CheckpointError,
    ModelBundle,
    add_prefix,
    convert_prefixes,
    extract_state_dict,
    is_native,
    is_state_dict,
    load_checkpoint,
    load_state_dict_checked,
    model_from_checkpoint,
    strip_prefixes,
    upcast,
)
from crnn.checkpoint.release import release_checkpoint, save_release

__all__ = [
    "FOREIGN_LAYOUTS",
    "FORMAT",
    "PREFIXES",
    "VERSION",
    "CharsetAdaptation",
    "CheckpointError",
    "ModelBundle",
    "adapt_to_charset",
    "add_prefix",
    "average_checkpoints",
    "convert_prefixes",
    "detect_layout",
    "extract_state_dict",
    "import_state_dict",
    "init_state_dict",
    "is_native",
    "is_state_dict",
    "load_checkpoint",
    "load_state_dict_checked",
    "map_foreign_keys",
    "model_from_checkpoint",
    "parse_shares",
    "release_checkpoint",
    "save_release",
    "strip_prefixes",
    "upcast",
]
