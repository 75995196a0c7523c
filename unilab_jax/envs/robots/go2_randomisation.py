"""Go2JoystickFlat's random draws and what each becomes (the reference's rules).

A reset's state (:func:`draw_reset`, :func:`reset_qpos_qvel`), the episode's command
(:func:`draw_command`), its domain randomisation (:func:`draw_randomisation` ->
:func:`randomised_values` -> :func:`episode_model`: the per-episode model fields, with the
constants ``mj_setConst`` derives from them) and the pushes (:func:`is_push_step`,
:func:`push_force`). The task (:class:`~unilab_jax.envs.robots.go2.Go2JoystickFlat`, whose
docstring gives the distributions) draws with JAX and calls them; the golden tests feed them the
reference's recorded draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import mujoco

from unilab_jax.envs.robots.common import (
    SETCONST_FIELDS,
    interval_push,
    position_gains,
    setconst_weights,
    uniform,
    yaw_quaternion,
)
from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig

__all__ = [
    "DERIVED_FIELDS",
    "DR_DRAWS",
    "draw_command",
    "draw_randomisation",
    "draw_reset",
    "episode_model",
    "is_push_step",
    "push_force",
    "randomised_values",
    "reset_qpos_qvel",
]

#: Model constants ``mj_setConst`` derives from the masses, which MJX does not recompute: the
#: task computes them per episode (:func:`~unilab_jax.envs.robots.common.setconst_weights`).
DERIVED_FIELDS = SETCONST_FIELDS
#: Episode draws of the domain randomisation (each a scalar but gravity [3]).
DR_DRAWS = ("base_mass_delta", "com_offset_x", "gravity", "kp_multiplier", "kd_multiplier")


# --------------------------------------------------------------------- resets
def reset_qpos_qvel(
    home: jax.Array, xy_offset: jax.Array, yaw: jax.Array, base_qvel: jax.Array, nv: int
) -> tuple[jax.Array, jax.Array]:
    """A reset's ``(qpos [19], qvel [18])`` from its draws: the home pose ``home`` moved by
    ``xy_offset`` [2], turned by ``yaw`` about z, free-joint velocity ``base_qvel`` [6]."""
    qpos = home.at[0:2].add(xy_offset).at[3:7].set(yaw_quaternion(yaw))
    qvel = jnp.zeros((nv,), jnp.float32).at[0:6].set(base_qvel)
    return qpos, qvel


def draw_reset(
    key: jax.Array, config: Go2JoystickFlatConfig
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A reset's draws ``(xy_offset [2], yaw, base_qvel [6])`` (:func:`reset_qpos_qvel`)."""
    k_xy, k_yaw, k_vel = jax.random.split(key, 3)
    xy = uniform(k_xy, (2,), -config.init_xy_range, config.init_xy_range)
    yaw = uniform(k_yaw, (), -math.pi, math.pi)
    base_qvel = uniform(k_vel, (6,), -config.init_base_vel, config.init_base_vel)
    return xy, yaw, base_qvel


def draw_command(key: jax.Array, config: Go2JoystickFlatConfig) -> jax.Array:
    """An episode's velocity command [3] (vx, vy, yaw rate), uniform in the config's box."""
    return uniform(key, (3,), config.command_low, config.command_high)


# --------------------------------------------------------------------- domain randomisation
def draw_randomisation(key: jax.Array, config: Go2JoystickFlatConfig) -> dict[str, jax.Array]:
    """One episode's domain-randomisation draws (:data:`DR_DRAWS`)."""
    keys = jax.random.split(key, 5)
    return {
        "base_mass_delta": uniform(keys[0], (), *config.added_mass_range),
        "com_offset_x": uniform(keys[1], (), *config.com_offset_x_range),
        "gravity": uniform(keys[2], (3,), config.gravity_low, config.gravity_high),
        "kp_multiplier": uniform(keys[3], (), *config.kp_multiplier_range),
        "kd_multiplier": uniform(keys[4], (), *config.kd_multiplier_range),
    }


def randomised_values(
    draws: Mapping[str, jax.Array],
    nominal: Mapping[str, jax.Array],
    base: int,
    config: Go2JoystickFlatConfig,
) -> dict[str, jax.Array]:
    """The physical values of one episode's draws: ``kp``, ``kd`` (shared by the 12
    actuators), ``base_mass``, ``base_com`` [3] (base centre of mass, body frame) and
    ``gravity`` [3]; ``nominal``: the model's fields, ``base``: the base body's id."""
    nominal_com = nominal["body_ipos"][base]
    return {
        "kp": config.kp * jnp.asarray(draws["kp_multiplier"], jnp.float32),
        "kd": config.kd * jnp.asarray(draws["kd_multiplier"], jnp.float32),
        "base_mass": nominal["body_mass"][base] + draws["base_mass_delta"],
        "base_com": nominal_com.at[0].add(draws["com_offset_x"]),
        "gravity": jnp.asarray(draws["gravity"], jnp.float32),
    }


def episode_model(
    values: Mapping[str, jax.Array],
    nominal: Mapping[str, jax.Array],
    base: int,
    model: mujoco.MjModel,
) -> dict[str, jax.Array]:
    """The per-episode model fields (``Task.model_fields``) of :func:`randomised_values`,
    with the inverse weights ``mj_setConst`` would derive from them (for MJX)."""
    gains = position_gains(
        nominal["actuator_gainprm"], nominal["actuator_biasprm"], values["kp"], values["kd"]
    )
    fields = {
        **gains,
        "body_mass": nominal["body_mass"].at[base].set(values["base_mass"]),
        "body_ipos": nominal["body_ipos"].at[base].set(values["base_com"]),
        "opt.gravity": jnp.asarray(values["gravity"], jnp.float32),
    }
    return {**fields, **setconst_weights(model, fields)}


# --------------------------------------------------------------------- pushes
def is_push_step(step_counter: jax.Array, config: Go2JoystickFlatConfig) -> jax.Array:
    """The batch's control step ``step_counter`` carries a push (0, 750, 1500, ...)."""
    interval = config.push_interval
    if interval <= 0:
        return jnp.zeros((), bool)
    return step_counter % interval == 0


def push_force(key: jax.Array, step_counter: jax.Array, config: Go2JoystickFlatConfig) -> jax.Array:
    """The world-frame force [3] on the base during step ``step_counter`` (0 if none)."""
    return interval_push(key, step_counter, config.push_interval, config.push_max_force)
