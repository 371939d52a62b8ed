"""Deliberate failures, for testing how a distributed run ends; never set in real training.

The launcher (``crnn.engine.launch``) attaches :meth:`FaultInjection.maybe_fire` to the
trainer as a step callback only when ``CRNN_FAULT_INJECT`` is set, so a normal run never
polls it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

FAULT_ENV = "CRNN_FAULT_INJECT"
FAULT_KINDS = ("raise", "kill", "hang")


@dataclass(frozen=True)
class FaultInjection:
    """A deliberate failure, for testing how a distributed run ends; never set it in
    real training.

    ``CRNN_FAULT_INJECT=RANK:STEP:KIND`` makes global rank ``RANK``, after ``STEP``
    optimizer steps, ``raise`` a RuntimeError, ``kill`` itself with SIGKILL, or ``hang``
    (sleep, like a rank stuck outside any collective).
    """

    rank: int
    step: int
    kind: str

    @classmethod
    def from_env(cls) -> FaultInjection | None:
        spec = os.environ.get(FAULT_ENV, "").strip()
        if not spec:
            return None
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
