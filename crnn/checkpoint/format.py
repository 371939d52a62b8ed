"""The checkpoint format: one owner of the header, safe loading, prefixes.

A checkpoint is a dict of plain types and tensors, so ``torch.load(weights_only=True)``
reads it and no code runs on load. Its header, built only by :meth:`ModelBundle.header`:

``format``, ``version``; ``model`` (state_dict of the *bare* model: no ``module.`` or
``_orig_mod.`` prefix ever reaches disk); ``model_config`` (arch, channels, hidden,
in_channels, num_classes); ``charset``; ``image`` (the preprocessing spec).

Training checkpoints add ``config`` (the whole run config), ``step``, ``epoch``,
``step_in_epoch``, ``optimizer``, ``scheduler``, ``scaler``, ``rng``, ``best``,
``metrics`` (see ``crnn.engine.state``); release files (``crnn.checkpoint.release``) add
``release`` (dtype, step, metrics); imported ones (``crnn.checkpoint.foreign``) add
``imported`` (layout, source file name).

Loading strips wrapper prefixes in any combination (:func:`strip_prefixes`), and a
strict load names every missing and unexpected key and every shape difference
(:func:`load_state_dict_checked`). Files are written with ``crnn.io.atomic_save``.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from crnn.config.image_spec import ImageSpec
from crnn.model import CRNN, build_model
from crnn.text.alphabet import Charset

FORMAT = "crnn-ocr"
VERSION = 1
PREFIXES = ("module.", "_orig_mod.")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit."""


class ModelBundle(NamedTuple):
    """What a checkpoint describes: the bare network, its alphabet and its
    preprocessing. Unpacks as ``model, charset, spec``."""

    model: CRNN
    charset: Charset
    spec: ImageSpec

    def header(self, state_dict: dict[str, Any] | None = None) -> dict[str, Any]:
        """The checkpoint header (see the module docstring): the one place it is built.

        ``state_dict`` replaces the model's own weights (e.g. a float16 copy for a
        release file); wrapper prefixes are stripped either way."""
        sd = self.model.state_dict() if state_dict is None else state_dict
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": strip_prefixes(sd),
            "model_config": dict(self.model.hparams),
            "charset": self.charset.to_dict(),
            "image": self.spec.to_dict(),
        }

    @classmethod
    def from_checkpoint(cls, ckpt: dict[str, Any], source: str = "checkpoint") -> ModelBundle:
        """Rebuild the bare model, its charset and its preprocessing from a loaded
        checkpoint; see :func:`model_from_checkpoint`."""
        return model_from_checkpoint(ckpt, source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ModelBundle:
        """:func:`load_checkpoint` then :meth:`from_checkpoint`."""
        return model_from_checkpoint(load_checkpoint(path), str(path))


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
    # The wording moves between PyTorch versions: "Unsupported global: GLOBAL os.system",
    # "Trying to load unsupported GLOBAL posix.system whose module posix is blocked".
    match = re.search(r"unsupported(?: global:)? GLOBAL ([\w.]+)", err, re.IGNORECASE)
    if match or "not an allowed global" in err or "is blocked" in err:
        what = match.group(1) if match else "a Python object"
        return (
            f"refusing to load {path!r}: it holds a pickled {what}, which would run code when "
            "unpickled. crnn-ocr reads checkpoints with torch.load(weights_only=True) and never "
            "executes anything from a file. If the file is yours and you trust it (e.g. a whole "
            "model saved by another project), load it there and re-save model.state_dict() "
            "with torch.save, then import that with tools/convert_checkpoint.py import."
        )
    detail = re.search(r"WeightsUnpickler error:\s*([^\n]+)", err)
    # Never pass on torch's advice to retry with weights_only=False (it runs the file).
    lines = [ln for ln in err.splitlines() if ln.strip() and "weights_only" not in ln]
    reason = detail.group(1).strip() if detail else (lines[0][:200] if lines else "unreadable")
    return (
        f"{path!r} is not a PyTorch checkpoint that can be read safely ({reason}). Expected a "
        "file written by torch.save (a crnn-ocr checkpoint, a release file, or a state_dict to "
        "import with tools/convert_checkpoint.py import)."
    )


def is_native(ckpt: dict[str, Any]) -> bool:
    return ckpt.get("format") == FORMAT


def model_from_checkpoint(ckpt: dict[str, Any], source: str = "checkpoint") -> ModelBundle:
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
    return ModelBundle(model, charset, spec)


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
