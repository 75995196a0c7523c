"""What every sink shares: the run's description (`RunInfo`), the `Sink` protocol and its
no-op base, a user callback as a sink, the `Checkpointer` protocol, and `SinkChain`, the
sinks of a run driven as one."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BaseSink", "CallbackSink", "Checkpointer", "RunInfo", "Sink", "SinkChain"]


@dataclass(frozen=True)
class RunInfo:
    """What sinks know about a run before its first block."""

    algo_name: str
    env_name: str
    num_envs: int
    obs_dim: int
    action_dim: int
    max_iterations: int
    env_steps_per_sync: int
    train_start_rows: int
    num_devices: int
    log_dir: str
    start_iteration: int
    """Iterations already done by the initial state (a resumed run starts past 0)."""
    config: dict | None = None
    """The run's settings, ``{"train": ..., "algo": ...}`` as in ``run_config.json``."""
    sync_collection: bool = True
    """Whether collection waits for learning (the core's fused step always does; the torch
    path's asynchronous collector does not)."""


class Sink(Protocol):
    """A consumer of the host loop's records (see the module docstring for the order)."""

    def start(self, run: RunInfo) -> None: ...

    def status(self, text: str) -> None: ...

    def block(self, record: dict, state: Any) -> dict | None: ...

    def finish(self, summary: dict) -> None: ...

    def close(self) -> None: ...


class BaseSink:
    """A sink that does nothing: subclass it and implement only what you react to."""

    def start(self, run: RunInfo) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def block(self, record: dict, state: Any) -> dict | None:
        return None

    def finish(self, summary: dict) -> None:
        pass

    def close(self) -> None:
        pass


class CallbackSink(BaseSink):
    """Calls ``fn(record)`` after every block (``train(..., on_block=fn)``)."""

    def __init__(self, fn: Callable[[dict], Any]) -> None:
        self.fn = fn

    def block(self, record: dict, state: Any) -> None:
        self.fn(record)


class Checkpointer(Protocol):
    """What ``CheckpointSink`` saves through (``unilab_jax.training.checkpoint.CheckpointWriter``
    is one; the facade's mjx path writes ``model_<iteration>.pt`` files with another). One
    with a true ``keeps_best`` attribute is also passed ``eval_return=`` (the mean return of the
    block's deterministic evaluation) when the block was evaluated."""

    def save(self, step: int, state: Any) -> Any:
        """Write ``state`` as the checkpoint of iteration ``step``; return the path written."""
        ...

    def close(self) -> None: ...


class SinkChain:
    """Sinks in order, driven as one: ``block`` hands the record to each in turn and merges
    what each returns into it (later sinks see earlier ones' fields); ``close`` closes every
    sink even when one of them raises. Both host loops report through one: the core's
    (``trainer.train``) and the facade's torch loop."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def start(self, run: RunInfo) -> None:
        for sink in self.sinks:
            sink.start(run)

    def status(self, text: str) -> None:
        for sink in self.sinks:
            sink.status(text)

    def block(self, record: dict, state: Any) -> dict:
        """``record`` with every sink's added fields; returns it."""
        for sink in self.sinks:
            record.update(sink.block(record, state) or {})
        return record

    def finish(self, summary: dict) -> None:
        for sink in self.sinks:
            sink.finish(summary)

    def close(self) -> None:
        with contextlib.ExitStack() as stack:  # each close runs, the first error propagates
            for sink in reversed(self.sinks):
                stack.callback(sink.close)
