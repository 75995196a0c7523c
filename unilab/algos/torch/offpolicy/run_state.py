"""Host-side bookkeeping of one torch-path run: what the collector reported, checkpoints, and
the `last_run_summary` built from them (the reference's keys, in its order)."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any

from unilab.ipc.async_runner import drain_queue
from unilab.logging.trace_event import TraceRecorder
from unilab_jax.logging import OffPolicyLogger
from unilab_jax.sinks import HealthSink

__all__ = ["RunState", "save_model"]


def save_model(learner: Any, path: Path) -> str:
    """``torch.save(learner.get_state_dict())`` as ``path``, atomically: written beside it and
    renamed into place, so an interrupted save never leaves a truncated ``model_<it>.pt``."""
    import torch

    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(learner.get_state_dict(), tmp)
    os.replace(tmp, path)
    return str(path)


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
        self.health: HealthSink | None = None
        self.warnings: list[str] = []

    def watch_support(self, config: Any) -> None:
        """Warn when the learner's C51 support clips its targets (``HealthSink``'s check):
        30 iterations in a row with more than 5% of the target mass beyond an edge."""
        if all(hasattr(config, name) for name in ("v_min", "v_max", "gamma")):  # C51 learners
            self.health = HealthSink(
                config.v_min, config.v_max, config.gamma, patience=30, unit="iterations"
            )

    def check_health(self, metrics: dict[str, float]) -> list[str]:
        """New warnings for this iteration's learner metrics (kept for the summary)."""
        if self.health is None:
            return []
        new = (self.health.block({"learner": metrics}, None) or {}).get("warnings", [])
        self.warnings.extend(new)
        return new

    def take_metrics(self, metrics_queue: Any, logger: OffPolicyLogger) -> None:
        """Everything the collector sent since the last call: trace events, episode
        statistics, timings and done rates."""
        for message in drain_queue(metrics_queue):
            if "trace_events" in message and self.recorder is not None:
                self.recorder.extend(message["trace_events"])
            if "mean_ep_reward" in message:
                self.reward_snapshots.append(message["mean_ep_reward"])
            if "mean_ep_length" in message:
                self.mean_ep_length = message["mean_ep_length"]
                logger.update_ep_length(message["mean_ep_length"])
            if message.get("reward_components"):
                self.reward_components = message["reward_components"]
            if "collector_timing_ms" in message:
                logger.update_collector_timing(message["collector_timing_ms"])
            if "timeout_rate" in message:
                logger.update_done_rates(message["timeout_rate"], message["terminated_rate"])
            if "total_steps" in message:
                logger.log_collector(
                    message["total_steps"],
                    message["buffer_size"],
                    message.get("mean_ep_reward", 0.0),
                )

    def summary_line(self) -> str:
        reward = f"{self.reward_snapshots[-1]:.3f}" if self.reward_snapshots else "n/a"
        return f"  Final mean episode return: {reward}"

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
