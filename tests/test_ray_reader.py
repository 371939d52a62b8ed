"""Reading on Ray: the reader class for ``map_batches`` (bytes or paths in, a row per
input out, a bad file its own error row) and ``crnn-predict --ray local``, which reads
what one process reads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, run_tool
from PIL import Image

from crnn.data.pdf import page_ref
from crnn.reading.ray_reader import COLUMNS, RayReader
from crnn.reading.recognizer import Recognizer

SAMPLES = sorted((ROOT / "data" / "samples").glob("word_*.png"))


def test_a_batch_of_bytes_reads_as_the_one_reader_reads_and_a_bad_file_is_its_own_row() -> None:
    reader = RayReader(model="word")
    paths = [str(p) for p in SAMPLES[:4]] + ["broken.png"]
    blobs = [p.read_bytes() for p in SAMPLES[:4]] + [b"not an image"]
    out = reader({"bytes": np.array(blobs, dtype=object), "path": np.array(paths)})
    assert set(out) == set(COLUMNS) and all(len(v) == 5 for v in out.values())
    truth = Recognizer.bundled("word").read_pages([str(p) for p in SAMPLES[:4]])
    assert list(out["text"][:4]) == [p.text for p in truth]
    assert list(out["error"][:4]) == [""] * 4 and "broken.png" == out["path"][4]
    assert out["error"][4] and out["text"][4] == ""
    record = json.loads(out["result"][0])
    assert record["path"] == paths[0] and record["text"] == truth[0].text and record["lines"]
    # Paths alone (files every worker can open) read the same.
    by_path = reader({"path": np.array(paths[:4])})
    assert list(by_path["text"]) == list(out["text"][:4])


def test_a_batch_without_images_says_what_it_expected() -> None:
    with pytest.raises(KeyError, match="expected 'bytes'.*or 'path'"):
        RayReader(model="word")({"image": np.zeros((1, 8, 8))})


@pytest.mark.slow
def test_predict_on_a_local_ray_cluster_writes_what_one_process_writes(tmp_path) -> None:
    pytest.importorskip("ray", reason="the ray extra: pip install 'crnn-ocr[ray]'")
    inputs = tmp_path / "inputs.txt"
    copies = []  # distinct files (--output keeps one record per path)
    for k in range(3):
        for p in SAMPLES:
            copies.append(tmp_path / f"{k}_{p.name}")
            copies[-1].write_bytes(p.read_bytes())
    # A PDF's pages are inputs of their own (doc.pdf#page=N), rendered by the actors.
    pdf = tmp_path / "two.pdf"
    first, *rest = [Image.open(p).convert("RGB").resize((360, 96)) for p in SAMPLES[:2]]
    first.save(pdf, save_all=True, append_images=rest, resolution=72)
    files = [str(p) for p in copies] + [str(pdf), str(tmp_path / "missing.png")]
    (tmp_path / "bad.png").write_bytes(b"not an image")
    files.insert(5, str(tmp_path / "bad.png"))
    inputs.write_text("\n".join(files) + "\n")
    common = ["--files-from", str(inputs), "--model", "word"]
    one = run_tool("predict", *common, "--output", str(tmp_path / "one.jsonl"))
    ray = run_tool(
        "predict",
        *common,
        "--ray",
        "local",
        "--ray-actors",
        "2",
        "--output",
        str(tmp_path / "ray.jsonl"),
        timeout=600,
    )
    assert one.returncode == ray.returncode == 1, ray.stderr[-3000:]  # the bad files
    rows = lambda name: [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]  # noqa: E731
    a, b = rows("one.jsonl"), rows("ray.jsonl")
    key = lambda r: r["path"]  # noqa: E731
    assert sorted(r["path"] for r in a) == sorted(r["path"] for r in b)
    assert {key(r): r.get("text") for r in a} == {key(r): r.get("text") for r in b}
    pages = [page_ref(str(pdf), 1), page_ref(str(pdf), 2)]
    assert [r["path"] for r in b if "error" not in r] == [str(p) for p in copies] + pages
    assert sum("error" in r for r in b) == 2


def fake_cluster(monkeypatch, asked: list[list[str]]) -> None:
    """--ray without a cluster: read_on_ray reads in this process with RayReader (the
    actors' own class), recording which inputs it was given."""
    import sys
    import types

    from crnn.reading import ray_reader

    def read_on_ray(files, model, *args, **kwargs):
        asked.append(list(files))
        reader = RayReader(model=model)
        out = reader({"path": np.array(files, dtype=object)})
        for i in range(len(files)):
            yield {c: out[c][i] for c in COLUMNS}

    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    monkeypatch.setattr(ray_reader, "read_on_ray", read_on_ray)


def test_ray_rows_go_to_json_lines_or_parquet_and_a_rerun_reads_only_what_is_missing(
    tmp_path, monkeypatch
) -> None:
    """--ray --output FILE.parquet writes the six columns; a rerun over more inputs keeps
    the rows it has and reads only the new inputs (JSON lines likewise, a torn last line
    read again)."""
    pq = pytest.importorskip("pyarrow.parquet")
    from crnn.cli.predict import main

    asked: list[list[str]] = []
    fake_cluster(monkeypatch, asked)
    files = [str(p) for p in SAMPLES[:4]]
    (tmp_path / "bad.png").write_bytes(b"not an image")
    bad = str(tmp_path / "bad.png")
    out = tmp_path / "reads.parquet"
    common = ["--ray", "local", "--model", "word", "--output", str(out)]
    assert main([*common, *files[:2]]) == 0
    assert main([*common, *files, bad]) == 1  # the bad file
    assert asked == [files[:2], [*files[2:], bad]]
    table = pq.read_table(out).to_pylist()
    assert [r["path"] for r in table] == [*files, bad]
    one = Recognizer.bundled("word")
    assert [r["text"] for r in table[:4]] == [one.read_page(f).text for f in files]
    assert table[4]["error"] and not table[0]["error"]
    assert json.loads(table[0]["result"])["text"] == table[0]["text"]
    assert not (tmp_path / "reads.parquet.partial").exists()

    asked.clear()
    lines = tmp_path / "reads.jsonl"
    common[-1] = str(lines)
    assert main([*common, *files[:2]]) == 0
    with open(lines, "a", encoding="utf-8") as f:
        f.write('{"path": "' + files[2] + '", "te')  # a kill mid-line
    assert main([*common, *files]) == 0
    assert asked == [files[:2], files[2:]]
    records = [json.loads(x) for x in lines.read_text().splitlines()]
    assert [r["path"] for r in records] == files


def test_an_output_that_cannot_be_resumed_from_is_named_and_left_alone(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow.parquet")
    from crnn.cli.predict import main

    fake_cluster(monkeypatch, [])
    out = tmp_path / "reads.parquet"
    out.write_bytes(b"a spreadsheet, not Parquet")
    common = ["--ray", "local", "--model", "word", str(SAMPLES[0])]
    assert main([*common, "--output", str(out)]) == 2
    assert out.read_bytes() == b"a spreadsheet, not Parquet"
    assert main([*common, "--output", str(tmp_path / "reads.csv")]) == 2
