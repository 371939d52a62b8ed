"""The run configuration: nested dataclasses whose ``Literal`` fields are the one list
of valid choices (the loader, :meth:`Config.validate` and the CLIs' ``choices=`` all
read them), and every cross-field rule in :meth:`Config.validate`."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from crnn.config.errors import ConfigError
from crnn.config.synth import SynthConfig

Arch = Literal["crnn", "vgg", "crnn_s8", "crnn_s4", "dense"]
UnknownChars = Literal["skip", "error"]
Optimizer = Literal["adam", "adamw"]
Schedule = Literal["cosine", "linear", "constant"]
Amp = Literal["bf16", "fp16", "none"]
Metric = Literal["accuracy", "alnum_accuracy", "cer", "ned"]
Strategy = Literal["ddp", "dp", "none"]
Task = Literal["recognize", "detect"]


@dataclass
class ModelConfig:
    # "crnn": Shi, Bai & Yao (2015), 7 conv + 2 BiLSTM (the layout of meijieru/crnn.pytorch).
    # "vgg": the VGG-BiLSTM-CTC layout of clovaai/deep-text-recognition-benchmark.
    # "crnn_s8": "crnn" with a time step every 8 px instead of 4 (CJK lines: about half
    # the compute). "crnn_s4": crnn_s8's network (and weights) with a time step every
    # 4 px. "dense": the "crnn" CNN and a linear classifier, no LSTM
    # (chineseocr's lstmFlag=False model; imported weights).
    arch: Arch = "crnn"
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
class DataConfig:
    # LMDB directories (or folders of LMDBs), or image folders holding a gt.txt; the
    # entry "synth" is the on-the-fly synthetic generator.
    # Empty train -> the synthetic generator; empty val -> a fixed synthetic set.
    train: list[str] = field(default_factory=list)
    val: list[str] = field(default_factory=list)
    # Share of every batch drawn from each data.train entry (e.g. [0.7, 0.3] for
    # ["synth", "data/lmdb/real"]); empty = all entries pooled into one set.
    train_ratios: list[float] = field(default_factory=list)
    # Built-in name (alnum36, alnum62, ascii94, ascii95, zh5529), a .txt path, or "chars:<literal>".
    charset: str = "alnum36"
    # Lower-case labels before encoding; null = auto (fold when the charset has no capitals).
    case_fold: Union[bool, None] = None  # noqa: UP007 (typing.get_type_hints on py3.10)
    # Encode labels in visual order (left to right as drawn) and decode predictions back
    # to logical order, for right-to-left scripts; null = auto (on when the charset has
    # Arabic, Hebrew... letters). See crnn/text/bidi.py.
    bidi: Union[bool, None] = None  # noqa: UP007
    # A label with characters outside the charset: "skip" (count and report) or "error".
    unknown_chars: UnknownChars = "skip"
    height: int = 32
    # Resized width is height * aspect, clamped to [min_width, max_width] and rounded up
    # to a multiple of width_multiple (the CNN's width stride, so no partial time steps).
    min_width: int = 16
    max_width: int = 128
    width_multiple: int = 4
    rgb: bool = False
    # Labels longer than this are skipped (0: only the model's output length limits them).
    max_label_length: int = 0
    # DataLoader workers PER PROCESS (each GPU's rank has its own): a number, or "auto"
    # = this process's share of the CPU cores (cores / processes on this machine) less
    # one for the training loop, at least 1, at most 16.
    num_workers: Union[int, Literal["auto"]] = "auto"  # noqa: UP007
    # Group batches by image width so little compute goes into padding.
    bucketing: bool = True
    # The same for the endless generator: each window of 50 steps is drawn, then sorted
    # by the widths the images came out at (crnn/data/batching.py): 2.1x the Chinese
    # lines per second of random batches. "auto" = charsets of more than 1,000 classes:
    # a 10-character Hebrew model did not learn at all from batches whose labels all
    # had one length (CER 1.0 vs 0.25 after 400 steps; sorted by the drawn widths, CER
    # 0.996 vs 0.0 after 1,000), so narrow charsets keep random batches. Needs
    # data.bucketing.
    stream_bucketing: Union[bool, Literal["auto"]] = "auto"  # noqa: UP007
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
    optimizer: Optimizer = "adamw"
    lr: float = 1e-3
    weight_decay: float = 1e-4
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    warmup_steps: int = 200
    schedule: Schedule = "cosine"  # after warm-up
    min_lr_ratio: float = 0.01
    # Mixed precision on CUDA: bf16 | fp16 | none. CPU runs: see cpu_bf16.
    amp: Amp = "bf16"
    # bf16 autocast on the CPU: "auto" = where the CPU has bfloat16 units (AVX512-BF16,
    # AMX) and a timed step shows it faster than fp32 (crnn/engine/cpu_precision.py);
    # true = always; false = fp32.
    cpu_bf16: Union[bool, Literal["auto"]] = "auto"  # noqa: UP007
    grad_clip: float = 5.0
    val_every: int = 500
    log_every: int = 50
    # Extra "last" checkpoints between validations (0: only at validation).
    save_every: int = 0
    # Also keep the weights of every keep_every-th step (0: off) as
    # <output_dir>/steps/step-<N>.pt, an inference-only file (the EMA where there is one)
    # that predict, eval and `convert_checkpoint.py average` read: averaging a run's last
    # few such steps reads more steadily than any one of them.
    keep_every: int = 0
    # Metric that decides "best": accuracy | alnum_accuracy | cer | ned.
    best_metric: Metric = "accuracy"
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
    # Steps in a row whose loss or gradients are not finite (each is skipped and its
    # samples named) before the run stops as diverged.
    max_nonfinite_steps: int = 5
    # Validations in a row that read only blanks before the log explains the plateau.
    blank_patience: int = 3
    # Stop after this many validations without a better best_metric (0: never).
    early_stop_patience: int = 0
    # Exponential moving average of the weights (e.g. 0.999; 0: off): validation,
    # best.pt and releases use the average, training continues on the raw weights.
    ema_decay: float = 0.0
    # Minutes the whole run may take (0: no budget). After a short warm-up the trainer
    # measures its speed and fixes max_steps so that the schedule, validations and final
    # save end inside the budget (crnn/engine/budget.py); --resume keeps that decision.
    time_budget_min: float = 0.0
    # Initialise weights from a checkpoint (fine-tuning; the charset may differ), or from
    # a bundled model by name: word, line, zh (tools/train.py resolves the name).
    init_from: str = ""
    # Fine-tuning that does not forget: this share of every batch comes from the
    # synthetic generator, as configured when the init_from model learnt to read, and the
    # run also validates on that generator's lines ("general"). "auto" = 0.5 when
    # init_from is set and data.train is your own data; 0 = off (crnn/engine/replay.py).
    replay: Union[float, Literal["auto"]] = "auto"  # noqa: UP007
    # Fine-tuning that does not forget, second half: the weights validated and saved
    # (best.pt, last.pt's "model", releases) are this share of the init_from weights and
    # the rest of the trained ones (WiSE-FT; training itself goes on with the trained
    # weights). "auto" = 0.5 when init_from is set, data.train is your own data and the
    # init_from model has the run's charset; 0 = off (crnn/engine/replay.py).
    init_share: Union[float, Literal["auto"]] = "auto"  # noqa: UP007
    # A new run's classifier starts at the training data's class frequencies (blank
    # included), which wide charsets otherwise spend hundreds of steps learning
    # (crnn/engine/prior.py): true, false, or "auto" = more than 1,000 classes.
    prior_init: Union[bool, Literal["auto"]] = "auto"  # noqa: UP007


@dataclass
class DistConfig:
    # ddp | dp | none. "none" is one device.
    strategy: Strategy = "ddp"
    sync_bn: bool = False
    backend: str = ""  # "" = nccl on CUDA, gloo on CPU
    # Seconds a rank waits at a collective before the run is declared hung.
    timeout_s: int = 600


@dataclass
class DetConfig:
    """The text detector's model and data (``task: detect``); train and dist are shared
    with the recognizer."""

    # Labelled sets: folders of images/ + labels/NAME.txt (ICDAR/MTWI quads), ICDAR's
    # gt_NAME.txt, or a PaddleOCR Label.txt.
    train: list[str] = field(default_factory=list)
    # Validation sets; empty = val_share of the training images, split by image name.
    val: list[str] = field(default_factory=list)
    val_share: float = 0.1
    # The backbone's stage widths and depths, the inverted residuals' expansion and the
    # feature pyramid's width (crnn/model/dbnet.py).
    widths: list[int] = field(default_factory=lambda: [24, 48, 96, 160])
    depths: list[int] = field(default_factory=lambda: [1, 2, 3, 2])
    expand: int = 4
    inner: int = 64
    # Training crops (pixels, square) and the scale images are read at (long side).
    # Share of training crops cut from synthetic scenes (crnn/data/scenes.py): text of the
    # recognizer's generator (data.synth, data.charset) drawn with its boxes on the
    # training images with their labelled lines painted out; 0 = real images only.
    synth_share: float = 0.0
    crop: int = 384
    limit_side: int = 960
    # The most a smaller image is enlarged towards limit_side, in training crops and
    # validation (1: never, as before; reading enlarges by up to 4, READ_ENLARGE).
    enlarge: float = 1.0
    # Validation images drawn with their boxes in TensorBoard.
    log_images: int = 4


@dataclass
class Config:
    # recognize: the CRNN (model, data); detect: the line detector (det).
    task: Task = "recognize"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    det: DetConfig = field(default_factory=DetConfig)

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
        check_choices(self)
        if self.task == "detect":
            self._validate_det()
        if len(self.model.channels) != 7:
            raise ConfigError(
                f"model.channels needs the 7 conv widths, got {len(self.model.channels)}: "
                f"{self.model.channels}"
            )
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
        if self.data.height < 32 or self.data.height % 16:
            # Heights above 32 leave a feature map taller than 1, which the model
            # average-pools; the published models use 32.
            raise ConfigError(
                f"data.height must be 32 or a larger multiple of 16, got {self.data.height}"
            )
        nw = self.data.num_workers
        if nw != "auto" and not (isinstance(nw, int) and nw >= 0):
            raise ConfigError(f"data.num_workers={nw!r}: expected a number >= 0 or 'auto'")
        if self.data.min_width > self.data.max_width:
            raise ConfigError(
                f"data.min_width ({self.data.min_width}) exceeds data.max_width "
                f"({self.data.max_width})"
            )
        if not 0.0 <= self.train.ema_decay < 1.0:
            raise ConfigError(
                f"train.ema_decay={self.train.ema_decay}: expected 0 (off) or a decay in "
                "(0, 1), e.g. 0.999"
            )
        rp = self.train.replay
        if rp != "auto" and not (isinstance(rp, (int, float)) and 0.0 <= rp < 1.0):
            raise ConfigError(
                f"train.replay={rp!r}: expected 'auto' or the generator's share of each "
                "batch in [0, 1), e.g. 0.5 (0: off)"
            )
        mix = self.train.init_share
        if mix != "auto" and not (isinstance(mix, (int, float)) and 0.0 <= mix < 1.0):
            raise ConfigError(
                f"train.init_share={mix!r}: expected 'auto' or the starting weights' share of "
                "the saved ones in [0, 1), e.g. 0.5 (0: off)"
            )
        if self.train.time_budget_min < 0:
            raise ConfigError(
                "train.time_budget_min must be >= 0 (0: no budget), got "
                f"{self.train.time_budget_min}"
            )
        for name in ("max_steps", "batch_size", "accum_steps", "val_every", "log_every"):
            if getattr(self.train, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(self.train, name)}")
        for name in ("save_every", "keep_every"):
            if (every := getattr(self.train, name)) < 0:
                raise ConfigError(f"train.{name} must be >= 0 (0: off), got {every}")
        self._validate_run(world_size, device_type, devices)

    def _validate_det(self) -> None:
        d = self.det
        if not d.train:
            raise ConfigError(
                "task: detect needs labelled images: det.train lists folders of images/ + "
                "labels/NAME.txt (ICDAR/MTWI quads) or a PaddleOCR Label.txt"
            )
        if d.crop < 64 or d.crop % 32:
            raise ConfigError(f"det.crop must be a multiple of 32, at least 64, got {d.crop}")
        if len(d.widths) != 4 or len(d.depths) != 4 or min(d.depths) < 1:
            raise ConfigError(
                f"det.widths and det.depths need 4 stages each (depths >= 1), got "
                f"{d.widths} and {d.depths}"
            )
        if d.inner % 4:
            raise ConfigError(f"det.inner must be a multiple of 4, got {d.inner}")
        if d.enlarge < 1.0:
            raise ConfigError(
                f"det.enlarge={d.enlarge}: expected 1 (never enlarge) or more, e.g. 4 (as "
                "reading does)"
            )
        if not 0.0 <= d.synth_share < 1.0:
            raise ConfigError(
                f"det.synth_share is the share of synthetic scenes among the training crops, "
                f"in [0, 1), got {d.synth_share}"
            )
        if not d.val and not 0.0 < d.val_share < 1.0:
            raise ConfigError(
                f"det.val_share={d.val_share}: without det.val a share in (0, 1) of the "
                "training images validates, e.g. 0.1"
            )

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
        if strategy == "dp" and self.train.compile:
            # torch.compile's OptimizedModule keeps a forward bound to the original
            # module in its instance __dict__; DataParallel's replicate() copies that, so
            # every replica would run GPU 0's module on its own GPU's inputs.
            raise ConfigError(
                "train.compile=true does not work with dist.strategy=dp (DataParallel "
                "replicas of a compiled model all run GPU 0's weights); use --strategy ddp "
                "(the default, one process per GPU), or train.compile=false"
            )
        if world_size is not None and world_size > 1 and strategy != "ddp":
            # Ranks that never all-reduce would silently train separate models.
            raise ConfigError(
                f"dist.strategy={strategy} runs in one process, but this run has {world_size} "
                f"processes; use --strategy ddp with several processes, or start "
                f"tools/train.py --strategy {strategy} without torchrun"
            )
        if strategy == "dp" and device_type == "cpu":
            raise ConfigError(
                "--strategy dp (DataParallel) needs CUDA GPUs; on the CPU use --strategy none "
                "(one process) or --gpus cpu --nproc N (DDP over gloo)"
            )
        if strategy == "dp" and self.dist.sync_bn:
            # PyTorch's SyncBatchNorm only synchronises inside a DDP process group; under
            # DataParallel each replica would keep computing statistics of its own chunk.
            raise ConfigError(
                "dist.sync_bn=true works with DDP only: DataParallel replicas compute BatchNorm "
                "statistics on their own share of the batch whatever this says. Use --strategy "
                "ddp (the default) or dist.sync_bn=false"
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


def choices(cls: type, name: str) -> tuple[str, ...]:
    """The valid values of a ``Literal`` field, e.g. ``choices(DistConfig, "strategy")``
    for an argparse ``choices=``."""
    return typing.get_args(typing.get_type_hints(cls)[name])


def check_choices(obj: Any, prefix: str = "") -> None:
    """Every ``Literal`` field of ``obj`` (and its nested configs) holds one of its
    choices; else :class:`ConfigError` naming the key and the choices."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{prefix}{f.name}.")
        elif typing.get_origin(hints[f.name]) is Literal:
            allowed = typing.get_args(hints[f.name])
            if value not in allowed:
                raise ConfigError(
                    f"{prefix}{f.name}={value!r} is not valid; choose one of {', '.join(allowed)}"
                )
