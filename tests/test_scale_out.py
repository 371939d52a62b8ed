"""predict and eval over several processes (--nproc on the CPU here; --gpus and torchrun
take the same path): each reads its share, the results are merged in input order, and
they equal one process's exactly; predict's JSON lines resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_tool

from crnn.reading.recognizer import default_checkpoint

REPO = Path(__file__).resolve().parents[1]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_eval_over_two_processes_equals_one_exactly(word_folder, tmp_path) -> None:
    model = str(default_checkpoint())
    one = run_tool(
        "eval",
        model,
        str(word_folder),
        str(REPO / "data" / "samples"),
        "--json",
        str(tmp_path / "one.json"),
    )
    two = run_tool(
        "eval",
        model,
        str(word_folder),
        str(REPO / "data" / "samples"),
        "--nproc",
        "2",
        "--json",
        str(tmp_path / "two.json"),
    )
    assert one.returncode == two.returncode == 0, two.stderr[-2000:]
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "two.json"))
    for ra, rb in zip(a, b, strict=True):
        ra.pop("images_per_s"), rb.pop("images_per_s")
        assert ra == rb
    assert a[0]["count"] == 64 and 0 < a[0]["accuracy"]
    # The printed tables differ only in the images/s column.
    strip = lambda out: [line.rsplit(None, 2)[0] for line in out.splitlines() if line.strip()]  # noqa: E731
    assert strip(one.stdout) == strip(two.stdout)


@pytest.mark.slow
def test_predict_over_two_processes_merges_in_input_order_and_resumes(
    word_folder, tmp_path
) -> None:
    inputs = [str(word_folder / "images"), str(REPO / "README.md")]
    one = run_tool("predict", *inputs, "--output", str(tmp_path / "one.jsonl"))
    two = run_tool("predict", *inputs, "--nproc", "2", "--output", str(tmp_path / "two.jsonl"))
    assert one.returncode == two.returncode == 1  # README.md is not an image
    assert (tmp_path / "one.jsonl").read_text() == (tmp_path / "two.jsonl").read_text()
    rows = _rows(tmp_path / "two.jsonl")
    assert len(rows) == 65 and rows[-1]["path"].endswith("README.md") and "error" in rows[-1]
    assert [r["path"] for r in rows[:64]] == sorted(r["path"] for r in rows[:64])
    assert not list(tmp_path.glob("two.jsonl.part*"))
    # A run killed after 20 lines: the rerun reads only the rest, and the file is the same.
    part = tmp_path / "two.jsonl.part-0-of-1"
    part.write_text("".join(json.dumps(r) + "\n" for r in rows[:20]), encoding="utf-8")
    (tmp_path / "two.jsonl").unlink()
    again = run_tool("predict", *inputs, "--output", str(tmp_path / "two.jsonl"))
    assert "resuming" in again.stderr and "20 inputs already read" in again.stderr
    assert (tmp_path / "two.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()


@pytest.mark.slow
def test_predict_under_torchrun_style_ranks_merges_on_rank_0(word_folder, tmp_path) -> None:
    out = tmp_path / "ranks.jsonl"
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "PYTHONPATH": str(REPO),
            "OMP_NUM_THREADS": "1",
        }
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "crnn.cli.predict",
                    str(word_folder / "images"),
                    "--output",
                    str(out),
                ],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    single = run_tool(
        "predict", str(word_folder / "images"), "--output", str(tmp_path / "single.jsonl")
    )
    assert single.returncode == 0
    assert out.read_text() == (tmp_path / "single.jsonl").read_text()


def test_several_processes_need_an_output_file(word_folder, capsys) -> None:
    from ckpt_helpers import run_main

    from crnn.cli import predict as predict_cli

    rc, _, err = run_main(predict_cli.main, word_folder / "images", "--nproc", "2", capsys=capsys)
    assert rc == 2 and "--output FILE.jsonl" in err


def test_each_rank_of_a_scaled_out_reader_runs_on_its_own_gpu() -> None:
    """Under torchrun (LOCAL_RANK set) a bare ``cuda``, given or the default, is the
    rank's own GPU; every rank ran on cuda:0 before. An explicit index is kept."""
    from crnn.backends.torch import reader_device

    assert str(reader_device("cuda", {"LOCAL_RANK": "3", "RANK": "7"})) == "cuda:3"
    assert str(reader_device("cuda:1", {"LOCAL_RANK": "3"})) == "cuda:1"
    assert str(reader_device("cuda", {})) == "cuda"
    assert str(reader_device("cpu", {"LOCAL_RANK": "3"})) == "cpu"


def test_a_completion_marker_left_by_an_earlier_run_does_not_start_the_merge(
    tmp_path, monkeypatch
) -> None:
    """A killed run's .done marker (or one re-created by a rank that finished after an
    earlier merge) must not count: rank 0 would merge early and delete a part that a
    rank of this run is still writing."""
    import os

    from crnn import sharding

    out = tmp_path / "out.jsonl"
    part = sharding.part_path(out, 1, 2)
    part.write_text('{"path": "a"}\n')
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "old-run")
    sharding.mark_done(part)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "this-run")
    assert not sharding.is_done(part)
    with pytest.raises(TimeoutError, match=r"parts \[0, 1\]"):
        sharding.wait_for_parts(out, 2, timeout_s=0.3)
    sharding.mark_done(part)
    assert sharding.is_done(part)
    # Without a run token, a marker written before this process started is stale.
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    for var in ("CRNN_RUN_ID", "SLURM_JOB_ID", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    os.utime(f"{part}.done", (sharding._STARTED - 3600, sharding._STARTED - 3600))
    assert not sharding.is_done(part)
    sharding.mark_done(part)
    assert sharding.is_done(part)
    # torchrun's default rendezvous names its run "none": the rendezvous address tells
    # this run's markers, however long before this process another rank finished.
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    monkeypatch.setenv("MASTER_ADDR", "node-0")
    monkeypatch.setenv("MASTER_PORT", "29500")
    sharding.mark_done(part)
    os.utime(f"{part}.done", (sharding._STARTED - 3600, sharding._STARTED - 3600))
    assert sharding.is_done(part)
    monkeypatch.setenv("MASTER_PORT", "29501")  # another run's rendezvous
    assert not sharding.is_done(part)


def test_predict_and_train_read_gpus_with_one_parser(monkeypatch):
    """``--gpus all`` was training's alone: predict and eval refused it ("expected GPU
    numbers"), and never checked a listed GPU exists. One parser serves all three now,
    counting the visible GPUs without PyTorch where CUDA_VISIBLE_DEVICES says."""
    from crnn.config.devices import DeviceSpecError, visible_gpus
    from crnn.sharding import devices_for, single_device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert visible_gpus() == 3
    assert devices_for("all", None) == ["cuda:0", "cuda:1", "cuda:2"]
    assert devices_for("0,2", None) == ["cuda:0", "cuda:2"]
    assert devices_for("1", None) is None and single_device("1", None) == "cuda:1"
    assert devices_for("cpu", 2) == ["cpu", "cpu"] and devices_for(None, 2) == ["cpu", "cpu"]
    assert devices_for(None, None) is None and single_device(None, None) is None
    assert single_device("cpu", None) == "cpu" and single_device("1", "cuda:0") == "cuda:0"
    with pytest.raises(DeviceSpecError, match=r"GPU 3 does not exist; 3 visible"):
        devices_for("0,3", None)
    with pytest.raises(DeviceSpecError, match="listed twice"):
        devices_for("1,1", None)
    with pytest.raises(DeviceSpecError, match="expected GPU numbers like 0 or 0,1, or 'all'"):
        devices_for("gpu0", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceSpecError, match="no CUDA GPU is visible"):
        devices_for("all", None)


def test_sharded_eval_pairs_each_datasets_parts_by_path_not_by_position(caplog):
    """One node could not open dataset a: the rows were zipped by position, so its b part
    was merged into a's row, and the exit was 0. Parts now pair by path, and a dataset
    some process lacks is named and fails the run."""
    from crnn.cli.eval import merged_rows
    from crnn.text.metrics import TextMetrics

    sums = dict.fromkeys(TextMetrics().sums, 0.0) | {"count": 1.0, "correct": 1.0, "chars": 4.0}

    def part(path, n):
        return {
            "dataset": path,
            "path": path,
            "sums": {k: v * n for k, v in sums.items()},
            "pairs": [],
            "images_per_s": 1.0,
            "bad_images": 0,
            "skipped_empty_labels": 0,
        }

    rows, lost = merged_rows([[part("a", 3), part("b", 5)], [part("b", 7)]], "charset")
    assert [r["path"] for r in rows] == ["a", "b"] and lost
    assert [r["count"] for r in rows] == [3, 12]
    assert "a: read by 1 of 2 processes" in caplog.text
    rows, lost = merged_rows([[part("a", 3)], [part("a", 4)]], "charset")
    assert rows[0]["count"] == 7 and not lost


def test_the_merge_streams_the_parts_in_input_order_holding_offsets_not_records(
    tmp_path,
) -> None:
    """Rank 0's merge of millions of reads must not hold them: 3,000 records of 4 kB
    (12 MB of parts) merge in input order, a part's record over the previous output's,
    a torn tail left out, with far less memory traced than the records take."""
    import tracemalloc

    from crnn.sharding import Shard, merge_jsonl, part_path

    out = tmp_path / "reads.jsonl"
    order = [f"img{i:05d}.png" for i in range(3000)]
    pad = "字" * 1300  # ~4 kB a record in UTF-8
    out.write_text(json.dumps({"path": order[0], "text": "old"}) + "\n", encoding="utf-8")
    for rank in range(2):
        with open(part_path(out, rank, 2), "w", encoding="utf-8") as f:
            for i, path in Shard(rank, 2).pick(order):
                f.write(json.dumps({"path": path, "index": i, "text": pad}) + "\n")
            f.write('{"path": "torn')  # a kill mid-write
    tracemalloc.start()
    n = merge_jsonl(out, 2, order + [order[5]])  # a path given twice is written once
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 3000
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["path"] for r in rows] == order
    assert rows[0]["text"] == pad and "index" not in rows[0]
    assert peak < 3_000_000, f"the merge held {peak / 1e6:.1f} MB"
    assert not list(tmp_path.glob("*.part-*"))
