"""Preemption-safe training: SIGTERM and SIGINT stop a run after its current block.

Clusters preempt jobs with SIGTERM (then SIGKILL after a grace period); people press Ctrl+C.
While ``train`` runs (in the main thread), ``StopSignals`` turns the first of either signal
into a request that the host loop honours at the end of the running block: it writes a final
checkpoint, restores the terminal and raises ``TrainingInterrupted`` (SIGINT; a
``KeyboardInterrupt``) or ``TrainingTerminated`` (SIGTERM; a ``SystemExit`` with code 143),
both ``RunStopped``, carrying the signal, the iteration and the checkpoint path. Uncaught in a
script they end it with the conventional status, 130 or 143; ``python -m unilab_jax.train``
prints one line with the resume command.

A second signal means "now": it raises an ``ImmediateStop`` (``ImmediateInterrupt`` or
``ImmediateTermination``, again a ``KeyboardInterrupt`` / ``SystemExit``) at once, wherever
the host is, and the CLI exits without waiting for the device. A running block
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

__all__ = [
    "ImmediateInterrupt",
    "ImmediateStop",
    "ImmediateTermination",
    "RunStopped",
    "StopSignals",
    "TrainingInterrupted",
    "TrainingTerminated",
    "run_stopped",
    "signal_name",
    "stop_now",
]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class RunStopped(BaseException):
    """Mixin of the two ways a run ends on its first signal, after finishing its block (or
    iteration) and saving: ``TrainingInterrupted`` (SIGINT, a ``KeyboardInterrupt``) and
    ``TrainingTerminated`` (SIGTERM, a ``SystemExit`` with code 143, so an uncaught one ends
    a script with the conventional status and no traceback)."""

    signum: int
    iteration: int
    checkpoint: str | None
    summary: dict
    saved: str

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"{signal_name(self.signum)}: stopped after iteration {self.iteration}; {self.saved}"


class TrainingInterrupted(RunStopped, KeyboardInterrupt):
    """SIGINT (Ctrl+C): training stopped after its block, with a final checkpoint."""


class TrainingTerminated(RunStopped, SystemExit):
    """SIGTERM (preemption): training stopped after its block, with a final checkpoint."""


def run_stopped(
    signum: int, iteration: int, checkpoint: str | None, summary: dict, saved: str
) -> RunStopped:
    """The exception to raise for a run stopped by ``signum`` (see ``RunStopped``)."""
    cls = TrainingTerminated if signum == signal.SIGTERM else TrainingInterrupted
    error = cls(128 + signum) if cls is TrainingTerminated else cls()
    error.signum, error.iteration, error.checkpoint = signum, iteration, checkpoint
    error.summary, error.saved = summary, saved
    return error


class ImmediateStop(BaseException):
    """Mixin of a second signal's "stop now", raised wherever the host is: ``ImmediateInterrupt``
    (SIGINT, a ``KeyboardInterrupt``) or ``ImmediateTermination`` (SIGTERM, ``SystemExit(143)``).
    """

    signum: int

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"second {signal_name(self.signum)}: stopped at once"


class ImmediateInterrupt(ImmediateStop, KeyboardInterrupt):
    """A second SIGINT."""


class ImmediateTermination(ImmediateStop, SystemExit):
    """A second SIGTERM."""


def stop_now(signum: int) -> ImmediateStop:
    """The exception a second ``signum`` raises."""
    error = ImmediateTermination(128 + signum) if signum == signal.SIGTERM else ImmediateInterrupt()
    error.signum = signum
    return error


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
            raise stop_now(signum)
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
