"""Host-side bookkeeping of one torch-path run: what the collector reported, checkpoints, and
the `last_run_summary` built from them (the reference's keys, in its order).

Checkpoints. Every ``model_<iteration>.pt`` the facade writes (both backends, `save_model`) is
``learner.get_state_dict()`` plus one entry, ``"unilab_meta"`` (`META_KEY`, built by
`checkpoint_meta`): JSON values only, so ``torch.load(path, weights_only=True)`` reads the
file. It records what rebuilding the policy needs, which the learner's state alone does not:

==================  ==========================================================================
``format``          `META_FORMAT` (1)
``algo``            the registry name of the learner's algorithm (``"sac"``, ``"td3"``)
``learner``         its class name (``"FastSACLearner"``)
``env``             the task the run trained on (a name of ``unilab_jax.envs``)
``sim_backend``     ``"mujoco"`` or ``"mjx"``
``obs_dim``         actor observation size; ``critic_obs_dim``, ``action_dim`` likewise
``config``          ``{"train": TrainConfig, "algo": learner.config}`` as JSON, the layout of
                    the core's ``run_config.json`` (``env_overrides`` included)
``iteration``       the training iteration of this file
``versions``        ``unilab_jax``, ``torch``, ``jax`` and ``python`` versions that wrote it
==================  ==========================================================================

The learners' ``load_state_dict`` read their own keys only, so a file with the entry loads
into a learner as before, and a reference file (no entry) still loads too.
``unilab_jax.load_policy(path)`` reads the entry to rebuild the deterministic policy in JAX
(and so ``python -m unilab_jax.evaluate``, ``play`` and the export work on facade runs); a file
without it cannot be read there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.markup import escape

from unilab.ipc.async_runner import drain_queue
from unilab.logging.trace_event import TraceRecorder
from unilab_jax.config import TrainConfig
from unilab_jax.logging import OffPolicyLogger
from unilab_jax.sinks import HealthSink

__all__ = ["META_FORMAT", "META_KEY", "RunState", "checkpoint_meta", "save_model"]

#: The entry of a ``model_<iteration>.pt`` that records how to rebuild its policy.
META_KEY = "unilab_meta"
#: The version of that entry's layout (a reader refuses a newer one).
META_FORMAT = 1


def checkpoint_meta(learner: Any, config: TrainConfig, sim_backend: str) -> dict[str, Any]:
    """The ``"unilab_meta"`` entry (all but ``iteration``, which `save_model`'s caller adds) of
    the checkpoints of ``learner`` trained as ``config`` says on ``sim_backend``.

    ``config`` is the run's ``TrainConfig`` (the facade's ``runner.config``); for a learner
    trained elsewhere, ``TrainConfig(env=..., algo=...)`` records the task. Raises
    ``ValueError`` for a learner of no registered algorithm.
    """
    from unilab.algos.torch.registry import TORCH_ALGOS

    algo = next(
        (name for name, spec in TORCH_ALGOS.items() if isinstance(learner, spec.learner_cls)),
        None,
    )
    if algo is None:
        raise ValueError(
            f"{type(learner).__name__} is not a learner of a registered algorithm "
            f"({', '.join(spec.learner_cls.__name__ for spec in TORCH_ALGOS.values())})"
        )
    return {
        "format": META_FORMAT,
        "algo": algo,
        "learner": type(learner).__name__,
        "env": config.env,
        "sim_backend": sim_backend,
        "obs_dim": int(learner.obs_dim),
        "critic_obs_dim": int(learner.critic_obs_dim),
        "action_dim": int(learner.action_dim),
        "config": {
            "train": _json_settings(config.replace(algo=algo)),
            "algo": _json_settings(learner.config),
        },
        "versions": _versions(),
    }


def _json_settings(settings: Any) -> dict[str, Any]:
    """A settings dataclass as JSON values, in the layout of ``unilab_jax.trainer.run_config``
    (not imported here: it pulls in orbax, seconds of start-up on the torch path)."""
    return json.loads(json.dumps(dataclasses.asdict(settings), default=str))


def _versions() -> dict[str, str | None]:
    import importlib.metadata

    import jax
    import torch

    try:
        ours = importlib.metadata.version("unilab-jax")
    except importlib.metadata.PackageNotFoundError:  # a source tree that is not installed
        ours = None
    return {
        "unilab_jax": ours,
        "torch": str(torch.__version__),
        "jax": jax.__version__,
        "python": platform.python_version(),
    }


def save_model(learner: Any, path: Path, meta: Mapping[str, Any] | None = None) -> str:
    """``torch.save(learner.get_state_dict())`` as ``path``, with ``meta`` (`checkpoint_meta`
    plus ``iteration``) as its ``"unilab_meta"`` entry when given; atomically: written beside
    it and renamed into place, so an interrupted save never leaves a truncated
    ``model_<it>.pt``."""
    import torch

    state = learner.get_state_dict()
    if meta is not None:
        state[META_KEY] = dict(meta)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
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
        self.config: TrainConfig | None = None
        """The run's settings (`describe`), recorded in its checkpoints."""
        self.checkpoint_meta: dict[str, Any] | None = None

    def describe(self, learner: Any, config: TrainConfig, sim_backend: str) -> None:
        """The run's settings: its checkpoints record them (`checkpoint_meta`)."""
        self.config = config
        self.checkpoint_meta = checkpoint_meta(learner, config, sim_backend)

    def save(self, learner: Any, iteration: int) -> str:
        """Write ``<log_dir>/model_<iteration>.pt`` (`save_model`, with the run's metadata once
        `describe` gave it); it becomes the summary's ``last_checkpoint``."""
        meta = self.checkpoint_meta
        meta = None if meta is None else {**meta, "iteration": int(iteration)}
        path = self.log_dir / f"model_{iteration}.pt"
        self.last_checkpoint = save_model(learner, path, meta)
        return self.last_checkpoint

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
            lines.append(
                f"  Evaluate it: python -m unilab_jax.evaluate {escape(str(self.log_dir))}"
            )
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
