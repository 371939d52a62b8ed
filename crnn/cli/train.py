"""Train a CRNN.

With no arguments it trains on the built-in synthetic text generator and validates
on a fixed synthetic set, on the first GPU if there is one, else on the CPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import crnn
from crnn.checkpoint import CheckpointError, load_checkpoint
from crnn.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Parser, setup_logging
from crnn.config import (
    Config,
    ConfigError,
    DistConfig,
    apply_overrides,
    choices,
    config_from_dict,
    load_config,
)
from crnn.config.loading import bundled_configs
from crnn.data import usable_cores
from crnn.data.errors import DataError
from crnn.data.synth.fonts import FontError
from crnn.data.synth.words import CorpusError
from crnn.engine.distributed import env_rank
from crnn.engine.guards import TrainingError
from crnn.engine.launch import (
    ChildProcess,
    Devices,
    DistributedRunError,
    LaunchError,
    parse_gpus,
    record_rank_error,
    run_training,
)
from crnn.engine.runlock import RunDirectoryBusy
from crnn.engine.state import missing_init
from crnn.io import WriteError
from crnn.reading.recognizer import BUNDLED, default_checkpoint
from crnn.text.alphabet_files import CharsetFileError

log = logging.getLogger("crnn.train")

EPILOG = """\
batch size: train.batch_size is the GLOBAL batch per optimizer step, summed over all
GPUs (processes) and accumulation steps, not a per-GPU batch. Each device processes
batch_size / (number of GPUs x train.accum_steps) images per micro-step, so changing
only the number of GPUs keeps the effective batch and the learning-rate schedule
unchanged (each step gets faster); raise train.accum_steps when a micro-batch does not
fit in memory. A checkpoint resumes on any number of GPUs.

data workers: data.num_workers counts DataLoader workers PER PROCESS (each GPU's
rank has its own). The default, auto, gives each process its share of the cores less
one for the training loop (16 cores, 1 GPU: 15; 96 cores, 8 GPUs: 11 each; at most
16, at least 1); set a number to override it.

multi-GPU: --gpus 0,1 starts one DDP process per listed GPU (local rank i uses the i-th
listed GPU; numbers count the GPUs CUDA_VISIBLE_DEVICES leaves visible). Under torchrun
the script joins the launch instead (default: every visible GPU, one per local rank).
If a process fails, all stop and the error names the rank and the cause; Ctrl-C stops
all of them after rank 0 saved last.pt. See docs/multi_gpu.md.

examples:
  tools/train.py                                    # synthetic data, defaults
  tools/train.py --config configs/quickstart.yaml   # the README's quick start
  tools/train.py --train data/lmdb/train --val data/lmdb/val --set train.lr=5e-4
  tools/train.py --gpus 0,1                         # DDP on GPUs 0 and 1
  tools/train.py --gpus 0,1 --strategy dp           # DataParallel in one process
  tools/train.py --gpus cpu --nproc 2               # 2-process DDP on the CPU (gloo)
  tools/train.py --gpus 0,1 --set train.accum_steps=4 train.grad_checkpoint=true
  tools/train.py --resume runs/default              # continue exactly where it stopped
  tools/train.py --config crnn_zh_cpu --train my_lines --set train.init_from=zh
                      # fine-tune the bundled Chinese model on your lines (word, line, zh:
                      # the bundled models; the generator stays in every batch, see replay)
  torchrun --nproc-per-node 8 tools/train.py ...    # join a torchrun launch
  torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 --rdzv-backend c10d \\
      --rdzv-endpoint HOST0:29400 --rdzv-id myrun tools/train.py ...   # node 0 of 2
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="train.py",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        help="YAML config, or a bundled recipe by name (a pip install has them too: "
        + ", ".join(bundled_configs())
        + "); defaults apply to anything it leaves out",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override config values, e.g. --set train.lr=3e-4 data.num_workers=4 (types are "
        "checked)",
    )
    p.add_argument(
        "--train",
        nargs="+",
        metavar="PATH",
        help="training data: LMDB dirs or image folders with gt.txt (= data.train)",
    )
    p.add_argument("--val", nargs="+", metavar="PATH", help="validation data (= data.val)")
    p.add_argument(
        "--output-dir", help="run directory for checkpoints and logs (= train.output_dir)"
    )
    p.add_argument(
        "--resume",
        metavar="RUN_OR_CKPT",
        help="continue a run from its last.pt (or a given checkpoint); --set still applies",
    )
    p.add_argument(
        "--until-step",
        type=int,
        metavar="N",
        help="save and stop after step N without changing the schedule (train in chunks; "
        "continue with --resume)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="MINUTES",
        help="save and stop once this many minutes have passed (to fit a GPU allocation); "
        "continue with --resume",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="MINUTES",
        help="fit the whole run into this many minutes (= train.time_budget_min): after a "
        "short warm-up the speed is measured and train.max_steps fixed so that the schedule, "
        "validations and final save end inside it; --resume keeps that decision",
    )
    p.add_argument(
        "--gpus",
        default=None,
        help="GPUs to use, e.g. 0 or 0,1 (indices among CUDA_VISIBLE_DEVICES), 'all', or 'cpu'. "
        "Several GPUs: DDP, one process each (or --strategy dp). Default: GPU 0 if there is "
        "one, else the CPU; under torchrun every visible GPU",
    )
    p.add_argument(
        "--strategy",
        choices=choices(DistConfig, "strategy"),
        help="multi-GPU strategy (= dist.strategy, default ddp)",
    )
    p.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="processes for --gpus cpu (DDP over gloo, for testing the multi-process path); "
        "default 1",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="build the data, model and loaders, take one training step, print what the run "
        "would do (datasets and skipped samples, batch split, schedule, output files) and exit "
        "without writing anything",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def resolve_config(args: argparse.Namespace) -> tuple[Config, str | None]:
    """The run's config and the checkpoint to resume from (or None)."""
    overrides = list(args.overrides)
    if args.train:
        overrides.append("data.train=" + json.dumps(args.train))
    if args.val:
        overrides.append("data.val=" + json.dumps(args.val))
    if args.output_dir:
        overrides.append(f"train.output_dir={args.output_dir}")
    if args.strategy:
        overrides.append(f"dist.strategy={args.strategy}")
    if args.time_budget is not None:
        overrides.append(f"train.time_budget_min={args.time_budget}")
    if not args.resume:
        return bundled_init(task_data(load_config(args.config, overrides), args)), None
    if args.config:
        raise ConfigError(
            "--resume uses the checkpoint's own config; change settings with --set, not --config"
        )
    path = Path(args.resume)
    if path.is_dir():
        path = path / "last.pt"
    state = load_checkpoint(path)
    if "config" not in state:
        raise ConfigError(f"{path} holds no run config; it is not a training checkpoint")
    return task_data(apply_overrides(config_from_dict(state["config"]), overrides), args), str(path)


def task_data(cfg: Config, args: argparse.Namespace) -> Config:
    """``--train``/``--val`` name the detector's labelled sets in a ``task: detect`` run."""
    if cfg.task == "detect":
        if args.train:
            cfg.det.train, cfg.data.train = list(args.train), []
        if args.val:
            cfg.det.val, cfg.data.val = list(args.val), []
    return cfg


def bundled_init(cfg: Config) -> Config:
    """``train.init_from`` naming a bundled model (word, line, zh) and no file of that
    name: the bundled model's release file (``det_zh`` in a detector run: the bundled
    detector's checkpoint, which the detector's trainer finds). A path that does not
    exist is named, with what to do, before anything is built (a later stage of a recipe
    whose first stage has not run yet, typically)."""
    name = cfg.train.init_from
    if cfg.task == "detect" and name == "det_zh" and not Path(name).exists():
        return cfg  # the bundled detector's checkpoint: the detector's trainer finds it
    if name in BUNDLED and not Path(name).exists():
        cfg.train.init_from = str(default_checkpoint(prefer_onnx=False, model=name))
    elif name and not Path(name).exists():
        raise missing_init(name)
    return cfg


def rank_command(argv: list[str], devices: Devices) -> ChildProcess:
    """What each launched rank runs: this command line again, as ``python -m
    crnn.cli.train``, with this crnn importable even from a clone that was never
    pip-installed, and the CPU threads shared out (torchrun does the same)."""
    root = str(Path(crnn.__file__).resolve().parent.parent)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    if "OMP_NUM_THREADS" not in os.environ:
        n = devices.nproc if devices.kind == "cpu" else len(devices.ids)
        env["OMP_NUM_THREADS"] = str(max(1, usable_cores() // n))
    return ChildProcess([sys.executable, "-m", "crnn.cli.train", *argv], env)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ranks = env_rank()
    setup_logging(args.verbose, rank=ranks[0] if ranks else 0)
    try:
        cfg, resume = resolve_config(args)
        devices = parse_gpus(args.gpus, args.nproc)
        if args.dry_run:
            from crnn.engine.dryrun import dry_run

            print(dry_run(cfg, devices, resume))
            return EXIT_OK
        child = rank_command(sys.argv[1:] if argv is None else argv, devices)
        result = run_training(
            cfg,
            devices,
            resume=resume,
            child=child,
            stop_at_step=args.until_step,
            time_limit_s=args.time_limit * 60 if args.time_limit else None,
        )
    except (DistributedRunError, WriteError, TrainingError) as e:
        log.error("%s", e)
        record_rank_error(e)
        return EXIT_FAILURE
    except (
        ConfigError,
        CheckpointError,
        LaunchError,
        DataError,
        FileNotFoundError,
        RunDirectoryBusy,
        CharsetFileError,
        FontError,
        CorpusError,
    ) as e:
        log.error("%s", e)
        record_rank_error(e)  # a launched rank: let the launcher say why it stopped
        return EXIT_USAGE
    if getattr(result, "signal", ""):  # the launcher itself was stopped: see LaunchResult
        _exit_now(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


def _exit_now(code: int) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def leave(code: int) -> int:
    """End a training command with ``code``. One rank of a multi-process run (our
    launcher's, torchrun's, srun's: ``WORLD_SIZE`` above 1) flushes its output and
    leaves with ``os._exit``: the run is over, its checkpoints written and the process
    group destroyed, but tearing down gloo's and the rendezvous' C++ threads at
    interpreter exit sometimes aborts the process ("terminate called without an active
    exception", SIGABRT, seen with PyTorch 2.4), which the launcher would report as a
    failed run. Any other process returns ``code`` for ``sys.exit``."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        _exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(leave(main()))
