"""Floating-base kinematics shared by the robot tasks (free joint first in ``qpos``/``qvel``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["base_state", "world_to_body"]


def world_to_body(quat: jax.Array, v: jax.Array) -> jax.Array:
    """Rotate world-frame ``v`` into the frame of quaternion ``quat`` (w, x, y, z; normalised
    here): ``R(quat)^T v``."""
    quat = quat / jnp.linalg.norm(quat)
    w, u = quat[0], quat[1:]
    return (2.0 * w * w - 1.0) * v + 2.0 * jnp.dot(u, v) * u - 2.0 * w * jnp.cross(u, v)


def base_state(data: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(linear velocity, angular velocity, projected gravity)`` of the base, body frame.

    MuJoCo's free joint stores the linear velocity in the world frame (``qvel[0:3]``) and the
    angular velocity in the body frame (``qvel[3:6]``).
    """
    quat = data.qpos[3:7]
    lin_vel = world_to_body(quat, data.qvel[0:3])
    gravity = world_to_body(quat, jnp.array([0.0, 0.0, -1.0]))
    return lin_vel, data.qvel[3:6], gravity
