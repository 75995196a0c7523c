"""SharpaInhandRotation's reward terms (the reference's ``_compute_reward``).

Unweighted, per control step of ``dt`` seconds (the task weighs them and multiplies by ``dt``):

* ``rotate``: the object's angular velocity about ``rot_axis``, clipped to ``angvel_clip``; the
  velocity is the finite difference of its orientation over the step (axis-angle of
  ``q_now * conj(q_prev)``, real part made non-negative, over ``dt``);
* ``obj_linvel``: ``sum |p_now - p_prev| / dt`` (object position);
* ``pose_diff``: ``sum (q - q_default)^2`` over the 22 hand joints;
* ``torque``: ``sum tau^2`` and ``work``: ``(sum tau * qdot)^2``, with the PD torque the episode's
  gains give, ``tau = kp (target - q) - kd qdot`` (the targets of this step);
* ``object_pos``: ``1 / (|p_now - anchor| + 0.001)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["REWARD_TERMS", "quat_to_axis_angle", "reward_terms"]

REWARD_TERMS = ("rotate", "obj_linvel", "pose_diff", "torque", "work", "object_pos")


def _quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    return jnp.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])  # fmt: skip


def quat_to_axis_angle(q: jax.Array) -> jax.Array:
    """Axis-angle vector [3] of a unit quaternion (wxyz), its real part made non-negative
    first (the shortest rotation); a Taylor series near zero angle."""
    q = jnp.where(q[0] < 0.0, -q, q)
    xyz, w = q[1:], q[0]
    half = jnp.arctan2(jnp.linalg.norm(xyz), w)
    angle = 2.0 * half
    small = jnp.abs(angle) < 1e-6
    safe = jnp.where(small, 1.0, angle)
    ratio = jnp.where(small, 0.5 - angle * angle / 48.0, jnp.sin(half) / safe)
    return xyz / ratio


def reward_terms(
    *,
    pos: jax.Array,
    quat: jax.Array,
    prev_pos: jax.Array,
    prev_quat: jax.Array,
    q: jax.Array,
    qdot: jax.Array,
    targets: jax.Array,
    kp: jax.Array,
    kd: jax.Array,
    default_pose: jax.Array,
    anchor: jax.Array,
    rot_axis: jax.Array,
    angvel_clip: tuple[float, float],
    dt: float,
) -> dict[str, jax.Array]:
    """The unweighted terms (module docstring), float32 scalars."""
    conj = prev_quat * jnp.array([1.0, -1.0, -1.0, -1.0], jnp.float32)
    angvel = quat_to_axis_angle(_quat_mul(quat, conj)) / dt
    linvel = (pos - prev_pos) / dt
    tau = kp * (targets - q) - kd * qdot
    return {
        "rotate": jnp.clip(jnp.dot(angvel, rot_axis), *angvel_clip),
        "obj_linvel": jnp.sum(jnp.abs(linvel)),
        "pose_diff": jnp.sum(jnp.square(q - default_pose)),
        "torque": jnp.sum(jnp.square(tau)),
        "work": jnp.square(jnp.sum(tau * qdot)),
        "object_pos": 1.0 / (jnp.linalg.norm(pos - anchor) + 0.001),
    }
