"""The reference's motion clip format and the layout it has against a model.

A clip in the reference's format (UniLab @ 9aa57115, ``envs/motion_tracking/g1/motion_loader.py``)
is an ``.npz`` with exactly these arrays (others are ignored by its loader):

* ``fps``: one integer (the reference writes ``int32 [1]``); one clip frame per control step;
* ``joint_pos``, ``joint_vel``: ``[T, J]``, the model's joints without the root's free joint,
  in the model's joint order (for the G1: its 29 hinges, ``qpos[7:]``, the actuator order);
* ``body_pos_w``, ``body_lin_vel_w``, ``body_ang_vel_w``: ``[T, B, 3]`` and ``body_quat_w``:
  ``[T, B, 4]``, world frame, quaternions ``wxyz`` (MuJoCo's), indexed by MuJoCo body id: body 0
  is the world, then the robot's bodies in the model's order (31 for the G1, world included).

``B`` is the model's bodies up to its last moving one: static bodies added after the robot (the
reference's wall for the wall flip) sit after the clip's bodies and are not in clips, so the robot's
body ids index both. Our converter also writes the ``joint_names`` and ``body_names`` of that
layout (the reference's loader ignores them); when a file has them, the loader checks them.
"""

from __future__ import annotations

import mujoco
import numpy as np

from unilab_jax.errors import ConfigError

__all__ = [
    "BODY_KEYS",
    "CLIP_KEYS",
    "MotionClipError",
    "motion_body_names",
    "motion_joint_names",
]

#: The arrays of a clip in the reference's format, in the order the reference writes them.
CLIP_KEYS = (
    "fps",
    "joint_pos",
    "joint_vel",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
)
#: The per-body arrays ``[T, B, 3 or 4]`` and their last dimension.
BODY_KEYS = {"body_pos_w": 3, "body_quat_w": 4, "body_lin_vel_w": 3, "body_ang_vel_w": 3}


class MotionClipError(ConfigError):
    """A motion clip that cannot be used as given: the one-line message names the problem and
    the fix (the command to convert it, or the package to install). A ``ConfigError``, so the
    CLI says it in one line."""


def motion_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """The clip's joint columns: the model's joints other than free joints, in joint order."""
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    return tuple(model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) != free)


def motion_body_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """The clip's bodies: MuJoCo body ids 0 (``world``) to the model's last moving body."""
    moving = np.flatnonzero(model.body_weldid != 0)
    count = int(moving[-1]) + 1 if moving.size else 1
    return tuple(model.body(b).name for b in range(count))
