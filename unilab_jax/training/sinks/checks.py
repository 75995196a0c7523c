"""The sinks that act on a run between blocks: checkpoints on a schedule (`CheckpointSink`),
the deterministic evaluation (`EvalSink`) and the known reasons a run learns badly
(`HealthSink`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from unilab_jax.training.sinks.base import BaseSink, Checkpointer, RunInfo

__all__ = ["CheckpointSink", "EvalSink", "HealthSink"]


class CheckpointSink(BaseSink):
    """Saves when the iteration reaches a multiple of ``save_interval`` and after the last block
    (also when ``save_interval`` is 0, as the reference always saves its final model); adds the
    path as the record's ``checkpoint``. A checkpointer that ``keeps_best`` (the core's
    ``CheckpointWriter``) is also handed the block's ``eval_return``, when the record has one,
    to keep the best-evaluated checkpoint, and an evaluated block whose return beats every
    earlier one of the run is saved too, off the schedule, so the best checkpoint is the best
    evaluated policy (not only the best of those the schedule happened to save): this sink
    must come after ``EvalSink``."""

    def __init__(self, checkpointer: Checkpointer, save_interval: int, max_iterations: int):
        self.checkpointer = checkpointer
        self.schedule = _Every(save_interval, max_iterations)
        self._last_saved: int | None = None
        self._last_path: str | None = None
        self._best = -math.inf  # the best eval return this sink has seen

    def start(self, run: RunInfo) -> None:
        self.schedule.start(run.start_iteration)

    def block(self, record: dict, state: Any) -> dict | None:
        due = self.schedule.due(record["iteration"])
        score = record.get("eval_return")
        best = (
            getattr(self.checkpointer, "keeps_best", False)
            and score is not None
            and math.isfinite(score)
            and score > self._best
        )
        if best:
            self._best = score
        if not (due or best):
            return None
        path = self.save_final(record["iteration"], state, score)
        return {"checkpoint": path}

    def save_final(self, iteration: int, state: Any, eval_return: float | None = None) -> str:
        """Save ``state`` as ``iteration`` unless that checkpoint is already written (a run
        stopped early saves what it has); returns the path."""
        if self._last_saved != iteration:
            ranked = eval_return is not None and getattr(self.checkpointer, "keeps_best", False)
            extra = {"eval_return": eval_return} if ranked else {}
            self._last_path = str(self.checkpointer.save(iteration, state, **extra))
            self._last_saved = iteration
        return self._last_path

    def close(self) -> None:
        self.checkpointer.close()


class _Every:
    """Due at every multiple of ``interval`` reached (0: never) and at ``max_iterations``."""

    def __init__(self, interval: int, max_iterations: int) -> None:
        self.interval, self.max_iterations = interval, max_iterations
        self._next = math.inf

    def _after(self, iteration: int) -> float:
        if self.interval <= 0:
            return math.inf
        return (iteration // self.interval + 1) * self.interval

    def start(self, iteration: int) -> None:
        self._next = self._after(iteration)

    def due(self, iteration: int) -> bool:
        if iteration < self._next and iteration != self.max_iterations:
            return False
        self._next = self._after(iteration)
        return True


class EvalSink(BaseSink):
    """Evaluates the deterministic policy every ``interval`` iterations and after the last
    block: ``evaluate(state) -> (mean return, mean length)`` (compiled once by the trainer);
    adds ``eval_return``, ``eval_length`` and ``eval_sec`` to the record. ``announce(text)``
    reports the first evaluation, which compiles it."""

    def __init__(
        self,
        evaluate: Callable[[Any], tuple[float, float]],
        interval: int,
        max_iterations: int,
        announce: Callable[[str], Any] | None = None,
    ) -> None:
        self.evaluate = evaluate
        self.schedule = _Every(interval, max_iterations)
        self.announce = announce

    def start(self, run: RunInfo) -> None:
        self.schedule.start(run.start_iteration)

    def block(self, record: dict, state: Any) -> dict | None:
        done = record["iteration"]
        if not self.schedule.due(done):
            return None
        if self.announce is not None:  # the first one compiles: say what is going on
            self.announce(f"Evaluating the deterministic policy (iteration {done})...")
            self.announce = None
        start = time.perf_counter()
        mean_return, mean_length = self.evaluate(state)
        seconds = time.perf_counter() - start
        return {"eval_return": mean_return, "eval_length": mean_length, "eval_sec": seconds}


class HealthSink(BaseSink):
    """Says when a run is learning badly for a known reason; adds the record's ``warnings``.

    Today's check: a C51 value support too small for the returns. The learner reports the
    share of its target probability that the projection clips at ``v_max`` / ``v_min``
    (``target_clip_high`` / ``target_clip_low``); when it stays above ``threshold`` for
    ``patience`` learning blocks in a row, the critic's values are pinned to the edge and
    learning stalls without any error, so the sink warns once per edge, naming the setting to
    change. ``suggest_v_max`` / ``suggest_v_min``: values to suggest (e.g. the support derived
    from the task's reward bounds); otherwise a doubled span. ``unit`` names what ``patience``
    counts in the message (the torch path checks every iteration).
    """

    def __init__(
        self,
        v_min: float,
        v_max: float,
        gamma: float,
        *,
        suggest_v_min: float | None = None,
        suggest_v_max: float | None = None,
        threshold: float = 0.05,
        patience: int = 3,
        unit: str = "blocks",
    ) -> None:
        self.v_min, self.v_max, self.gamma = v_min, v_max, gamma
        span = v_max - v_min
        self._suggest = {
            "high": suggest_v_max if suggest_v_max and suggest_v_max > v_max else v_max + span,
            "low": suggest_v_min if suggest_v_min and suggest_v_min < v_min else v_min - span,
        }
        self.threshold, self.patience, self.unit = threshold, patience, unit
        self._streak = {"high": 0, "low": 0}
        self._warned: set[str] = set()

    def block(self, record: dict, state: Any) -> dict | None:
        learner = record["learner"]
        if not learner:
            return None
        new = []
        for edge in ("high", "low"):
            share = learner.get(f"target_clip_{edge}")
            if share is None:
                continue
            self._streak[edge] = self._streak[edge] + 1 if share > self.threshold else 0
            if self._streak[edge] >= self.patience and edge not in self._warned:
                self._warned.add(edge)
                new.append(self._support_warning(edge, share))
        return {"warnings": new} if new else None

    def _support_warning(self, edge: str, share: float) -> str:
        bound, name, verb = (
            (self.v_max, "v_max", "raise") if edge == "high" else (self.v_min, "v_min", "lower")
        )
        side = "beyond" if edge == "high" else "below"
        return (
            f"value support too small: {100 * share:.0f}% of the critic's target probability "
            f"lies {side} {name} = {bound:g} (train/target_clip_{edge}) for {self.patience} "
            f"{self.unit} in a row, so its values are pinned to the edge and learning stalls at "
            f"gamma {self.gamma:g}; {verb} {name} (--{name.replace('_', '-')}), e.g. to "
            f"{self._suggest[edge]:.3g}, or lower the discount (--gamma)"
        )
