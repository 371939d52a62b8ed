"""SIGINT/SIGTERM during training: finish the current step, save, stop."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

log = logging.getLogger(__name__)


class StopRequest:
    """While active, SIGINT/SIGTERM set :attr:`requested` instead of raising; the loop
    checks it after each step (all ranks agree via ``any_rank``). A second SIGINT aborts
    at once with ``KeyboardInterrupt``."""

    def __init__(self, announce: bool = True) -> None:
        self.requested = False
        self.announce = announce  # rank 0 says it; the other ranks just stop
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        if not self.announce:
            return
        log.warning(
            "%s received: stopping after the current step and saving a checkpoint "
            "(press Ctrl-C again to abort at once)",
            signal.Signals(signum).name,
        )

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
