"""Anchor-frame kinematics of motion tracking: where the clip's bodies are relative to the robot.

Quaternions are (w, x, y, z); every function is a pure JAX function of arrays whose last axis
is the quaternion or vector (leading axes broadcast), float32 as the reference computes them.

* :func:`aligned_reference`: the clip's bodies moved onto the robot, the reference's (and
  BeyondMimic's) rule: keep the clip's body offsets from its anchor, turned by the yaw between
  the robot's anchor and the clip's, placed at the robot anchor's x, y and the clip anchor's z.
  The body rewards compare the robot's bodies with these.
* :func:`in_frame`: a position and orientation seen from a frame (the robot's anchor): the
  anchor observation and the critic's body layout. Orientations enter observations as the
  first two columns of their rotation matrix, row by row (:func:`rotation_6d`).
* :func:`rotation_angle_sq`: the squared angle between two orientations, ``(2 acos |<q1,
  q2>|)^2``, the orientation error of the rewards.
* :func:`xbody_velocity`: a body frame's world linear and angular velocity from ``cvel``, what
  MuJoCo's ``framelinvel`` / ``frameangvel`` sensors of an ``xbody`` report (the reference reads
  the tracked bodies through such sensors).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "aligned_reference",
    "gravity_z",
    "in_frame",
    "quat_conj",
    "quat_from_euler_xyz",
    "quat_mul",
    "rotate",
    "rotate_inverse",
    "rotation_6d",
    "rotation_angle_sq",
    "xbody_velocity",
]


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product ``a b``."""
    w1, x1, y1, z1 = (a[..., i] for i in range(4))
    w2, x2, y2, z2 = (b[..., i] for i in range(4))
    return jnp.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        axis=-1,
    )


def quat_conj(q: jax.Array) -> jax.Array:
    """The conjugate (the inverse of a unit quaternion)."""
    return q * jnp.asarray([1.0, -1.0, -1.0, -1.0], q.dtype)


def rotate(q: jax.Array, v: jax.Array) -> jax.Array:
    """``R(q) v`` for a unit quaternion: ``v + w t + u x t`` with ``t = 2 u x v``."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * jnp.cross(u, v)
    return v + w * t + jnp.cross(u, t)


def rotate_inverse(q: jax.Array, v: jax.Array) -> jax.Array:
    """``R(q)^T v``: ``v`` in the frame of ``q``."""
    return rotate(quat_conj(q), v)


def quat_from_euler_xyz(roll: jax.Array, pitch: jax.Array, yaw: jax.Array) -> jax.Array:
    """The turn ``yaw`` about z after ``pitch`` about y after ``roll`` about x."""
    cr, sr = jnp.cos(roll * 0.5), jnp.sin(roll * 0.5)
    cp, sp = jnp.cos(pitch * 0.5), jnp.sin(pitch * 0.5)
    cy, sy = jnp.cos(yaw * 0.5), jnp.sin(yaw * 0.5)
    return jnp.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        axis=-1,
    )


def rotation_6d(q: jax.Array) -> jax.Array:
    """The first two columns of ``R(q)``, row by row: ``[R00, R01, R10, R11, R20, R21]``."""
    w, x, y, z = (q[..., i] for i in range(4))
    return jnp.stack(
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
        ],
        axis=-1,
    )


def in_frame(
    frame_pos: jax.Array, frame_quat: jax.Array, pos: jax.Array, quat: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(pos, quat)`` seen from the frame ``(frame_pos, frame_quat)``: ``R^T (pos - p)`` and
    the 6D form of ``conj(frame_quat) quat``."""
    rel = rotate_inverse(frame_quat, pos - frame_pos)
    return rel, rotation_6d(quat_mul(quat_conj(frame_quat), quat))


def gravity_z(quat: jax.Array) -> jax.Array:
    """The z component of world gravity ``(0, 0, -1)`` in the frame of ``quat``."""
    return 2.0 * (quat[..., 1] * quat[..., 1] + quat[..., 2] * quat[..., 2]) - 1.0


def rotation_angle_sq(q1: jax.Array, q2: jax.Array) -> jax.Array:
    """``(2 acos(clip(|<q1, q2>|, 0, 1)))^2``: the squared angle between unit quaternions."""
    dot = jnp.clip(jnp.abs(jnp.sum(q1 * q2, axis=-1)), 0.0, 1.0)
    return jnp.square(2.0 * jnp.arccos(dot))


def aligned_reference(
    body_pos: jax.Array,
    body_quat: jax.Array,
    anchor: int,
    robot_anchor_pos: jax.Array,
    robot_anchor_quat: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The clip's bodies ``[B, 3]`` / ``[B, 4]`` moved onto the robot: turned about z by the yaw
    of ``robot_anchor_quat conj(clip anchor quat)`` about the clip's anchor, which is placed at
    the robot anchor's x, y and the clip anchor's own z."""
    delta = quat_mul(robot_anchor_quat, quat_conj(body_quat[anchor]))
    w, x, y, z = delta[0], delta[1], delta[2], delta[3]
    half_yaw = 0.5 * jnp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    dw, dz = jnp.cos(half_yaw), jnp.sin(half_yaw)
    # (dw, 0, 0, dz) applied to the offsets: cos(yaw) = 1 - 2 dz^2, sin(yaw) = 2 dw dz.
    offset = body_pos - body_pos[anchor]
    cross, z2 = 2.0 * dw * dz, 2.0 * dz * dz
    vx, vy, vz = offset[:, 0], offset[:, 1], offset[:, 2]
    pos = jnp.stack(
        [
            vx - cross * vy - z2 * vx + robot_anchor_pos[0],
            vy + cross * vx - z2 * vy + robot_anchor_pos[1],
            vz + body_pos[anchor, 2],
        ],
        axis=-1,
    )
    mw, mx, my, mz = (body_quat[:, i] for i in range(4))
    quat = jnp.stack(
        [dw * mw - dz * mz, dw * mx - dz * my, dw * my + dz * mx, dw * mz + dz * mw], -1
    )
    return pos, quat


def xbody_velocity(
    cvel: jax.Array, xpos: jax.Array, subtree_com: jax.Array, root: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """World linear and angular velocity ``[B, 3]`` of body frames at ``xpos`` ``[B, 3]`` from
    their ``cvel`` ``[B, 6]`` (rotation, translation at the subtree centre of mass of their tree
    root ``root`` ``[B]``): ``v + w x (xpos - com)``."""
    ang = cvel[:, :3]
    lin = cvel[:, 3:] + jnp.cross(ang, xpos - subtree_com[root])
    return lin, ang
