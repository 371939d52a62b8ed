"""Weights from elsewhere: other projects' layouts, and another charset's classifier.

:func:`import_state_dict` renames the weights of meijieru/crnn.pytorch, chineseocr (its
LSTM and its dense model), Sierkinhane/CRNN_Chinese_Characters_Rec and clovaai
None-VGG-BiLSTM-CTC to ours and wraps them in a native checkpoint with the preprocessing
each project used; :func:`adapt_to_charset` re-orders a classifier trained on another
alphabet row by row (fine-tuning).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

import torch

from crnn.checkpoint.format import (
    CheckpointError,
    ModelBundle,
    extract_state_dict,
    is_native,
    load_state_dict_checked,
    strip_prefixes,
    upcast,
)
from crnn.checkpoint.grow import grow_hidden
from crnn.config.image_spec import ImageSpec
from crnn.model import CRNN, build_model, classifier_name, hparams_from_state_dict
from crnn.text.alphabet import Charset

log = logging.getLogger(__name__)

# ---- foreign layouts -------------------------------------------------------------------

# clovaai None-VGG-BiLSTM-CTC: index in FeatureExtraction.ConvNet -> our layer name.
_CLOVA_CONVNET = {
    0: "conv0",
    3: "conv1",
    6: "conv2",
    8: "conv3",
    11: "conv4",
    12: "bn4",
    14: "conv5",
    15: "bn5",
    18: "conv6",
}

# (pattern, replacement) per layout; a key that matches none is not part of the layout.
_MEIJIERU = [
    (re.compile(r"^cnn\.conv([0-6])\.(weight|bias)$"), r"cnn.conv\1.\2"),
    (re.compile(r"^cnn\.batchnorm([246])\.(\w+)$"), r"cnn.bn\1.\2"),
    (re.compile(r"^rnn\.([01])\.rnn\.(\w+)$"), r"rnn.\1.lstm.\2"),
    (re.compile(r"^rnn\.([01])\.embedding\.(weight|bias)$"), r"rnn.\1.proj.\2"),
]
_KEY_MAPS: dict[str, list[tuple[re.Pattern[str], Any]]] = {
    "meijieru": _MEIJIERU,
    # chineseocr's crnn/network_torch.py: meijieru's CRNN, or with lstmFlag=False a linear
    # layer on the conv features instead of the LSTMs ("dense").
    "chineseocr": [*_MEIJIERU, (re.compile(r"^linear\.(weight|bias)$"), r"fc.\1")],
    # Sierkinhane/CRNN_Chinese_Characters_Rec lib/models/crnn.py: meijieru's CRNN (its
    # forward ends in log_softmax, which changes no prediction).
    "sierkinhane": _MEIJIERU,
    "clova": [
        (
            re.compile(r"^FeatureExtraction\.ConvNet\.(\d+)\.(\w+)$"),
            lambda m: (
                f"cnn.{_CLOVA_CONVNET[int(m.group(1))]}.{m.group(2)}"
                if int(m.group(1)) in _CLOVA_CONVNET
                else None
            ),
        ),
        (re.compile(r"^SequenceModeling\.([01])\.rnn\.(\w+)$"), r"rnn.\1.lstm.\2"),
        (re.compile(r"^SequenceModeling\.([01])\.linear\.(weight|bias)$"), r"rnn.\1.proj.\2"),
        (re.compile(r"^Prediction\.(weight|bias)$"), r"fc.\1"),
    ],
}
FOREIGN_LAYOUTS = {
    "meijieru": "meijieru/crnn.pytorch CRNN(imgH=32, nc, nclass, nh): arch 'crnn'",
    "chineseocr": "chineseocr/chineseocr crnn/network_torch.py CRNN(32, 1, nclass, 256), "
    "lstmFlag=True (arch 'crnn') or False (arch 'dense')",
    "sierkinhane": "Sierkinhane/CRNN_Chinese_Characters_Rec CRNN ({'state_dict', 'epoch', "
    "'best_acc'}): arch 'crnn', its normalisation (mean 0.588, std 0.193) and 280 -> 160 "
    "px width squeeze",
    "clova": "clovaai/deep-text-recognition-benchmark None-VGG-BiLSTM-CTC: arch 'vgg'",
    "crnn-ocr": "a bare crnn-ocr state_dict (no charset inside): arch from its keys",
}
_ARCH = {"meijieru": "crnn", "sierkinhane": "crnn", "clova": "vgg"}
# The preprocessing each project trained with, where it differs from ours (ImageSpec):
# Sierkinhane's config (lib/config/360CC_config.yaml) normalises with MEAN 0.588 and
# STD 0.193 and squeezes every line from its original 280 px to 160 px (demo.py applies
# the same OW/W ratio to an image of any width). meijieru and chineseocr use
# (x / 255 - 0.5) / 0.5 at height 32, ratio kept: our own.
_SPECS: dict[str, dict[str, float]] = {
    "sierkinhane": {"mean": 0.588, "std": 0.193, "width_scale": 160 / 280},
}


def detect_layout(state_dict: dict[str, Any], wrapper: dict[str, Any] | None = None) -> str:
    """``meijieru``, ``chineseocr`` (its dense model), ``sierkinhane`` (a meijieru network
    saved in Sierkinhane's ``{'state_dict', 'epoch', 'best_acc'}``), ``clova`` or
    ``crnn-ocr`` from the (prefix-free) key names and the file's top-level keys."""
    keys = list(strip_prefixes(state_dict))
    if any(k.startswith(("FeatureExtraction.", "SequenceModeling.", "Prediction.")) for k in keys):
        return "clova"
    if "linear.weight" in keys and any(k.startswith("cnn.conv") for k in keys):
        return "chineseocr"
    if any(k.startswith(("cnn.batchnorm", "rnn.0.embedding", "rnn.0.rnn.")) for k in keys):
        if wrapper is not None and "state_dict" in wrapper and "best_acc" in wrapper:
            return "sierkinhane"
        return "meijieru"
    if any(k.startswith(("rnn.0.lstm.", "cnn.bn")) for k in keys):
        return "crnn-ocr"
    raise CheckpointError(
        "cannot tell which network these weights belong to (first keys: "
        f"{', '.join(keys[:6])}). Known layouts: "
        + "; ".join(f"{k} ({v})" for k, v in FOREIGN_LAYOUTS.items())
    )


def _same_keys(asked: str, found: str) -> bool:
    """Layouts whose key names are the same network's, told apart only by how the file
    was saved (an explicit ``--layout`` then decides the preprocessing)."""
    meijieru = {"meijieru", "chineseocr", "sierkinhane"}
    return (
        asked in meijieru
        and found in meijieru
        and not (found == "chineseocr" and asked != "chineseocr")
    )


def map_foreign_keys(state_dict: dict[str, Any], layout: str) -> dict[str, Any]:
    """Rename a foreign state_dict's keys to crnn-ocr's (prefixes stripped first).

    Raises :class:`CheckpointError` listing every key that is not part of ``layout``
    (e.g. a TPS ``Transformation`` or an attention ``Prediction`` from another clova
    variant, which crnn-ocr cannot hold).
    """
    sd = strip_prefixes(state_dict)
    if layout == "crnn-ocr":
        return sd
    if layout not in _KEY_MAPS:
        raise CheckpointError(
            f"unknown layout {layout!r}; expected one of {', '.join(FOREIGN_LAYOUTS)}"
        )
    out: dict[str, Any] = {}
    foreign: list[str] = []
    for k, v in sd.items():
        for pattern, repl in _KEY_MAPS[layout]:
            m = pattern.match(k)
            if m:
                new = repl(m) if callable(repl) else m.expand(repl)
                if new is not None:
                    out[new] = v
                    break
        else:
            foreign.append(k)
    if foreign:
        raise CheckpointError(
            f"{len(foreign)} keys are not part of the {layout} layout "
            f"({FOREIGN_LAYOUTS[layout]}): {', '.join(foreign[:12])}. Only that exact network "
            "can be imported; other variants (TPS, ResNet, attention) have no crnn-ocr equivalent."
        )
    return out


def import_state_dict(
    obj: dict[str, Any],
    charset: Charset,
    layout: str = "auto",
    spec: ImageSpec | None = None,
    source: str = "state_dict",
) -> dict[str, Any]:
    """Turn another project's weights into a native crnn-ocr checkpoint.

    Args:
        obj: what ``torch.load`` returned: a state_dict (``module.`` prefixes and all), or
            a dict holding one under ``state_dict``/``model``/...
        charset: the alphabet the network was trained with, in its class order; class 0
            is the CTC blank, ``charset.chars[i]`` is class ``i + 1``.
        layout: ``meijieru``, ``clova``, ``crnn-ocr`` or ``auto`` (from the key names).
        spec: preprocessing to store (default: ``ImageSpec()``, 32 px high); ``rgb`` is
            set from the first conv's input channels.

    Returns:
        A checkpoint dict (``format``, ``version``, ``model``, ``model_config``,
        ``charset``, ``image``, ``imported``) that loads with :func:`model_from_checkpoint`
        and serves ``predict``, ``eval`` and ``train.init_from``.

    Raises:
        CheckpointError: unknown keys, a classifier whose size does not fit ``charset``
            (naming both sizes), or shapes that do not fit the layout.
    """
    sd = strip_prefixes(extract_state_dict(obj, source))
    found = detect_layout(sd, obj)
    if layout == "auto":
        layout = found
    elif layout != found and not _same_keys(layout, found):
        raise CheckpointError(
            f"{source} looks like the {found} layout, not {layout} as requested "
            f"({FOREIGN_LAYOUTS[found]}); pass --layout {found} or --layout auto"
        )
    sd = map_foreign_keys(sd, layout)
    if layout == "chineseocr":
        arch = "crnn" if "rnn.1.proj.weight" in sd else "dense"
    else:
        arch = _ARCH.get(layout) or ("vgg" if "fc.weight" in sd else "crnn")
    try:
        hp = hparams_from_state_dict(sd, arch)
    except KeyError as e:
        raise CheckpointError(
            f"the weights lack {e.args[0]!r}, which a {arch!r} model needs"
        ) from None
    if hp["num_classes"] != charset.num_classes:
        raise CheckpointError(
            f"{source}: the classifier has {hp['num_classes']} classes "
            f"({hp['num_classes'] - 1} characters + blank), but the alphabet "
            f"{charset.name!r} gives {charset.num_classes} ({len(charset)} characters + "
            "blank). Pass the exact alphabet the model was trained with, in its order, "
            "without the blank."
        )
    model = build_model(hp, num_classes=hp["num_classes"], in_channels=hp["in_channels"])
    for k, v in model.state_dict().items():
        # Files saved before PyTorch 0.4.1 have no BatchNorm batch counter; it only
        # matters for momentum=None, which no layout uses.
        if k.endswith("num_batches_tracked") and k not in sd:
            sd[k] = torch.zeros_like(v)
    load_state_dict_checked(model, upcast(sd), source)
    if hp["in_channels"] not in (1, 3):
        raise CheckpointError(
            f"{source} takes {hp['in_channels']}-channel images; only grayscale (1) and RGB (3) "
            "inputs can be preprocessed"
        )
    # Grayscale or RGB is fixed by the first conv's weights, not a choice; the
    # normalisation and width squeeze by the project the weights come from.
    spec = dataclasses.replace(
        spec or ImageSpec(), rgb=hp["in_channels"] == 3, **_SPECS.get(layout, {})
    )
    return {
        **ModelBundle(model, charset, spec).header(),
        "imported": {"layout": layout, "source": Path(source).name},
    }


# ---- fine-tuning with another charset --------------------------------------------------


@dataclasses.dataclass
class CharsetAdaptation:
    """What :func:`adapt_to_charset` did to the classifier's rows (characters)."""

    old_name: str
    new_name: str
    kept: list[str] = dataclasses.field(default_factory=list)
    added: list[str] = dataclasses.field(default_factory=list)
    dropped: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        def chars(cs: list[str]) -> str:
            shown = "".join(cs[:40]) + ("..." if len(cs) > 40 else "")
            return f" ({shown!r})" if cs else ""

        return (
            f"charset {self.old_name!r} -> {self.new_name!r}: kept {len(self.kept)} rows "
            f"(and the blank), initialised {len(self.added)} new ones{chars(self.added)}, "
            f"dropped {len(self.dropped)}{chars(self.dropped)}"
        )


def adapt_to_charset(
    state_dict: dict[str, Any], old_charset: Charset, new_charset: Charset, model: CRNN
) -> tuple[dict[str, Any], CharsetAdaptation]:
    """Re-order the classifier of ``state_dict`` (trained with ``old_charset``) for
    ``new_charset``: the blank row and the rows of characters both charsets share are
    kept (moved to their new ids); rows of new characters come from ``model``'s own
    freshly initialised classifier; rows of characters the new charset lacks are dropped.
    All other weights are returned unchanged.

    The classifier is the last BiLSTM's ``proj`` (arch ``crnn``) or ``fc`` (``vgg``):
    weight ``(K, F)`` and bias ``(K,)``, ``K = charset.num_classes``.
    """
    sd = dict(state_dict)
    report = CharsetAdaptation(old_charset.name, new_charset.name)
    prefix = classifier_name(model.arch)
    own = model.state_dict()
    names = (f"{prefix}.weight", f"{prefix}.bias")
    if any(n not in sd for n in names):
        return sd, report  # another layout: the strict load names what is missing
    if sd[names[0]].shape[0] != old_charset.num_classes:
        raise CheckpointError(
            f"the classifier {names[0]} has {sd[names[0]].shape[0]} rows but the checkpoint's "
            f"charset {old_charset.name!r} gives {old_charset.num_classes}; the file is "
            "inconsistent"
        )
    if sd[names[0]].shape[1:] != own[names[0]].shape[1:]:
        return sd, report  # different widths: the strict load reports both shapes
    for name in names:
        old, new = sd[name], own[name].detach().clone().to(sd[name].dtype)
        new[0] = old[0]  # the CTC blank
        for i, ch in enumerate(new_charset.chars, start=1):
            if ch in old_charset:
                new[i] = old[old_charset.index(ch)]
        sd[name] = new
    report.kept = [c for c in new_charset.chars if c in old_charset]
    report.added = [c for c in new_charset.chars if c not in old_charset]
    report.dropped = [c for c in old_charset.chars if c not in new_charset]
    return sd, report


def init_state_dict(
    state: dict[str, Any], model: CRNN, charset: Charset, source: str = "checkpoint"
) -> dict[str, Any]:
    """Weights from a loaded file for fine-tuning ``model`` on ``charset``
    (``train.init_from``): prefixes stripped, float16 upcast, BiLSTMs grown to a wider
    ``model.hidden`` (:mod:`crnn.checkpoint.grow`), and the classifier adapted (and the
    change logged) when the checkpoint's charset differs. A bare state_dict has
    no charset, so its classifier must already fit."""
    sd = upcast(strip_prefixes(extract_state_dict(state, source)))
    try:
        sd, grown = grow_hidden(sd, model)
    except ValueError as e:
        raise CheckpointError(f"{source}: {e}") from None
    if grown:
        log.info("%s: %s", source, grown)
    if is_native(state):
        theirs = Charset.from_dict(state["charset"])
        if theirs.chars != charset.chars:
            sd, report = adapt_to_charset(sd, theirs, charset, model)
            log.info("%s: %s", source, report.summary())
    return sd
