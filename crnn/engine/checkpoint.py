"""Checkpoints: self-describing, atomic, safe to load, loadable from any wrapper.

A checkpoint is a dict of plain types and tensors, so ``torch.load(weights_only=True)``
reads it and no code runs on load:

``format``, ``version``; ``model`` (state_dict of the *bare* model: no ``module.`` or
``_orig_mod.`` prefix ever reaches disk); ``model_config`` (arch, channels, hidden,
in_channels, num_classes); ``charset``; ``image`` (the preprocessing spec);
``config`` (the whole run config); and for training checkpoints ``step``, ``epoch``,
``step_in_epoch``, ``optimizer``, ``scheduler``, ``scaler``, ``rng``, ``best``.
Release files (:func:`save_release`) keep only the first six plus ``release`` (dtype,
step, metrics); imported ones (:func:`import_state_dict`) add ``imported`` (layout,
source file name).

Writes go to a temporary file in the same directory, are fsync'd and then renamed
over the target (``os.replace`` is atomic on POSIX), so a run killed at any moment
leaves either the old or the new file, never a torn one.

Loading strips wrapper prefixes in any combination (:func:`strip_prefixes`), and a
strict load names every missing and unexpected key and every shape difference
(:func:`load_state_dict_checked`). Weights from other projects are renamed to ours
(:func:`import_state_dict`); a classifier trained on another charset is re-ordered
row by row (:func:`adapt_to_charset`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import pickle
import random
import re
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import nn

from crnn import __version__
from crnn.charset import Charset
from crnn.data.transforms import ImageSpec
from crnn.model import CRNN, build_model

FORMAT = "crnn-ocr"
VERSION = 1
PREFIXES = ("module.", "_orig_mod.")

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit."""


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], Any]) -> Path:
    """Write a file atomically: ``write(f)`` fills a temporary file in the same folder,
    which is fsync'd and renamed over ``path``; a crash leaves the old file or the new
    one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: torch.save(obj, f))


def strip_prefixes(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Remove ``module.`` (DataParallel/DDP) and ``_orig_mod.`` (torch.compile) from
    the start of every key, in any order and number."""
    out = {}
    for k, v in state_dict.items():
        changed = True
        while changed:
            changed = False
            for p in PREFIXES:
                if k.startswith(p):
                    k = k[len(p) :]
                    changed = True
        out[k] = v
    return out


def load_state_dict_checked(
    model: nn.Module, state_dict: dict[str, Any], source: str = "checkpoint"
) -> None:
    """Strict load after prefix stripping; on mismatch, name every missing and
    unexpected key and every shape difference."""
    sd = strip_prefixes(state_dict)
    own = model.state_dict()
    missing = [k for k in own if k not in sd]
    unexpected = [k for k in sd if k not in own]
    shapes = [
        f"{k}: checkpoint {tuple(sd[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in sd and hasattr(sd[k], "shape") and tuple(sd[k].shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing keys ({len(missing)}): {', '.join(missing[:20])}")
        if unexpected:
            parts.append(f"unexpected keys ({len(unexpected)}): {', '.join(unexpected[:20])}")
        if shapes:
            parts.append(f"shape mismatches ({len(shapes)}): {'; '.join(shapes[:20])}")
        raise CheckpointError(
            f"{source} does not fit the model: " + " | ".join(parts) + ". A different charset "
            "changes the classifier's shape (fine-tune with --set train.init_from=CKPT); a "
            "different architecture needs matching model.* settings, or "
            "tools/convert_checkpoint.py import for foreign layouts."
        )
    model.load_state_dict(sd, strict=True)


def load_checkpoint(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)``: tensors, containers and
    plain types only, so no code in the file ever runs. Clear errors for every failure.

    ``path`` may be a file or a run directory (its ``best.pt``, else ``last.pt``).
    Raises :class:`CheckpointError`.
    """
    path = Path(path)
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / name).is_file():
                path = path / name
                break
        else:
            raise CheckpointError(f"{str(path)!r} is a directory without best.pt or last.pt")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} not found")
    try:
        # weights_only=True, passed explicitly: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD cannot
        # override an explicit argument.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*pickle protocol.*")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(_unpickling_message(str(path), str(e))) from None
    except (EOFError, zipfile.BadZipFile) as e:
        raise CheckpointError(
            f"cannot read {str(path)!r}: the file is empty, truncated or corrupt ({e or 'EOF'}). "
            "Checkpoints are written atomically, so look for an older one (best.pt, last.pt)."
        ) from None
    except OSError as e:
        raise CheckpointError(f"cannot read {str(path)!r}: {e}") from None
    except RuntimeError as e:
        raise CheckpointError(
            f"cannot read {str(path)!r}: {str(e)[:200]}. The file is truncated, corrupt or not "
            "a torch.save file (checkpoints are written atomically, so look for an older one)."
        ) from None
    except Exception as e:  # torch.load raises KeyError, RuntimeError... on non-checkpoints
        raise CheckpointError(
            f"{str(path)!r} is not a PyTorch checkpoint ({type(e).__name__}: "
            f"{str(e)[:200]}). Expected a file written by torch.save: a crnn-ocr checkpoint, a "
            "release file, or a state_dict to import with tools/convert_checkpoint.py import."
        ) from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(
            f"{str(path)!r} holds a {type(ckpt).__name__}, expected a dict (a crnn-ocr "
            "checkpoint or a state_dict)"
        )
    return ckpt


def _unpickling_message(path: str, err: str) -> str:
    """Say whether the file tried to run code (a disallowed global) or is just not a
    checkpoint, instead of passing on torch's advice to switch weights_only off."""
    match = re.search(r"Unsupported global: GLOBAL ([\w.]+)", err)
    if match or "not an allowed global" in err:
        what = match.group(1) if match else "a Python object"
        return (
            f"refusing to load {path!r}: it holds a pickled {what}, which would run code when "
            "unpickled. crnn-ocr reads checkpoints with torch.load(weights_only=True) and never "
            "executes anything from a file. If the file is yours and you trust it (e.g. a whole "
            "model saved by another project), load it there and re-save model.state_dict() "
            "with torch.save, then import that with tools/convert_checkpoint.py import."
        )
    detail = re.search(r"WeightsUnpickler error:\s*([^\n]+)", err)
    reason = detail.group(1).strip() if detail else err.splitlines()[0][:200]
    return (
        f"{path!r} is not a PyTorch checkpoint that can be read safely ({reason}). Expected a "
        "file written by torch.save (a crnn-ocr checkpoint, a release file, or a state_dict to "
        "import with tools/convert_checkpoint.py import)."
    )


def is_native(ckpt: dict[str, Any]) -> bool:
    return ckpt.get("format") == FORMAT


def model_from_checkpoint(
    ckpt: dict[str, Any], source: str = "checkpoint"
) -> tuple[CRNN, Charset, ImageSpec]:
    """Rebuild the bare model, its charset and its preprocessing from a checkpoint."""
    if not is_native(ckpt):
        keys = ", ".join(list(ckpt)[:8])
        raise CheckpointError(
            f"{source} is not a crnn-ocr checkpoint (top-level keys: {keys}). A bare state_dict "
            "from another project can be imported with tools/convert_checkpoint.py import."
        )
    if ckpt.get("version", 0) > VERSION:
        raise CheckpointError(
            f"{source} has format version {ckpt['version']}, newer than this crnn-ocr "
            f"understands ({VERSION}); upgrade crnn-ocr"
        )
    charset = Charset.from_dict(ckpt["charset"])
    spec = ImageSpec.from_dict(ckpt["image"])
    mc = ckpt["model_config"]
    if mc["num_classes"] != charset.num_classes:
        raise CheckpointError(
            f"{source}: model has {mc['num_classes']} classes but its charset "
            f"{charset.name!r} gives {charset.num_classes}; the file is inconsistent"
        )
    model = build_model(mc, num_classes=mc["num_classes"], in_channels=mc["in_channels"])
    load_state_dict_checked(model, upcast(ckpt["model"]), source)
    return model, charset, spec


def upcast(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Half-precision tensors (an ``--fp16`` release file) as float32; others unchanged."""
    return {
        k: v.float() if isinstance(v, torch.Tensor) and v.dtype in _HALF else v
        for k, v in state_dict.items()
    }


_HALF = (torch.float16, torch.bfloat16)


# ---- state_dict containers and prefixes ------------------------------------------------

# Where other projects' training scripts keep the weights inside a saved dict.
_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "net", "state")


def is_state_dict(obj: Any) -> bool:
    """A non-empty dict of tensors with string keys (what ``module.state_dict()`` gives)."""
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())
    )


def extract_state_dict(obj: dict[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """The weights inside a loaded file: a crnn-ocr checkpoint's ``model``, a bare
    state_dict, or one kept under a common key (``state_dict``, ``model``, ...)."""
    if is_native(obj):
        return obj["model"]
    if is_state_dict(obj):
        return obj
    for key in _WRAPPER_KEYS:
        if is_state_dict(obj.get(key)):
            return obj[key]
    keys = ", ".join(repr(k) for k in list(obj)[:8])
    raise CheckpointError(
        f"{source} holds neither a crnn-ocr checkpoint nor a state_dict (a dict of tensors); "
        f"its top-level keys are {keys}. Save the model's weights with "
        "torch.save(model.state_dict(), path) and convert that."
    )


def add_prefix(state_dict: dict[str, Any], prefix: str = "module.") -> dict[str, Any]:
    """Keys as a wrapped model names them: ``prefix`` + the bare key (existing
    ``module.``/``_orig_mod.`` prefixes are removed first, so it is never doubled)."""
    return {prefix + k: v for k, v in strip_prefixes(state_dict).items()}


def convert_prefixes(obj: dict[str, Any], to: str, source: str = "checkpoint") -> dict[str, Any]:
    """Rewrite the weight keys of a loaded file for single-device (``to="single"``: bare
    keys) or DataParallel/DDP (``to="dp"``: ``module.`` keys) consumers. A crnn-ocr
    checkpoint stays a checkpoint (only ``model`` changes); a state_dict stays one."""
    if to not in ("single", "dp"):
        raise ValueError(f"to must be 'single' or 'dp', got {to!r}")
    sd = extract_state_dict(obj, source)
    new = strip_prefixes(sd) if to == "single" else add_prefix(sd, "module.")
    if sd is obj:
        return new
    key = next(k for k, v in obj.items() if v is sd)  # "model", "state_dict", ...
    return {**obj, key: new}


# ---- release files ---------------------------------------------------------------------

_HASHED_NAME = re.compile(r"^(?P<stem>.+)-(?P<hash>[0-9a-f]{8})$")


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def release_checkpoint(
    ckpt: dict[str, Any], fp16: bool = False, source: str = "checkpoint"
) -> dict[str, Any]:
    """An inference-only copy of a crnn-ocr checkpoint: weights, model config, charset,
    image spec and a little provenance; optimizer, scheduler, scaler and RNG state dropped.

    The weights go through the rebuilt model, so a file that would not load is never
    released. ``fp16`` stores floating-point weights as float16 (half the size); loading
    upcasts them to float32 (:func:`model_from_checkpoint`).
    """
    model, charset, spec = model_from_checkpoint(ckpt, source)
    earlier = ckpt.get("release", {})  # re-releasing keeps the provenance
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if fp16:
        sd = {k: v.half() if v.is_floating_point() else v for k, v in sd.items()}
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": sd,
        "model_config": dict(model.hparams),
        "charset": charset.to_dict(),
        "image": spec.to_dict(),
        "release": {
            "dtype": "float16" if fp16 else "float32",
            "step": int(ckpt.get("step", earlier.get("step", 0))),
            "metrics": {
                k: float(v) for k, v in ckpt.get("metrics", earlier.get("metrics", {})).items()
            },
            "crnn_ocr_version": __version__,
        },
    }


def save_release(
    ckpt: dict[str, Any],
    out: str | os.PathLike[str],
    fp16: bool = False,
    source: str = "checkpoint",
) -> Path:
    """Write :func:`release_checkpoint` as ``<stem>-<sha256[:8]><suffix>`` beside ``out``
    (torchvision's naming: the hash of the file's own bytes, so a download can be checked
    with ``sha256sum``). Returns the final path."""
    out = Path(out)
    suffix = out.suffix or ".pt"
    stem = out.name[: -len(out.suffix)] if out.suffix else out.name
    m = _HASHED_NAME.match(stem)
    if m:  # re-releasing a release file: replace its hash, don't append a second one
        stem = m.group("stem")
    tmp = atomic_save(release_checkpoint(ckpt, fp16, source), out.with_name(f".{stem}.release"))
    final = out.with_name(f"{stem}-{sha256_file(tmp)[:8]}{suffix}")
    os.replace(tmp, final)
    return final


# ---- foreign layouts -------------------------------------------------------------------

# clovaai None-VGG-BiLSTM-CTC: index in FeatureExtraction.ConvNet -> our layer name.
_CLOVA_CONVNET = {
    0: "conv0", 3: "conv1", 6: "conv2", 8: "conv3", 11: "conv4", 12: "bn4", 14: "conv5",
    15: "bn5", 18: "conv6",
}  # fmt: skip

# (pattern, replacement) per layout; a key that matches none is not part of the layout.
_KEY_MAPS: dict[str, list[tuple[re.Pattern[str], Any]]] = {
    "meijieru": [
        (re.compile(r"^cnn\.conv([0-6])\.(weight|bias)$"), r"cnn.conv\1.\2"),
        (re.compile(r"^cnn\.batchnorm([246])\.(\w+)$"), r"cnn.bn\1.\2"),
        (re.compile(r"^rnn\.([01])\.rnn\.(\w+)$"), r"rnn.\1.lstm.\2"),
        (re.compile(r"^rnn\.([01])\.embedding\.(weight|bias)$"), r"rnn.\1.proj.\2"),
    ],
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
    "clova": "clovaai/deep-text-recognition-benchmark None-VGG-BiLSTM-CTC: arch 'vgg'",
    "crnn-ocr": "a bare crnn-ocr state_dict (no charset inside): arch from its keys",
}
_ARCH = {"meijieru": "crnn", "clova": "vgg"}


def detect_layout(state_dict: dict[str, Any]) -> str:
    """``meijieru``, ``clova`` or ``crnn-ocr`` from the (prefix-free) key names."""
    keys = list(strip_prefixes(state_dict))
    if any(k.startswith(("FeatureExtraction.", "SequenceModeling.", "Prediction.")) for k in keys):
        return "clova"
    if any(k.startswith(("cnn.batchnorm", "rnn.0.embedding", "rnn.0.rnn.")) for k in keys):
        return "meijieru"
    if any(k.startswith(("rnn.0.lstm.", "cnn.bn")) for k in keys):
        return "crnn-ocr"
    raise CheckpointError(
        "cannot tell which network these weights belong to (first keys: "
        f"{', '.join(keys[:6])}). Known layouts: "
        + "; ".join(f"{k} ({v})" for k, v in FOREIGN_LAYOUTS.items())
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


def _hparams_from_keys(sd: dict[str, Any], arch: str) -> dict[str, Any]:
    """Model hyper-parameters read off the weight shapes."""
    try:
        classifier = sd[f"{classifier_prefix(arch)}.weight"]
        return {
            "arch": arch,
            "channels": [int(sd[f"cnn.conv{i}.weight"].shape[0]) for i in range(7)],
            "hidden": int(sd["rnn.0.lstm.weight_hh_l0"].shape[1]),
            "in_channels": int(sd["cnn.conv0.weight"].shape[1]),
            "num_classes": int(classifier.shape[0]),
        }
    except KeyError as e:
        raise CheckpointError(
            f"the weights lack {e.args[0]!r}, which a {arch!r} model needs"
        ) from None


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
    found = detect_layout(sd)
    if layout == "auto":
        layout = found
    elif layout != found:
        raise CheckpointError(
            f"{source} looks like the {found} layout, not {layout} as requested "
            f"({FOREIGN_LAYOUTS[found]}); pass --layout {found} or --layout auto"
        )
    sd = map_foreign_keys(sd, layout)
    arch = _ARCH.get(layout) or ("vgg" if "fc.weight" in sd else "crnn")
    hp = _hparams_from_keys(sd, arch)
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
    # Grayscale or RGB is fixed by the first conv's weights, not a choice.
    spec = dataclasses.replace(spec or ImageSpec(), rgb=hp["in_channels"] == 3)
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model.state_dict(),
        "model_config": dict(model.hparams),
        "charset": charset.to_dict(),
        "image": spec.to_dict(),
        "imported": {"layout": layout, "source": Path(source).name},
    }


# ---- fine-tuning with another charset --------------------------------------------------


def classifier_prefix(arch: str) -> str:
    """State-dict prefix of the layer whose rows are the classes."""
    return "fc" if arch == "vgg" else "rnn.1.proj"


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
    prefix = classifier_prefix(model.arch)
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
    (``train.init_from``): prefixes stripped, float16 upcast, and the classifier adapted
    (and the change logged) when the checkpoint's charset differs. A bare state_dict has
    no charset, so its classifier must already fit."""
    sd = upcast(strip_prefixes(extract_state_dict(state, source)))
    if is_native(state):
        theirs = Charset.from_dict(state["charset"])
        if theirs.chars != charset.chars:
            sd, report = adapt_to_charset(sd, theirs, charset, model)
            log.info("%s: %s", source, report.summary())
    return sd


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)
