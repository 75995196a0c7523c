"""Preemption-safe training: SIGTERM and SIGINT stop a run after its current block.

Clusters preempt jobs with SIGTERM (then SIGKILL after a grace period); people press Ctrl+C.
While a run trains (in the main thread), ``StopSignals`` turns the first of either signal
into a request that the loop honours at the end of the running block (the core) or iteration
(the facade's torch path): it writes a final checkpoint, restores the terminal and raises
``TrainingInterrupted`` (SIGINT; a ``KeyboardInterrupt``) or ``TrainingTerminated`` (SIGTERM;
a ``SystemExit`` with code 143), both ``RunStopped``, carrying the signal, the iteration and
the checkpoint path. Uncaught in a script they end it with the conventional status, 130 or
143; ``python -m unilab_jax.train`` prints one line with the resume command.

A second signal means "now": it raises an ``ImmediateStop`` (``ImmediateInterrupt`` or
``ImmediateTermination``, again a ``KeyboardInterrupt`` / ``SystemExit``) at once, wherever
the host is, and the CLI exits without waiting for the device. A running block
is never abandoned on the first signal: its buffers are donated, so the state exists only once
the block is done (one block is ``log_interval`` iterations, seconds on most set-ups).

One family: every exception a signal raises, in the core and in the facade, is a
``RunSignal`` (its ``signum`` and ``exit_code``): ``RunStopped`` and ``ImmediateStop`` above,
and ``StopRequested``, the first signal raised by ``StopSignals.check()`` where a loop that
polls (the torch path, waiting for its next iteration's data) can stop; that loop catches it,
saves and raises ``RunStopped``. Each comes as a ``KeyboardInterrupt`` (SIGINT) and a
``SystemExit(128 + signum)`` (SIGTERM) variant, so one that escapes still ends a program as
the signal would: while ``StopSignals`` is active, ``sys.excepthook`` (unless the program set
its own) ends a program that does not catch a stop with the signal's status (130, 143) and one
line, not a traceback (``end_uncaught_stops_quietly``).

The host waits for the device through ``wait`` (a worker thread does the blocking call), so
a signal is handled within milliseconds even during a long block or compilation.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = [
    "ImmediateInterrupt",
    "ImmediateStop",
    "ImmediateTermination",
    "InterruptRequested",
    "RunSignal",
    "RunStopped",
    "StopRequested",
    "StopSignals",
    "TerminationRequested",
    "TrainingInterrupted",
    "TrainingTerminated",
    "end_uncaught_stops_quietly",
    "note_early_stop",
    "raise_early_stop",
    "run_stopped",
    "signal_name",
    "stop_now",
    "stop_requested",
]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class RunSignal(BaseException):
    """Every exception a SIGINT/SIGTERM raises (see the module docstring); ``exit_code`` is
    the conventional status of the signal, 128 + its number."""

    signum: int

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopRequested(RunSignal):
    """A first signal, raised by ``StopSignals.check()`` where a polling loop can stop: the
    loop catches it, saves and raises ``RunStopped``."""

    def __str__(self) -> str:
        return f"{signal_name(self.signum)} received: stopping"


class RunStopped(RunSignal):
    """A run ended on its first signal, after finishing its block (or iteration) and saving:
    ``TrainingInterrupted`` (SIGINT) or ``TrainingTerminated`` (SIGTERM)."""

    iteration: int
    checkpoint: str | None
    summary: dict
    saved: str

    def __str__(self) -> str:
        return f"{signal_name(self.signum)}: stopped after iteration {self.iteration}; {self.saved}"


class ImmediateStop(RunSignal):
    """A second signal's "stop now", raised wherever the host is: ``ImmediateInterrupt``
    (SIGINT) or ``ImmediateTermination`` (SIGTERM)."""

    def __str__(self) -> str:
        return f"second {signal_name(self.signum)}: stopped at once"


class InterruptRequested(StopRequested, KeyboardInterrupt):
    """A first SIGINT (Ctrl+C), not yet honoured."""


class TerminationRequested(StopRequested, SystemExit):
    """A first SIGTERM (preemption), not yet honoured."""


class TrainingInterrupted(RunStopped, KeyboardInterrupt):
    """SIGINT (Ctrl+C): training stopped after its block, with a final checkpoint."""


class TrainingTerminated(RunStopped, SystemExit):
    """SIGTERM (preemption): training stopped after its block, with a final checkpoint."""


class ImmediateInterrupt(ImmediateStop, KeyboardInterrupt):
    """A second SIGINT."""


class ImmediateTermination(ImmediateStop, SystemExit):
    """A second SIGTERM."""


_VARIANTS = {
    StopRequested: (InterruptRequested, TerminationRequested),
    RunStopped: (TrainingInterrupted, TrainingTerminated),
    ImmediateStop: (ImmediateInterrupt, ImmediateTermination),
}


def _of(kind: type[RunSignal], signum: int) -> RunSignal:
    """The ``kind`` exception of ``signum``: its SIGINT (a ``KeyboardInterrupt``) or SIGTERM
    (a ``SystemExit(128 + signum)``) variant."""
    interrupt, termination = _VARIANTS[kind]
    error = termination(128 + signum) if signum == signal.SIGTERM else interrupt()
    error.signum = signum
    return error


def stop_requested(signum: int) -> StopRequested:
    """The ``StopRequested`` of a first ``signum``."""
    return _of(StopRequested, signum)


#: A signal that arrived before the run took the signals (``note_early_stop``), not yet acted on.
_early_stop: int | None = None


def note_early_stop(signum: int) -> StopRequested:
    """Note a signal that arrived before training began (a program's own handler calls this)
    and return its ``StopRequested`` to raise. The handler's exception can be lost: raised
    while a finaliser, ``__del__`` or a weakref callback runs, Python prints it and goes on; the
    note is not lost, and :func:`raise_early_stop` (which ``StopSignals`` calls on entry)
    raises it again."""
    global _early_stop
    _early_stop = signum
    return stop_requested(signum)


def raise_early_stop() -> None:
    """Raise the ``StopRequested`` of a noted early signal (once), if there is one."""
    global _early_stop
    signum, _early_stop = _early_stop, None
    if signum is not None:
        raise stop_requested(signum)


def run_stopped(
    signum: int, iteration: int, checkpoint: str | None, summary: dict, saved: str
) -> RunStopped:
    """The exception to raise for a run stopped by ``signum`` (see ``RunStopped``)."""
    error = _of(RunStopped, signum)
    error.iteration, error.checkpoint, error.summary, error.saved = (
        iteration, checkpoint, summary, saved,
    )  # fmt: skip
    return error


def stop_now(signum: int) -> ImmediateStop:
    """The exception a second ``signum`` raises."""
    return _of(ImmediateStop, signum)


_DEFAULT_HANDLERS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


def _uncaught_stop(exc_type: type, exc: BaseException, tb: Any) -> None:
    """``sys.excepthook`` while a run takes signals: a stop that the program does not catch
    ends it as the signal would, with its status (130, 143) and its one line (unless the run
    already wrote it: ``told``), not a traceback. CPython gives a plain uncaught
    ``KeyboardInterrupt`` the SIGINT status but a subclass status 1 after a traceback, so the
    hook ends the process itself, after the ``atexit`` functions. Anything else goes to the
    hook that was there before."""
    if not isinstance(exc, RunSignal):
        _previous_hook(exc_type, exc, tb)
        return
    if not getattr(exc, "told", False):
        print(f"\n{exc}", file=sys.stderr)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(exc.exit_code)


_previous_hook = sys.__excepthook__


def end_uncaught_stops_quietly() -> None:
    """Install :func:`_uncaught_stop` as ``sys.excepthook`` (once; a hook of the program's
    own is left alone)."""
    global _previous_hook
    if sys.excepthook is sys.__excepthook__:
        _previous_hook = sys.excepthook
        sys.excepthook = _uncaught_stop


class StopSignals:
    """While active, the first SIGINT/SIGTERM sets ``requested`` (and calls ``on_request``);
    a second one raises ``ImmediateStop``. Outside the main thread it does nothing, since
    Python delivers signals to the main thread only.

    - A loop that polls calls ``check()``: it raises ``StopRequested`` once a stop was
      requested, and again an ``ImmediateStop`` that Python swallowed (an exception raised
      while a finaliser, ``__del__`` or a weakref callback, runs is lost), so a loop that
      checks at every iteration and in its waits cannot miss either.
    - ``deferred()``: while cleanup runs (collector join, shared memory), further signals are
      noted and ignored, so they cannot leave a process or a ``/dev/shm`` entry behind.
    - ``own_handlers_win``: install only over Python's default handler of each signal (a
      handler of the caller's own, or an ignored signal, is left alone): the facade's runners
      run inside other people's programs. The core's ``train`` takes both signals.
    """

    def __init__(
        self, on_request: Callable[[int], Any] | None = None, own_handlers_win: bool = False
    ) -> None:
        self.requested: int | None = None
        self.pending: BaseException | None = None
        self.on_request = on_request
        self._own_handlers_win = own_handlers_win
        self._deferring = False
        self._previous: dict[int, Any] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> StopSignals:
        raise_early_stop()  # a signal before the run whose exception a finaliser swallowed
        if threading.current_thread() is threading.main_thread():
            end_uncaught_stops_quietly()
            for signum in _SIGNALS:
                previous = signal.getsignal(signum)
                if self._own_handlers_win and previous is not _DEFAULT_HANDLERS[signum]:
                    continue  # the caller's own handler (or SIG_IGN) stays
                self._previous[signum] = signal.signal(signum, self._handle)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="unilab-jax-wait")
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        self.pending = None  # its traceback would keep the run's frames alive
        if self._pool is not None:
            # Do not wait for an abandoned call (a second signal): the process is ending.
            self._pool.shutdown(wait=exc[0] is None, cancel_futures=True)
            self._pool = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self._deferring:
            if self.requested is None:
                self.requested = signum
            return
        if self.requested is not None:
            self.pending = stop_now(signum)
            raise self.pending
        self.requested = signum
        if self.on_request is not None:
            self.on_request(signum)

    def check(self) -> None:
        """Raise a swallowed immediate stop again, else ``StopRequested`` if a signal asked
        the run to stop."""
        if self.pending is not None:
            raise self.pending
        if self.requested is not None:
            raise stop_requested(self.requested)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals arriving inside the block are noted, not raised (cleanup must finish)."""
        previous, self._deferring = self._deferring, True
        try:
            yield
        finally:
            self._deferring = previous

    def wait(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the worker thread; the main thread waits interruptibly, so a
        second signal stops the run at once even during a long device call."""
        if self._pool is None:
            return fn(*args)
        future: Future = self._pool.submit(fn, *args)
        return future.result()
