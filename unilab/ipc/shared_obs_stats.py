"""Observation-normalisation statistics from the learner to the collector (§1.1).

A maxsize-2 spawn Queue of `(mean, std)` float32 numpy arrays. Only the newest value matters,
so `put` drains stale entries first and `get` drains everything and keeps the last value seen:
the collector normalises with the latest statistics it has ever received, and with nothing
(`None`) before the first arrival. The queue is the reference's design; it is kept because
statistics are small and a lost intermediate value is harmless.

The reference's calls are accepted: `SharedObsNormStats(ctx)` (the multiprocessing context
whose `Queue` carries the statistics; default: spawn) and `put((mean, std))`, one tuple.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
from typing import Any

import numpy as np

__all__ = ["SharedObsNormStats"]

Stats = tuple[np.ndarray, np.ndarray]


def _as_array(value: Any) -> np.ndarray:
    """float32 numpy copy of a numpy array or a (CPU or device) torch tensor."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.array(value, dtype=np.float32, copy=True)


class SharedObsNormStats:
    """Latest-value channel for `(mean, std)`; create in the learner, pass at spawn time.

    Args:
        ctx: the multiprocessing context whose `Queue(maxsize)` is used (the reference's
            argument); None: the spawn context. An int is taken as `maxsize` (our former
            first argument).
        maxsize: the queue's bound.
    """

    def __init__(self, ctx: Any = None, maxsize: int = 2) -> None:
        if isinstance(ctx, int):
            ctx, maxsize = None, ctx
        ctx = mp.get_context("spawn") if ctx is None else ctx
        self._queue: Any = ctx.Queue(maxsize=maxsize)
        self._last: Stats | None = None

    def _drain(self) -> None:
        if self._queue is None:
            raise RuntimeError("SharedObsNormStats is closed")
        while True:
            try:
                self._last = self._queue.get_nowait()
            except queue.Empty:
                return

    def put(self, mean: Any, std: Any = None) -> None:
        """Learner: replace whatever is pending with the new statistics, `put(mean, std)` or
        the reference's `put((mean, std))`."""
        if std is None:
            mean, std = mean
        item = (_as_array(mean), _as_array(std))
        while True:
            self._drain()  # the learner's own `_last` is irrelevant; only the queue matters
            try:
                # A short block absorbs items still in the feeder thread, which `get_nowait`
                # cannot see yet but which count against maxsize.
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def get(self) -> Stats | None:
        """Collector: newest `(mean, std)` ever received, or None before the first one."""
        self._drain()
        return self._last

    def close(self) -> None:
        """Release the queue's pipe and feeder thread without waiting on unread items.

        Dropping the queue also lets its named semaphores (`/dev/shm/sem.mp-*`, spawn context)
        be unlinked by their finalisers as soon as no other reference remains. Idempotent.
        """
        if self._queue is not None:
            for release in ("cancel_join_thread", "close"):  # a thread queue has neither
                getattr(self._queue, release, lambda: None)()
            self._queue = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_queue": self._queue, "_last": None}
