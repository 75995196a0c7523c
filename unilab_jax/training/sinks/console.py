"""The sinks that show and log a run: the live console panel with TensorBoard/wandb scalars
(`LoggerSink`, over the ``OffPolicyLogger``) and plain progress lines for a log file
(`PlainLineSink`); the run's wandb identity file and the summary's lines."""

from __future__ import annotations

import io
import json
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from unilab_jax.training.logger import OffPolicyLogger, use_console
from unilab_jax.training.logger.console import format_duration
from unilab_jax.training.sinks.base import BaseSink, RunInfo

__all__ = ["WANDB_RUN_FILE", "LoggerSink", "PlainLineSink", "write_wandb_run"]


class LoggerSink(BaseSink):
    """The ``OffPolicyLogger``: live console panel plus TensorBoard or wandb scalars.

    ``backend`` is ``"tensorboard"``, ``"wandb"`` (TensorBoard files too) or ``"none"``
    (console only); ``quiet`` silences the console but keeps the TensorBoard/wandb files.
    ``wandb``: ``wandb.init`` options (``project``, ``entity``, ``group``, ``name``, ``tags``,
    ``notes``, ``job_type``); the run's whole configuration becomes the wandb config.
    """

    def __init__(
        self,
        backend: str = "tensorboard",
        quiet: bool = False,
        wandb: dict | None = None,
        *,
        starting: str | None = None,
        summary_lines: Callable[[dict], str] | None = None,
    ) -> None:
        self.backend = backend
        self.quiet = quiet
        self.starting = starting
        """The status line shown from ``start`` on (default: the fused step compiles)."""
        self.summary_lines = summary_lines
        """``summary -> str``: the summary panel's lines (default: the core's summary)."""
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
        self.log.set_collection_sync(run.sync_collection, run.env_steps_per_sync)
        starting = self.starting or f"Compiling the fused step ({run.num_devices} device(s))..."
        self.log.start(status=starting)

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
            **(record.get("timing") or {"train_time": record["sec_per_iter"]}),
            extra_info={"throughput_steps": rows_per_iter},
        )
        if record.get("checkpoint"):
            log.log_save(record["checkpoint"])
        for text in record.get("warnings", ()):
            log.log_warning(text)
        if record.get("eval_return") is not None:
            log.log_eval(record["iteration"], record["eval_return"], record["eval_length"])

    def finish(self, summary: dict) -> None:
        if self.summary_lines is not None:
            self.log.finish(extra_summary=self.summary_lines(summary))
        else:
            self.log.finish(extra_summary=_summary_lines(summary, _eval_envs(self._run)))

    def close(self) -> None:
        if self.log is not None:
            self.log.close()  # restores the terminal (cursor) after Ctrl+C or an error


WANDB_RUN_FILE = "wandb_run.json"


def write_wandb_run(log_dir: str, wandb_run: Any) -> None:
    """Record the run's wandb identity in ``<log_dir>/wandb_run.json`` (id, project, entity,
    name, group, mode), so that later commands can log into the same wandb run
    (``unilab-jax play RUN --wandb``)."""
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
