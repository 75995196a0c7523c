"""What Go2JoystickFlat reads from the physics and what its policy and critic see.

:func:`read_sensors` (the sensors the task reads, which the observation, the reward and the
termination share), the noisy inputs (:data:`NOISE_SLOTS`, their scales :func:`noise_scales`,
the clean values :func:`clean_inputs`) and the layout of the observation groups
(:func:`observation_groups`: "obs" 49, "critic" 52; the task's docstring,
:mod:`unilab_jax.envs.robots.go2`, draws it). The task
(:class:`~unilab_jax.envs.robots.go2.Go2JoystickFlat`) draws the noise and calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.robots.common import apply_obs_noise
from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig
from unilab_jax.envs.robots.go2_model import FEET

__all__ = ["NOISE_SLOTS", "clean_inputs", "noise_scales", "observation_groups", "read_sensors"]

#: Noisy observation inputs, in the reference's draw order, with their sizes.
NOISE_SLOTS = (("gyro", 3), ("upvector", 3), ("joint_pos", 12), ("joint_vel", 12), ("linvel", 3))


def noise_scales(config: Go2JoystickFlatConfig) -> dict[str, float]:
    """Noise half-width per :data:`NOISE_SLOTS` slot in ``config``, before ``noise_level``."""
    return {
        "gyro": config.noise_gyro,
        "upvector": config.noise_upvector,
        "joint_pos": config.noise_joint_pos,
        "joint_vel": config.noise_joint_vel,
        "linvel": config.noise_linvel,
    }


def read_sensors(data: Any, slices: Mapping[str, slice]) -> dict[str, jax.Array]:
    """What the task reads from the physics ``data`` (``slices``: each sensor's slice of
    ``sensordata``): the imu's ``gyro``, ``linvel`` (local) and ``upvector``, the feet's world
    positions ``feet_pos`` [4, 3] and contact sensors ``feet_found`` [4] (feet order),
    ``qpos``, ``qvel``."""
    sd, s = data.sensordata, slices
    return {
        "gyro": sd[s["gyro"]],
        "linvel": sd[s["local_linvel"]],
        "upvector": sd[s["upvector"]],
        "feet_pos": jnp.stack([sd[s[f"{leg}_pos"]] for leg in FEET]),
        "feet_found": jnp.concatenate([sd[s[f"{leg}_foot_contact"]] for leg in FEET]),
        "qpos": data.qpos,
        "qvel": data.qvel,
    }


def clean_inputs(sensors: Mapping[str, jax.Array], default_pose: jax.Array) -> dict[str, jax.Array]:
    """The :data:`NOISE_SLOTS` inputs before noise, from :func:`read_sensors`' ``sensors``."""
    s = sensors
    return {
        "gyro": s["gyro"],
        "upvector": s["upvector"],
        "joint_pos": s["qpos"][7:19] - default_pose,
        "joint_vel": s["qvel"][6:18],
        "linvel": s["linvel"],
    }


def observation_groups(
    clean: Mapping[str, jax.Array],
    draws: Mapping[str, jax.Array] | None,
    task_state: Mapping[str, jax.Array],
    noise_level: float,
    scales: Mapping[str, float],
) -> dict[str, jax.Array]:
    """The observation groups from the clean :data:`NOISE_SLOTS` inputs and their noise
    draws (None: noise off), at ``noise_level`` times ``scales`` (:func:`noise_scales`)."""
    x = dict(clean)
    if draws is not None:
        x = apply_obs_noise(clean, draws, noise_level, scales)
    obs = jnp.concatenate(
        [
            x["gyro"],
            -x["upvector"],
            x["joint_pos"],
            x["joint_vel"],
            task_state["action"],
            task_state["command"],
            task_state["feet_phase"],
        ]
    )
    return {"obs": obs, "critic": jnp.concatenate([obs, x["linvel"]])}
