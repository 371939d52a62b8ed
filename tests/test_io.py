"""Atomic writes: the temporary's name, failure mid-write, and stale temporaries."""

import os
import subprocess
import sys

import pytest

from crnn.io import atomic_write, remove_stale_temporaries, temporary_path


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "last.pt"
    atomic_write(target, lambda f: f.write(b"old"))

    def torn(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        atomic_write(target, torn)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_stale_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path):
    target = tmp_path / "last.pt"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stale = temporary_path(target, pid=dead_pid)
        busy = temporary_path(target, pid=live.pid)
        mine = temporary_path(target)
        other = tmp_path / f".best.pt.tmp-{dead_pid}"  # another file's: not ours to touch
        for p in (stale, busy, mine, other):
            p.write_bytes(b"x")
        assert remove_stale_temporaries(target) == [stale]
        assert not stale.exists() and busy.exists() and mine.exists() and other.exists()
    finally:
        live.kill()
        live.wait()
    assert mine.name == f".last.pt.tmp-{os.getpid()}"
