"""Deterministic evaluation of a torch learner's actor on the numpy vectorised env.

The reference evaluates in `play_offpolicy` (deterministic actions, normaliser first); this is
the same policy without the video and ONNX export: one full episode in each of `num_envs`
envs, step counters not staggered, the actor fed through the learner's observation normaliser
exactly as in training (a privileged actor, HORA-SAC's, also with the critic observation's
privileged values).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from unilab_jax.envs.vec_env import make

__all__ = ["evaluate_actor"]


def _actor_input(learner: Any, obs: dict[str, np.ndarray]) -> torch.Tensor:
    """The actor's normalised input for an env observation dict: ``learner.actor_input(obs,
    critic)`` (a privileged actor, HORA-SAC, also reads the critic's tail), else the
    observation through ``learner.obs_normalizer``."""
    device = getattr(learner, "device", "cpu")
    own = torch.from_numpy(obs["obs"]).to(device)
    actor_input = getattr(learner, "actor_input", None)
    if actor_input is None:
        return learner.obs_normalizer(own)
    return actor_input(own, torch.from_numpy(obs.get("critic", obs["obs"])).to(device))


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
                action = learner.actor.explore(_actor_input(learner, state.obs), deterministic=True)
            state = env.step(action.cpu().numpy())
            returns += state.reward * alive
            alive &= ~(state.terminated | state.truncated)
            if not alive.any():
                break
        return float(returns.mean())
    finally:
        env.close()
