"""Convert a clip whose joints and bodies are named (holosoma's format) into the reference's
format (``layout.py``) against a model, by name.

What the reference's remap tool does for holosoma's clips (``scripts/motion/remap_fullbody_npz.py``,
upstream PR #357), against our model instead of its ``scene_flat.xml`` (the same bodies and joints):

* joints: the model's joints (``layout.motion_joint_names``), each looked up in ``joint_names``.
  A root free joint's columns come first in holosoma's arrays (``joint_pos``: position 3 +
  quaternion 4, ``joint_vel``: 6) and are dropped: the root's pose and velocity are the pelvis's
  rows of the body arrays. The reference strips 7/6 columns by count and keeps the rest in the
  file's order; we pick the columns by name, which gives the same array for holosoma's clips
  (their 29 joints are the model's, in its order) and refuses a clip whose joints differ;
* bodies: the model's bodies (``layout.motion_body_names``, MuJoCo order), each looked up in
  ``body_names``; the world's row too, by name, as the reference's tool does (its target list is
  ``world`` + the model's bodies, so its remap's index 0 picks the source's ``world``, holosoma's
  body 0: zero position and velocities, identity quaternion in every frame). For holosoma's
  51-body clips the index is ``[0, 1, 3, 4, 5, 6, 8, 9, 15, ..., 47]``, the reference tool's;
* every array float32, ``fps`` kept (``int32 [1]``); the layout's ``joint_names`` and
  ``body_names`` are written too (the reference's loader ignores them, ours checks them).

A clip without the names, whose joint columns are neither ``J`` nor ``7 + J`` (``J`` names), or
that lacks one of the model's joints or bodies is refused in one line naming the problem.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import mujoco
import numpy as np

from unilab_jax.envs.motion.layout import (
    BODY_KEYS,
    MotionClipError,
    motion_body_names,
    motion_joint_names,
)
from unilab_jax.envs.motion.sources import read_motion_arrays

__all__ = ["ROOT_QPOS_DIM", "ROOT_QVEL_DIM", "convert_motion", "convert_motion_file", "name_index"]

#: A free joint's columns in ``joint_pos`` (position 3, quaternion wxyz 4) and ``joint_vel`` (6).
ROOT_QPOS_DIM, ROOT_QVEL_DIM = 7, 6


def name_index(
    names: Sequence[str], wanted: Sequence[str], kind: str, origin: str = "the clip"
) -> np.ndarray:
    """``int32 [len(wanted)]``: where each of ``wanted`` is in ``names`` (``source[:, index]`` is
    in ``wanted``'s order). Refuses repeated names and any of ``wanted`` missing from ``names``."""
    names = [str(name) for name in names]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise MotionClipError(
            f"cannot convert {origin} by name: its {kind}_names repeat {', '.join(duplicates)}"
        )
    where = {name: i for i, name in enumerate(names)}
    missing = [name for name in wanted if name not in where]
    if missing:
        unused = sorted(set(names) - set(wanted))  # where a renamed one would be
        close = {name: difflib.get_close_matches(name, unused, n=1) for name in missing}
        shown = ", ".join(name + (f" (it has {c[0]!r})" if c else "") for name, c in close.items())
        raise MotionClipError(
            f"cannot convert {origin} by name: the model's {kind}(s) {shown} are not in its "
            f"{kind}_names ({len(names)} names)"
        )
    return np.asarray([where[name] for name in wanted], dtype=np.int32)


def _joint_columns(arrays: Mapping[str, np.ndarray], count: int, origin: str) -> tuple[int, int]:
    """How many root columns ``joint_pos`` and ``joint_vel`` start with: (7, 6) or (0, 0)."""
    pos, vel = (np.shape(arrays[key]) for key in ("joint_pos", "joint_vel"))
    if len(pos) == 2 and len(vel) == 2 and pos[0] == vel[0]:
        for root in ((ROOT_QPOS_DIM, ROOT_QVEL_DIM), (0, 0)):
            if (pos[1], vel[1]) == (count + root[0], count + root[1]):
                return root
    raise MotionClipError(
        f"cannot convert {origin}: joint_pos {list(pos)} and joint_vel {list(vel)} fit neither its "
        f"{count} joint_names ([T, {count}] both) nor them after a free root "
        f"([T, {count + ROOT_QPOS_DIM}] and [T, {count + ROOT_QVEL_DIM}])"
    )


def convert_motion(
    arrays: Mapping[str, np.ndarray], model: mujoco.MjModel, origin: str = "the clip"
) -> dict[str, np.ndarray]:
    """The reference-format arrays of a clip with ``joint_names`` and ``body_names`` (module
    docstring), for ``model``; ``origin`` names the clip in messages."""
    needed = ("fps", "joint_pos", "joint_vel", *BODY_KEYS, "joint_names", "body_names")
    absent = [key for key in needed if key not in arrays]
    if absent:
        hint = " (a clip in the reference's format loads as is)" if "body_names" in absent else ""
        lacks = ", ".join(absent)
        raise MotionClipError(f"cannot convert {origin} by name: it lacks {lacks}{hint}")
    joint_names, body_names = np.ravel(arrays["joint_names"]), np.ravel(arrays["body_names"])
    root_pos, root_vel = _joint_columns(arrays, len(joint_names), origin)
    joints = name_index(joint_names, motion_joint_names(model), "joint", origin)
    bodies = name_index(body_names, motion_body_names(model), "body", origin)
    frames = np.shape(arrays["joint_pos"])[0]
    for key, width in BODY_KEYS.items():
        if np.shape(arrays[key]) != (frames, len(body_names), width):
            raise MotionClipError(
                f"cannot convert {origin}: {key} is {list(np.shape(arrays[key]))}, its "
                f"{len(body_names)} body_names and {frames} frames make it "
                f"[{frames}, {len(body_names)}, {width}]"
            )
    out = {"fps": np.asarray(np.ravel(arrays["fps"])[:1], dtype=np.int32)}
    out["joint_pos"] = np.asarray(arrays["joint_pos"])[:, root_pos + joints].astype(np.float32)
    out["joint_vel"] = np.asarray(arrays["joint_vel"])[:, root_vel + joints].astype(np.float32)
    for key in BODY_KEYS:
        out[key] = np.asarray(arrays[key])[:, bodies].astype(np.float32)
    out["joint_names"] = np.asarray(motion_joint_names(model))
    out["body_names"] = np.asarray(motion_body_names(model))
    return out


def convert_motion_file(
    source: str, destination: str | os.PathLike, model: mujoco.MjModel
) -> dict[str, np.ndarray]:
    """Convert ``source`` (a path or ``holosoma:NAME``) for ``model`` into the ``.npz`` file
    ``destination`` (written whole or not at all, at exactly that name); the arrays written."""
    out = convert_motion(read_motion_arrays(source), model, origin=repr(source))
    destination = Path(destination).expanduser()
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **out)
        os.replace(partial, destination)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return out
