"""Taking a lock shared with another process that may die holding it.

A process SIGKILLed (an OOM kill, a user's ``kill -9``) while holding a multiprocessing lock
never releases it, and the survivor would wait forever. `held` waits a second at a time and
calls ``while_waiting`` in between: the caller's check that the other process is alive, which
raises when it is gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["POLL_S", "held"]

POLL_S = 1.0  # the locks are held for microseconds to milliseconds: a second means stuck


@contextlib.contextmanager
def held(lock: Any, while_waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """``with lock``, checking ``while_waiting()`` every `POLL_S` seconds it stays taken."""
    while not lock.acquire(timeout=POLL_S):
        if while_waiting is not None:
            while_waiting()
    try:
        yield
    finally:
        lock.release()
