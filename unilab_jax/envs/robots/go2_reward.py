"""Go2JoystickFlat's reward terms (the reference's), unweighted, and their weights.

:data:`REWARD_TERMS` in the order the reference sums them, :func:`reward_terms` (the table in
the task's docstring, :mod:`unilab_jax.envs.robots.go2`) and :func:`reward_weights` (the
config's ``w_<term>``). The task (:class:`~unilab_jax.envs.robots.go2.Go2JoystickFlat`) weighs
them (:func:`~unilab_jax.envs.robots.common.weighted_reward`).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig
from unilab_jax.envs.robots.go2_model import FEET

__all__ = ["REWARD_TERMS", "reward_terms", "reward_weights"]

#: Reward terms in the order the reference sums them.
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "lin_vel_z",
    "ang_vel_xy",
    "base_height",
    "action_rate",
    "similar_to_default",
    "contact",
    "swing_feet_z",
)


def reward_weights(config: Go2JoystickFlatConfig) -> dict[str, float]:
    """Each term's weight (:data:`REWARD_TERMS` order): the config's ``w_<term>``."""
    return {name: float(getattr(config, f"w_{name}")) for name in REWARD_TERMS}


def reward_terms(
    sensors: Mapping[str, jax.Array],
    action: jax.Array,
    task_state: Mapping[str, jax.Array],
    phases: jax.Array,
    default_pose: jax.Array,
    config: Go2JoystickFlatConfig,
) -> dict[str, jax.Array]:
    """The unweighted reward terms (:data:`REWARD_TERMS`) of the step that applied ``action``
    from ``task_state`` and ended where the task's ``sensors`` read
    (:func:`~unilab_jax.envs.robots.go2_observation.read_sensors`); ``phases`` [4]: the feet
    phases after the step's clock advance (feet order)."""
    cfg = config
    s = sensors
    v, w, cmd = s["linvel"], s["gyro"], task_state["command"]
    swing = phases >= cfg.stance_fraction
    contact = s["feet_found"] > cfg.contact_threshold
    foot_z = s["feet_pos"][:, 2]
    height = jnp.exp(-jnp.square(foot_z - cfg.swing_height_target) / cfg.swing_height_sigma)
    n_feet = len(FEET)
    return {
        "tracking_lin_vel": jnp.exp(-jnp.sum(jnp.square(cmd[:2] - v[:2])) / cfg.tracking_sigma),
        "tracking_ang_vel": jnp.exp(-jnp.square(cmd[2] - w[2]) / cfg.tracking_sigma),
        "lin_vel_z": jnp.square(v[2]),
        "ang_vel_xy": jnp.sum(jnp.square(w[:2])),
        "base_height": jnp.square(s["qpos"][2] - cfg.base_height_target),
        "action_rate": jnp.sum(jnp.square(action - task_state["action"])),
        "similar_to_default": jnp.sum(jnp.abs(s["qpos"][7:19] - default_pose)),
        "contact": jnp.sum((contact == ~swing).astype(jnp.float32)) / n_feet,
        "swing_feet_z": jnp.sum(height * swing) / n_feet,
    }
