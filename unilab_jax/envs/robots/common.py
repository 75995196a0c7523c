"""Floating-base kinematics and model constants shared by the robot tasks (free joint first in
``qpos``/``qvel``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

with contextlib.redirect_stdout(io.StringIO()):  # silence "Failed to import warp"
    from mujoco import mjx

from unilab_jax.envs.base import replace_model_fields

__all__ = ["base_state", "setconst_weights", "world_to_body"]


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
