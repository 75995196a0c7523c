"""After training: a loaded policy's deterministic episodes.

``evaluate(policy, episodes=...)`` runs one deterministic episode in each of ``episodes`` fresh
envs of the run's task (or another registered one with the same sizes) and returns every
return and length (on C MuJoCo also which episodes reached the time limit, and the reward
components per step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from unilab_jax.algos.agent import observer
from unilab_jax.collection.step import make_evaluate
from unilab_jax.envs import load
from unilab_jax.policy.load import Policy

__all__ = ["EvalResult", "evaluate"]


@dataclass(frozen=True)
class EvalResult:
    """Returns and lengths of one deterministic episode per env; on C MuJoCo also which
    episodes reached the time limit and each reward component's mean per step."""

    returns: np.ndarray
    lengths: np.ndarray
    time_limit: np.ndarray | None = None
    """[episodes] bool: the episode ran to the time limit without terminating."""
    components: dict[str, np.ndarray] | None = None
    """``{"reward/<name>": [episodes]}``: the component's mean per step of each episode."""

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))

    def as_dict(self) -> dict:
        return {
            "episodes": len(self.returns),
            "mean_return": self.mean_return,
            "std_return": float(np.std(self.returns)),
            "min_return": float(np.min(self.returns)),
            "max_return": float(np.max(self.returns)),
            "mean_length": self.mean_length,
            **({} if self.time_limit is None else
               {"time_limit_rate": float(np.mean(self.time_limit))}),
            **{f"{k}_per_step": float(np.mean(v)) for k, v in (self.components or {}).items()},
        }  # fmt: skip


def evaluate(
    policy: Policy,
    env_name: str | None = None,
    episodes: int = 64,
    seed: int = 0,
    env_overrides: dict | None = None,
    physics: str | None = None,
) -> EvalResult:
    """One deterministic episode in each of ``episodes`` fresh envs of ``env_name`` (default:
    the policy's task with its run's overrides); an episode stops counting at termination or
    the time limit. ``physics``: ``"mjx"`` or ``"mujoco"`` (C MuJoCo on CPU threads, our
    registered tasks; its result also says which episodes reached the time limit and gives
    the reward components per step); default: the run's."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if physics is None:
        physics = policy.config.get("train", {}).get("physics", "mjx")
    if physics not in ("mjx", "mujoco"):
        raise ValueError(f"physics {physics!r} is not one of mjx, mujoco")
    if env_name is None:
        env_name = policy.env
        if env_overrides is None:
            env_overrides = policy.config["train"].get("env_overrides")
    env = load(env_name, config_override=env_overrides, physics=physics)
    if (env.obs_size["obs"], env.action_size) != (policy.obs_dim, policy.action_dim):
        raise ValueError(
            f"{env_name} has obs {env.obs_size['obs']} / action {env.action_size}, the policy "
            f"obs {policy.obs_dim} / action {policy.action_dim} (trained on {policy.env})"
        )
    if physics == "mujoco":
        return _evaluate_on_mujoco(policy, env, env_name, episodes, seed)
    run = make_evaluate(env, policy.agent.act, episodes, observer(policy.agent))
    with policy.precision():
        _, returns, lengths = run(policy.state, jax.random.PRNGKey(seed))
    return EvalResult(np.asarray(returns), np.asarray(lengths))


def _evaluate_on_mujoco(policy: Policy, env: Any, name: str, episodes: int, seed: int):
    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.vec_env import MujocoVecEnv

    task = getattr(env, "task", None)
    if task is None:
        raise ValueError(f"{name} is a JAX environment and runs on MJX only (physics 'mjx')")
    vec = MujocoVecEnv(task, name, episodes, seed)
    try:
        with policy.precision():
            out = mujoco_episodes(
                vec, jax.jit(policy.agent.act), policy.state, seed,
                observe=observer(policy.agent),
            )  # fmt: skip
    finally:
        vec.close()
    return EvalResult(out["returns"], out["lengths"], out["time_limit"], out["components"])
