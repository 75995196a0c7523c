"""Deterministic evaluation of a torch learner's actor on the numpy vectorised env."""

from __future__ import annotations

import numpy as np
import torch

from unilab_jax.envs.vec_env import make


def evaluate_actor(learner, env_name: str, num_envs: int = 32, seed: int = 123) -> float:
    """Mean return of one deterministic episode per env (C MuJoCo backend).

    Episode counters start at 0 (no staggering), so every env runs one full episode. The actor
    sees observations through the learner's normaliser, as in training.
    """
    env = make(env_name, num_envs, "mujoco", seed=seed, nthread=1)
    try:
        state = env.init_state(stagger=False)
        env_steps = env.max_episode_steps
        returns = np.zeros(num_envs)
        alive = np.ones(num_envs, dtype=bool)
        for _ in range(env_steps):
            with torch.no_grad():
                obs = learner.obs_normalizer(torch.from_numpy(state.obs["obs"]))
                action = learner.actor.explore(obs, deterministic=True).numpy()
            state = env.step(action)
            returns += state.reward * alive
            alive &= ~(state.terminated | state.truncated)
            if not alive.any():
                break
        return float(returns.mean())
    finally:
        env.close()
