"""Checkpoints: self-describing, atomic, safe to load, loadable from any wrapper.

A checkpoint is a dict of plain types and tensors, so ``torch.load(weights_only=True)``
reads it and no code runs on load:

``format``, ``version``; ``model`` (state_dict of the *bare* model: no ``module.`` or
``_orig_mod.`` prefix ever reaches disk); ``model_config`` (arch, channels, hidden,
in_channels, num_classes); ``charset``; ``image`` (the preprocessing spec);
``config`` (the whole run config); and for training checkpoints ``step``, ``epoch``,
``step_in_epoch``, ``optimizer``, ``scheduler``, ``scaler``, ``rng``, ``best``.

Writes go to a temporary file in the same directory, are fsync'd and then renamed
over the target (``os.replace`` is atomic on POSIX), so a run killed at any moment
leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from crnn.charset import Charset
from crnn.data.transforms import ImageSpec
from crnn.model import CRNN, build_model

FORMAT = "crnn-ocr"
VERSION = 1
PREFIXES = ("module.", "_orig_mod.")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit."""


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
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
    """Read a checkpoint with ``weights_only=True``; clear errors for every failure."""
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
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"refusing to load {str(path)!r}: it holds Python objects that would run code when "
            f"unpickled ({str(e).splitlines()[0][:200]}). Only load checkpoints you trust; if "
            "this one is yours from another tool, re-save its state_dict with torch.save and "
            "import it with tools/convert_checkpoint.py."
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise CheckpointError(
            f"cannot read {str(path)!r}: {e}. The file is truncated or corrupt (checkpoints are "
            "written atomically, so look for an older one such as best.pt or last.pt)."
        ) from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"{str(path)!r} holds a {type(ckpt).__name__}, expected a dict")
    return ckpt


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
    load_state_dict_checked(model, ckpt["model"], source)
    return model, charset, spec


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
