"""How a distributed run's failures are recorded, and deliberate failures for testing
that; never set the latter in real training.

:func:`write_rank_record` writes what a rank says about its end to the file torch's
launch agent collects (``TORCHELASTIC_ERROR_FILE``), with what the launcher needs to
tell the cause of a failure from its echoes (``crnn.engine.launch.describe_failures``).

The launcher attaches :meth:`FaultInjection.maybe_fire` to the trainer as a step
callback only when ``CRNN_FAULT_INJECT`` is set, so a normal run never polls it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

FAULT_ENV = "CRNN_FAULT_INJECT"
FAULT_KINDS = ("raise", "kill", "hang")
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


def write_rank_record(message: str, peer: str = "", traceback_text: str = "") -> None:
    """Record how this rank ends for the launcher: ``message``; ``peer`` is ``"lost"``
    or ``"timeout"`` (it failed because another rank did), ``"stopped"`` (the
    launcher stopped it) or ``""`` (a failure of its own). Nothing outside a launch."""
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    now = time.time()
    data = {
        "message": {
            "message": message,
            "extraInfo": {"py_callstack": traceback_text, "timestamp": str(int(now))},
        },
        "crnn": {"time": now, "peer": peer},
    }
    with open(path, "w") as f:
        json.dump(data, f)


@dataclass(frozen=True)
class FaultInjection:
    """A deliberate failure, for testing how a distributed run ends; never set it in
    real training.

    ``CRNN_FAULT_INJECT=RANK:STEP:KIND`` makes global rank ``RANK``, after ``STEP``
    optimizer steps, ``raise`` a RuntimeError, ``kill`` itself with SIGKILL, or ``hang``
    (sleep forever: signal handlers run but the wait goes on, like a rank stuck outside
    any collective, or in a CUDA call waiting for a dead peer). Several faults are
    separated by commas (``1:4:kill,0:4:hang``).
    """

    rank: int
    step: int
    kind: str

    @classmethod
    def all_from_env(cls) -> list[FaultInjection]:
        """Every fault ``CRNN_FAULT_INJECT`` names (comma-separated)."""
        specs = [s for s in os.environ.get(FAULT_ENV, "").split(",") if s.strip()]
        return [cls.parse(s.strip()) for s in specs]

    @classmethod
    def from_env(cls) -> FaultInjection | None:
        faults = cls.all_from_env()
        return faults[0] if faults else None

    @classmethod
    def parse(cls, spec: str) -> FaultInjection:
        parts = spec.split(":")
        try:
            rank, step, kind = int(parts[0]), int(parts[1]), parts[2]
            if len(parts) != 3 or kind not in FAULT_KINDS:
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(
                f"{FAULT_ENV}={spec!r}: expected RANK:STEP:KIND with KIND one of "
                f"{', '.join(FAULT_KINDS)} (e.g. 1:3:raise); unset it for real training"
            ) from None
        return cls(rank, step, kind)

    def maybe_fire(self, rank: int, step: int) -> None:
        """Fail now if this is the chosen rank and step."""
        if rank != self.rank or step != self.step:
            return
        log.warning("%s: injecting '%s' on rank %d at step %d", FAULT_ENV, self.kind, rank, step)
        if self.kind == "raise":
            raise RuntimeError(f"injected fault ({FAULT_ENV}) on rank {rank} at step {step}")
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # hang
            time.sleep(3600)
