"""Preemption-safe training: SIGTERM and SIGINT stop a run after its current block.

Clusters preempt jobs with SIGTERM (then SIGKILL after a grace period); people press Ctrl+C.
While ``train`` runs (in the main thread), ``StopSignals`` turns the first of either signal
into a request that the host loop honours at the end of the running block: it writes a final
checkpoint, restores the terminal and raises ``TrainingInterrupted`` (a ``KeyboardInterrupt``)
carrying the signal, the iteration and the checkpoint path; ``python -m unilab_jax.train``
turns that into one line and the conventional exit code, 130 (SIGINT) or 143 (SIGTERM).

A second signal means "now": it raises ``ImmediateStop`` (also a ``KeyboardInterrupt``) at
once, wherever the host is, and the CLI exits without waiting for the device. A running block
is never abandoned on the first signal: its buffers are donated, so the state exists only once
the block is done (one block is ``log_interval`` iterations, seconds on most set-ups).

The host waits for the device through ``wait`` (a worker thread does the blocking call), so
a signal is handled within milliseconds even during a long block or compilation.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["ImmediateStop", "StopSignals", "TrainingInterrupted", "signal_name"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after finishing its block and saving a checkpoint."""

    def __init__(
        self, signum: int, iteration: int, checkpoint: str | None, summary: dict, saved: str
    ) -> None:
        self.signum, self.iteration, self.checkpoint, self.summary = (
            signum,
            iteration,
            checkpoint,
            summary,
        )
        super().__init__(f"{signal_name(signum)}: stopped after iteration {iteration}; {saved}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class ImmediateStop(KeyboardInterrupt):
    """A second signal: stop now, without finishing the block or saving."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"second {signal_name(signum)}: stopping at once")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """While active, the first SIGINT/SIGTERM sets ``requested`` (and calls ``on_request``);
    a second one raises ``ImmediateStop``. Outside the main thread it does nothing, since
    Python delivers signals to the main thread only."""

    def __init__(self, on_request: Callable[[int], Any] | None = None) -> None:
        self.requested: int | None = None
        self.on_request = on_request
        self._previous: dict[int, Any] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="unilab-jax-wait")
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        if self._pool is not None:
            # Do not wait for an abandoned call (a second signal): the process is ending.
            self._pool.shutdown(wait=exc[0] is None, cancel_futures=True)
            self._pool = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested is not None:
            raise ImmediateStop(signum)
        self.requested = signum
        if self.on_request is not None:
            self.on_request(signum)

    def wait(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the worker thread; the main thread waits interruptibly, so a
        second signal stops the run at once even during a long device call."""
        if self._pool is None:
            return fn(*args)
        future: Future = self._pool.submit(fn, *args)
        return future.result()
