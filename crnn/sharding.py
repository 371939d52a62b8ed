"""Prediction and evaluation over several processes (``--gpus 0,1``, ``--nproc N`` or
``torchrun``): each process reads its share of the inputs and writes what it found to a
part file beside the output; the first process (or the launching one) merges the parts
in input order. No process group and no collective: files are the only channel, so a
process that dies loses only its unwritten lines, and a rerun resumes from the parts.

    shard = Shard.from_env()                   # RANK / WORLD_SIZE, as torchrun sets them
    mine = shard.pick(items)                   # [(index, item)] of this process
    parts = JsonlParts("out.jsonl", shard)     # out.jsonl.part-0-of-2 ...
    done = parts.done_keys()                   # what a previous run already wrote
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# When this process started: a part's completion marker older than that, without a run
# token to tell, is left over from an earlier run.
_STARTED = time.time()


def run_token(environ: dict[str, str] | None = None) -> str:
    """What every process of one run shares and no other run does: the launcher's
    ``CRNN_RUN_ID``, torchrun's rendezvous id, SLURM's job and step, or the rendezvous
    address (``MASTER_ADDR:MASTER_PORT``); "" when none is set (then a marker counts only
    if it was written after this process started)."""
    env = os.environ if environ is None else environ
    if env.get("CRNN_RUN_ID"):
        return f"crnn:{env['CRNN_RUN_ID']}"
    if env.get("TORCHELASTIC_RUN_ID", "none") not in ("", "none"):
        return f"torchrun:{env['TORCHELASTIC_RUN_ID']}"
    if env.get("SLURM_JOB_ID"):
        return f"slurm:{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '')}"
    if env.get("MASTER_PORT"):
        # torchrun's default rendezvous (its run id "none") and other launchers: the
        # address every rank meets at. Without it, a rank that finished more than a
        # second before rank 0 started (or a clock skew between nodes) had its marker
        # taken for an earlier run's, and rank 0 waited 24 h.
        return f"rendezvous:{env.get('MASTER_ADDR', '')}:{env['MASTER_PORT']}"
    return ""


def mark_done(part: Path) -> None:
    """Mark a part complete: its ``.done`` file holds this run's :func:`run_token`."""
    Path(f"{part}.done").write_text(run_token() + "\n", encoding="utf-8")


def is_done(part: Path) -> bool:
    """Whether ``part`` was completed by this run: its marker holds this run's token, or,
    where the run has none, was written after this process started. A marker left by a
    killed run (or re-created by a rank that finished after an earlier merge) is not,
    so the merge never starts early and deletes a part another rank is still writing."""
    marker = Path(f"{part}.done")
    try:
        token = marker.read_text(encoding="utf-8").strip()
        written = marker.stat().st_mtime
    except OSError:
        return False
    mine = run_token()
    return token == mine if mine else written >= _STARTED - 1.0


@dataclass(frozen=True)
class Shard:
    """This process's place among ``world`` processes (``rank`` 0 merges)."""

    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Shard:
        env = os.environ if environ is None else environ
        world = int(env.get("WORLD_SIZE", "1") or 1)
        rank = int(env.get("RANK", "0") or 0)
        if not 0 <= rank < world:
            raise ValueError(f"RANK={rank} is outside WORLD_SIZE={world}")
        return cls(rank, world)

    @property
    def local_rank(self) -> int:
        return int(os.environ.get("LOCAL_RANK", self.rank))

    def pick(self, items: Sequence[Any]) -> list[tuple[int, Any]]:
        """``(index, item)`` of this process's share: every ``world``-th item from ``rank``."""
        return [(i, items[i]) for i in range(self.rank, len(items), self.world)]


def part_path(output: str | os.PathLike[str], rank: int, world: int) -> Path:
    return Path(f"{output}.part-{rank}-of-{world}")


class JsonlLog:
    """A JSON-lines file appended one flushed line at a time: a killed run keeps every line
    it finished (a torn last line is cut before the next is appended), and :meth:`keys`
    names what it holds, for a rerun to skip. The one appender behind a rank's part
    (:class:`JsonlParts`) and ``--ray``'s rows (``crnn.reading.row_files``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._f: Any = None

    def keys(self, key: str = "path") -> set[str]:
        return {str(r.get(key)) for r in _read_jsonl(self.path)} if self.path.is_file() else set()

    def append(self, line: str) -> None:
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            cut_torn_tail(self.path)
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(line + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class JsonlParts:
    """One process's part of a JSON-lines output (a :class:`JsonlLog`), so a killed run
    keeps what it wrote and a rerun skips it (:meth:`done_keys`)."""

    def __init__(self, output: str | os.PathLike[str], shard: Shard, key: str = "path") -> None:
        self.output, self.shard, self.key = Path(output), shard, key
        self.path = part_path(output, shard.rank, shard.world)
        self._log = JsonlLog(self.path)

    def done_keys(self) -> set[str]:
        """Keys already written, in this part or in a finished output."""
        return self._log.keys(self.key) | JsonlLog(self.output).keys(self.key)

    def write(self, record: dict[str, Any]) -> None:
        self._log.append(json.dumps(record, ensure_ascii=False))

    def finish(self) -> None:
        """Close the part and mark it complete (``.done`` beside it)."""
        self._log.close()
        self.path.touch()
        mark_done(self.path)


def cut_torn_tail(path: Path) -> None:
    """Drop a last line that a kill left without its newline, so that the next record
    appended starts a line of its own (glued to the torn tail, it was lost with it). The
    torn record's key is not among the done ones: it is read again."""
    if not path.is_file():
        return
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines file, one at a time (a file of millions is never held
    whole); a line that does not parse (the last line of a part killed mid-write) is
    left out."""
    return (record for _, record in _records_at(path))


def _records_at(path: Path) -> Iterator[tuple[int, Any]]:
    """``(byte offset, record)`` of each line of a JSON-lines file that parses."""
    with open(path, "rb") as f:
        offset = 0
        for line in f:
            start, offset = offset, offset + len(line)
            try:
                yield start, json.loads(line)
            except ValueError:
                continue


def wait_for_parts(output: str | os.PathLike[str], world: int, timeout_s: float = 86_400.0) -> None:
    """Block until every process's part of ``output`` is marked complete."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(world) if not is_done(part_path(output, r, world))]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"parts {missing} of {output} were never finished")
        time.sleep(0.2)


def merge_jsonl(
    output: str | os.PathLike[str], world: int, order: Sequence[str], key: str = "path"
) -> int:
    """Write ``output`` from the parts (and a previous ``output``), one record per key, in
    the order of ``order``; remove the parts. Returns the records written.

    The merge streams: a first pass notes where each key's record lies (which file, which
    byte; a part's record wins over the previous output's, a later one over an earlier),
    the second copies the records in input order from there, so what it holds is an
    offset per record, never the records (a million reads with their character boxes
    are gigabytes)."""
    output = Path(output)
    parts = [part_path(output, r, world) for r in range(world)]
    sources = [p for p in (output, *parts) if p.is_file()]
    where: dict[str, tuple[int, int]] = {}
    for i, p in enumerate(sources):
        for offset, record in _records_at(p):
            if isinstance(record, dict):
                where[str(record.get(key))] = (i, offset)
    written = 0
    tmp = output.with_name(f".{output.name}.merging")
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(p, "rb")) for p in sources]
        out = stack.enter_context(open(tmp, "w", encoding="utf-8"))
        for k in order:
            found = where.pop(k, None)  # popped: a key given twice is written once
            if found is None:
                continue
            f = files[found[0]]
            f.seek(found[1])
            rec = json.loads(f.readline())
            rec.pop("index", None)
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written += 1
    os.replace(tmp, output)
    for p in parts:
        for q in (p, Path(f"{p}.done")):
            q.unlink(missing_ok=True)
    return written


def write_part_json(output: str | os.PathLike[str], shard: Shard, obj: Any) -> None:
    """One process's whole result as JSON (evaluation sums), marked complete."""
    p = part_path(output, shard.rank, shard.world)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, p)
    mark_done(p)


def read_part_jsons(output: str | os.PathLike[str], world: int) -> list[Any]:
    """Every process's JSON part, in rank order; the parts are removed."""
    out = []
    for r in range(world):
        p = part_path(output, r, world)
        out.append(json.loads(p.read_text(encoding="utf-8")))
        p.unlink()
        Path(f"{p}.done").unlink(missing_ok=True)
    return out


def spawn(module: str, argv: Iterable[str], devices: Sequence[str]) -> list[int]:
    """Run ``python -m module argv`` once per device (``cuda:N`` or ``cpu``), as ranks
    0..n-1 of one run (RANK, WORLD_SIZE, LOCAL_RANK set, ``--device`` given), and wait for
    all; returns their exit codes. A rank that fails does not stop the others: their
    parts are kept for a rerun."""
    n = len(devices)
    root = str(Path(__file__).resolve().parent.parent)
    procs = []
    for rank, device in enumerate(devices):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // n))
        procs.append(
            subprocess.Popen([sys.executable, "-m", module, *argv, "--device", device], env=env)
        )
    return [p.wait() for p in procs]


def devices_for(gpus: str | None, nproc: int | None) -> list[str] | None:
    """The processes a read asks for, parsed as training parses ``--gpus``
    (:func:`crnn.config.devices.parse_devices`): ``--gpus 0,1`` or ``--gpus all`` ->
    ``["cuda:0", "cuda:1", ...]``; ``--gpus cpu --nproc 2`` or ``--nproc 2`` -> two CPU
    processes; None: one process, this one (``--gpus N`` alone: this one, on GPU N, see
    :func:`single_device`). Raises ``ValueError`` with the fix."""
    from crnn.config.devices import parse_devices, visible_gpus

    if gpus is None and nproc is None:
        return None
    d = parse_devices(gpus if gpus is not None else "cpu", nproc, visible_gpus)
    if d.kind == "cpu":
        return ["cpu"] * d.nproc if d.nproc > 1 else None
    return [f"cuda:{i}" for i in d.ids] if len(d.ids) > 1 else None


def single_device(gpus: str | None, device: str | None) -> str | None:
    """The device of a one-process read: ``--device`` if given, else what ``--gpus``
    named (``cpu``, or its one GPU N: ``cuda:N``), else None (the default: CUDA if
    there is one)."""
    if device or gpus is None:
        return device
    ids = [g.strip() for g in gpus.lower().split(",") if g.strip()]
    if ids == ["cpu"]:
        return "cpu"
    return f"cuda:{ids[0]}" if len(ids) == 1 and ids[0].isdigit() else None


def strip_flags(
    argv: Sequence[str], flags: tuple[str, ...] = ("--gpus", "--nproc", "--device")
) -> list[str]:
    """``argv`` less ``flags`` and their values (``--flag v`` or ``--flag=v``): a command
    line for the processes :func:`spawn` starts."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        elif not any(a.startswith(f + "=") for f in flags):
            out.append(a)
    return out
