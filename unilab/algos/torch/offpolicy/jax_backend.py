"""The off-policy facade's ``"mjx"`` backend: train a torch learner with the JAX core.

``OffPolicyRunner(learner, ..., sim_backend="mjx")`` keeps the reference's API (a torch
learner in, ``model_<iteration>.pt`` files and a trained learner out) while the whole loop
(collection, replay, updates) runs fused on the device in ``unilab_jax``. ``learn_with_jax``
reads the hyperparameters from ``learner.config`` and the initial weights, optimiser moments
and normaliser statistics from the learner (``unilab.algos.torch.convert``, exact), trains with
``unilab_jax.trainer.train`` and writes the state back into the learner at every checkpoint and
at the end.

Differences from the reference runner:

- ``log_interval`` (iterations per device call) divides ``save_interval``, so checkpoints land
  on its multiples; the console is updated once per block, not per iteration.
- ``max_iterations=0`` trains nothing and writes no checkpoint (the reference writes
  ``model_0.pt``); the learner is left as it was.
- ``learner.update_count`` grows by the critic updates made (``updates_per_step`` per learning
  iteration), what the learners' own ``update_critic`` counts; the reference runner adds one
  per learning iteration on top of that.
- No deterministic evaluation is run (``eval_envs=0``) and ``trace_path`` is always None.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab.algos.torch.convert import (
    jax_sac_to_torch,
    jax_td3_to_torch,
    torch_sac_to_jax,
    torch_td3_to_jax,
)
from unilab_jax.algos.sac import SACConfig
from unilab_jax.algos.td3 import TD3Config
from unilab_jax.config import TrainConfig
from unilab_jax.loop import TrainState
from unilab_jax.trainer import Trainer, train

__all__ = ["SUPPORTED_ALGOS", "learn_with_jax"]

# algo_type -> (the learner's config type, torch -> JAX, JAX -> torch)
_CONVERTERS = {
    "sac": (SACConfig, torch_sac_to_jax, jax_sac_to_torch),
    "td3": (TD3Config, torch_td3_to_jax, jax_td3_to_torch),
}
SUPPORTED_ALGOS = tuple(_CONVERTERS)

# The reference's ``last_run_summary`` keys, in its order (``trace_path`` is always None here).
_SUMMARY_KEYS = (
    "status",
    "completed_iterations",
    "total_env_steps",
    "final_mean_reward",
    "best_mean_reward",
    "mean_episode_length",
    "last_checkpoint",
    "trace_path",
    "training_wall_time_sec",
)


def learn_with_jax(
    learner: Any,
    algo_type: str,
    *,
    env_name: str,
    num_envs: int,
    replay_buffer_n: int,
    batch_size: int,
    learning_starts: int,
    updates_per_step: int,
    policy_frequency: int,
    env_steps_per_sync: int,
    seed: int | None,
    env_cfg_override: dict | None,
    max_iterations: int,
    save_interval: int,
    log_dir: str,
    logger_type: str,
    num_devices: int = 1,
) -> dict:
    """Train ``learner`` (a ``FastSACLearner`` / ``FastTD3Learner``) on ``env_name`` with the
    JAX core and write the trained state back into it.

    Checkpoints ``<log_dir>/model_<iteration>.pt`` (``learner.get_state_dict()``) are written
    at multiples of ``save_interval`` and after the last iteration. ``seed=None`` draws one.
    ``logger_type``: ``"tensorboard"``, ``"wandb"``, or anything else for console only
    (``"no_print"`` silences the console too). Returns the reference's run summary plus
    ``backend`` and ``compile_time_sec``.
    """
    if algo_type not in _CONVERTERS:
        raise ValueError(
            f"algo_type {algo_type!r} has no JAX backend; supported: {', '.join(SUPPORTED_ALGOS)}"
        )
    config_type, to_jax, to_torch = _CONVERTERS[algo_type]
    if not isinstance(learner.config, config_type):
        raise ValueError(
            f"algo_type {algo_type!r} needs a learner whose config is a {config_type.__name__}, "
            f"got {type(learner.config).__name__} ({type(learner).__name__})"
        )
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**31)
    config = TrainConfig(
        env=env_name,
        algo=algo_type,
        num_envs=num_envs,
        replay_buffer_n=replay_buffer_n,
        batch_size=batch_size,
        learning_starts=learning_starts,
        updates_per_step=updates_per_step,
        policy_frequency=policy_frequency,
        env_steps_per_sync=env_steps_per_sync,
        max_iterations=max_iterations,
        log_interval=_log_interval(save_interval, max_iterations),
        save_interval=save_interval,
        num_devices=num_devices,
        eval_envs=0,
        seed=seed,
        sim_backend="mjx",
        env_overrides=env_cfg_override,
    )
    trainer = Trainer(config, learner.config)
    _check_dims(learner, trainer, env_name)
    state = trainer.init_state(seed)
    state = state.replace(agent=to_jax(learner, state.agent))
    update_count = learner.update_count

    def write_back(step: int, final: TrainState) -> None:
        to_torch(final.agent, learner)
        learner.update_count = update_count + _critic_updates(config, step)

    checkpointer = _TorchCheckpointer(Path(log_dir), learner, write_back)
    result = train(
        config,
        trainer=trainer,
        initial_state=state,
        log_dir=log_dir,
        logger=logger_type if logger_type in ("tensorboard", "wandb") else "none",
        quiet=logger_type == "no_print",
        checkpointer=checkpointer,  # never called when no iteration runs
    )
    write_back(int(result.state.iteration), result.state)
    summary = {key: result.summary.get(key) for key in _SUMMARY_KEYS}
    summary["backend"] = "mjx"
    summary["compile_time_sec"] = result.summary["compile_time_sec"]
    return summary


def _log_interval(save_interval: int, max_iterations: int) -> int:
    """Iterations per device call: at most 10, dividing ``save_interval`` (so checkpoints fall
    on its multiples) and no more than the run (no step compiled longer than needed)."""
    interval = math.gcd(10, save_interval) if save_interval > 0 else 10
    return min(interval, max_iterations) if max_iterations > 0 else interval


def _critic_updates(config: TrainConfig, iterations: int) -> int:
    """Critic updates made in the first ``iterations`` iterations from an empty buffer.

    The loop learns in every iteration after which the buffer holds ``train_start_rows``
    rows; each iteration stores ``env_steps_per_sync`` rows per env.
    """
    slots_needed = -(-config.train_start_rows // config.num_envs)
    first = max(1, -(-slots_needed // config.env_steps_per_sync))
    return max(0, iterations - first + 1) * config.updates_per_step


def _check_dims(learner: Any, trainer: Trainer, env_name: str) -> None:
    pairs = (
        ("obs_dim", learner.obs_dim, trainer.obs_dim, "observation size"),
        ("critic_obs_dim", learner.critic_obs_dim, trainer.critic_dim, "critic observation size"),
        ("action_dim", learner.action_dim, trainer.env.action_size, "action size"),
    )
    for name, got, want, what in pairs:
        if got != want:
            raise ValueError(
                f"learner {name} {got} does not match {env_name}'s {what} {want}; "
                f"build the learner with {name}={want}"
            )


class _TorchCheckpointer:
    """``train``'s checkpointer: loads the JAX state into the learner and ``torch.save``s
    ``learner.get_state_dict()`` as ``<log_dir>/model_<step>.pt``."""

    def __init__(self, log_dir: Path, learner: Any, write_back) -> None:
        self.log_dir = log_dir
        self.learner = learner
        self.write_back = write_back

    def save(self, step: int, state: TrainState) -> str:
        self.write_back(step, state)
        path = self.log_dir / f"model_{step}.pt"
        torch.save(self.learner.get_state_dict(), path)
        return str(path)

    def close(self) -> None:
        pass
