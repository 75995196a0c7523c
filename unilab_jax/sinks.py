"""Where the host loop's block records go: the console panel, TensorBoard/wandb, checkpoints and
any user callback are all sinks of the same records.

``unilab_jax.trainer.train`` runs ``log_interval`` iterations per device call and turns each
call's reduced metrics into one *block record* (a plain dict, kept in ``TrainResult.history``):

===================  =====================================================================
``iteration``        iterations completed after this block
``env_steps``        ``iteration * num_envs * env_steps_per_sync``
``episodes``         episodes that ended during the block
``mean_return``      mean return of those episodes (None when none ended)
``mean_length``      their mean length (None when none ended)
``timeout_rate``     fraction of them that hit the time limit (None when none ended)
``terminated_rate``  fraction of them that terminated (None when none ended)
``learning``         whether the block's last iteration updated the learner
``buffer_rows``      rows stored in the replay after the block
``learner``          mean learner metrics over the block's learning iterations ({} if none)
``components``       mean per-step reward components
``sec_per_iter``     wall-clock seconds per iteration of the block
``elapsed_sec``      wall-clock seconds since ``train`` began (compile and earlier evaluations
                     included), taken when the block's results arrived
``checkpoint``       path written after this block (added by ``CheckpointSink``), or absent
``warnings``         new warnings raised after this block (added by ``HealthSink``), or absent
``eval_return``      mean return of the deterministic evaluation run after this block (added
                     by ``EvalSink`` every ``eval_interval`` iterations and after the last),
                     with ``eval_length`` and ``eval_sec`` (its wall-clock cost); or absent
===================  =====================================================================

A sink has four methods, called in this order: ``start(run)`` once, ``status(text)`` for
messages between blocks ("Compiling..."), ``block(record, state)`` after every block, and
``finish(summary)`` once training ended normally; ``close()`` is called always, also after an
error or Ctrl+C (the console sink restores the terminal there). ``block`` may return a dict of
fields to add to the record, which later sinks and the history see (the checkpoint sink adds
``checkpoint``), so the order of the sinks matters: ``train`` puts the checkpoint sink first.
"""

from __future__ import annotations

import io
import json
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from rich.console import Console

from unilab_jax.logging import OffPolicyLogger, use_console
from unilab_jax.logging.common import format_duration

__all__ = [
    "BaseSink",
    "CallbackSink",
    "CheckpointSink",
    "Checkpointer",
    "EvalSink",
    "HealthSink",
    "LoggerSink",
    "PlainLineSink",
    "RunInfo",
    "Sink",
]


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
    """What ``CheckpointSink`` saves through (``unilab_jax.checkpoint.CheckpointWriter`` is one;
    the facade's mjx path writes ``model_<iteration>.pt`` files with another)."""

    def save(self, step: int, state: Any) -> Any:
        """Write ``state`` as the checkpoint of iteration ``step``; return the path written."""
        ...

    def close(self) -> None: ...


class CheckpointSink(BaseSink):
    """Saves when the iteration reaches a multiple of ``save_interval`` and after the last block
    (also when ``save_interval`` is 0, as the reference always saves its final model); adds the
    path as the record's ``checkpoint``."""

    def __init__(self, checkpointer: Checkpointer, save_interval: int, max_iterations: int):
        self.checkpointer = checkpointer
        self.schedule = _Every(save_interval, max_iterations)
        self._last_saved: int | None = None
        self._last_path: str | None = None

    def start(self, run: RunInfo) -> None:
        self.schedule.start(run.start_iteration)

    def block(self, record: dict, state: Any) -> dict | None:
        if not self.schedule.due(record["iteration"]):
            return None
        return {"checkpoint": self.save_final(record["iteration"], state)}

    def save_final(self, iteration: int, state: Any) -> str:
        """Save ``state`` as ``iteration`` unless that checkpoint is already written (a run
        stopped early saves what it has); returns the path."""
        if self._last_saved != iteration:
            self._last_path = str(self.checkpointer.save(iteration, state))
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


class LoggerSink(BaseSink):
    """The ``OffPolicyLogger``: live console panel plus TensorBoard or wandb scalars.

    ``backend`` is ``"tensorboard"``, ``"wandb"`` (TensorBoard files too) or ``"none"``
    (console only); ``quiet`` silences the console but keeps the TensorBoard/wandb files.
    ``wandb``: ``wandb.init`` options (``project``, ``entity``, ``group``, ``name``, ``tags``,
    ``notes``, ``job_type``); the run's whole configuration becomes the wandb config.
    """

    def __init__(
        self, backend: str = "tensorboard", quiet: bool = False, wandb: dict | None = None
    ) -> None:
        self.backend = backend
        self.quiet = quiet
        self.wandb = {f"wandb_{k}": v for k, v in (wandb or {}).items() if v is not None}
        self.log: OffPolicyLogger | None = None
        self._returns: deque[float] = deque(maxlen=100)
        self._run: RunInfo | None = None

    def start(self, run: RunInfo) -> None:
        self._run = run
        kwargs = dict(
            algo_name=run.algo_name,
            max_iterations=run.max_iterations,
            num_envs=run.num_envs,
            env_name=run.env_name,
            obs_dim=run.obs_dim,
            action_dim=run.action_dim,
            log_dir=run.log_dir,
            **self.wandb,
        )
        backend = self.backend if run.log_dir else "none"
        if not self.quiet:
            self.log = OffPolicyLogger(log_backend=backend, **kwargs)
        elif backend == "none":
            self.log = OffPolicyLogger(log_backend="no_print", **kwargs)
        else:
            with use_console(Console(file=io.StringIO(), force_terminal=False)):
                self.log = OffPolicyLogger(log_backend=backend, **kwargs)
        wandb_run = getattr(self.log, "_wandb_run", None)
        if wandb_run is not None:  # the logger's documented signature takes no config
            wandb_run.config.update(_flat_config(run.config), allow_val_change=True)
            if run.log_dir:
                write_wandb_run(run.log_dir, wandb_run)
        self.log.set_collection_sync(True, run.env_steps_per_sync)
        self.log.start(status=f"Compiling the fused step ({run.num_devices} device(s))...")

    def status(self, text: str) -> None:
        self.log.log_status(text)

    def block(self, record: dict, state: Any) -> None:
        log, run = self.log, self._run
        rows_per_iter = run.num_envs * run.env_steps_per_sync
        if record["mean_return"] is not None:
            self._returns.append(record["mean_return"])
        log.log_collector(record["env_steps"], record["buffer_rows"], record["mean_return"] or 0.0)
        if record["mean_length"] is not None:
            log.update_ep_length(record["mean_length"])
            log.update_done_rates(record["timeout_rate"] or 0.0, record["terminated_rate"] or 0.0)
        if not record["learning"]:
            log.log_buffer_fill(record["buffer_rows"], run.train_start_rows)
        returns = self._returns
        log.log_step(
            record["iteration"],
            metrics=record["learner"],
            reward=float(np.mean(returns)) if returns else None,
            reward_metrics={"mean_ep100": returns[-1]} if returns else None,
            reward_components=record["components"],
            train_time=record["sec_per_iter"],
            extra_info={"throughput_steps": rows_per_iter},
        )
        if record.get("checkpoint"):
            log.log_save(record["checkpoint"])
        for text in record.get("warnings", ()):
            log.log_warning(text)
        if record.get("eval_return") is not None:
            log.log_eval(record["iteration"], record["eval_return"], record["eval_length"])

    def finish(self, summary: dict) -> None:
        self.log.finish(extra_summary=_summary_lines(summary, _eval_envs(self._run)))

    def close(self) -> None:
        if self.log is not None:
            self.log.close()  # restores the terminal (cursor) after Ctrl+C or an error


WANDB_RUN_FILE = "wandb_run.json"


def write_wandb_run(log_dir: str, wandb_run: Any) -> None:
    """Record the run's wandb identity in ``<log_dir>/wandb_run.json`` (id, project, entity,
    name, group, mode), so that later commands can log into the same wandb run
    (``python -m unilab_jax.play RUN --wandb``)."""
    settings = getattr(wandb_run, "settings", None)
    record = {
        "id": wandb_run.id,
        "project": wandb_run.project or None,
        "entity": wandb_run.entity or None,
        "name": wandb_run.name or None,
        "group": wandb_run.group or None,
        "mode": getattr(settings, "mode", None) or "online",
    }
    path = Path(log_dir) / WANDB_RUN_FILE
    path.write_text(json.dumps(record, indent=2) + "\n")


class PlainLineSink(BaseSink):
    """Progress for a log file (stdout not a terminal, e.g. a cluster job): one plain line per
    block, and plain lines for status, warnings and the summary; no live panel, no escape
    codes, flushed as written.

    A block's line: ``it 200/1500 | env steps 12,800 | 3,950 steps/s | train return 61.8 |
    eval return 81.3 | qf_loss 2.41 actor_loss -20.3 | ETA 5m10s``. The training return is
    the exploring policy's mean episode return in the block; the eval return (on blocks that
    evaluated) the deterministic policy's.
    """

    #: Learner metrics printed when present, in this order.
    LOSSES = ("qf_loss", "actor_loss", "alpha_loss")

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream
        self._run: RunInfo | None = None

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    def start(self, run: RunInfo) -> None:
        self._run = run
        where = f", logs in {run.log_dir}" if run.log_dir else ""
        self._print(
            f"{run.algo_name} on {run.env_name}: {run.num_envs} envs, iterations "
            f"{run.start_iteration}..{run.max_iterations} on {run.num_devices} device(s){where}"
        )

    def status(self, text: str) -> None:
        self._print(text)

    def block(self, record: dict, state: Any) -> None:
        run = self._run
        parts = [
            f"it {record['iteration']}/{run.max_iterations}",
            f"env steps {record['env_steps']:,}",
        ]
        if record["sec_per_iter"] > 0:
            rate = run.num_envs * run.env_steps_per_sync / record["sec_per_iter"]
            parts.append(f"{rate:,.0f} steps/s")
        if record["mean_return"] is not None:
            parts.append(f"train return {record['mean_return']:.4g}")
        if record.get("eval_return") is not None:
            parts.append(f"eval return {record['eval_return']:.4g}")
        losses = [f"{k} {record['learner'][k]:.3g}" for k in self.LOSSES if k in record["learner"]]
        if losses:
            parts.append(" ".join(losses))
        elif not record["learning"]:
            parts.append(f"filling replay {record['buffer_rows']:,}/{run.train_start_rows:,}")
        done = record["iteration"] - run.start_iteration
        if done > 0 and record.get("elapsed_sec"):
            left = record["elapsed_sec"] / done * (run.max_iterations - record["iteration"])
            parts.append(f"ETA {format_duration(left)}")
        self._print(" | ".join(parts))
        for text in record.get("warnings", ()):
            self._print(f"WARNING {text}")
        if record.get("checkpoint"):
            self._print(f"saved {record['checkpoint']}")

    def finish(self, summary: dict) -> None:
        self._print(f"Training {summary['status']}: {summary['completed_iterations']} iterations, "
                    f"{summary['total_env_steps']:,} env steps")  # fmt: skip
        for line in _summary_lines(summary, _eval_envs(self._run)).splitlines():
            self._print(line.strip())
        for text in summary.get("warnings", ()):
            self._print(f"Warning: {text}")


def _flat_config(config: dict | None) -> dict:
    """``{"train": {...}, "algo": {...}}`` as flat ``train/<name>`` / ``algo/<name>`` keys."""
    return {f"{section}/{k}": v for section, values in (config or {}).items()
            for k, v in values.items()}  # fmt: skip


def _eval_envs(run: RunInfo | None) -> int | None:
    """The run's ``eval_envs`` (None when its settings are not known)."""
    train = ((run.config if run is not None else None) or {}).get("train") or {}
    return train.get("eval_envs")


def _summary_lines(summary: dict, eval_envs: int | None = None) -> str:
    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    final_eval = fmt(summary["eval_mean_return"])
    if summary["eval_mean_return"] is None and eval_envs == 0:
        final_eval = "not run (eval_envs=0)"
    lines = [
        f"  Training return (exploring policy, last block): {fmt(summary['final_mean_reward'])}"
        f" | best block: {fmt(summary['best_mean_reward'])}",
        f"  Eval return (deterministic policy, final): {final_eval}",
    ]
    if summary.get("best_eval_return") is not None:
        lines[-1] += (
            f" | best: {fmt(summary['best_eval_return'])} at "
            f"{summary['best_eval_env_steps']:,} env steps "
            f"({summary['best_eval_elapsed_sec']:.0f}s)"
        )
    lines.append(
        f"  Compile: {summary['compile_time_sec']:.1f}s | "
        f"Evaluation: {summary.get('eval_time_sec', 0.0):.1f}s"
    )
    return "\n".join(lines)
