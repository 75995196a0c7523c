"""What the host loop reports: one record per block, the run's description and its summary.

``block_record`` turns a block's reduced device metrics (``step``: per-iteration sums of
returns, lengths, episodes and done counts, the learner's metrics on learning iterations,
the buffer fill, reward components, C MuJoCo's policy lag and collection time) into the record
the sinks read (``unilab_jax.training.sinks`` lists its fields); ``check_finite`` stops a run at the
first env that produced a non-finite step and ``check_learner_finite`` at the first iteration
whose learner losses or parameters are not finite; ``run_info`` is what the sinks are told at
the start (``RunInfo``); ``run_summary`` is the reference's ``last_run_summary`` plus ours, which
``write_run_summary`` writes into the run's log dir when it completes, stops on a signal or
diverges.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from unilab_jax.algos.registry import get_algo
from unilab_jax.config import TrainConfig
from unilab_jax.errors import EnvNaNError, LearnerDivergedError
from unilab_jax.training.sinks import RunInfo

__all__ = [
    "RUN_SUMMARY_FILE", "block_record", "check_finite", "check_learner_finite", "run_info",
    "run_summary", "write_run_summary",
]  # fmt: skip

#: The file in a run's log dir that ``train`` writes its summary into when the run ends.
RUN_SUMMARY_FILE = "run_summary.json"


def run_info(
    trainer: Any, config: TrainConfig, log_dir: Path | None, done: int, run_config: dict
) -> RunInfo:
    """What the sinks are told when the run (of ``trainer``, a ``Trainer``) starts at
    iteration ``done``."""
    return RunInfo(
        algo_name=get_algo(config.algo).display_name,
        env_name=config.env,
        num_envs=config.num_envs,
        obs_dim=trainer.obs_dim,
        action_dim=trainer.env.action_size,
        max_iterations=config.max_iterations,
        env_steps_per_sync=config.env_steps_per_sync,
        train_start_rows=config.train_start_rows,
        num_devices=config.num_devices,
        log_dir=str(log_dir or ""),
        start_iteration=done,
        config=run_config,
    )


def run_summary(
    config: TrainConfig,
    state: Any,
    history: list[dict],
    compile_time: float,
    wall: float,
    final_eval: float | None,
) -> dict:
    """The run summary: the reference's ``last_run_summary`` keys plus ours. Wall-clock
    ``training_wall_time_sec`` excludes the evaluations (``eval_time_sec``)."""
    done = int(state.iteration)
    evals = [h for h in history if h.get("eval_return") is not None]
    eval_time = sum(h["eval_sec"] for h in evals)
    best = max(evals, key=lambda h: h["eval_return"], default=None)
    if evals and evals[-1]["iteration"] == done:
        final_eval = evals[-1]["eval_return"]
    returns = [h["mean_return"] for h in history if h["mean_return"] is not None]
    lengths = [h["mean_length"] for h in history if h["mean_length"] is not None]
    checkpoints = [h["checkpoint"] for h in history if h.get("checkpoint")]
    warnings = [text for h in history for text in h.get("warnings", ())]
    return {
        "status": "completed",
        "completed_iterations": done,
        "total_env_steps": done * config.num_envs * config.env_steps_per_sync,
        "final_mean_reward": returns[-1] if returns else None,
        "best_mean_reward": max(returns) if returns else None,
        "mean_episode_length": lengths[-1] if lengths else None,
        "eval_mean_return": final_eval,
        "best_eval_return": best["eval_return"] if best else None,
        "best_eval_iteration": best["iteration"] if best else None,
        "best_eval_env_steps": best["env_steps"] if best else None,
        "best_eval_elapsed_sec": best["elapsed_sec"] if best else None,
        "eval_time_sec": eval_time,
        "last_checkpoint": checkpoints[-1] if checkpoints else None,
        "warnings": warnings,
        "compile_time_sec": compile_time,
        "training_wall_time_sec": wall - eval_time,
    }


def write_run_summary(log_dir: Path, summary: dict) -> None:
    """``summary`` and ``log_dir`` as ``log_dir/run_summary.json`` (not at all when the disk
    is full: the run's own error already says so)."""
    with contextlib.suppress(OSError):
        text = json.dumps({**summary, "log_dir": str(log_dir)}, indent=2)
        (log_dir / RUN_SUMMARY_FILE).write_text(text)


def _mean_or_none(total: float, count: float) -> float | None:
    return float(total / count) if count > 0 else None


def block_record(metrics: dict, iteration: int, rows_per_iter: int, sec_per_iter: float) -> dict:
    """The record of the block that ended at ``iteration`` (``sec_per_iter``: its wall-clock
    seconds per iteration)."""
    episodes = float(np.sum(metrics["episodes"]))
    learning = np.asarray(metrics["learning"])
    learner = (
        {k: float(np.mean(np.asarray(v)[learning])) for k, v in metrics["learner"].items()}
        if learning.any()
        else {}
    )
    return {
        "iteration": iteration,
        "env_steps": iteration * rows_per_iter,
        "episodes": episodes,
        "mean_return": _mean_or_none(float(np.sum(metrics["return_sum"])), episodes),
        "mean_length": _mean_or_none(float(np.sum(metrics["length_sum"])), episodes),
        "timeout_rate": _mean_or_none(float(np.sum(metrics["truncated"])), episodes),
        "terminated_rate": _mean_or_none(float(np.sum(metrics["terminated"])), episodes),
        "learning": bool(learning[-1]),
        "buffer_rows": int(np.asarray(metrics["buffer_rows"])[-1]),
        "learner": learner,
        "components": {k: float(np.mean(v)) for k, v in metrics["components"].items()},
        "sec_per_iter": sec_per_iter,
        **_collection_fields(metrics),
    }


def _collection_fields(metrics: dict) -> dict:
    """C MuJoCo collection's own fields: the largest policy lag of the block (iterations the
    acting actor was behind the learner's; 0 with the sync schedule) and the collector's
    seconds per iteration."""
    if "policy_lag" not in metrics:
        return {}
    return {
        "policy_lag": int(np.max(metrics["policy_lag"])),
        "collect_sec_per_iter": float(np.mean(metrics["collect_sec"])),
    }


def check_finite(metrics: dict, first_iteration: int, num_envs: int) -> None:
    """Raise ``EnvNaNError`` naming the env and iteration of the first non-finite step."""
    nan_env = np.asarray(metrics["nan_env"])  # [iterations]; num_envs when all were finite
    bad = np.nonzero(nan_env < num_envs)[0]
    if len(bad):
        i = int(bad[0])
        raise EnvNaNError(
            f"environment {int(nan_env[i])} produced a non-finite observation or reward at "
            f"iteration {first_iteration + i + 1}; check the task's physics settings (timestep, "
            "damping, actuator gains) or its observation/reward code for that state"
        )


def check_learner_finite(metrics: dict, first_iteration: int) -> None:
    """Raise ``LearnerDivergedError`` at the first iteration whose learner metrics (losses,
    Q values, temperature, ...) or agent parameters are not finite, naming the quantities."""
    learning = np.asarray(metrics["learning"])
    finite = np.asarray(metrics.get("params_finite", np.ones_like(learning)))
    learner = {k: np.asarray(v) for k, v in metrics["learner"].items()}
    for i in range(len(learning)):
        bad = [k for k, v in learner.items() if learning[i] and not np.all(np.isfinite(v[i]))]
        if not finite[i]:
            bad.append("the agent's parameters")
        if bad:
            values = ", ".join(
                f"{k} = {float(np.ravel(learner[k][i])[0])}" if k in learner else k for k in bad
            )
            raise LearnerDivergedError(
                f"the learner diverged at iteration {first_iteration + i + 1}: {values} "
                "(the first non-finite learner quantities); training stopped and nothing from "
                "this block was saved. Lower the learning rates (critic_lr, actor_lr) or the "
                "value support's range, or check the task's reward scale"
            )
