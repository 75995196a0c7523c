"""Deterministic evaluation of a torch learner's actor on the numpy vectorised env.

The reference evaluates in `play_offpolicy` (deterministic actions, normaliser first); this is
the same policy without the video and ONNX export: one full episode in each of `num_envs`
envs, step counters not staggered, the actor fed through the learner's observation normaliser
exactly as in training.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from unilab_jax.envs.vec_env import make

__all__ = ["evaluate_actor"]


def evaluate_actor(
    learner: Any,
    env_name: str,
    num_envs: int = 32,
    *,
    sim_backend: str = "mujoco",
    seed: int = 123,
    env_cfg_override: dict | None = None,
) -> float:
    """Mean undiscounted return of one deterministic episode per env.

    An env stops counting once its episode ends (termination or time limit), so every env
    contributes exactly one episode.
    """
    env = make(env_name, num_envs, sim_backend, env_cfg_override, seed=seed, nthread=1)
    try:
        state = env.init_state(stagger=False)
        returns = np.zeros(num_envs)
        alive = np.ones(num_envs, dtype=bool)
        for _ in range(env.max_episode_steps):
            with torch.no_grad():
                obs = torch.from_numpy(state.obs["obs"]).to(getattr(learner, "device", "cpu"))
                action = learner.actor.explore(learner.obs_normalizer(obs), deterministic=True)
            state = env.step(action.cpu().numpy())
            returns += state.reward * alive
            alive &= ~(state.terminated | state.truncated)
            if not alive.any():
                break
        return float(returns.mean())
    finally:
        env.close()
