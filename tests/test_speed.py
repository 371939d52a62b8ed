"""The speed work stays honest: bucketing loses nothing and keeps CTC lengths exact,
faster numerics read like fp32, the PyTorch-free predict path really is, and the
benchmark counts what it says it counts. (Speed itself is in docs/benchmarks.md.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from ckpt_helpers import run_main
from conftest import ROOT, TINY_MODEL, word_labels, write_folder

from benchmarks.bench import BenchOptions, count_flops, format_tables, padding_fraction, run_bench
from crnn import checkpoint as ck
from crnn.backends.torch import TorchBackend, normalize
from crnn.config import load_config
from crnn.config.image_spec import ImageSpec
from crnn.ctc import greedy_decode
from crnn.data.transforms import preprocess
from crnn.engine import parallel
from crnn.engine.data import to_device
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.model import CRNN
from crnn.reading import recognizer as inference
from crnn.reading.recognizer import Recognizer
from crnn.text.alphabet import Charset

READER = Path(__file__).parent / "fixtures" / "tiny_reader.pt"


@pytest.fixture(scope="module")
def reader():
    """A tiny CRNN trained on conftest's rendered words (tests/fixtures/make_tiny_reader.py)."""
    model, charset, spec = ck.model_from_checkpoint(ck.load_checkpoint(READER), str(READER))
    return model.eval(), charset, spec


def _word_images(word_folder: Path, n: int) -> tuple[list[Path], list[str]]:
    rows = [line.split("\t") for line in (word_folder / "gt.txt").read_text().splitlines()][:n]
    return [word_folder / r for r, _ in rows], [label for _, label in rows]


def _by_width(images: list[torch.Tensor]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for i, im in enumerate(images):
        groups.setdefault(im.shape[-1], []).append(i)
    return list(groups.values())


# ---- bucketing ------------------------------------------------------------------------


def test_bucketed_epoch_has_every_sample_once_and_exact_ctc_input_lengths(tmp_path, monkeypatch):
    words = ["a", "cat", "house", "stone", "lampdoor", "riverstone", "treemoonsun", "doorlamproad"]
    root = write_folder(tmp_path / "d", [words[i % len(words)] for i in range(48)])
    cfg = load_config(
        None,
        [
            *TINY_MODEL,
            f'data.train=["{root}"]',
            f'data.val=["{root}"]',
            "data.num_workers=0",
            "data.augment.enabled=false",
            "train.batch_size=16",
            "train.accum_steps=2",
            f"train.output_dir={tmp_path / 'run'}",
            "dist.strategy=none",
        ],
    )
    t = Trainer(cfg, DistInfo())
    ds, sampler = t.data.dataset, t.data.sampler
    seen_lengths: list[torch.Tensor] = []
    real = parallel.ctc_loss_per_sample

    def spy(logits, targets, input_lengths, target_lengths):
        seen_lengths.append(input_lengths.clone())
        return real(logits, targets, input_lengths, target_lengths)

    monkeypatch.setattr(parallel, "ctc_loss_per_sample", spy)
    sampler.set_epoch(0)
    keys = list(sampler)
    batches = list(t.data.loader)
    assert len(keys) == len(batches) == sampler.steps_per_epoch * cfg.train.accum_steps
    indices = []
    padded = unpadded = 0
    for mb, batch in zip(keys, batches):
        alone = [ds[k]["image"].shape[-1] for k in mb]  # each sample's width on its own
        assert batch["widths"].tolist() == alone
        assert batch["images"].shape[-1] == max(alone)
        with torch.no_grad():
            t.train_module(*to_device(batch, t.device))
        expected = [t.model.output_length(w) for w in alone]
        assert seen_lengths[-1].tolist() == expected  # not the padded batch's length
        indices += [i for i, _ in mb]
        padded += max(alone) * len(alone)
        unpadded += sum(alone)
    # Every sample of the epoch once (the incomplete last global batch is dropped).
    assert len(indices) == len(set(indices)) == sampler.steps_per_epoch * cfg.train.batch_size
    assert len(ds) - len(indices) < cfg.train.batch_size
    # Bucketing did its job: less padding than the same epoch unbucketed.
    off = padding_fraction(ds.widths, cfg.train.batch_size, bucketing=False)
    assert 1 - unpadded / padded < off


def test_the_generator_stream_is_bucketed_by_width(tmp_path):
    """With ``data.stream_bucketing`` the on-the-fly generator's batches hold images of
    similar width (sorted once drawn): padding is a few percent, where the same images
    in random batches are mostly padding. Its
    default, "auto", leaves a narrow charset's stream in random batches (a tiny model
    did not learn from batches of one label length) and buckets a wide one's."""
    from crnn.engine.data import _bucket_stream

    base = [
        *TINY_MODEL,
        "data.num_workers=0",
        "data.synth.min_length=1",
        "data.synth.max_length=12",
        "train.batch_size=16",
        f"train.output_dir={tmp_path / 'run'}",
        "dist.strategy=none",
    ]
    assert not _bucket_stream(load_config(None, base), Charset.from_spec("alnum36"))
    assert _bucket_stream(load_config(None, base), Charset.from_spec("zh5529"))
    assert not _bucket_stream(
        load_config(None, [*base, "data.bucketing=false"]), Charset.from_spec("zh5529")
    )
    cfg = load_config(None, [*base, "data.stream_bucketing=true"])
    t = Trainer(cfg, DistInfo())
    widths = [b["widths"].numpy() for b, _ in zip(t.batches(), range(20))]
    padded = sum(w.max() * len(w) for w in widths) / sum(w.sum() for w in widths)
    shuffled = np.random.default_rng(0).permutation(np.concatenate(widths)).reshape(20, -1)
    unbucketed = sum(w.max() * len(w) for w in shuffled) / shuffled.sum()
    assert padded < 1.08 and padded - 1 < 0.2 * (unbucketed - 1), (padded, unbucketed)
    # Resuming mid-window draws the window again and goes on where the run stopped.
    from types import SimpleNamespace

    stream = t.data.batches(SimpleNamespace(epoch=0, step_in_epoch=0))
    later = [b["sources"] for _, b in zip(range(53), stream)][50:]
    resumed = t.data.batches(SimpleNamespace(epoch=0, step_in_epoch=50 + 2))
    assert next(resumed)["sources"] == later[2]


# ---- reduced precision and int8 read like fp32 --------------------------------------


def test_the_fixture_model_reads(reader, word_folder):
    model, charset, _ = reader
    paths, labels = _word_images(word_folder, 32)
    rec = Recognizer(TorchBackend(model, charset, ImageSpec(), device="cpu"))
    texts = [p.text for p in rec.predict(paths)]
    assert sum(t == lbl for t, lbl in zip(texts, labels)) >= 0.8 * len(labels), texts


def test_bf16_autocast_reads_like_fp32(reader, word_folder):
    """bf16 autocast (on the CPU here; autocast_for enables it on CUDA) on a small batch:
    the same texts as fp32, probabilities within a few per cent."""
    model, charset, spec = reader
    paths, _ = _word_images(word_folder, 16)
    images = [preprocess(p, spec) for p in paths]
    for group in _by_width(images):
        x = normalize(torch.stack([images[i] for i in group]))
        with torch.inference_mode():
            ref = model(x)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                low = model(x).float()
        assert [p.text for p in greedy_decode(low, charset)] == [
            p.text for p in greedy_decode(ref, charset)
        ]
        assert (low.softmax(-1) - ref.softmax(-1)).abs().max() < 0.05


def test_int8_export_reads_like_fp32_and_says_so(reader, word_folder, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from crnn.backends.onnx import OnnxBackend
    from crnn.cli import export as export_cli
    from crnn.export import agreement, int8_path

    out = tmp_path / "m.onnx"
    rc, _, err = run_main(
        export_cli.main,
        READER,
        "-o",
        out,
        "--int8",
        "--calibration",
        word_folder,
        "--calibration-images",
        "24",
        "--check-batch-sizes",
        "1",
        capsys=capsys,
    )
    assert rc == 0, err
    assert "identical texts" in err
    fp32, int8 = OnnxBackend(out), OnnxBackend(int8_path(out))
    assert (fp32.quantization, int8.quantization) == ("", "int8-static")
    _, charset, spec = reader
    images = [preprocess(p, spec).numpy() for p in _word_images(word_folder, 64)[0][24:]]
    a = agreement(fp32, int8, images)
    assert a["images"] == 40 and a["text_agreement"] >= 0.95, a
    assert a["max_prob_error"] < 0.5, a
    # The int8 file reads through the same Recognizer and says what it is in predict.
    rc, _, err = run_main(
        __import__("crnn.cli.predict", fromlist=["main"]).main,
        "-c",
        int8_path(out),
        word_folder / "images" / "0000.png",
        capsys=capsys,
    )
    assert rc == 0 and "int8-static" in err


# ---- predicting without PyTorch -----------------------------------------------------


@pytest.mark.slow
def test_predict_from_onnx_never_imports_torch_and_matches_pytorch(reader, word_folder, tmp_path):
    pytest.importorskip("onnxruntime")
    from crnn.export import export_onnx

    model, charset, spec = reader
    onnx_path = export_onnx(model, charset, spec, tmp_path / "r.onnx")
    paths = [str(p) for p in _word_images(word_folder, 6)[0]]
    lex = tmp_path / "words.txt"
    lex.write_text("house\nriver\nstone\n")
    code = (
        "import json, sys\n"
        "from crnn.cli.predict import main\n"
        "rc = main(sys.argv[1:])\n"
        "leaked = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('LEAKED', json.dumps(leaked), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for extra in ([], ["--beam", "4", "--lexicon", str(lex)]):
        r = subprocess.run(
            [sys.executable, "-c", code, "-c", str(onnx_path), "--json", *extra, *paths],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert "LEAKED []" in r.stderr, r.stderr
        got = json.loads(r.stdout)
        beam = {"beam_width": 4, "lexicon": str(lex)} if extra else {}
        want = Recognizer(TorchBackend(model, charset, spec, device="cpu"), **beam).predict(paths)
        assert [g["text"] for g in got] == [w.text for w in want]
        assert [g["confidence"] for g in got] == pytest.approx(
            [w.confidence for w in want], rel=1e-3, abs=1e-5
        )


def test_default_checkpoint_prefers_the_bundled_onnx(tmp_path, monkeypatch):
    from crnn import bundled

    monkeypatch.setattr(bundled, "MODELS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="--checkpoint"):
        inference.default_checkpoint()
    (tmp_path / "crnn_en-1.pt").write_bytes(b"")
    assert inference.default_checkpoint().name == "crnn_en-1.pt"
    (tmp_path / "crnn_en-1.int8.onnx").write_bytes(b"")  # never chosen silently
    assert inference.default_checkpoint().name == "crnn_en-1.pt"
    (tmp_path / "crnn_en-1.onnx").write_bytes(b"")
    if importlib.util.find_spec("onnxruntime") is not None:
        assert inference.default_checkpoint().name == "crnn_en-1.onnx"
    assert inference.default_checkpoint(prefer_onnx=False).name == "crnn_en-1.pt"
    # The line model sits beside it and is only taken when asked for.
    with pytest.raises(FileNotFoundError, match="no bundled line model"):
        inference.default_checkpoint(model="line")
    (tmp_path / "crnn_line_en-2.pt").write_bytes(b"")
    (tmp_path / "crnn_line_en-2.onnx").write_bytes(b"")
    assert inference.default_checkpoint(prefer_onnx=False).name == "crnn_en-1.pt"
    assert inference.default_checkpoint(prefer_onnx=False, model="line").name == "crnn_line_en-2.pt"
    if importlib.util.find_spec("onnxruntime") is not None:
        assert inference.default_checkpoint().name == "crnn_en-1.onnx"
        assert inference.default_checkpoint(model="line").name == "crnn_line_en-2.onnx"
    with pytest.raises(ValueError, match="unknown bundled model 'page'"):
        inference.default_checkpoint(model="page")


# ---- the benchmark ------------------------------------------------------------------


def test_flop_count_includes_the_lstms():
    """The counter must see the recurrent layers (oneDNN's fused LSTM is invisible to
    it): compare with the multiply-adds of the LSTM and projection layers by hand."""
    c, h, k = 32, 16, 37
    m = CRNN(k, channels=[8, 16, 16, 32, 32, 32, c], hidden=h)
    f = count_flops(m, 32, 100)
    t = m.output_length(100)
    lstm = lambda n_in: 2 * t * 2 * 4 * h * (n_in + h)  # noqa: E731 -- 2 directions, 4 gates
    by_hand = lstm(c) + 2 * t * 2 * h * h + lstm(h) + 2 * t * 2 * h * k
    assert f["forward_recurrent_gflop"] * 1e9 == pytest.approx(by_hand, rel=1e-6)
    assert f["forward_conv_gflop"] > 0
    assert 2.5 < f["train_gflop"] / f["forward_gflop"] < 3.5


def test_bench_quick_run_writes_rows_tables_and_json(tmp_path):
    opts = BenchOptions(
        quick=True,
        sections=("flops", "padding", "infer"),
        shapes=("word",),
        batch_sizes=(1, 4),
        int8=False,
        repeats=2,
        seconds=0.02,
        model={"channels": [8, 16, 16, 32, 32, 32, 32], "hidden": 16},
        work_dir=str(tmp_path),
    )
    res = run_bench(opts)
    pad = {r["case"]: r["padding_fraction"] for r in res.rows if r["section"] == "padding"}
    assert pad["bucketing on"] < pad["bucketing off"]
    infer = [r for r in res.rows if r["section"] == "infer"]
    assert {r["case"] for r in infer} >= {"PyTorch fp32"} and all(
        r["images_per_s"] > 0 for r in infer
    )
    assert res.flops["word"]["forward_recurrent_gflop"] > 0
    table = format_tables(res)
    assert "| infer | PyTorch fp32 | word | 1 |" in table and "single image" in table
    assert json.loads(res.to_json())["meta"]["load_start"]
    with pytest.raises(ValueError, match="unknown bench sections"):
        BenchOptions(sections=("nope",))
    assert np.isfinite([r["images_per_s"] for r in infer]).all()


def test_learn_vs_dtrb_starts_both_ways_alike_and_writes_the_curve(tmp_path):
    """The learning comparison is fair (one seed, one network on both sides) and reports
    accuracy after the same number of images for each way of training."""
    from benchmarks import learn_vs_dtrb as lv

    train = write_folder(tmp_path / "train", word_labels(12))
    dev = write_folder(tmp_path / "dev", word_labels(6, seed=1), seed=100)
    charset = Charset.from_spec("alnum36")
    dtrb, ours = lv.make_sides(lv.words([train], charset, 100, seed=0), charset)
    a, b = dtrb.model.state_dict(), ours.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    out = tmp_path / "learn.json"
    # A window: the same words on both sides, ours in batches of similar widths.
    plan = lv.window([], np.random.default_rng(0), 3, ours.images)
    assert len(plan) == lv.WINDOW
    assert sorted(i for d, _ in plan for i in d) == sorted(i for _, o in plan for i in o)
    widths = [[ours.images[i].shape[-1] for i in o] for _, o in plan]
    assert sorted(widths) == sorted(sorted(w) for w in widths)  # batches cut from one sort
    assert max(max(w) - min(w) for w in widths) < max(map(max, widths)) - min(map(min, widths))
    argv = [
        "--data",
        str(train),
        "--dev",
        str(dev),
        "--steps",
        "16",
        "--eval-every",
        "8",
        "--batch",
        "2",
    ]
    assert lv.main([*argv, "--json", str(out)]) == 0
    curve = json.loads(out.read_text())["curve"]
    assert [(r["step"], r["images"]) for r in curve] == [(8, 16), (16, 32)]
    for row in curve:
        for side in ("dtrb", "ours"):
            assert 0 <= row[side]["dev"]["accuracy"] <= 1 and row[side]["dev"]["cer"] >= 0
            assert row[side]["images_per_s"] > 0
