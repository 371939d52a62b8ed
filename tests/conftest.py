"""Shared fixtures: tiny word images rendered with Pillow's bundled font, as an image
folder with gt.txt and as an LMDB, and a tiny model config that trains in seconds."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# Keep tests light on threads (CI has 2 cores), and on the CPU unless the gpu tier runs.
torch.set_num_threads(1)


def pytest_configure(config: pytest.Config) -> None:
    """Hide CUDA devices from every test but the gpu tier's (``pytest -m gpu``): the
    default run is the CPU run on any machine. CUDA reads the variable when it starts,
    which no test has done at this point."""
    if not gpu_tier_selected(config.option.markexpr):
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def gpu_tier_selected(markexpr: str) -> bool:
    """Whether ``-m`` selects the gpu tier (``gpu``, ``gpu and not slow``), not excludes it."""
    return "gpu" in markexpr and "not gpu" not in markexpr


@pytest.fixture(autouse=True, scope="session")
def _fp32_on_every_cpu() -> Iterator[None]:
    """In-process runs train in fp32 whatever CPU runs the suite: ``train.cpu_bf16: auto``
    would time bf16 on a CPU with bfloat16 units (AVX512-BF16, AMX) and could choose it,
    so that a test comparing two runs (one process against DDP, which is fp32 under
    ``auto``) or counting compiled graphs would pass on one machine and fail on another.
    The CPU's flags read as having no bfloat16 units; flags a test passes itself are read
    as given, and ``train.cpu_bf16=true`` still trains in bf16. Session-wide, so that
    module-scoped fixtures that train (test_distributed's ``ddp_run``) are covered too: a
    function-scoped patch is set up after them, and their first run once timed bf16."""
    from crnn.engine import cpu_precision
    from crnn.precision import cpu_bf16_units

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            cpu_precision, "cpu_bf16_units", lambda cpuinfo=None: cpu_bf16_units(cpuinfo or "")
        )
        yield


WORDS = [
    "cat",
    "dog",
    "tree",
    "house",
    "river",
    "stone",
    "light",
    "moon",
    "sun",
    "road",
    "lamp",
    "door",
]

# A model small enough to train a few steps per test in well under a second.
TINY_MODEL = ["model.channels=[8,16,16,32,32,32,32]", "model.hidden=16"]


def render_word(text: str, height: int = 32, seed: int = 0) -> Image.Image:
    """Dark text on a light background with Pillow's own font (no font files needed)."""
    rng = random.Random(seed)
    font = ImageFont.load_default(size=24)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 8, bottom - top + 8
    bg = rng.randint(200, 255)
    img = Image.new("L", (w, h), bg)
    ImageDraw.Draw(img).text((4 - left, 4 - top), text, fill=rng.randint(0, 60), font=font)
    return img.resize((max(8, round(w * height / h)), height))


def write_folder(root: Path, labels: list[str], seed: int = 0) -> Path:
    """``root/images/*.png`` and ``root/gt.txt``."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, label in enumerate(labels):
        name = f"images/{i:04d}.png"
        render_word(label, seed=seed + i).save(root / name)
        lines.append(f"{name}\t{label}")
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def word_labels(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


@pytest.fixture(scope="session")
def word_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 rendered words as an image folder with gt.txt."""
    return write_folder(tmp_path_factory.mktemp("words"), word_labels(64))


@pytest.fixture(scope="session")
def word_lmdb(tmp_path_factory: pytest.TempPathFactory, word_folder: Path) -> Path:
    """The same 64 words as an LMDB in the shared layout."""
    from crnn.data.lmdb import LmdbWriter

    out = tmp_path_factory.mktemp("lmdb") / "words"
    with LmdbWriter(out) as w:
        for line in (word_folder / "gt.txt").read_text().splitlines():
            rel, label = line.split("\t")
            with Image.open(word_folder / rel) as im:
                size = im.size
            w.add((word_folder / rel).read_bytes(), label, size)
    return out


@pytest.fixture
def tiny_overrides(tmp_path: Path, word_lmdb: Path) -> list[str]:
    """Config overrides for a seconds-long CPU run on ``word_lmdb``."""
    return [
        *TINY_MODEL,
        f'data.train=["{word_lmdb}"]',
        f'data.val=["{word_lmdb}"]',
        "data.num_workers=0",
        "data.augment.enabled=false",
        "train.batch_size=8",
        "train.max_steps=6",
        "train.val_every=3",
        "train.log_every=1",
        "train.warmup_steps=2",
        "train.lr=3e-3",
        "train.log_images=2",
        f"train.output_dir={tmp_path / 'run'}",
    ]


def train_on_corpus_words(
    tmp_path: Path,
    chars: str,
    charset: str,
    font_dir: Path,
    max_length: int,
    *extra: str,
    steps: int = 1000,
) -> dict[str, float]:
    """Train a small CRNN on the CPU for ``steps`` steps on synthetic text from a corpus of
    3,000 random strings of 1-6 of ``chars`` (seed 0), pieces of at most ``max_length``,
    drawn with the fonts of ``font_dir`` only, effects and augmentation off; returns its
    metrics on a fixed synthetic validation set of 96."""
    from crnn.config import load_config
    from crnn.data.synth.render import EFFECT_PROBABILITIES
    from crnn.engine.distributed import DistInfo
    from crnn.engine.trainer import Trainer

    r = random.Random(0)
    tmp_path.mkdir(parents=True, exist_ok=True)
    corpus = tmp_path / "corpus.txt"
    lines = ["".join(r.choice(chars) for _ in range(r.randint(1, 6))) for _ in range(3000)]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    overrides = [
        "model.channels=[16,32,32,64,64,64,64]",
        "model.hidden=64",
        f"data.charset={charset}",
        "data.synth.bundled_fonts=false",
        f'data.synth.font_dirs=["{font_dir}"]',
        f'data.synth.corpus=["{corpus}"]',
        *(
            f"data.synth.{k}=0"
            for k in (
                "p_word",
                "p_number",
                "p_date",
                "p_price",
                "p_code",
                "p_random",
                "p_line",
                *EFFECT_PROBABILITIES,
            )
        ),
        "data.synth.min_length=1",
        f"data.synth.max_length={max_length}",
        "data.synth.val_size=96",
        "data.max_width=160",
        "data.augment.enabled=false",
        "data.num_workers=0",
        "train.batch_size=32",
        f"train.max_steps={steps}",
        f"train.val_every={steps}",
        "train.lr=3e-3",
        "train.warmup_steps=50",
        "train.log_images=0",
        f"train.output_dir={tmp_path / 'run'}",
        "train.seed=1",
        "train.channels_last=true",
        "dist.strategy=none",
        *extra,
    ]
    return Trainer(load_config(None, overrides), DistInfo()).fit().metrics


def base_overrides(lmdb: Path, out: Path, *extra: str) -> list[str]:
    """A tiny run whose learning rate does not depend on max_steps (constant after a
    two-step warm-up), so runs of different lengths and their resumptions compare."""
    return [
        *TINY_MODEL,
        f'data.train=["{lmdb}"]',
        f'data.val=["{lmdb}"]',
        "data.num_workers=0",
        "data.augment.enabled=false",
        "train.batch_size=8",
        "train.log_every=1",
        "train.val_every=1000",
        "train.warmup_steps=2",
        "train.schedule=constant",
        "train.lr=3e-3",
        "train.log_images=0",
        f"train.output_dir={out}",
        *extra,
    ]


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago. It is closed again before the
    caller's process binds it, so a test running beside may take it first: a caller
    starts again on a new port when its process says the address is in use."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when it is absent (a user's clone)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (development data beside the project)")
    return path


def run_tool(
    name: str, *args: str, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``tools/<name>.py`` in a subprocess, as a user would."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    full_env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(ROOT),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The gpu tier skips where there is no CUDA device (the default CPU run), unless
    ``CRNN_GPU_DRY_RUN=1`` asks for its CPU dry run."""
    import torch

    if torch.cuda.is_available() or os.environ.get("CRNN_GPU_DRY_RUN") == "1":
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA GPU (the gpu tier: pytest -m gpu on a GPU machine)"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
