"""Typed configuration: nested dataclasses, filled from YAML and checked overrides.

``load_config("configs/x.yaml", ["train.lr=3e-4"])`` starts from the defaults below,
merges the YAML file, then applies ``key=value`` overrides. Every key is checked
against the dataclass fields (unknown keys are rejected with a suggestion) and every
value against the field's type, so a typo fails at start-up, not an hour in.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

# ---- architectures ---------------------------------------------------------------------
# The layer tables live here, not in crnn.model, so that code which only needs the time
# step arithmetic (the ONNX backend, which must not import torch) can read them.

# (kind, out_index or kernel, ...) per layer, in order; "conv" entries are
# (name index, kernel, padding, batchnorm, bias) and "pool" entries are (kernel, stride, padding).
_CRNN_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, True, True), ("conv", 3, 3, 1, False, True), ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 4, 3, 1, True, True), ("conv", 5, 3, 1, False, True), ("pool", (2, 2), (2, 1), (0, 1)),
    ("conv", 6, 2, 0, True, True),
]  # fmt: skip
_VGG_LAYOUT: list[tuple[Any, ...]] = [
    ("conv", 0, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 1, 3, 1, False, True), ("pool", (2, 2), (2, 2), (0, 0)),
    ("conv", 2, 3, 1, False, True), ("conv", 3, 3, 1, False, True), ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 4, 3, 1, True, False), ("conv", 5, 3, 1, True, False), ("pool", (2, 1), (2, 1), (0, 0)),
    ("conv", 6, 2, 0, False, True),
]  # fmt: skip
LAYOUTS = {"crnn": _CRNN_LAYOUT, "vgg": _VGG_LAYOUT}


def output_length(width: Any, arch: str = "crnn") -> Any:
    """Time steps ``T`` the ``arch`` network produces for an input (or real, unpadded)
    width: an int, or elementwise for a NumPy array or tensor of widths."""
    w = width
    for layer in LAYOUTS[arch]:
        if layer[0] == "conv":
            k, s, p = layer[2], 1, layer[3]
        else:
            k, s, p = layer[1][1], layer[2][1], layer[3][1]
        w = (w + 2 * p - k) // s + 1
    return w


class ConfigError(ValueError):
    """A configuration file or override that does not fit the schema."""


@dataclass
class ModelConfig:
    # "crnn": Shi, Bai & Yao (2015), 7 conv + 2 BiLSTM (the layout of meijieru/crnn.pytorch).
    # "vgg": the VGG-BiLSTM-CTC layout of clovaai/deep-text-recognition-benchmark.
    arch: str = "crnn"
    # Widths of the 7 conv layers.
    channels: list[int] = field(default_factory=lambda: [64, 128, 256, 256, 512, 512, 512])
    # LSTM hidden size per direction.
    hidden: int = 256


@dataclass
class AugmentConfig:
    """Training-only augmentations; each has a probability (0 turns it off)."""

    enabled: bool = True
    affine_p: float = 0.3
    max_rotate: float = 3.0  # degrees
    max_shear: float = 8.0  # degrees
    max_scale: float = 0.08  # fraction
    perspective_p: float = 0.2
    perspective_distortion: float = 0.15
    blur_p: float = 0.15
    max_blur_sigma: float = 1.2
    color_p: float = 0.3
    brightness: float = 0.3
    contrast: float = 0.3
    invert_p: float = 0.05
    noise_p: float = 0.15
    max_noise_std: float = 0.08  # in [0, 1] pixel units


@dataclass
class SynthConfig:
    """The synthetic text generator (used when ``data.train`` is empty).

    Probabilities are per image and 0 turns an effect off; lengths in pixels are
    measured at the output height unless said otherwise. See docs/synth.md.
    """

    # Fixed synthetic validation set size (rendered once, deterministic).
    val_size: int = 512
    # Extra folders of .ttf/.otf fonts (searched recursively) on top of the bundled ones.
    font_dirs: list[str] = field(default_factory=list)
    # Use the fonts in crnn/assets/fonts; false = only font_dirs.
    bundled_fonts: bool = True
    # One word per line (UTF-8); "" = the bundled English list (crnn/assets/words).
    word_list: str = ""
    # Text sources, relative weights (need not sum to 1).
    p_word: float = 0.55
    p_number: float = 0.1
    p_date: float = 0.04
    p_price: float = 0.04
    p_code: float = 0.08
    p_random: float = 0.12
    # Lines of several words; only drawn when the charset has a space (ascii95).
    p_line: float = 0.07
    # Case of dictionary words (only matters for case-sensitive charsets).
    p_upper: float = 0.2
    p_title: float = 0.25
    # A word gets punctuation attached ("word," "(word)").
    p_punct: float = 0.1
    # Label length in characters (after the charset's normalisation).
    min_length: int = 1
    max_length: int = 20
    # Render resolution relative to the output: text is rasterised so that the crop is
    # render_scale x the output height, then warped down (or up) to it. Above 1 gives
    # smoother strokes, below 1 softer, upsampled ones; the letters' size in the output
    # is set by the crop margins (pad_*), as the output height is fixed.
    render_scale_min: float = 0.9
    render_scale_max: float = 1.4
    # Extra space between characters, as a fraction of the font size (at most 0.12 when
    # the charset has a space, so a letter gap never looks like a word gap).
    p_spacing: float = 0.15
    spacing_min: float = -0.04
    spacing_max: float = 0.4
    # Horizontal stretch (condensed/expanded look): width scaled by 1 +- max_stretch.
    p_stretch: float = 0.2
    max_stretch: float = 0.2
    # Colour and contrast: |text - background| >= min_contrast (fraction of 255).
    min_contrast: float = 0.3
    p_light_text: float = 0.25  # light text on a dark background
    p_color: float = 0.5  # coloured text/background (RGB output only)
    # Backgrounds: flat unless one of these is drawn.
    p_gradient_bg: float = 0.2
    p_noise_bg: float = 0.15
    p_texture_bg: float = 0.2
    # Background variation (peak to peak), fraction of 255.
    max_bg_variation: float = 0.3
    # Drop shadow 1-3 px down-right, between the text and background tones.
    p_shadow: float = 0.05
    # Geometry: rotation (degrees), perspective (corner shift, fraction of text
    # height), curvature (bow height, fraction of text height).
    p_rotate: float = 0.3
    max_rotate: float = 4.0
    p_perspective: float = 0.2
    max_perspective: float = 0.2
    p_curve: float = 0.1
    max_curve: float = 0.35
    # Degradations: Gaussian blur (sigma, px), pixel noise (std, fraction of 255), JPEG.
    p_blur: float = 0.25
    max_blur: float = 1.0
    p_noise: float = 0.25
    max_noise: float = 0.06
    p_jpeg: float = 0.2
    jpeg_quality_min: int = 20
    jpeg_quality_max: int = 70
    # Crop margin on each side, as a fraction of the text height; tight crops cut to
    # the ink with at most pad_min.
    pad_min: float = 0.02
    pad_max: float = 0.3
    p_tight_crop: float = 0.1

    def validate(self) -> None:
        """Check ranges and probabilities; raise :class:`ConfigError` saying how to fix them."""
        cfg = self

        def bad(key: str, value: Any, expected: str) -> ConfigError:
            return ConfigError(f"data.synth.{key}={value!r} is not valid: expected {expected}")

        for f in dataclasses.fields(cfg):
            v = getattr(cfg, f.name)
            if f.name.startswith("p_") and not 0.0 <= v <= 1.0:
                raise bad(f.name, v, "a probability in [0, 1]")
        weights = ("p_word", "p_number", "p_date", "p_price", "p_code", "p_random", "p_line")
        if sum(getattr(cfg, k) for k in weights[:-1]) <= 0:
            raise ConfigError(
                "data.synth text weights p_word, p_number, p_date, p_price, p_code, p_random are "
                "all 0: at least one must be positive (p_line alone needs a space in the charset)"
            )
        bg = cfg.p_gradient_bg + cfg.p_noise_bg + cfg.p_texture_bg
        if bg > 1.0 + 1e-9:
            raise ConfigError(
                f"data.synth.p_gradient_bg + p_noise_bg + p_texture_bg = {bg:g}: they are shares of "
                "one choice (the rest is flat), so their sum must be <= 1"
            )
        if cfg.p_upper + cfg.p_title > 1.0 + 1e-9:
            raise bad("p_upper + p_title", cfg.p_upper + cfg.p_title, "a sum <= 1")
        if cfg.min_length < 1 or cfg.max_length < cfg.min_length:
            raise ConfigError(
                f"data.synth lengths min_length={cfg.min_length}, max_length={cfg.max_length}: "
                "expected 1 <= min_length <= max_length"
            )
        for lo, hi in (
            ("render_scale_min", "render_scale_max"),
            ("spacing_min", "spacing_max"),
            ("pad_min", "pad_max"),
            ("jpeg_quality_min", "jpeg_quality_max"),
        ):
            if getattr(cfg, lo) > getattr(cfg, hi):
                raise ConfigError(
                    f"data.synth.{lo}={getattr(cfg, lo)!r} exceeds data.synth.{hi}={getattr(cfg, hi)!r}"
                )
        if cfg.render_scale_min <= 0:
            raise bad("render_scale_min", cfg.render_scale_min, "a ratio > 0")
        if not 0.0 <= cfg.min_contrast <= 0.9:
            raise bad("min_contrast", cfg.min_contrast, "a fraction of 255 in [0, 0.9]")
        if not 0.0 <= cfg.max_bg_variation <= 1.0 - cfg.min_contrast:
            raise bad(
                "max_bg_variation",
                cfg.max_bg_variation,
                f"a value in [0, 1 - min_contrast = {1 - cfg.min_contrast:g}]",
            )
        if not 1 <= cfg.jpeg_quality_min <= cfg.jpeg_quality_max <= 95:
            raise bad(
                "jpeg_quality_min/max",
                (cfg.jpeg_quality_min, cfg.jpeg_quality_max),
                "1 <= min <= max <= 95",
            )
        for key in (
            "max_rotate",
            "max_perspective",
            "max_curve",
            "max_blur",
            "max_noise",
            "max_stretch",
            "pad_min",
        ):
            if getattr(cfg, key) < 0:
                raise bad(key, getattr(cfg, key), "a value >= 0")
        if cfg.max_stretch >= 1:
            raise bad("max_stretch", cfg.max_stretch, "a fraction < 1")
        if cfg.spacing_min <= -0.5:
            raise bad("spacing_min", cfg.spacing_min, "a fraction of the font size > -0.5")


@dataclass
class DataConfig:
    # LMDB directories (or folders of LMDBs), or image folders holding a gt.txt; the
    # entry "synth" is the on-the-fly synthetic generator.
    # Empty train -> the synthetic generator; empty val -> a fixed synthetic set.
    train: list[str] = field(default_factory=list)
    val: list[str] = field(default_factory=list)
    # Share of every batch drawn from each data.train entry (e.g. [0.7, 0.3] for
    # ["synth", "data/lmdb/real"]); empty = all entries pooled into one set.
    train_ratios: list[float] = field(default_factory=list)
    # Built-in name (alnum36, alnum62, ascii94, ascii95), a .txt path, or "chars:<literal>".
    charset: str = "alnum36"
    # Lower-case labels before encoding; null = auto (fold when the charset has no capitals).
    case_fold: Union[bool, None] = None  # noqa: UP007 (typing.get_type_hints on py3.10)
    # A label with characters outside the charset: "skip" (count and report) or "error".
    unknown_chars: str = "skip"
    height: int = 32
    # Resized width is height * aspect, clamped to [min_width, max_width] and rounded up
    # to a multiple of width_multiple (the CNN's width stride, so no partial time steps).
    min_width: int = 16
    max_width: int = 128
    width_multiple: int = 4
    rgb: bool = False
    # Labels longer than this are skipped (0: only the model's output length limits them).
    max_label_length: int = 0
    num_workers: int = 2
    # Group batches by image width so little compute goes into padding.
    bucketing: bool = True
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    synth: SynthConfig = field(default_factory=SynthConfig)


@dataclass
class TrainConfig:
    output_dir: str = "runs/default"
    max_steps: int = 2000
    # Global batch per optimizer step, summed over GPUs and accumulation steps. Each
    # device processes batch_size / (world_size * accum_steps) images per micro-step, so
    # changing the number of GPUs keeps the effective batch and the LR schedule.
    batch_size: int = 64
    accum_steps: int = 1
    optimizer: str = "adamw"  # adam | adamw
    lr: float = 1e-3
    weight_decay: float = 1e-4
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    warmup_steps: int = 200
    schedule: str = "cosine"  # cosine | linear | constant (after warm-up)
    min_lr_ratio: float = 0.01
    # Mixed precision on CUDA: bf16 | fp16 | none. CPU runs always use fp32.
    amp: str = "bf16"
    grad_clip: float = 5.0
    val_every: int = 500
    log_every: int = 50
    # Extra "last" checkpoints between validations (0: only at validation).
    save_every: int = 0
    # Metric that decides "best": accuracy | alnum_accuracy | cer | ned.
    best_metric: str = "accuracy"
    seed: int = 42
    # Activation checkpointing of the CNN: trade compute for memory.
    grad_checkpoint: bool = False
    compile: bool = False
    channels_last: bool = False
    # cuDNN autotuning (torch.backends.cudnn.benchmark) on CUDA: each new input shape is
    # timed once per algorithm, then the fastest is used. Widths are multiples of
    # data.width_multiple up to data.max_width (29 shapes by default), so the one-off
    # cost is seconds in a run of hours; switch off for data with very many widths.
    cudnn_benchmark: bool = True
    # Images logged (with predictions) to TensorBoard at each validation.
    log_images: int = 16
    # Initialise weights from a checkpoint (fine-tuning); the charset may differ.
    init_from: str = ""


@dataclass
class DistConfig:
    # ddp | dp | none. "none" is one device.
    strategy: str = "ddp"
    sync_bn: bool = False
    backend: str = ""  # "" = nccl on CUDA, gloo on CPU
    # Seconds a rank waits at a collective before the run is declared hung.
    timeout_s: int = 600


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    dist: DistConfig = field(default_factory=DistConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(
        self,
        world_size: int | None = None,
        device_type: str | None = None,
        devices: int | None = None,
    ) -> None:
        """Every cross-field rule, with messages that say how to fix the value.

        Without arguments only the config itself is checked (at load time). A launch
        adds what it knows, and the rules that depend on it run too:

        Args:
            world_size: training processes (DDP ranks) in the whole run.
            device_type: ``cpu`` or ``cuda``.
            devices: devices this process was given (``--gpus``/``--nproc``).
        """
        _choice("model.arch", self.model.arch, ("crnn", "vgg"))
        if len(self.model.channels) != 7:
            raise ConfigError(
                f"model.channels needs the 7 conv widths, got {len(self.model.channels)}: "
                f"{self.model.channels}"
            )
        _choice("data.unknown_chars", self.data.unknown_chars, ("skip", "error"))
        d = self.data
        if d.train_ratios:
            if len(d.train_ratios) != len(d.train):
                raise ConfigError(
                    f"data.train_ratios has {len(d.train_ratios)} entries for {len(d.train)} "
                    "data.train entries; give one share per entry"
                )
            if any(r <= 0 for r in d.train_ratios):
                raise ConfigError(f"data.train_ratios must all be > 0, got {d.train_ratios}")
        elif "synth" in d.train and len(d.train) > 1:
            raise ConfigError(
                "data.train mixes the endless synthetic generator with other data: say how "
                "much of each batch comes from each with data.train_ratios (e.g. [0.7, 0.3])"
            )
        self.data.synth.validate()
        _choice("train.optimizer", self.train.optimizer, ("adam", "adamw"))
        _choice("train.schedule", self.train.schedule, ("cosine", "linear", "constant"))
        _choice("train.amp", self.train.amp, ("bf16", "fp16", "none"))
        _choice(
            "train.best_metric",
            self.train.best_metric,
            ("accuracy", "alnum_accuracy", "cer", "ned"),
        )
        _choice("dist.strategy", self.dist.strategy, ("ddp", "dp", "none"))
        if self.data.height < 32 or self.data.height % 16:
            # Heights above 32 leave a feature map taller than 1, which the model
            # average-pools; the published models use 32.
            raise ConfigError(
                f"data.height must be 32 or a larger multiple of 16, got {self.data.height}"
            )
        if self.data.min_width > self.data.max_width:
            raise ConfigError(
                f"data.min_width ({self.data.min_width}) exceeds data.max_width ({self.data.max_width})"
            )
        for name in ("max_steps", "batch_size", "accum_steps", "val_every", "log_every"):
            if getattr(self.train, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(self.train, name)}")
        self._validate_run(world_size, device_type, devices)

    def _validate_run(
        self, world_size: int | None, device_type: str | None, devices: int | None
    ) -> None:
        strategy = self.dist.strategy
        if devices is not None and devices > 1:
            flag = "--nproc" if device_type == "cpu" else "--gpus"
            if strategy == "none":
                raise ConfigError(
                    f"--strategy none trains on one device, but {devices} were asked for "
                    f"({flag}); use --strategy ddp (or dp for GPUs in one process), or list "
                    "one device"
                )
            if strategy == "dp" and device_type == "cpu":
                raise ConfigError(
                    "--strategy dp (DataParallel) needs CUDA GPUs; --gpus cpu --nproc N runs DDP"
                )
        if world_size is not None and world_size > 1 and strategy != "ddp":
            # Ranks that never all-reduce would silently train separate models.
            raise ConfigError(
                f"dist.strategy={strategy} runs in one process, but this run has {world_size} "
                f"processes; use --strategy ddp with several processes, or start "
                f"tools/train.py --strategy {strategy} without torchrun"
            )
        if self.dist.sync_bn and device_type == "cpu":
            raise ConfigError(
                "dist.sync_bn=true needs GPUs: PyTorch's SyncBatchNorm has no CPU "
                "implementation. Use dist.sync_bn=false with --gpus cpu."
            )
        if world_size is not None:
            parts = world_size * self.train.accum_steps
            bs = self.train.batch_size
            if bs % parts:
                raise ConfigError(
                    f"train.batch_size={bs} is the global batch per optimizer step; it must "
                    f"split evenly over {world_size} processes x {self.train.accum_steps} "
                    f"accumulation steps = {parts}. Use e.g. "
                    f"train.batch_size={max(parts, bs // parts * parts)}"
                )


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(allowed)}")


# ---- loading -------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return " or ".join(
            "null" if a is type(None) else _type_name(a) for a in typing.get_args(tp)
        )
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _check_value(key: str, value: Any, tp: Any) -> Any:
    """Return ``value`` converted to ``tp`` where lossless (int -> float), else raise."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        for arm in typing.get_args(tp):
            if arm is type(None):
                if value is None:
                    return None
                continue
            try:
                return _check_value(key, value, arm)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r} ({type(value).__name__})")
        (item_tp,) = typing.get_args(tp)
        return [_check_value(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        # YAML 1.1 reads "3e-4" (no dot) as a string; it is a float to anyone writing it.
        try:
            return float(value)
        except ValueError:
            pass
    if tp is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(
            f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})"
        )
    return value


def _merge(obj: Any, updates: dict[str, Any], prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    for k, v in updates.items():
        key = f"{prefix}{k}"
        if k not in names:
            close = difflib.get_close_matches(k, names, n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigError(
                f"unknown config key {key!r}{hint} Valid keys here: {', '.join(names)}"
            )
        tp = hints[k]
        current = getattr(obj, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(f"{key}: expected a mapping of sub-keys, got {v!r}")
            _merge(current, v, f"{key}.")
        else:
            setattr(obj, k, _check_value(key, v, tp))


def parse_override(text: str) -> dict[str, Any]:
    """``"train.lr=3e-4"`` -> ``{"train": {"lr": 0.0003}}``; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError(
            f"override {text!r} must look like section.key=value (e.g. train.lr=3e-4)"
        )
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: cannot parse value {raw!r}: {e}") from None
    out: dict[str, Any] = {}
    node = out
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return out


def config_from_dict(d: dict[str, Any]) -> Config:
    cfg = Config()
    _merge(cfg, d, "")
    return cfg


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply ``key=value`` overrides in place, then validate."""
    for text in overrides:
        _merge(cfg, parse_override(text), "")
    cfg.validate()
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults <- YAML file <- overrides, then :meth:`Config.validate`."""
    cfg = Config()
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} not found (see configs/ for examples)")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{path}: expected a mapping at the top level, got {type(data).__name__}"
            )
        _merge(cfg, data, "")
    return apply_overrides(cfg, overrides or [])


def save_config(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
