"""`StopFlag`: the learner's stop request to its collector, safe against a killed process.

The collector functions' documented first argument is a `stop_event` with the interface of
`multiprocessing.Event` (`is_set`, `set`, `clear`, `wait`). A real `multiprocessing.Event`
guards its flag with a process-shared lock, and a collector killed (SIGKILL, OOM killer)
while inside `is_set()` leaves that lock held forever: the learner's `set()` in `close()`
then blocks for good, a hang instead of the `CollectorError` the user should see.

This flag is one byte of shared memory with no lock. A byte store and load are atomic, and
the flag only ever goes from clear to set within a run, so nothing needs one; `wait` polls.
It also leaves no named semaphore in `/dev/shm` for a crash to strand.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["StopFlag"]

_POLL_S = 0.005


class StopFlag:
    """A lock-free, process-shared `multiprocessing.Event` look-alike (see the module doc)."""

    def __init__(self, ctx: Any) -> None:
        self._value = ctx.RawValue("b", 0)

    def is_set(self) -> bool:
        return bool(self._value.value)

    def set(self) -> None:
        self._value.value = 1

    def clear(self) -> None:
        self._value.value = 0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set or `timeout` seconds pass; returns the flag."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True
