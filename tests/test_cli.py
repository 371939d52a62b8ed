"""The command-line tools end to end, as a user runs them, bad input included."""

import json
import re

import pytest
from conftest import TINY_MODEL, run_tool, write_folder

from crnn.data.lmdb import LmdbReader


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, word_lmdb):
    out = tmp_path_factory.mktemp("cli") / "run"
    r = run_tool(
        "train",
        "--gpus",
        "cpu",
        "--train",
        str(word_lmdb),
        "--val",
        str(word_lmdb),
        "--output-dir",
        str(out),
        "--set",
        *TINY_MODEL,
        "train.max_steps=4",
        "train.val_every=2",
        "train.batch_size=8",
        "data.num_workers=0",
        "train.log_every=2",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "run directory" in r.stderr and "tensorboard --logdir" in r.stderr
    assert "saved" in (out / "train.log").read_text()
    return out


@pytest.mark.slow
def test_create_lmdb_reports_bad_lines_and_writes_the_rest(tmp_path):
    root = write_folder(tmp_path / "imgs", ["one", "two", "three"])
    (root / "images" / "0001.png").write_bytes(b"not a png")
    with open(root / "gt.txt", "a") as f:
        f.write("images/nope.png\tfour\nimages/0002.png\t \n")
    r = run_tool("create_lmdb", "--root", str(root), "--out", str(tmp_path / "db"))
    assert r.returncode == 1, r.stderr
    assert "gt.txt:2: image 'images/0001.png' cannot be decoded" in r.stderr
    assert "gt.txt:4: image 'images/nope.png' not found" in r.stderr
    assert "gt.txt:5: empty label" in r.stderr
    assert "wrote 2 samples" in r.stderr
    reader = LmdbReader(tmp_path / "db")
    assert reader.labels() == ["one", "three"] and reader.sizes() is not None
    again = run_tool("create_lmdb", "--root", str(root), "--out", str(tmp_path / "db"))
    assert again.returncode == 2 and "--overwrite" in again.stderr


@pytest.mark.slow
def test_create_lmdb_usage_errors(tmp_path):
    r = run_tool("create_lmdb", "--root", str(tmp_path / "missing"), "--out", str(tmp_path / "db"))
    assert r.returncode == 2 and "is not a folder" in r.stderr


@pytest.mark.slow
def test_train_rejects_bad_config_before_doing_anything(tmp_path):
    r = run_tool(
        "train", "--gpus", "cpu", "--set", "train.lrr=1", "--output-dir", str(tmp_path / "x")
    )
    assert r.returncode == 2 and "did you mean train.lr" in r.stderr
    assert not (tmp_path / "x").exists()
    r = run_tool("train", "--gpus", "7")
    assert r.returncode == 2 and "no CUDA GPU is visible" in r.stderr
    r = run_tool("train", "--resume", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "not found" in r.stderr


@pytest.mark.slow
def test_train_then_resume_from_the_run_directory(trained_run):
    r = run_tool(
        "train", "--gpus", "cpu", "--resume", str(trained_run), "--set", "train.max_steps=6"
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed at step 4" in r.stderr and "finished 6 steps" in r.stderr


@pytest.mark.slow
def test_eval_prints_a_table_per_dataset(trained_run, word_lmdb, word_folder, tmp_path):
    out_json = tmp_path / "eval.json"
    r = run_tool(
        "eval",
        str(trained_run / "best.pt"),
        str(word_lmdb),
        str(word_folder),
        "--json",
        str(out_json),
        "--workers",
        "0",
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("acc: exact match with the label as the model's charset")
    assert lines[1].split()[:7] == ["dataset", "n", "acc", "alnum", "CER", "NED", "ECE"]
    assert len(lines) == 5  # what acc means, header, rule, two datasets
    rows = json.loads(out_json.read_text())
    assert [row["count"] for row in rows] == [64, 64]
    assert rows[0]["accuracy"] == pytest.approx(rows[1]["accuracy"])  # same images, two formats
    bad = run_tool("eval", str(trained_run / "best.pt"), str(tmp_path / "nope"))
    assert bad.returncode == 1 and "does not exist" in bad.stderr


@pytest.mark.slow
def test_predict_tsv_json_and_bad_files(trained_run, word_folder, tmp_path):
    img = word_folder / "images" / "0000.png"
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG but not really")
    r = run_tool(
        "predict", "-c", str(trained_run), str(img), str(bad), str(tmp_path / "missing.png")
    )
    assert r.returncode == 1
    fields = r.stdout.strip().split("\t")
    assert fields[0] == str(img) and len(fields) == 3 and 0.0 <= float(fields[2]) <= 1.0
    assert "bad.png" in r.stderr and "missing.png: no such file" in r.stderr
    r = run_tool(
        "predict", "-c", str(trained_run / "last.pt"), "--json", str(word_folder / "images")
    )
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert len(results) == 64 and {"path", "text", "confidence", "char_confidences"} <= set(
        results[0]
    )
    assert len(results[0]["char_confidences"]) == len(results[0]["text"])


@pytest.mark.slow
def test_predict_with_a_missing_checkpoint_is_a_usage_error(tmp_path, word_folder):
    r = run_tool(
        "predict", "-c", str(tmp_path / "none.pt"), str(word_folder / "images" / "0000.png")
    )
    assert r.returncode == 2 and "not found" in r.stderr


@pytest.mark.slow
def test_help_explains_the_batch_size():
    r = run_tool("train", "--help")
    assert r.returncode == 0 and "GLOBAL batch" in r.stdout


@pytest.mark.slow
def test_create_lmdb_holds_out_a_stable_validation_split(tmp_path):
    root = write_folder(tmp_path / "imgs", [f"w{i}" for i in range(40)])
    args = [
        "--root",
        str(root),
        "--out",
        str(tmp_path / "tr"),
        "--val-fraction",
        "0.25",
        "--val-out",
        str(tmp_path / "va"),
    ]
    r = run_tool("create_lmdb", *args)
    assert r.returncode == 0, r.stderr
    train, val = LmdbReader(tmp_path / "tr").labels(), LmdbReader(tmp_path / "va").labels()
    assert sorted(train + val) == sorted(f"w{i}" for i in range(40))
    assert 3 <= len(val) <= 20  # about a quarter
    lines = (root / "gt.txt").read_text().splitlines()
    (root / "gt.txt").write_text("\n".join(reversed(lines)) + "\n")  # order must not matter
    r = run_tool("create_lmdb", *args, "--overwrite")
    assert r.returncode == 0 and sorted(LmdbReader(tmp_path / "va").labels()) == sorted(val)
    bad = run_tool(
        "create_lmdb", "--root", str(root), "--out", str(tmp_path / "x"), "--val-fraction", "0.2"
    )
    assert bad.returncode == 2 and "go together" in bad.stderr


@pytest.mark.slow
def test_train_in_chunks_with_until_step(tmp_path, word_lmdb):
    from crnn.checkpoint import load_checkpoint

    out = tmp_path / "chunks"
    common = ["--gpus", "cpu"]
    r = run_tool(
        "train",
        *common,
        "--train",
        str(word_lmdb),
        "--val",
        str(word_lmdb),
        "--output-dir",
        str(out),
        "--until-step",
        "2",
        "--set",
        *TINY_MODEL,
        "train.max_steps=4",
        "train.val_every=10",
        "train.batch_size=8",
        "data.num_workers=0",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "stopping at step 2 as asked" in r.stderr
    ckpt = load_checkpoint(out / "last.pt")
    assert ckpt["step"] == 2 and ckpt["config"]["train"]["max_steps"] == 4
    r = run_tool("train", *common, "--resume", str(out), "--time-limit", "30")
    assert r.returncode == 0 and "finished 4 steps" in r.stderr
    log = (out / "train.log").read_text()  # one log across both launches, set-up included
    assert "stopping at step 2" in log and "resumed at step 2" in log and "finished 4 steps" in log
    assert re.search(r"step 4 \S+: acc [0-9.]+  alnum-acc", log), log  # validation is logged


def test_train_dry_run_reports_the_run_and_writes_nothing(word_lmdb, tmp_path, capsys):
    from ckpt_helpers import run_main

    from crnn.cli import train as train_cli

    out = tmp_path / "run"
    rc, text, _ = run_main(
        train_cli.main,
        "--dry-run",
        "--train",
        word_lmdb,
        "--val",
        word_lmdb,
        "--output-dir",
        out,
        "--set",
        *TINY_MODEL,
        "data.num_workers=0",
        "train.batch_size=8",
        "train.max_steps=40",
        "data.charset=chars:abcdefghijklmnopqrstu",
        capsys=capsys,
    )
    assert rc == 0
    assert "words: " in text and "samples kept, skipped:" in text and "unknown_chars" in text
    assert "8 per optimizer step = 8 per device x 1 accumulation" in text
    assert "40 steps (" in text and "epochs of" in text
    assert f"would write {out}/last.pt" in text
    assert not out.exists()  # nothing written


def test_eval_modes_decoding_options_and_error_report(word_lmdb, tmp_path, capsys):
    """--mode states what counts as right, --beam/--lexicon decode as predict does, and
    --errors writes every wrong read, the breakdowns and a picture of the worst."""
    import csv
    import json as json_

    from ckpt_helpers import run_main
    from conftest import WORDS

    from crnn.cli import eval as eval_cli
    from crnn.cli import train as train_cli

    run_dir = tmp_path / "run"
    rc, _, _ = run_main(
        train_cli.main,
        "--train",
        word_lmdb,
        "--val",
        word_lmdb,
        "--output-dir",
        run_dir,
        "--set",
        *TINY_MODEL,
        "data.num_workers=0",
        "train.batch_size=8",
        "train.max_steps=4",
        capsys=capsys,
    )
    assert rc == 0
    out = tmp_path / "errors"
    rc, text, _ = run_main(
        eval_cli.main,
        run_dir,
        word_lmdb,
        "--mode",
        "exact",
        "--errors",
        out,
        "--json",
        tmp_path / "r.json",
        "--workers",
        "0",
        capsys=capsys,
    )
    assert rc == 0 and "acc: case-sensitive, punctuation and symbols kept (--mode exact)" in text
    row = json_.loads((tmp_path / "r.json").read_text())[0]
    assert row["mode"] == "exact" and 0 <= row["exact_accuracy"] <= row["caseless_accuracy"] <= 1
    rows = list(csv.DictReader(open(out / "words" / "errors.tsv"), delimiter="\t"))
    wrong = round((1 - row["exact_accuracy"]) * row["count"])
    assert len(rows) == wrong > 0  # a 4-step model reads most words wrong
    assert all(r["label"] in WORDS and r["source"].startswith(str(word_lmdb)) for r in rows)
    assert "## By label length" in (out / "words" / "summary.md").read_text()
    from PIL import Image

    assert Image.open(out / "words" / "worst_errors.png").size[0] > 100
    lex = tmp_path / "words.txt"
    lex.write_text("\n".join(WORDS))
    rc, text, _ = run_main(
        eval_cli.main,
        run_dir,
        word_lmdb,
        "--lexicon",
        lex,
        "--max-edits",
        "9",
        "--json",
        tmp_path / "l.json",
        "--workers",
        "0",
        capsys=capsys,
    )
    snapped = json_.loads((tmp_path / "l.json").read_text())[0]
    assert rc == 0 and snapped["accuracy"] > row["accuracy"]  # a lexicon of the answers helps
    rc, _, _ = run_main(
        eval_cli.main, run_dir, word_lmdb, "--beam", "4", "--workers", "0", capsys=capsys
    )
    assert rc == 0


def test_keep_every_keeps_each_steps_weights_for_predict_and_average(tmp_path, word_lmdb):
    """train.keep_every=2 keeps steps 2 and 4 (not 3, a validation) as inference files
    holding the EMA weights; predict reads one, and averaging 2 and 4 gives their mean."""
    import torch

    from crnn.checkpoint import load_checkpoint

    out = tmp_path / "run"
    r = run_tool(
        "train",
        "--gpus",
        "cpu",
        "--train",
        str(word_lmdb),
        "--val",
        str(word_lmdb),
        "--output-dir",
        str(out),
        "--set",
        *TINY_MODEL,
        "train.max_steps=4",
        "train.val_every=3",
        "train.batch_size=8",
        "data.num_workers=0",
        "train.keep_every=2",
        "train.ema_decay=0.5",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    kept = sorted(p.name for p in (out / "steps").iterdir())
    assert kept == ["step-00000002.pt", "step-00000004.pt"], kept
    assert "kept the weights as steps/step-00000004.pt" in (out / "train.log").read_text()
    last, four = load_checkpoint(out / "last.pt"), load_checkpoint(out / "steps" / kept[1])
    assert "optimizer" not in four and four["release"]["step"] == 4
    for k, v in last["model"].items():  # the EMA, not the raw weights
        assert torch.equal(four["model"][k], v), k
    assert any(not torch.equal(last["model_raw"][k], v) for k, v in last["model"].items())
    images = write_folder(tmp_path / "imgs", ["one"]) / "images"
    r = run_tool("predict", "-c", str(out / "steps" / kept[0]), str(images))
    assert r.returncode == 0, r.stderr[-2000:]
    steps = [str(out / "steps" / k) for k in kept]  # the run directory's two kept steps
    r = run_tool("convert_checkpoint", "average", str(out), "--last", "2", "-o", str(out / "a"))
    assert r.returncode == 0, r.stderr[-2000:]
    avg, two = load_checkpoint(r.stdout.strip()), load_checkpoint(steps[0])
    k = "cnn.conv0.weight"
    torch.testing.assert_close(avg["model"][k], (two["model"][k] + four["model"][k]) / 2)


def test_every_command_answers_version(capsys):
    """Each console script of pyproject.toml prints the package's version and exits 0."""
    import importlib
    import re
    from pathlib import Path

    import crnn

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    scripts = dict(re.findall(r'^(crnn-[\w-]+) = "([\w.:]+)"', section, re.M))
    assert len(scripts) >= 11
    for name, target in scripts.items():
        module, func = target.split(":")
        try:  # argparse exits; crnn-synth returns argparse's exit code instead
            code = getattr(importlib.import_module(module), func)(["--version"])
        except SystemExit as e:
            code = e.code
        assert code in (0, None), name
        assert capsys.readouterr().out.strip() == f"crnn-ocr {crnn.__version__}", name


def test_predict_reads_its_inputs_from_a_list_or_standard_input(tmp_path, capsys, monkeypatch):
    import io
    from pathlib import Path

    from crnn.cli.predict import main

    word = Path(__file__).resolve().parents[1] / "data" / "samples" / "word_01.png"
    listing = tmp_path / "list.txt"
    listing.write_text(f"\n  {word}  \n\n")
    assert main(["--files-from", str(listing)]) == 0
    assert "homeland" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{word}\n"))
    assert main(["-"]) == 0
    assert "homeland" in capsys.readouterr().out
    assert main([]) == 2
    assert "no inputs" in capsys.readouterr().err


def test_a_command_whose_extra_is_missing_says_what_to_install(monkeypatch, capsys):
    """A reader-only install (no PyTorch): crnn-train names the extra instead of failing
    with a traceback; --version still answers."""
    from crnn.cli import entry

    monkeypatch.setattr(
        entry, "missing", lambda modules: [m for m in modules if m in ("torch", "lmdb")]
    )
    assert entry.train([]) == 2
    err = capsys.readouterr().err
    assert "crnn-train needs torch, lmdb" in err and "pip install 'crnn-ocr[train]'" in err
    assert entry.create_lmdb(["--root", "x", "--out", "y"]) == 2
    assert "crnn-create-lmdb needs lmdb" in capsys.readouterr().err
    assert entry.train(["--version"]) == 0
    assert capsys.readouterr().out.startswith("crnn-ocr ")
