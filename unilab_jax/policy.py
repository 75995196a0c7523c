"""After training: load a run's deterministic policy and evaluate it.

``load_policy(path)`` reads a checkpoint written by ``train`` (a run's log dir, its
``checkpoints/`` folder or one checkpoint's folder) and returns a ``Policy``: observations in,
actions out, the observation normaliser included. It restores only the checkpoint's ``agent``
item (never the replay) and builds no trainer, so it takes seconds; the run's configuration
comes from the checkpoint's own ``meta.json``.

``evaluate(policy, episodes=...)`` runs one deterministic episode in each of ``episodes`` fresh
envs of the run's task (or another registered one with the same sizes) and returns every
return and length. ``python -m unilab_jax.evaluate RUN`` does both from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.algos.agent import Agent
from unilab_jax.algos.config import settings_from_json
from unilab_jax.algos.registry import get_algo
from unilab_jax.checkpoint import latest_step, read_meta, restore_item
from unilab_jax.envs import load
from unilab_jax.loop import make_evaluate

__all__ = ["EvalResult", "Policy", "evaluate", "find_checkpoint", "load_policy"]


@dataclass
class Policy:
    """A trained deterministic policy (SAC: tanh of the mean; TD3: the actor, no noise)."""

    env: str
    """The task it was trained on."""
    algo: str
    iteration: int
    """The training iteration of the checkpoint."""
    obs_dim: int
    action_dim: int
    config: dict
    """The run's settings: ``{"train": ..., "algo": ...}`` as in ``run_config.json``."""
    checkpoint: str
    agent: Agent
    state: Any
    """The agent's state (parameters and normalisers)."""

    def __post_init__(self) -> None:
        self._act = jax.jit(self.agent.act)

    def act(self, obs: jax.Array) -> jax.Array:
        """Actions ``[N, action_dim]`` in [-1, 1] for raw observations ``[N, obs_dim]``
        (jit-able; the normaliser is applied inside)."""
        return self._act(self.state, obs)

    def __call__(self, obs: Any) -> np.ndarray:
        """``act`` for numpy input and output; a single observation ``[obs_dim]`` works too."""
        obs = np.asarray(obs, np.float32)
        single = obs.ndim == 1
        actions = np.asarray(self.act(jnp.asarray(obs[None] if single else obs)))
        return actions[0] if single else actions


def find_checkpoint(path: str | Path, step: int | None = None) -> tuple[Path, int]:
    """``(checkpoints folder, iteration)`` for a run dir, a ``checkpoints/`` folder or one
    checkpoint's folder; the newest when ``step`` is None."""
    path = Path(path)
    if (path / "meta.json").is_file() and path.name.isdigit():
        return path.parent, int(path.name) if step is None else step
    if (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    newest = latest_step(path)
    if newest is None:
        raise FileNotFoundError(
            f"no checkpoint under {path}: pass a run's log dir, its checkpoints/ folder or one "
            "checkpoint's folder (written by python -m unilab_jax.train or train(log_dir=...))"
        )
    return path, newest if step is None else step


def load_policy(path: str | Path, step: int | None = None) -> Policy:
    """The deterministic policy of the checkpoint at ``path`` (see ``find_checkpoint``)."""
    directory, step = find_checkpoint(path, step)
    meta = read_meta(directory, step)
    config = meta.get("config") or {}
    if "train" not in config or "algo" not in config:
        raise ValueError(f"checkpoint {step} under {directory} records no run configuration")
    train = config["train"]
    spec = get_algo(train["algo"])
    algo_config = spec.config_cls(**settings_from_json(config["algo"]))
    env = load(train["env"], config_override=train.get("env_overrides"))
    obs_dim, critic_dim = env.obs_size["obs"], env.obs_size["critic"]
    agent = spec.make_agent(algo_config, obs_dim, critic_dim, env.action_size, axis_name=None)
    like = jax.eval_shape(agent.init, jax.random.PRNGKey(0))
    like = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), like)
    state = restore_item(directory, "agent", like, step=step)
    return Policy(
        env=train["env"],
        algo=train["algo"],
        iteration=step,
        obs_dim=obs_dim,
        action_dim=env.action_size,
        config=config,
        checkpoint=str(directory / str(step)),
        agent=agent,
        state=state,
    )


@dataclass(frozen=True)
class EvalResult:
    """Returns and lengths of one deterministic episode per env."""

    returns: np.ndarray
    lengths: np.ndarray

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
        }


def evaluate(
    policy: Policy,
    env_name: str | None = None,
    episodes: int = 64,
    seed: int = 0,
    env_overrides: dict | None = None,
) -> EvalResult:
    """One deterministic episode in each of ``episodes`` fresh envs of ``env_name`` (default:
    the policy's task with its run's overrides); an episode stops counting at termination or
    the time limit."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if env_name is None:
        env_name = policy.env
        if env_overrides is None:
            env_overrides = policy.config["train"].get("env_overrides")
    env = load(env_name, config_override=env_overrides)
    if (env.obs_size["obs"], env.action_size) != (policy.obs_dim, policy.action_dim):
        raise ValueError(
            f"{env_name} has obs {env.obs_size['obs']} / action {env.action_size}, the policy "
            f"obs {policy.obs_dim} / action {policy.action_dim} (trained on {policy.env})"
        )
    run = make_evaluate(env, policy.agent.act, episodes)
    _, returns, lengths = run(policy.state, jax.random.PRNGKey(seed))
    return EvalResult(np.asarray(returns), np.asarray(lengths))
