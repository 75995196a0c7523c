"""Left-right mirror maps: the data a task declares so that training can use its symmetry.

A robot whose left and right halves are mirror images has dynamics that commute with the
reflection through its sagittal plane (the x-z plane): stepping the mirrored state with the
mirrored action gives the mirrored next state, the reward is the same, and the mirrored
observation is the observation of the mirrored state. So every replay row stands for a second,
mirrored one; symmetry augmentation (``use_symmetry`` of the SAC/TD3 configs, reference §2.1)
trains on both.

Every map here is a :class:`SignedPermutation`, ``out[..., i] = sign[i] * x[..., index[i]]``,
and an involution (mirroring twice is the identity; checked when one is built). Under the
reflection ``M = diag(1, -1, 1)`` of world and base frames alike:

* a vector (position, linear velocity, projected gravity): ``(x, y, z) -> (x, -y, z)``;
* a pseudo-vector (angular velocity, in the world or the base frame; a rotation axis):
  ``(x, y, z) -> (-x, y, -z)``, as ``M w`` times ``det M = -1``;
* the base quaternion ``(w, x, y, z)`` of rotation ``R``: ``M R M`` is ``(w, -x, y, -z)``;
* a velocity command ``(vx, vy, yaw rate)``: ``(vx, -vy, -yaw rate)``;
* a hinge joint: the value of its mirror partner (left <-> right), with the sign read from the
  joint axes of the model (:func:`hinge_mirror`): a rotation by ``q`` about world axis ``a``
  mirrors to a rotation by ``q`` about ``-M a``, so the partner's angle is ``+q`` when its axis
  is ``-M a`` (pitch joints, axes along y) and ``-q`` when it is ``M a`` (roll and yaw joints);
* a gait clock: the task's own rule (G1: the left and right feet are half a period apart, so the
  mirror shifts the phase by half a period, ``(sin, cos) -> (-sin, -cos)``; the quadrupeds: the
  two trot pairs swap).

Maps are plain tuples (hashable, picklable, no array library): :meth:`SignedPermutation.apply`
works on numpy and JAX arrays; the torch learners index with the same tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

__all__ = [
    "COMMAND",
    "PSEUDOVECTOR",
    "QUATERNION",
    "VECTOR",
    "MirrorMap",
    "SignedPermutation",
    "concat",
    "floating_base_mirror",
    "hinge_mirror",
    "left_right_partner",
    "signs",
]


@dataclass(frozen=True)
class SignedPermutation:
    """``out[..., i] = sign[i] * x[..., index[i]]``; an involution (its own inverse)."""

    index: tuple[int, ...]
    sign: tuple[float, ...]

    def __post_init__(self) -> None:
        index = tuple(int(i) for i in self.index)
        sign = tuple(float(s) for s in self.sign)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "sign", sign)
        n = len(index)
        if len(sign) != n or sorted(index) != list(range(n)):
            raise ValueError(f"index {index} is not a permutation of range({len(sign)})")
        for i, j in enumerate(index):
            if index[j] != i or sign[i] * sign[j] != 1.0 or abs(sign[i]) != 1.0:
                raise ValueError(
                    f"entry {i} <- {j} (sign {sign[i]:+g}) is not undone by entry {j} <- "
                    f"{index[j]} (sign {sign[j]:+g}): a mirror map must be its own inverse"
                )

    @property
    def size(self) -> int:
        return len(self.index)

    def apply(self, x: Any) -> Any:
        """Mirror the last axis of a numpy or JAX array (dtype kept)."""
        sign = np.asarray(self.sign, dtype=x.dtype)
        return x[..., np.asarray(self.index)] * sign

    def __call__(self, x: Any) -> Any:
        return self.apply(x)


def concat(*parts: SignedPermutation) -> SignedPermutation:
    """The map of a vector made of ``parts`` laid end to end."""
    index: list[int] = []
    sign: list[float] = []
    offset = 0
    for part in parts:
        index.extend(offset + i for i in part.index)
        sign.extend(part.sign)
        offset += part.size
    return SignedPermutation(tuple(index), tuple(sign))


def signs(*values: float) -> SignedPermutation:
    """Sign flips only, no permutation: ``out[i] = values[i] * x[i]``."""
    return SignedPermutation(tuple(range(len(values))), values)


VECTOR = signs(1.0, -1.0, 1.0)
"""A polar vector: ``(x, y, z) -> (x, -y, z)``."""
PSEUDOVECTOR = signs(-1.0, 1.0, -1.0)
"""An angular velocity or rotation axis: ``(x, y, z) -> (-x, y, -z)``."""
COMMAND = signs(1.0, -1.0, -1.0)
"""A velocity command ``(vx, vy, yaw rate) -> (vx, -vy, -yaw rate)``."""
QUATERNION = signs(1.0, -1.0, 1.0, -1.0)
"""A unit quaternion ``(w, x, y, z)`` of rotation ``R`` -> that of ``M R M``."""


@dataclass(frozen=True)
class MirrorMap:
    """How a task's observations, actions and physics state mirror (module docstring).

    ``obs`` / ``critic`` / ``action`` are what symmetry augmentation applies to replay rows;
    ``qpos`` / ``qvel`` mirror the MuJoCo state (``qvel``'s map also serves ``qacc`` and
    ``qacc_warmstart``), which the tests step to check the other three against the physics.
    """

    obs: SignedPermutation
    critic: SignedPermutation
    action: SignedPermutation
    qpos: SignedPermutation
    qvel: SignedPermutation


def left_right_partner(name: str) -> str:
    """``name`` with its side swapped: ``left_``/``right_`` prefixes (humanoids) and the
    ``FL``/``FR``, ``RL``/``RR`` leg prefixes (quadrupeds); names without a side are their own
    partner (a waist joint)."""
    for a, b in (("left", "right"), ("FL", "FR"), ("RL", "RR")):
        if name.startswith(a):
            return b + name[len(a) :]
        if name.startswith(b):
            return a + name[len(b) :]
    return name


def hinge_mirror(
    model: mujoco.MjModel,
    joints: Sequence[str],
    partner: Callable[[str], str] = left_right_partner,
) -> SignedPermutation:
    """The mirror of the hinge joint vector ``joints`` (names, in vector order).

    Joint ``j`` takes the value of ``partner(j)``; the sign comes from the world-frame joint
    axes in the model's reference pose (base at the origin, unrotated, all joints 0), which is
    mirror-symmetric for a symmetric robot: ``+1`` when the partner's axis is ``-M a``, ``-1``
    when it is ``M a`` (module docstring). Raises ``ValueError`` naming a joint whose partner is
    missing or whose axes are not mirror images (an asymmetric or unusually built model).
    """
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0
    if model.njnt and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        data.qpos[:7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    mujoco.mj_kinematics(model, data)
    reflect = np.diag([1.0, -1.0, 1.0])
    position = {name: i for i, name in enumerate(joints)}
    index, sign = [], []
    for name in joints:
        other = partner(name)
        if other not in position:
            raise ValueError(f"joint {name!r} has no mirror partner {other!r} among {joints}")
        axis = data.xaxis[model.joint(name).id]
        other_axis = data.xaxis[model.joint(other).id]
        alignment = -float(np.dot(other_axis, reflect @ axis))
        if abs(abs(alignment) - 1.0) > 1e-6:
            raise ValueError(
                f"the axis of joint {other!r} {other_axis} is not the mirror of {name!r}'s "
                f"{axis} (alignment {alignment:+.6f}); the model is not left-right symmetric"
            )
        index.append(position[other])
        sign.append(1.0 if alignment > 0 else -1.0)
    return SignedPermutation(tuple(index), tuple(sign))


def floating_base_mirror(joints: SignedPermutation) -> tuple[SignedPermutation, SignedPermutation]:
    """``(qpos map, qvel map)`` of a model with a free joint first and hinge joints after it.

    MuJoCo's free joint: ``qpos = [position (world), quaternion wxyz, joints]``, ``qvel =
    [linear velocity (world), angular velocity (body frame), joints]``.
    """
    return concat(VECTOR, QUATERNION, joints), concat(VECTOR, PSEUDOVECTOR, joints)
