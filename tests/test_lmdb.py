import lmdb
import pytest
import torch
from conftest import render_word, shared_data
from torch.utils.data import DataLoader

from crnn.config.image_spec import ImageSpec
from crnn.data import lmdb as lm
from crnn.data.batching import collate
from crnn.data.datasets import RecognitionDataset, open_sources
from crnn.data.lmdb import LmdbFormatError, LmdbReader, LmdbWriter, find_lmdb_roots
from crnn.model import CRNN
from crnn.text.alphabet import Charset

T = CRNN(37).output_length


def _png(text):
    import io

    buf = io.BytesIO()
    render_word(text).save(buf, format="PNG")
    return buf.getvalue()


def test_write_read_round_trip_in_the_shared_layout(tmp_path):
    items = [(_png(w), w) for w in ("alpha", "beta", "gamma")]
    with LmdbWriter(tmp_path / "db") as w:
        for data, label in items:
            w.add(data, label, (40, 32))
    env = lmdb.open(str(tmp_path / "db"), readonly=True, lock=False)
    with env.begin() as txn:  # the keys other tools read
        assert txn.get(b"num-samples") == b"3"
        assert txn.get(b"label-000000001") == b"alpha"
        assert txn.get(b"image-000000003") == items[2][0]
    env.close()
    r = LmdbReader(tmp_path / "db")
    assert len(r) == 3
    assert r.labels() == ["alpha", "beta", "gamma"]
    assert r.image_bytes(1) == items[1][0]
    assert r.sizes() == [(40, 32)] * 3


def test_map_grows_instead_of_failing(tmp_path, monkeypatch):
    monkeypatch.setattr(lm, "_INITIAL_MAP_SIZE", 256 * 1024)
    blob = bytes(range(256)) * 1024  # 256 KiB per sample, more than the initial map
    with LmdbWriter(tmp_path / "db", commit_every=2) as w:
        for i in range(6):
            w.add(blob, f"s{i}")
    assert w._map_size > 256 * 1024
    r = LmdbReader(tmp_path / "db")
    assert len(r) == 6 and r.image_bytes(5) == blob


def test_existing_lmdb_is_not_overwritten_by_accident(tmp_path):
    with LmdbWriter(tmp_path / "db") as w:
        w.add(b"x", "a")
    with pytest.raises(FileExistsError, match="--overwrite"):
        LmdbWriter(tmp_path / "db")


def test_missing_num_samples_and_garbage_files_fail_cleanly(tmp_path):
    env = lmdb.open(str(tmp_path / "nokeys"), map_size=2**20)
    with env.begin(write=True) as txn:
        txn.put(b"foo", b"bar")
    env.close()
    with pytest.raises(LmdbFormatError, match="num-samples"):
        LmdbReader(tmp_path / "nokeys")
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "data.mdb").write_bytes(b"\0not an lmdb" * 100)
    with pytest.raises(LmdbFormatError, match="corrupt or not an LMDB"):
        LmdbReader(tmp_path / "garbage")
    with pytest.raises(LmdbFormatError, match="no LMDB found"):
        find_lmdb_roots(_empty(tmp_path))


def _empty(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    return d


def test_folder_of_lmdbs_is_combined(tmp_path):
    for name, words in (("a", ["one", "two"]), ("sub/b", ["three"])):
        with LmdbWriter(tmp_path / name) as w:
            for word in words:
                w.add(_png(word), word)
    roots = find_lmdb_roots(tmp_path)
    assert [r.relative_to(tmp_path).as_posix() for r in roots] == ["a", "sub/b"]
    ds = RecognitionDataset(open_sources([tmp_path]), Charset.from_spec("alnum36"), ImageSpec(), T)
    assert sorted(ds.label(i) for i in range(len(ds))) == ["one", "three", "two"]


def test_readers_work_in_dataloader_workers_after_the_parent_opened_the_lmdb(word_lmdb):
    ds = RecognitionDataset(open_sources([word_lmdb]), Charset.from_spec("alnum36"), ImageSpec(), T)
    parent = [ds[i]["label"] for i in range(4)]  # the parent process opens the env first
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
    labels = [lbl for batch in loader for lbl in batch["labels"]]
    assert labels[:4] == parent and len(labels) == len(ds)


def test_reads_an_lmdb_written_by_mmocr():
    path = shared_data("fixtures", "mmocr_toy.lmdb")
    r = LmdbReader(path)
    assert len(r) == 10
    assert r.labels()[:4] == ["GRAND", "HOTEL", "HOTEL", "PACIFIC"]
    ds = RecognitionDataset(open_sources([path]), Charset.from_spec("alnum36"), ImageSpec(), T)
    assert len(ds) == 9 and ds.skipped["unknown_chars"] == 1  # 03/09/2009 has '/'
    sample = ds[0]
    assert sample["image"].dtype == torch.uint8 and sample["image"].shape[1] == 32
    assert sample["label"] == "grand"


def test_broken_mmocr_lmdb_fails_cleanly():
    path = shared_data("fixtures", "mmocr_broken.lmdb")
    ds = RecognitionDataset(open_sources([path]), Charset.from_spec("alnum36"), ImageSpec(), T)
    item = ds[0]
    assert "error" in item and "not a readable image" in item["error"]
    batch = collate([item])
    assert batch["images"] is None and len(batch["errors"]) == 1


def test_a_stale_handle_that_trips_py_lmdbs_open_guard_is_closed_and_the_open_retried(
    tmp_path, monkeypatch
):
    """py-lmdb 3 refuses to open files it takes for those of an environment already open
    in the process, by the inodes of data.mdb and lock.mdb. A handle this process still
    holds on an LMDB deleted and re-created since (read-only and lock-free, so its lock
    file was not kept open) can hand that inode on to another LMDB's files: CI once failed
    so, at random. The stale handle is closed and the open tried once more; with nothing
    stale the refusal is an error that says what it was."""
    import shutil

    def write(path, words):
        with LmdbWriter(path) as w:
            for word in words:
                w.add(_png(word), word, (40, 32))

    write(tmp_path / "a", ["old"])
    write(tmp_path / "b", ["bee"])
    assert LmdbReader(tmp_path / "a").labels() == ["old"]  # its handle is kept
    shutil.rmtree(tmp_path / "a")
    write(tmp_path / "a", ["new"])  # the kept handle is now stale
    real, calls = lmdb.open, []

    def guarded(path, **kw):  # the guard's refusal, on the first try only
        calls.append(path)
        if len(calls) == 1:
            raise lmdb.Error(f"The environment '{path}' is already open in this process.")
        return real(path, **kw)

    monkeypatch.setattr(lm.lmdb, "open", guarded)
    assert LmdbReader(tmp_path / "b").labels() == ["bee"]
    assert len(calls) == 2 and str((tmp_path / "a").resolve()) not in lm._ENVS
    assert LmdbReader(tmp_path / "a").labels() == ["new"]
    write(tmp_path / "c", ["sea"])
    calls.clear()

    def refuse(path, **kw):
        calls.append(path)
        raise lmdb.Error(f"The environment '{path}' is already open in this process.")

    monkeypatch.setattr(lm.lmdb, "open", refuse)
    with pytest.raises(LmdbFormatError, match="already open in this process"):
        LmdbReader(tmp_path / "c")
    assert len(calls) == 1  # nothing stale: not tried again


def test_an_lmdb_another_process_appends_to_is_not_taken_for_stale(tmp_path):
    """Another process appended to an LMDB (same file, grown): the stale-handle check
    took it for re-created and closed the environment every reader still used ("Attempt
    to operate on closed/deleted/dropped object"). A file that only grew keeps its
    handle; one replaced (a new inode) or cut shorter is reopened."""
    import subprocess
    import sys

    with LmdbWriter(tmp_path / "a") as w:
        for word in ("one", "two"):
            w.add(_png(word), word, (40, 32))
    first = LmdbReader(tmp_path / "a")
    assert first.label(0) == "one"
    append = (
        "import lmdb, sys\n"
        "env = lmdb.open(sys.argv[1], map_size=1 << 26)\n"
        "with env.begin(write=True) as t:\n"
        "    for i in range(3, 400):\n"
        "        t.put(b'label-%09d' % i, b'w%d' % i)\n"
        "        t.put(b'image-%09d' % i, bytes(2000))\n"
    )
    subprocess.run([sys.executable, "-c", append, str(tmp_path / "a")], check=True)
    LmdbReader(tmp_path / "a")  # a new reader revalidates the shared handle
    assert first.label(1) == "two"  # the first reader still reads
