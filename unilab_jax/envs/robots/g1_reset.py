"""The reset of a G1WalkFlat episode from its random draws (the reference's rules).

Each function turns uniform draws into part of the fresh episode: :func:`reset_qpos_qvel` (the
physics state), :func:`commands_from_draw`, :func:`gait_phase_from_draw` and
:func:`actuator_gains` (the per-episode model fields). The task
(:class:`~unilab_jax.envs.robots.g1.G1WalkFlat`) draws with JAX and calls them; the golden
tests feed them the reference's recorded draws.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from unilab_jax.envs.robots.common import yaw_quaternion

__all__ = ["actuator_gains", "commands_from_draw", "gait_phase_from_draw", "reset_qpos_qvel"]


def gait_phase_from_draw(p: jax.Array) -> jax.Array:
    """Reset gait phases ``[..., 2]`` (left, right) = ``(p, p + pi)`` (not wrapped)."""
    return jnp.stack([p, p + jnp.float32(math.pi)], axis=-1)


def commands_from_draw(draw: jax.Array, min_speed: float) -> jax.Array:
    """The command ``[..., 3]`` from its uniform draw: vx, vy zeroed when their norm is at most
    ``min_speed`` (the yaw rate stays)."""
    moving = jnp.linalg.norm(draw[..., :2], axis=-1, keepdims=True) > min_speed
    return jnp.concatenate([draw[..., :2] * moving, draw[..., 2:]], axis=-1)


def _quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product of (w, x, y, z) quaternions."""
    w1, x1, y1, z1 = a[0], a[1], a[2], a[3]
    w2, x2, y2, z2 = b[0], b[1], b[2], b[3]
    return jnp.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def reset_qpos_qvel(
    key_qpos: jax.Array, xy: jax.Array, yaw: jax.Array, base_qvel: jax.Array, nv: int
) -> tuple[jax.Array, jax.Array]:
    """One env's reset state from its draws: the keyframe ``key_qpos`` [nq] moved by ``xy``
    [2] and turned by ``yaw`` [] about the world z axis; ``base_qvel`` [6] the free joint's
    velocities, the joints' 0."""
    turn = yaw_quaternion(yaw)
    qpos = key_qpos.at[0:2].add(xy).at[3:7].set(_quat_mul(key_qpos[3:7], turn))
    qvel = jnp.zeros((nv,), jnp.float32).at[0:6].set(base_qvel)
    return qpos, qvel


def actuator_gains(
    gainprm: jax.Array, biasprm: jax.Array, kp_multiplier: jax.Array, kd_multiplier: jax.Array
) -> dict[str, jax.Array]:
    """The per-episode model fields of the position actuators: ``kp`` (``gainprm[:, 0]``,
    ``-biasprm[:, 1]``) times ``kp_multiplier``, ``kv`` (``-biasprm[:, 2]``) times
    ``kd_multiplier`` (scalars), from the nominal ``gainprm`` / ``biasprm`` [nu, 10]."""
    kp = gainprm[:, 0] * kp_multiplier
    kv = -biasprm[:, 2] * kd_multiplier
    return {
        "actuator_gainprm": gainprm.at[:, 0].set(kp),
        "actuator_biasprm": biasprm.at[:, 1].set(-kp).at[:, 2].set(-kv),
    }
