"""Host-side bookkeeping of one torch-path run: what the collector reported, each iteration's
record for the sinks, and the `last_run_summary` (the reference's keys, in its order).

The torch loop reports through the core's sinks (``unilab_jax.training.sinks``): `RunState.record`
turns an iteration into a block record of the core's layout (one iteration per block), which
the checkpoint, health and console sinks then see, as on the JAX path. The collector's
statistics arrive between iterations (`take_metrics`): its progress and timings go to the
console panel as they come, its episode returns into the next record. The checkpoints
themselves (``model_<it>.pt``, their metadata, the atomic write) are `checkpoints`.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.markup import escape

from unilab.algos.torch.offpolicy.checkpoints import TorchCheckpointer, checkpoint_meta
from unilab.ipc.async_runner import drain_queue
from unilab.logging.trace_event import TraceRecorder
from unilab_jax.config import TrainConfig
from unilab_jax.training.facade import (
    CheckpointSink,
    HealthSink,
    LoggerSink,
    OffPolicyLogger,
    RunInfo,
    RunStopped,
    SinkChain,
    run_stopped,
)

__all__ = ["RunState", "late_stop", "open_sinks", "stop_line"]


class RunState:
    """One `learn` call on one learner rank (`lead`: rank 0, which records, logs and saves)."""

    def __init__(self, recorder: TraceRecorder | None, log_dir: Path, lead: bool = True) -> None:
        self.recorder = recorder
        self.log_dir = log_dir
        self.lead = lead
        self.status = "running"
        self.completed = 0
        self.total_env_steps = 0
        self.reward_snapshots: deque[float] = deque(maxlen=100)
        self.reward_components: dict[str, float] = {}
        self.mean_ep_length: float | None = None
        self.last_checkpoint: str | None = None
        self.trace_path: str | None = None
        self.warnings: list[str] = []
        self.config: TrainConfig | None = None
        """The run's settings (recorded in its checkpoints)."""
        self.started = time.perf_counter()
        self._new_returns: list[float] = []  # the collector's reports since the last record
        self._done_rates: tuple[float, float] | None = None

    def record(
        self, iteration: int, metrics: dict[str, float], buffer_rows: int, timing: dict[str, float]
    ) -> dict[str, Any]:
        """This iteration as a block record of the core's layout (``unilab_jax.training.sinks``; the
        collector's latest statistics, its returns reported since the last record)."""
        self.completed = iteration
        returns, self._new_returns = self._new_returns, []
        timeout, terminated = self._done_rates or (None, None)
        return {
            "iteration": iteration,
            "env_steps": self.total_env_steps,
            "episodes": None,  # the collector reports means, not episode counts
            "mean_return": returns[-1] if returns else None,
            "mean_length": self.mean_ep_length,
            "timeout_rate": timeout,
            "terminated_rate": terminated,
            "learning": True,
            "buffer_rows": buffer_rows,
            "learner": metrics,
            "components": self.reward_components,
            "sec_per_iter": timing["train_time"],
            "elapsed_sec": time.perf_counter() - self.started,
            "timing": timing,
        }

    def reported(self, record: dict[str, Any]) -> None:
        """What the sinks added to an iteration's record: its checkpoint and warnings."""
        if record.get("checkpoint"):
            self.last_checkpoint = record["checkpoint"]
        self.warnings.extend(record.get("warnings", ()))

    def take_metrics(self, metrics_queue: Any, logger: OffPolicyLogger) -> None:
        """Everything the collector sent since the last call: trace events, episode
        statistics, timings and done rates (shown on ``logger``'s panel at once; the returns
        go into the next `record`)."""
        for message in drain_queue(metrics_queue):
            if "trace_events" in message and self.recorder is not None:
                self.recorder.extend(message["trace_events"])
            if "mean_ep_reward" in message:
                self.reward_snapshots.append(message["mean_ep_reward"])
                self._new_returns.append(message["mean_ep_reward"])
            if "mean_ep_length" in message:
                self.mean_ep_length = message["mean_ep_length"]
                logger.update_ep_length(message["mean_ep_length"])
            if message.get("reward_components"):
                self.reward_components = message["reward_components"]
            if "collector_timing_ms" in message:
                logger.update_collector_timing(message["collector_timing_ms"])
            if "timeout_rate" in message:
                self._done_rates = (message["timeout_rate"], message["terminated_rate"])
                logger.update_done_rates(*self._done_rates)
            if "total_steps" in message:  # progress only: the returns go into the next record
                logger.log_collector(message["total_steps"], message["buffer_size"])

    def summary_line(self) -> str:
        """The summary panel's lines below the total env steps (rich markup): the training
        return, and the deterministic evaluation, which the torch path never runs (in the
        core's wording), with the command that evaluates the saved policy."""
        reward = f"{self.reward_snapshots[-1]:.3f}" if self.reward_snapshots else "n/a"
        eval_envs = 0 if self.config is None else self.config.eval_envs
        why = "eval_envs=0" if eval_envs == 0 else "the torch path runs no evaluation"
        lines = [
            f"  Final mean episode return: {reward}",
            f"  Eval return (deterministic policy, final): not run ({why})",
        ]
        if self.last_checkpoint is not None:
            lines.append(f"  Evaluate it: unilab-jax evaluate {escape(str(self.log_dir))}")
        return "\n".join(lines)

    def summary(self, wall: float, world_size: int = 1) -> dict[str, Any]:
        """The run summary; `world_size` is added for several learner ranks."""
        snaps = list(self.reward_snapshots)
        summary = {
            "status": self.status,
            "completed_iterations": self.completed,
            "total_env_steps": self.total_env_steps,
            "final_mean_reward": snaps[-1] if snaps else None,
            "best_mean_reward": max(snaps) if snaps else None,
            "mean_episode_length": self.mean_ep_length,
            "last_checkpoint": self.last_checkpoint,
            "trace_path": self.trace_path,
            "training_wall_time_sec": wall,
            "backend": "mujoco",
            "warnings": list(self.warnings),
        }
        if world_size > 1:
            summary["world_size"] = world_size
        return summary


def open_sinks(
    loop: Any, run: RunState, log_dir: str, logger_type: str
) -> tuple[SinkChain, CheckpointSink, OffPolicyLogger]:
    """Rank 0 of the torch loop ``loop``: the core's sinks of this run, started (checkpoints,
    the value-support check, the console panel); returns them, their checkpoint sink and the
    panel's logger, which the collector's statistics reach between iterations."""
    meta = checkpoint_meta(loop.learner, run.config, loop.sim_backend)
    saver = CheckpointSink(
        TorchCheckpointer(run.log_dir, meta), run.config.save_interval,
        run.config.max_iterations,
    )  # fmt: skip
    multi = loop.world_size > 1
    panel = LoggerSink(
        logger_type,
        starting=f"{loop.world_size} learners" if multi else "Warming up...",
        summary_lines=lambda summary: run.summary_line(),
    )
    sinks = [saver, *_health_sinks(loop.learner.config), panel]
    chain = SinkChain(sinks)
    info = RunInfo(
        algo_name=loop._algo_name(), env_name=loop.env_name, num_envs=loop.num_envs,
        obs_dim=loop.obs_dim, action_dim=loop.action_dim,
        max_iterations=run.config.max_iterations,
        env_steps_per_sync=loop.env_steps_per_sync,
        train_start_rows=loop.config.train_start_rows, num_devices=loop.world_size,
        log_dir=log_dir, start_iteration=0, config=meta["config"],
        sync_collection=loop.sync_collection,
    )  # fmt: skip
    try:
        chain.start(info)
    except BaseException:  # e.g. wandb failing to start: the panel restores the terminal
        chain.close()
        raise
    if getattr(loop.learner, "use_symmetry", False):  # the reference's status line
        chain.status("Symmetry augmentation: enabled")
    for status in loop._batches.statuses(loop):
        chain.status(status)
    return chain, saver, panel.log


def _health_sinks(config: Any) -> list[HealthSink]:
    """The core's value-support check for a C51 learner: a warning after 30 iterations in a
    row with more than 5% of the target mass beyond an edge of the support."""
    if not all(hasattr(config, name) for name in ("v_min", "v_max", "gamma")):
        return []
    return [HealthSink(config.v_min, config.v_max, config.gamma, patience=30,
                       unit="iterations")]  # fmt: skip


def late_stop(signum: int, summary: dict[str, Any] | None) -> RunStopped:
    """The `RunStopped` of a signal that came once the last iteration was done (and saved):
    the process was still asked to stop, as the core does (summary status "completed")."""
    summary = summary or {}
    checkpoint = summary.get("last_checkpoint")
    saved = f"saved checkpoint {checkpoint}" if checkpoint else "nothing to save"
    done = summary.get("completed_iterations") or 0
    return run_stopped(signum, done, checkpoint, summary, saved)


def stop_line(ended: BaseException, log_dir: str, summary: dict[str, Any] | None) -> str:
    """The one line a signal-stopped run writes to stderr: where it saved, how to resume."""
    if isinstance(ended, RunStopped):
        if ended.checkpoint is None:
            return str(ended)
        return (
            f"{ended}. To resume, load it into the learner with "
            f"learner.load_state_dict(torch.load({ended.checkpoint!r})) and call learn again"
        )
    checkpoint = (summary or {}).get("last_checkpoint")
    if checkpoint is None:  # several ranks, or the summary was not written
        saved = sorted(Path(log_dir).glob("model_*.pt"), key=_checkpoint_iteration)
        checkpoint = str(saved[-1]) if saved else None
    where = f"last checkpoint {checkpoint}" if checkpoint else f"no checkpoint in {log_dir}"
    return f"{ended}; {where}"


def _checkpoint_iteration(path: Path) -> int:
    """N of `model_N.pt` (-1 for another name)."""
    suffix = path.stem.removeprefix("model_")
    return int(suffix) if suffix.isdigit() else -1
