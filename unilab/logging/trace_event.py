"""Minimal Chrome Trace Event / Perfetto recorder for the off-policy runner (reference §5).

One recorder per process: the learner's (`offpolicy_learner`) and the collector's
(`offpolicy_collector`). The collector `drain()`s its events into metrics messages; the learner
`extend()`s its own list with them, so one file holds both pids. Timestamps come from
`time.perf_counter_ns` (CLOCK_MONOTONIC on Linux, shared by all processes of the machine), so the
two processes' events line up without any clock exchange.

Event shapes (Chrome Trace Event format, units are microseconds):

- metadata `{"ph": "M", "name": "process_name" | "thread_name", "args": {"name": ...}}`, emitted
  at construction for the process, the constructing thread ("main") and the synthetic GPU
  thread `gpu_stream_0` (tid 9001);
- complete `{"ph": "X", "name", "cat", "ts", "dur", "pid", "tid", "args"}` from `span(...)`;
- counter `{"ph": "C", "name", "cat", "ts", "pid", "tid", "args": {"value": v}}`.

Deviations from the reference:

- `write()` may be called at any time and any number of times (it snapshots, it does not
  clear), and it writes through a temporary file plus `os.replace`, so the runner can call it in
  a `finally` block: a run that raises still leaves a complete, loadable trace (the reference
  wrote the trace only when `learn` completed normally). A span whose body raised is still
  recorded, with `args.error` naming the exception type.
- `tid` is the OS thread id (`threading.get_native_id`), which stays small and JSON-safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["GPU_STREAM_TID", "TraceRecorder", "maybe_span"]

GPU_STREAM_TID = 9001
"""Synthetic thread id on which GPU durations are drawn (reference: `gpu_stream_0`)."""

TraceEvent = dict[str, Any]


def _now_us() -> float:
    """Current monotonic time in µs (float keeps sub-µs resolution in the JSON)."""
    return time.perf_counter_ns() / 1000.0


def _json_default(value: Any) -> Any:
    """Serialise numpy / torch scalars that end up in `args` without importing either."""
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


class TraceRecorder:
    """Collects trace events in memory for one process; `write` dumps them as Chrome JSON.

    Args:
        process_name: shown as the process track name (`offpolicy_learner`, ...).
        output_path: default destination of `write()`.
        thread_time: when True, spans given a `thread_time_counter` also emit a counter with
            the thread CPU time (µs) spent inside the span; the reference uses this for the
            weight-sync read/write only.
    """

    def __init__(
        self,
        process_name: str,
        output_path: str | os.PathLike[str] | None = None,
        thread_time: bool = False,
    ) -> None:
        self.process_name = process_name
        self.output_path = Path(output_path) if output_path is not None else None
        self.thread_time = thread_time
        self._events: list[TraceEvent] = []
        pid = os.getpid()
        self._events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": process_name},
            }
        )
        self.name_thread("main")
        self.name_thread("gpu_stream_0", tid=GPU_STREAM_TID)

    # -- recording ---------------------------------------------------------------------------

    def name_thread(self, name: str, tid: int | None = None) -> None:
        """Emit a `thread_name` metadata event (default: the calling thread), e.g. for H2D."""
        tid = threading.get_native_id() if tid is None else tid
        self._events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": os.getpid(),
                "tid": tid,
                "args": {"name": name},
            }
        )

    @contextlib.contextmanager
    def span(
        self, name: str, cat: str = "", thread_time_counter: str | None = None, **args: Any
    ) -> Iterator[dict[str, Any]]:
        """Record the body as one complete (`ph:"X"`) event on the calling thread.

        Yields the event's `args` dict so the body can attach results (sizes, indices).
        `thread_time_counter` names the thread-CPU-time counter to emit when the recorder was
        built with `thread_time=True` (e.g. `"weight_sync/write_thread_cpu_us"`).
        """
        want_cpu = self.thread_time and thread_time_counter is not None
        cpu0 = time.thread_time_ns() if want_cpu else 0
        start_ns = time.perf_counter_ns()
        try:
            yield args
        except BaseException as exc:
            args["error"] = type(exc).__name__
            raise
        finally:
            end_ns = time.perf_counter_ns()
            self.add_complete(name, start_ns / 1000.0, (end_ns - start_ns) / 1000.0, cat, **args)
            if want_cpu:
                cpu_us = (time.thread_time_ns() - cpu0) / 1000.0
                self.counter(thread_time_counter, cpu_us, cat=cat, ts_us=end_ns / 1000.0)

    def add_complete(
        self,
        name: str,
        ts_us: float,
        dur_us: float,
        cat: str = "",
        tid: int | None = None,
        **args: Any,
    ) -> None:
        """Append a complete event with explicit timing (GPU spans go on `GPU_STREAM_TID`)."""
        self._events.append(
            {
                "ph": "X",
                "name": name,
                "cat": cat,
                "ts": ts_us,
                "dur": dur_us,
                "pid": os.getpid(),
                "tid": threading.get_native_id() if tid is None else tid,
                "args": args,
            }
        )

    def counter(self, name: str, value: float, cat: str = "", ts_us: float | None = None) -> None:
        """Append a counter sample (`ph:"C"`, drawn as a step graph named `name`)."""
        self._events.append(
            {
                "ph": "C",
                "name": name,
                "cat": cat,
                "ts": _now_us() if ts_us is None else ts_us,
                "pid": os.getpid(),
                "tid": threading.get_native_id(),
                "args": {"value": value},
            }
        )

    # -- moving events between processes -----------------------------------------------------

    @property
    def events(self) -> list[TraceEvent]:
        """The events recorded (or merged) so far; a live list, do not mutate."""
        return self._events

    def drain(self) -> list[TraceEvent]:
        """Return and forget all events so far (the collector ships them over the queue).

        The swap is one assignment, so a span finishing on another thread lands either in the
        returned list or in the next one, never nowhere.
        """
        events, self._events = self._events, []
        return events

    def extend(self, events: Iterable[TraceEvent]) -> None:
        """Merge events from another recorder (the learner adds the collector's)."""
        self._events.extend(events)

    # -- output ------------------------------------------------------------------------------

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write `{"traceEvents": [...]}` atomically and return the path; keeps the events.

        Safe to call from a `finally` block after a partial run, and repeatedly (periodic
        flushes): readers only ever see a complete previous file or the complete new one.
        """
        target = Path(path) if path is not None else self.output_path
        if target is None:
            raise ValueError("TraceRecorder.write: no path given and no output_path set")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w") as f:
                json.dump({"traceEvents": list(self._events)}, f, default=_json_default)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target

    def __getstate__(self) -> dict[str, Any]:
        """Pickle configuration only: events belong to the process that recorded them."""
        state = self.__dict__.copy()
        state["_events"] = []
        return state


def maybe_span(
    recorder: TraceRecorder | None, name: str, cat: str = "", **kwargs: Any
) -> contextlib.AbstractContextManager[Any]:
    """`recorder.span(...)` when tracing is on, a no-op context when `recorder` is None."""
    if recorder is None:
        return contextlib.nullcontext({})
    return recorder.span(name, cat=cat, **kwargs)
