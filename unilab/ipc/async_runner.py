"""`AsyncRunner`: owns the collector subprocess and the shared resources of one run (§1.1).

The learner process starts one collector with the `spawn` context and talks to it through
objects created here and in the runner (replay ring, weight block, queues). This class keeps
the lifetime rules in one place:

- The collector target runs inside `_collector_entry_wrapper`. An exception there is formatted
  (traceback included) and sent to the learner over a one-way `Pipe`, and the stop event (a
  lock-free `StopFlag`, which a killed collector cannot leave locked) is set; the learner's
  `check_collector()` turns it into a `CollectorError` carrying the collector's traceback.
  A collector that dies without a report (killed, segfault) is reported with its exit code.
  The reference at the documented version sent `{"error": ...}` over the metrics queue and
  then swallowed it (quirk "collector errors are swallowed").
- The collector ignores SIGINT and SIGTERM: Ctrl+C in a terminal reaches the whole process
  group (and a cluster may signal every process of a job), and the learner, not the
  collector, decides how to stop (it sets the stop event in `close()`). The collector also
  exits on its own if the learner process disappears (`parent_alive`), and ends with
  `os._exit` (no interpreter teardown to wait for).
- Signals in the learner are the core's (`unilab_jax.training.interrupts.StopSignals`, one exception
  family for both): the torch loop holds one around a run, over Python's default handlers
  only (`own_handlers_win`). The first SIGINT/SIGTERM is a request that the loop honours
  where it waits for its next iteration's data (`check()` raises `StopRequested`; the loop
  saves and raises `RunStopped`), a second one raises `ImmediateStop` at once. Neither can be
  lost: Python swallows an exception raised while a finaliser (`__del__`, a weakref callback)
  runs, and `check()` raises a swallowed one again, so a signal landing there cannot leave a
  1,000,000-iteration run going. Cleanup runs `deferred()`: signals then are noted, not
  raised, so that it always finishes.
- `close()` is idempotent and runs from `learn()`'s `finally`, from user code and from
  `__del__`: set stop, join (10 s), kill, then release every registered resource
  (`cleanup()` if it has one, else `close()`), so no process and no `/dev/shm` entry
  outlives the run.

The reference's base is accepted as its subclasses use it: the constructor takes its
arguments (`env_name`, `env_cfg_overrides`, `rl_cfg`, then keyword-only `device` (None:
`_get_default_device()`), `collector_device` (None: `device`), `sim_backend`, `num_envs`) and
keeps them as attributes; `_stop_event` exists from construction; resources appended to
`_shared_resources` directly are released by `close()`; and `_start_collector(target_fn,
kwargs)` with `"stop_event"` among `kwargs` calls `target_fn(**kwargs)` as the reference's does
(ours, without it: `target_fn(stop_event, parent_pid=..., **kwargs)`), in the same wrapper
(failure report, signals ignored).
"""

from __future__ import annotations

import abc
import contextlib
import multiprocessing as mp
import os
import queue
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from unilab.ipc.stop_flag import StopFlag

__all__ = [
    "AsyncRunner",
    "CollectorError",
    "parent_alive",
]

_JOIN_TIMEOUT_S = 10.0


class CollectorError(RuntimeError):
    """The collector process failed; the message carries its traceback (or its exit code)."""


def parent_alive(parent_pid: int) -> bool:
    """True while the learner process that spawned this collector is still our parent."""
    return os.getppid() == parent_pid


def _collector_entry_wrapper(
    target_fn: Callable[..., None],
    error_conn: Any,
    stop_event: Any,
    kwargs: dict[str, Any],
    pass_stop_event: bool = True,
) -> None:
    """Run the collector (`target_fn(stop_event, **kwargs)`, or `target_fn(**kwargs)` without
    `pass_stop_event`); report any exception to the learner with its traceback.

    The process then ends at once (`os._exit`): the interpreter's own teardown takes seconds
    with jax and MuJoCo loaded (module garbage collection), time a stopping learner would
    wait for, and nothing is left to flush (the learner reads nothing once it stopped us;
    the report pipe is written synchronously).
    """
    # The learner decides how to stop (stop event, `close()`): a Ctrl+C reaches the whole
    # process group, and a preempted job's SIGTERM may too.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = 0
    try:
        if pass_stop_event:
            target_fn(stop_event, **kwargs)
        else:
            target_fn(**kwargs)
    except BaseException as error:  # noqa: BLE001 - every failure must reach the learner
        code = 1
        report = "".join(traceback.format_exception(error))
        with contextlib.suppress(OSError, ValueError):  # learner gone: nobody to tell
            error_conn.send(report)
        stop_event.set()
    finally:
        error_conn.close()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def close_queue(q: Any) -> None:
    """Close a multiprocessing queue without waiting for its unread items."""
    if q is None:
        return
    q.cancel_join_thread()
    q.close()


def drain_queue(q: Any) -> list[Any]:
    """Everything currently readable from a queue, without blocking."""
    items = []
    while True:
        try:
            items.append(q.get_nowait())
        except (queue.Empty, OSError, ValueError):
            return items


class AsyncRunner(abc.ABC):
    """Base of the off-policy runners: one spawned collector plus the run's shared resources.

    Args (the reference's; all optional here, as our runners set their own attributes):
        env_name, env_cfg_overrides, rl_cfg: kept as attributes (None: ``""``, ``{}``).
        device: the learner's device; None: `_get_default_device()`.
        collector_device: the collector's; None: `device`.
        sim_backend, num_envs: kept as attributes.
    """

    def __init__(
        self,
        env_name: str = "",
        env_cfg_overrides: dict | None = None,
        rl_cfg: dict | None = None,
        *,
        device: str | None = None,
        collector_device: str | None = None,
        sim_backend: str = "mujoco",
        num_envs: int = 4096,
    ) -> None:
        self.env_name = env_name
        self.env_cfg_overrides = {} if env_cfg_overrides is None else env_cfg_overrides
        self.rl_cfg = {} if rl_cfg is None else rl_cfg
        self.device = device or self._get_default_device()
        self.collector_device = collector_device or self.device
        self.sim_backend = sim_backend
        self.num_envs = num_envs
        self._ctx = mp.get_context("spawn")
        self._stop_event: Any = StopFlag(self._ctx)
        self._collector_process: Any = None
        self._error_conn: Any = None
        self._collector_report: str | None = None
        self._shared_resources: list[Any] = []
        self._queues: list[Any] = []
        self._close_complete = True

    def _get_default_device(self) -> str:
        """The learner's device when none is given (the reference's subclasses choose theirs;
        ours set `device` themselves): ``"cpu"``."""
        return "cpu"

    # -- collector lifetime --------------------------------------------------------------------

    def _new_queue(self, maxsize: int = 0) -> Any:
        q = self._ctx.Queue(maxsize=maxsize)
        self._queues.append(q)
        return q

    def _register_resource(self, resource: Any) -> Any:
        """Release `resource` in `close()` (its `cleanup()` if it has one, else `close()`)."""
        self._close_complete = False
        self._shared_resources.append(resource)
        return resource

    def _prepare_run(self) -> None:
        """Fresh stop flag for a new run; previous resources must have been released."""
        self._close_complete = False
        self._stop_event = StopFlag(self._ctx)
        self._collector_report = None

    def _start_collector(self, target_fn: Callable[..., None], kwargs: dict[str, Any]) -> None:
        """Spawn the collector as `target_fn(stop_event, **kwargs)` (a daemon process), or,
        with `"stop_event"` among `kwargs` (the reference's contract), `target_fn(**kwargs)`."""
        self._close_complete = False
        receiver, sender = self._ctx.Pipe(duplex=False)
        if "stop_event" in kwargs:
            args = (target_fn, sender, kwargs["stop_event"], kwargs, False)
        else:
            kwargs = {**kwargs, "parent_pid": os.getpid()}
            args = (target_fn, sender, self._stop_event, kwargs)
        process = self._ctx.Process(
            target=_collector_entry_wrapper, args=args, name="offpolicy-collector", daemon=True
        )
        process.start()
        sender.close()  # the child holds the only write end: EOF once it exits
        self._collector_process = process
        self._error_conn = receiver

    def _poll_collector(self) -> bool:
        """Read a pending failure report; returns False once the collector's pipe is closed
        (the collector exited), which also works in processes that did not spawn it."""
        conn = self._error_conn
        if conn is None:
            return True
        try:
            while conn.poll():  # also True at EOF, where recv raises
                report = conn.recv()
                if self._collector_report is None:
                    self._collector_report = report
        except (EOFError, OSError):
            return False
        return True

    def check_collector(self) -> None:
        """Raise `CollectorError` if the collector reported an exception or exited."""
        alive = self._poll_collector()
        if self._collector_report is not None:
            raise CollectorError(f"the collector process failed:\n{self._collector_report}")
        process = self._collector_process
        if process is not None and not process.is_alive():
            process.join(0.1)
            alive = False
            self._poll_collector()  # the report may land just before the exit
            if self._collector_report is not None:
                raise CollectorError(f"the collector process failed:\n{self._collector_report}")
        if not alive:
            if process is not None:
                process.join(1.0)  # the pipe closes just before the process can be reaped
            code = process.exitcode if process is not None else "unknown"
            raise CollectorError(f"the collector process exited unexpectedly (exit code {code})")

    def _stop_collector(self) -> None:
        process = self._collector_process
        if self._stop_event is not None:
            self._stop_event.set()
        if process is None:
            return
        process.join(_JOIN_TIMEOUT_S)
        if process.is_alive():  # it ignores SIGTERM (see `_collector_entry_wrapper`)
            process.kill()
            process.join()
        self._collector_process = None

    def close(self) -> None:
        """Stop the collector and release every shared resource. Idempotent."""
        idle = not self._shared_resources and self._collector_process is None
        if self._close_complete and idle:
            return
        try:
            self._stop_collector()
        finally:
            for resource in reversed(self._shared_resources):
                release = getattr(resource, "cleanup", None) or resource.close
                release()
            self._shared_resources.clear()
            for q in self._queues:
                close_queue(q)
            self._queues.clear()
            if self._error_conn is not None:
                self._error_conn.close()
                self._error_conn = None
            self._close_complete = True  # the stop event stays set, as the reference's

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: best effort only
            self.close()

    @abc.abstractmethod
    def learn(self, *args: Any, **kwargs: Any) -> None:
        """Run training."""
