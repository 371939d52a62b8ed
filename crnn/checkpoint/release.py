"""Release files: inference-only copies of a checkpoint, named by their SHA-256."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from crnn import __version__
from crnn.checkpoint.format import model_from_checkpoint
from crnn.io import atomic_save, sha256_file

_HASHED_NAME = re.compile(r"^(?P<stem>.+)-(?P<hash>[0-9a-f]{8})$")


def release_checkpoint(
    ckpt: dict[str, Any], fp16: bool = False, source: str = "checkpoint"
) -> dict[str, Any]:
    """An inference-only copy of a crnn-ocr checkpoint: weights, model config, charset,
    image spec and a little provenance; optimizer, scheduler, scaler and RNG state dropped.

    The weights go through the rebuilt model, so a file that would not load is never
    released. ``fp16`` stores floating-point weights as float16 (half the size); loading
    upcasts them to float32 (:func:`model_from_checkpoint`).
    """
    bundle = model_from_checkpoint(ckpt, source)
    earlier = ckpt.get("release", {})  # re-releasing keeps the provenance
    sd = {k: v.detach().clone() for k, v in bundle.model.state_dict().items()}
    if fp16:
        sd = {k: v.half() if v.is_floating_point() else v for k, v in sd.items()}
    calibration = ckpt.get("calibration")  # the confidence temperature, if fitted
    averaged = ckpt.get("averaged", earlier.get("averaged"))
    config = ckpt.get("config")
    synth = (
        config["data"].get("synth")
        if isinstance(config, dict) and isinstance(config.get("data"), dict)
        else earlier.get("synth")
    )
    return {
        **bundle.header(sd),
        **({"calibration": dict(calibration)} if calibration else {}),
        "release": {
            "dtype": "float16" if fp16 else "float32",
            "step": int(ckpt.get("step", earlier.get("step", 0))),
            "metrics": {
                k: float(v) for k, v in ckpt.get("metrics", earlier.get("metrics", {})).items()
            },
            "crnn_ocr_version": __version__,
            # The generator settings the model learnt from (plain types): fine-tuning
            # replays them (train.replay), benchmarks read its training fonts off them.
            **({"synth": synth} if synth is not None else {}),
            # An average of several checkpoints (crnn.checkpoint.average): its inputs.
            **({"averaged": averaged} if averaged else {}),
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
