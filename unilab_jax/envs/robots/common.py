"""What the robot tasks share (free joint first in ``qpos``/``qvel``): their base class
:class:`LocomotionTask` (a standing pose, a velocity command to follow, a mirror map), the
mirror map of their common observation layout (:func:`locomotion_mirror`), floating-base
kinematics (:func:`world_to_body`, :func:`base_state`, :func:`yaw_quaternion`), the model
constants MJX does not recompute (:func:`setconst_weights`), and the reference's rules for
observation noise (:func:`uniform_noise`, :func:`apply_obs_noise`), weighted rewards
(:func:`weighted_reward`), domain randomisation (:func:`uniform`, :func:`model_field`,
:func:`position_gains`) and pushes (:func:`interval_push`, :func:`body_force`)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

with contextlib.redirect_stdout(io.StringIO()):  # silence "Failed to import warp"
    from mujoco import mjx

from unilab_jax.envs.base import Task, replace_model_fields
from unilab_jax.envs.mirror import (
    COMMAND,
    PSEUDOVECTOR,
    VECTOR,
    MirrorMap,
    SignedPermutation,
    concat,
    floating_base_mirror,
)
from unilab_jax.envs.task import VelocityTracking

__all__ = [
    "SETCONST_FIELDS",
    "LocomotionTask",
    "apply_obs_noise",
    "base_state",
    "body_force",
    "interval_push",
    "locomotion_mirror",
    "model_field",
    "position_gains",
    "setconst_weights",
    "uniform",
    "uniform_noise",
    "weighted_reward",
    "world_to_body",
    "yaw_quaternion",
]


class LocomotionTask(Task):
    """A floating-base robot that follows a velocity command (vx, vy, yaw rate) from a standing
    pose: what the robot tasks declare alike. Subclasses build the model and hand it to
    ``__init__`` with its standing pose and the task's left-right mirror map."""

    #: Where the actor observation holds the command.
    command_obs: ClassVar[slice]
    #: The task scales its reward by the control step (the reference's tasks do).
    reward_times_dt: ClassVar[bool] = True

    def __init__(
        self, config: Any, model: mujoco.MjModel, default_pose: Any, mirror: MirrorMap
    ) -> None:
        super().__init__(config, model)
        self._default_pose = jnp.asarray(default_pose, jnp.float32)
        self._mirror = mirror

    @property
    def default_pose(self) -> jax.Array:
        """Standing joint positions (qpos order, float32), from which the action is an offset."""
        return self._default_pose

    @property
    def mirror(self) -> MirrorMap:
        """Left-right mirror map (:func:`locomotion_mirror`; the task module's docstring)."""
        return self._mirror

    @property
    def velocity_tracking(self) -> VelocityTracking:
        """The ``tracking_lin_vel`` reward of the config's ``w_tracking_lin_vel`` and
        ``tracking_sigma`` (per step: times the control step where the reward is)."""
        c = self.config
        weight = c.w_tracking_lin_vel * (self.control_dt if self.reward_times_dt else 1.0)
        return VelocityTracking("tracking_lin_vel", weight, c.tracking_sigma, self.command_obs)


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


def yaw_quaternion(yaw: jax.Array) -> jax.Array:
    """The quaternion (w, x, y, z) of a turn by ``yaw`` (rad) about the z axis."""
    half = 0.5 * jnp.asarray(yaw, jnp.float32)
    zero = jnp.zeros_like(half)
    return jnp.stack([jnp.cos(half), zero, zero, jnp.sin(half)])


def locomotion_mirror(
    joints: SignedPermutation, action: SignedPermutation, clock: SignedPermutation
) -> MirrorMap:
    """The mirror map of the robot tasks' observation layout: "obs" ``[base angular velocity
    (a pseudo-vector), gravity or minus the up vector (a vector), joint positions, joint
    velocities (both by ``joints``, the hinge joints in qpos order), last action (by
    ``action``), velocity command, gait clock (by ``clock``)]``, "critic" that plus a linear
    velocity (a vector); qpos / qvel by :func:`~unilab_jax.envs.mirror.floating_base_mirror`."""
    obs = concat(PSEUDOVECTOR, VECTOR, joints, joints, action, COMMAND, clock)
    qpos, qvel = floating_base_mirror(joints)
    return MirrorMap(obs=obs, critic=concat(obs, VECTOR), action=action, qpos=qpos, qvel=qvel)


def uniform_noise(key: jax.Array, slots: tuple[tuple[str, int], ...]) -> dict[str, jax.Array]:
    """``U(-1, 1)`` draws [size] of each ``(name, size)`` noise slot, one key each, in order."""
    keys = jax.random.split(key, len(slots))
    return {
        name: jax.random.uniform(k, (size,), minval=-1.0, maxval=1.0)
        for k, (name, size) in zip(keys, slots, strict=True)
    }


def apply_obs_noise(
    clean: Mapping[str, jax.Array],
    draws: Mapping[str, jax.Array],
    level: float,
    scales: Mapping[str, float],
) -> dict[str, jax.Array]:
    """``clean[slot] + draws[slot] * level * scales[slot]`` per slot of ``clean``, in float32 in
    the reference's order of operations (``draws``: ``U(-1, 1)`` of each slot's shape)."""
    return {
        k: clean[k]
        + jnp.asarray(draws[k], jnp.float32) * jnp.float32(level) * jnp.float32(scales[k])
        for k in clean
    }


def weighted_reward(
    terms: Mapping[str, jax.Array], weights: Mapping[str, Any], dt: float
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The reference's reward: ``dt`` times the float32 sum of ``terms[name] * weight`` in the
    order of ``weights``; the components ``terms[name] * weight * dt`` sum to it."""
    dt = jnp.float32(dt)
    total = jnp.zeros((), jnp.float32)
    for name, weight in weights.items():
        total = total + terms[name] * weight
    return total * dt, {name: terms[name] * weight * dt for name, weight in weights.items()}


#: The model constants :func:`setconst_weights` computes (``Task.model_fields`` names).
SETCONST_FIELDS = ("body_subtreemass", "body_invweight0", "dof_invweight0")


def setconst_weights(
    model: mujoco.MjModel, fields: Mapping[str, jax.Array]
) -> dict[str, jax.Array]:
    """The constants MuJoCo's ``mj_setConst`` derives from the masses and inertias, for
    ``model`` with ``fields`` replaced (``Task.model_fields`` names): ``body_subtreemass``,
    ``body_invweight0`` and ``dof_invweight0``, computed in JAX (float32) with MJX.

    MJX replaces per-episode model fields but keeps the compiled model's derived constants;
    the inverse weights set the constraint regularisation of contacts, joint limits and
    friction loss, so a task that randomises masses hands these to MJX as model fields too
    (C MuJoCo recomputes them itself). As ``mj_setConst``: at ``qpos0``, with ``M`` the joint
    space inertia, ``body_invweight0[b]`` = the mean diagonal of the translational and of the
    rotational block of ``J M^-1 J^T`` (J: the Jacobian of body b's centre of mass), and
    ``dof_invweight0`` = the diagonal of ``M^-1``, averaged over the translational and over the
    rotational dofs of a free joint and over the dofs of a ball joint.
    """
    if np.any(model.body_simple == 2):  # mj_setConst's shortcut for them is not reproduced
        raise NotImplementedError("bodies with translational joints only are not supported")
    mx = replace_model_fields(mjx.put_model(model, impl="jax"), fields)
    data = mjx.make_data(mx, impl="jax").replace(qpos=jnp.asarray(model.qpos0, jnp.float32))
    data = mjx.crb(mx, mjx.com_pos(mx, mjx.kinematics(mx, data)))
    mass = mjx.full_m(mx, data)
    chol = jnp.linalg.cholesky(mass)
    eye = jnp.eye(model.nv, dtype=mass.dtype)
    m_inv = jax.scipy.linalg.cho_solve((chol, True), eye)

    # Jacobians of every body's centre of mass (as ``mjx.jac``, all bodies at once): dof i
    # moves body b when it belongs to b or to an ancestor of b.
    moves = np.zeros((model.nbody, model.nv), bool)
    for b in range(1, model.nbody):
        moves[b] = moves[model.body_parentid[b]]
        moves[b, model.body_dofadr[b] : model.body_dofadr[b] + model.body_dofnum[b]] = True
    moves[model.body_weldid == 0] = False  # static bodies: zero weights
    offset = data.xipos - data.subtree_com[model.body_rootid]  # [nbody, 3]
    cdof = data.cdof  # [nv, 6]: rotation, translation
    jacp = cdof[None, :, 3:] + jnp.cross(cdof[None, :, :3], offset[:, None, :])
    jacp = jacp * moves[:, :, None]  # [nbody, nv, 3]
    jacr = jnp.broadcast_to(cdof[None, :, :3], jacp.shape) * moves[:, :, None]
    trans = jnp.einsum("bix,ij,bjx->b", jacp, m_inv, jacp) / 3.0
    rot = jnp.einsum("bix,ij,bjx->b", jacr, m_inv, jacr) / 3.0
    invweight = jnp.stack([trans, rot], axis=1)
    diag = jnp.diagonal(m_inv)
    dof = diag
    for j in range(model.njnt):
        adr = int(model.jnt_dofadr[j])
        kind = model.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            dof = dof.at[adr : adr + 3].set(jnp.mean(diag[adr : adr + 3]))
            dof = dof.at[adr + 3 : adr + 6].set(jnp.mean(diag[adr + 3 : adr + 6]))
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            dof = dof.at[adr : adr + 3].set(jnp.mean(diag[adr : adr + 3]))
    subtree = mx.body_mass
    for b in range(model.nbody - 1, 0, -1):  # children come after their parents
        subtree = subtree.at[model.body_parentid[b]].add(subtree[b])
    return {"body_subtreemass": subtree, "body_invweight0": invweight, "dof_invweight0": dof}


def uniform(key: jax.Array, shape: tuple[int, ...], low: Any, high: Any) -> jax.Array:
    """``U(low, high)`` of ``shape`` in float32 (bounds broadcast)."""
    low = jnp.asarray(low, jnp.float32)
    high = jnp.asarray(high, jnp.float32)
    return jax.random.uniform(key, shape, jnp.float32, low, high)


def model_field(model: mujoco.MjModel, name: str) -> np.ndarray:
    """A compiled model field by its ``Task.model_fields`` name (``"opt.<name>"`` for an
    option)."""
    if name.startswith("opt."):
        return np.asarray(getattr(model.opt, name[4:]))
    return np.asarray(getattr(model, name))


def position_gains(
    gainprm: jax.Array, biasprm: jax.Array, kp: jax.Array, kd: jax.Array
) -> dict[str, jax.Array]:
    """``actuator_gainprm`` / ``actuator_biasprm`` of position actuators with gains ``kp``
    and ``kd`` (scalars or one per actuator): MuJoCo's ``kp (ctrl - q) - kd qdot`` is
    ``gain = kp``, ``bias = (0, -kp, -kd)``."""
    kp = jnp.asarray(kp, jnp.float32)
    kd = jnp.asarray(kd, jnp.float32)
    return {
        "actuator_gainprm": gainprm.at[:, 0].set(kp),
        "actuator_biasprm": biasprm.at[:, 1].set(-kp).at[:, 2].set(-kd),
    }


def interval_push(
    key: jax.Array, step_counter: jax.Array, interval: int, max_force: Any
) -> jax.Array:
    """The reference's interval push: on control steps 0, ``interval``, ``2 interval``, ... of
    a step counter the batch shares, a world-frame force ``U(-1, 1) * max_force`` [3] (N), held
    over that step; zero on the other steps and when ``interval`` is 0."""
    force = uniform(key, (3,), -1.0, 1.0) * jnp.asarray(max_force, jnp.float32)
    if interval <= 0:
        return jnp.zeros_like(force)
    return jnp.where(step_counter % interval == 0, force, jnp.zeros_like(force))


def body_force(nbody: int, body: int, force: jax.Array) -> jax.Array:
    """``xfrc_applied`` [nbody, 6] with world-frame ``force`` [3] on ``body``'s centre of
    mass and nothing else."""
    return jnp.zeros((nbody, 6), jnp.float32).at[body, 0:3].set(force)
