"""Failures that explain themselves: each bad input or broken environment gives one
clear message (what, where, what to do), the right exit code, and loses nothing."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
import torch
from ckpt_helpers import run_main
from conftest import TINY_MODEL, write_folder

from crnn.checkpoint import load_checkpoint
from crnn.cli import create_lmdb as create_lmdb_cli
from crnn.cli import eval as eval_cli
from crnn.cli import train as train_cli
from crnn.reading.recognizer import default_checkpoint


def train_args(lmdb: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--train",
        str(lmdb),
        "--val",
        str(lmdb),
        "--output-dir",
        str(out),
        "--set",
        *TINY_MODEL,
        "data.num_workers=0",
        "train.batch_size=8",
        "train.log_every=1",
        "train.warmup_steps=1",
        *extra,
    ]


def test_a_truncated_lmdb_is_named_not_a_bus_error(word_lmdb, tmp_path, capsys):
    cut = tmp_path / "cut"
    shutil.copytree(word_lmdb, cut)
    data = cut / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    rc, _, err = run_main(train_cli.main, *train_args(cut, tmp_path / "run"), capsys=capsys)
    assert rc == 2 and "is damaged: data.mdb holds" in err and "cut off" in err
    assert "is damaged" in (tmp_path / "run" / "train.log").read_text()  # never an empty log
    word_model = str(default_checkpoint(prefer_onnx=False))
    rc, _, err = run_main(eval_cli.main, word_model, cut, capsys=capsys)
    assert rc == 1 and "is damaged" in err


def test_a_gt_file_in_another_encoding_is_reported_by_line_never_corrupted(tmp_path, capsys):
    root = write_folder(tmp_path / "f", ["hello", "world"])
    gt = root / "gt.txt"
    lines = gt.read_bytes().splitlines()
    gt.write_bytes(lines[0] + b"\n" + lines[1].split(b"\t")[0] + b"\tcaf\xe9\n")  # latin-1
    rc, _, err = run_main(
        create_lmdb_cli.main, "--root", root, "--out", tmp_path / "a", capsys=capsys
    )
    assert rc == 1 and "gt.txt:2: not valid utf-8 (byte 0xe9" in err and "--encoding" in err
    from crnn.data.lmdb import LmdbReader

    assert [LmdbReader(tmp_path / "a").label(i) for i in range(1)] == ["hello"]
    rc, _, _ = run_main(
        create_lmdb_cli.main,
        "--root",
        root,
        "--out",
        tmp_path / "b",
        "--encoding",
        "latin-1",
        capsys=capsys,
    )
    assert rc == 0
    assert LmdbReader(tmp_path / "b").label(1) == "café"


def test_a_full_disk_during_a_save_says_so_keeps_last_pt_and_exits_1(
    word_lmdb, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    args = train_args(
        word_lmdb, out, "train.max_steps=4", "train.save_every=2", "train.val_every=100"
    )
    real_save, saves = torch.save, []

    def save(obj, f, *a, **k):
        saves.append(1)
        if len(saves) >= 2:  # the second checkpoint does not fit
            # What torch's zip writer raises when the disk fills up.
            raise RuntimeError(
                "[enforce fail at inline_container.cc:603] . unexpected pos 4610112 vs 4610004"
            )
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", save)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9, 0))
    rc, _, err = run_main(train_cli.main, *args, capsys=capsys)
    assert rc == 1, err[-2000:]
    assert "no space left on device at" in err and "Traceback" not in err
    assert "no space left on device" in (out / "train.log").read_text()
    monkeypatch.setattr(torch, "save", real_save)
    assert load_checkpoint(out / "last.pt")["step"] == 2  # the previous one, intact
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_a_training_set_without_a_readable_image_stops_at_once(tmp_path, capsys):
    bad = tmp_path / "bad"
    (bad / "images").mkdir(parents=True)
    for i in range(10):
        (bad / "images" / f"{i}.png").write_text("not an image")
    (bad / "gt.txt").write_text("".join(f"images/{i}.png\tword\n" for i in range(10)))
    for batch in ("1", "64"):
        rc, _, err = run_main(
            train_cli.main,
            *train_args(bad, tmp_path / f"r{batch}"),
            "--set",
            f"train.batch_size={batch}",
            capsys=capsys,
        )
        assert rc == 2 and "none of the 10 images tried could be read" in err, err[-1500:]
        assert not (tmp_path / f"r{batch}" / "last.pt").exists()


def test_too_few_samples_for_one_batch_is_a_message_not_a_traceback(word_lmdb, tmp_path, capsys):
    rc, _, err = run_main(
        train_cli.main,
        *train_args(word_lmdb, tmp_path / "r"),
        "--set",
        "train.batch_size=128",
        capsys=capsys,
    )
    assert rc == 2 and "64 usable samples, fewer than one global batch" in err
    assert "Traceback" not in err


def test_unreadable_batches_in_a_row_stop_the_run():
    from crnn.data.errors import DataError
    from crnn.engine.logging import BadImageReport

    report = BadImageReport()
    for _ in range(report.MAX_EMPTY_IN_A_ROW - 1):
        report.add(["x.png: not a readable image"], readable=0)
    report.add([], readable=4)  # one readable batch resets the count
    with pytest.raises(DataError, match="no image could be read in the last 50 batches"):
        for _ in range(report.MAX_EMPTY_IN_A_ROW):
            report.add(["x.png: not a readable image"], readable=0)


def test_an_output_dir_that_is_a_file_is_one_line(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("")
    rc, _, err = run_main(train_cli.main, "--output-dir", f, capsys=capsys)
    assert rc == 2 and "is a file, not a folder" in err and "Traceback" not in err


def test_resuming_with_another_batch_size_warns_that_the_data_order_changes(
    word_lmdb, tmp_path, capsys
):
    out = tmp_path / "run"
    rc, _, _ = run_main(
        train_cli.main, *train_args(word_lmdb, out, "train.max_steps=2"), capsys=capsys
    )
    assert rc == 0
    rc, _, err = run_main(
        train_cli.main,
        "--resume",
        out,
        "--set",
        "train.max_steps=3",
        "train.batch_size=16",
        capsys=capsys,
    )
    assert rc == 0
    assert "train.batch_size changed from 8 to 16 on resume" in err
    rc, _, err = run_main(
        train_cli.main,
        "--resume",
        out,
        "--set",
        "train.max_steps=4",
        "train.batch_size=16",
        capsys=capsys,
    )
    assert "changed from" not in err  # the saved settings now match


def test_write_errors_other_than_a_full_disk_pass_through(tmp_path):
    from crnn.io import WriteError, atomic_write

    def denied(f):
        raise PermissionError(errno.EACCES, "denied")

    with pytest.raises(PermissionError) as e:
        atomic_write(tmp_path / "x", denied)
    assert not isinstance(e.value, WriteError)
