"""What `OffPolicyRunner`'s documented keywords become: one core `TrainConfig`, checked once.

`train_config` is the facade's only translation of its sizes and schedule into
`unilab_jax.config.TrainConfig`: both paths read the result (the torch loop its
`train_start_rows`, the `"mjx"` path hands it to the JAX core), and `TrainConfig.validate()`
is the one validation.

The rest checks a torch learner against the task and the collector (torch path only).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from torch import nn

from unilab_jax.config import TrainConfig

__all__ = [
    "SIM_BACKENDS",
    "actor_layout_mismatch",
    "apply_training_seed",
    "check_task_mirror",
    "check_learner_dims",
    "env_dims",
    "train_config",
]

#: Physics backends `OffPolicyRunner` accepts: the torch loop on C MuJoCo, or the JAX core.
SIM_BACKENDS = ("mujoco", "mjx")


def train_config(
    algo_type: str,
    env_name: str,
    *,
    num_envs: int,
    replay_buffer_n: int,
    batch_size: int,
    learning_starts: int,
    updates_per_step: int,
    policy_frequency: int,
    env_steps_per_sync: int,
    seed: int | None,
    env_cfg_override: dict | None,
    num_devices: int = 1,
    max_iterations: int = 1500,
    save_interval: int = 50,
    physics: str = "mjx",
) -> TrainConfig:
    """The facade's keywords as a validated `TrainConfig` (raises `ConfigError`, a
    `ValueError`). A negative `learning_starts` means 0; `seed=None` is stored as 0 (the
    runner draws a seed for the JAX core per run); no evaluation episode (`eval_envs=0`).
    `physics`: what steps the envs, "mujoco" for the torch loop (so a C MuJoCo-only task such
    as SharpaInhandRotation passes) and "mjx" for the JAX core."""
    config = TrainConfig(
        env=env_name, algo=algo_type, num_envs=num_envs, replay_buffer_n=replay_buffer_n,
        batch_size=batch_size, learning_starts=max(int(learning_starts), 0),
        updates_per_step=updates_per_step, policy_frequency=policy_frequency,
        env_steps_per_sync=env_steps_per_sync, max_iterations=max_iterations,
        save_interval=save_interval, num_devices=num_devices, eval_envs=0,
        seed=0 if seed is None else int(seed), env_overrides=env_cfg_override, physics=physics,
    )  # fmt: skip
    config.validate()
    return config


def apply_training_seed(seed: int | None) -> None:
    """Seed Python, numpy and torch (no-op for None)."""
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def env_dims(env_name: str, env_cfg_override: dict | None = None) -> tuple[int, int, int]:
    """`(obs_dim, action_dim, critic_dim)` of a registered task; critic falls back to obs.

    Read from the core's functional env: its observation sizes come from tracing `reset`
    (shapes only, nothing compiled or run), the cheapest source the core offers."""
    from unilab_jax.envs import load

    env = load(env_name, config_override=env_cfg_override, physics="mujoco")  # sizes only
    obs_dim = int(env.obs_size["obs"])
    return obs_dim, int(env.action_size), int(env.obs_size.get("critic", obs_dim))


def check_learner_dims(learner: Any, env_name: str, dims: tuple[int, int, int]) -> None:
    """The learner's sizes must be the task's (a learner without a size attribute passes)."""
    expected = dict(zip(("obs_dim", "action_dim", "critic_obs_dim"), dims, strict=True))
    for name, env_value in expected.items():
        value = getattr(learner, name, env_value)
        if value != env_value:
            raise ValueError(
                f"the learner's {name} is {value} but {env_name} has {env_value}; "
                f"build the learner with {name}={env_value}"
            )


def check_task_mirror(
    learner: Any, env_name: str, env_cfg_override: dict | None, batch_size: int
) -> None:
    """A learner with ``use_symmetry`` trains on the task's mirror map: one whose mirror map
    differs from the task's is refused (``ValueError``), as are a task without a mirror map and
    an odd ``batch_size`` (``ConfigError``, a ``ValueError``: each update trains on half its
    rows plus their mirrors). A learner built with the reference's ``symmetry_augmentation``
    contract (no ``mirror``) keeps it: only ``batch_size`` is checked against its
    ``batch_multiplier``. A no-op without symmetry."""
    if not getattr(learner, "use_symmetry", False):
        return
    if learner.mirror is None:  # the reference's contract: the user's maps, opaque here
        copies = int(getattr(learner.symmetry, "batch_multiplier", 2))
        if batch_size % copies:
            raise ValueError(
                f"use_symmetry trains on 1/{copies} of each update's rows plus their images: "
                f"batch_size {batch_size} must be a multiple of {copies}"
            )
        return
    from unilab_jax.algos.symmetry import resolve_mirror
    from unilab_jax.envs import load

    mirror = resolve_mirror(True, load(env_name, config_override=env_cfg_override), batch_size)
    if learner.mirror != mirror:
        raise ValueError(
            f"the learner's mirror map is not {env_name}'s; build the learner with "
            f"mirror=unilab_jax.envs.load({env_name!r}).mirror"
        )


def actor_layout_mismatch(reference: nn.Module, candidate: nn.Module) -> str | None:
    """Why `candidate`'s state_dict cannot receive `reference`'s weights (None if it can)."""
    ref = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    cand = {k: tuple(v.shape) for k, v in candidate.state_dict().items()}
    if ref.keys() != cand.keys():
        missing = sorted(ref.keys() - cand.keys())
        extra = sorted(cand.keys() - ref.keys())
        return f"parameter names differ (missing {missing}, unexpected {extra})"
    for name, shape in ref.items():
        if cand[name] != shape:
            return f"{name}: the learner's actor has shape {shape}, the collector's {cand[name]}"
    return None
