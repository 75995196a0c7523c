"""Motion clips for the tracking tasks: one or more clips in the reference's format
(``layout.py``), checked against the task's model and concatenated along frames.

``load_motion_clips(motion_file, model)`` takes a path, ``holosoma:NAME`` (a clip of the
``holosoma`` package, converted by name in memory: ``sources.py``, ``convert.py``), or a
sequence of them; :data:`DEFAULT_MOTION_FILE` is holosoma's default tracking clip, so a fresh
install needs no extra step. As the reference's loader: every clip shares one fps and layout,
``clip_offsets`` are the clips' first frames in the concatenation. Unlike it, a file is checked
against the model before use: a clip in another layout (holosoma's raw ``[T, 36]`` joints, 51
bodies) or whose body axis is not the model's bodies is refused in one line that gives the
command to convert it by name (the reference's loader takes it and fails at the first reset,
or silently reads other bodies' data). A clip whose bodies are not where the model's forward
kinematics puts them from the clip's joint angles and root pose, on 8 frames, is refused too:
quaternions read in another order (xyzw), joints or bodies in another order; a sanity check
with tolerances of 5 cm and 0.1 rad (holosoma's clips are within 1.1 cm and 7e-4 rad of our
G1), so bodies that move together (two wrist links) can still pass swapped.

Deviations from the reference: the checks above; the default clip (the reference downloads
``motions/g1/dance1_subject2_part.npz`` from its Hugging Face dataset at run time, which this
project cannot reach; holosoma's is the clip the reference's tracking SAC was first trained on,
upstream PR #319); nothing is downloaded.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from unilab_jax.envs.motion.convert import convert_motion
from unilab_jax.envs.motion.layout import (
    BODY_KEYS,
    CLIP_KEYS,
    MotionClipError,
    motion_body_names,
    motion_joint_names,
)
from unilab_jax.envs.motion.sources import is_holosoma_name, read_motion_arrays

__all__ = ["DEFAULT_MOTION_FILE", "MotionClips", "load_motion_clips"]

#: Holosoma's default whole-body tracking clip (box lifting, 325 frames at 50 fps), converted
#: by name when loaded; needs the ``holosoma`` package (``pip install --no-deps holosoma==0.0.3``).
DEFAULT_MOTION_FILE = "holosoma:sub3_largebox_003_mj"

#: A quaternion further than this from unit norm is not a rotation (float32 files: ~1e-7).
_UNIT_TOLERANCE = 1e-3
#: Frames of a clip checked against the model's kinematics, and how far a body may be from where
#: the model puts it: holosoma's clips are within 1.1 cm and 7e-4 rad of our G1 (their model's
#: torso and arms sit up to 1 cm off ours); quaternions read xyzw are off by radians.
_KINEMATICS_FRAMES = 8
_KINEMATICS_TOLERANCE = (0.05, 0.1)  # m, rad


@dataclass(frozen=True)
class MotionClips:
    """Clips concatenated along frames (F frames in all, C clips); float32 arrays, world frame,
    quaternions wxyz, bodies indexed by MuJoCo body id (``layout.motion_body_names``)."""

    fps: int
    """Frames per second of every clip (the tracker advances one frame per control step)."""
    joint_pos: np.ndarray
    """[F, J] the model's joints in joint order, without the root's free joint."""
    joint_vel: np.ndarray
    """[F, J]."""
    body_pos_w: np.ndarray
    """[F, B, 3]."""
    body_quat_w: np.ndarray
    """[F, B, 4] wxyz."""
    body_lin_vel_w: np.ndarray
    """[F, B, 3]."""
    body_ang_vel_w: np.ndarray
    """[F, B, 3] world frame."""
    clip_lengths: np.ndarray
    """[C] int32 frames per clip."""
    clip_offsets: np.ndarray
    """[C] int32 each clip's first frame in the concatenation."""
    files: tuple[str, ...]
    """The clips as given (paths or ``holosoma:NAME``), in order."""

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def num_clips(self) -> int:
        return int(self.clip_lengths.shape[0])


def load_motion_clips(motion_file: str | Sequence[str], model: mujoco.MjModel) -> MotionClips:
    """Load one clip or several (module docstring) for ``model``; a clip that cannot be used
    is refused with a :class:`~unilab_jax.envs.motion.layout.MotionClipError` (one line)."""
    files = _files(motion_file)
    clips = [_load_clip(source, model) for source in files]
    for source, clip in zip(files[1:], clips[1:], strict=True):
        if clip["fps"] != clips[0]["fps"]:
            raise MotionClipError(
                f"motion file {source!r} has fps {clip['fps']}, the first ({files[0]!r}) "
                f"{clips[0]['fps']}: all clips must share one fps"
            )
    lengths = np.asarray([clip["joint_pos"].shape[0] for clip in clips], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    joined = {key: np.concatenate([clip[key] for clip in clips]) for key in CLIP_KEYS[1:]}
    return MotionClips(
        fps=clips[0]["fps"], **joined, clip_lengths=lengths, clip_offsets=offsets, files=files
    )


def _files(motion_file: str | os.PathLike | Sequence[str | os.PathLike]) -> tuple[str, ...]:
    if isinstance(motion_file, str | os.PathLike):
        motion_file = [motion_file]
    files = tuple(os.fspath(source) for source in motion_file)
    if not files or not all(files):
        raise MotionClipError(f"motion_file must name one clip or more, got {motion_file!r}")
    return files


def _load_clip(source: str, model: mujoco.MjModel) -> dict:
    """One clip's arrays (float32, ``fps`` an int), checked against ``model``."""
    arrays = read_motion_arrays(source)
    if is_holosoma_name(source):
        arrays = convert_motion(arrays, model, origin=repr(source))
    origin = f"motion file {source!r}"
    absent = [key for key in CLIP_KEYS if key not in arrays]
    if absent:
        raise MotionClipError(f"{origin} lacks {', '.join(absent)} of the reference's format")
    mismatch = _layout_mismatch(arrays, model)
    if mismatch:
        written = f"{Path(source).stem}_g1.npz"  # in the current folder
        command = shlex.join(["unilab-jax", "convert-motion", source, written])
        raise MotionClipError(f"{origin} is not in the model's layout: {mismatch}; convert it by "
                              f"name first: {command}")  # fmt: skip
    clip = _checked(arrays, origin)
    disagreement = _kinematics_mismatch(clip, model)
    if disagreement:
        raise MotionClipError(f"{origin} does not fit the model: {disagreement}")
    return clip


def _layout_mismatch(arrays: Mapping[str, np.ndarray], model: mujoco.MjModel) -> str:
    """What differs between the clip's joint and body axes and the model's ('' when none)."""
    joints, bodies = motion_joint_names(model), motion_body_names(model)
    problems = []
    columns = [np.shape(arrays[key])[1:2] for key in ("joint_pos", "joint_vel")]
    if columns != [(len(joints),)] * 2:
        sizes = " and ".join(f"[T, {c[0] if c else '?'}]" for c in columns)
        problems.append(f"joint_pos and joint_vel are {sizes}, the model has {len(joints)} joints")
    body_axes = {np.shape(arrays[key])[1:2] for key in BODY_KEYS}
    if body_axes != {(len(bodies),)}:
        counts = "/".join(str(axis[0] if axis else "?") for axis in sorted(body_axes))
        problems.append(f"the body arrays hold {counts} bodies, the model {len(bodies)} "
                        f"(world, {bodies[1]}, ... in MuJoCo body-id order)")  # fmt: skip
    for kind, names in (("joint", joints), ("body", bodies)):
        given = tuple(map(str, np.ravel(arrays.get(f"{kind}_names", names))))
        if not problems and given != names:
            first = next(i for i in range(len(given) + 1) if given[i : i + 1] != names[i : i + 1])
            pair = [f"{n[first]!r}" if first < len(n) else "nothing" for n in (given, names)]
            problems.append(f"its {kind}_names differ from the model's at index {first} "
                            f"({pair[0]} for {pair[1]})")  # fmt: skip
    return "; ".join(problems)


def _checked(arrays: Mapping[str, np.ndarray], origin: str) -> dict:
    """The clip's arrays as float32 (``fps`` an int) after checking frames, shapes and values."""
    fps = np.ravel(arrays["fps"])
    numeric = np.issubdtype(fps.dtype, np.number)
    if fps.size != 1 or not numeric or not fps[0] > 0 or fps[0] != int(fps[0]):
        raise MotionClipError(f"{origin}: fps must be one positive integer, got {fps.tolist()}")
    clip = {"fps": int(fps[0])}
    frames = np.shape(arrays["joint_pos"])[0]
    if frames == 0:
        raise MotionClipError(f"{origin} holds no frames")
    tails = {"joint_pos": (), "joint_vel": (), **{key: (n,) for key, n in BODY_KEYS.items()}}
    for key, tail in tails.items():
        value = np.asarray(arrays[key])
        if value.shape[:1] != (frames,) or value.shape[2:] != tail:
            expected = [frames, "J" if key[:5] == "joint" else "B", *tail]
            raise MotionClipError(f"{origin}: {key} is {list(value.shape)}, expected "
                                  f"{expected} ({frames} frames)".replace("'", ""))  # fmt: skip
        if not np.all(np.isfinite(value)):
            raise MotionClipError(f"{origin}: {key} holds non-finite values")
        clip[key] = value.astype(np.float32)
    error = float(np.max(np.abs(np.linalg.norm(clip["body_quat_w"], axis=-1) - 1.0)))
    if error > _UNIT_TOLERANCE:
        raise MotionClipError(f"{origin}: body_quat_w are not unit quaternions (|norm - 1| up to "
                              f"{error:.3g}); the format is wxyz rotations")  # fmt: skip
    return clip


def _kinematics_mismatch(clip: Mapping[str, np.ndarray], model: mujoco.MjModel) -> str:
    """Where a body of the clip is not where the model's forward kinematics puts it from the
    clip's joint angles and its root body's pose, on a few frames ('' when all agree). Checks
    the joint order, the body order and the wxyz quaternions of files without names too;
    skipped for models with joints other than one free root and hinges or slides."""
    kinds, types = model.jnt_type, mujoco.mjtJoint  # compared as ints (enum == int32 fails)
    free = np.flatnonzero(kinds == int(types.mjJNT_FREE))
    joints = np.flatnonzero(kinds != int(types.mjJNT_FREE))
    simple = np.isin(kinds[joints], [int(types.mjJNT_HINGE), int(types.mjJNT_SLIDE)])
    if free.size > 1 or not simple.all():
        return ""
    data, bodies = mujoco.MjData(model), clip["body_pos_w"].shape[1]
    count = clip["joint_pos"].shape[0]
    for frame in np.unique(np.linspace(0, count - 1, _KINEMATICS_FRAMES).astype(int)):
        data.qpos[:] = model.qpos0
        data.qpos[model.jnt_qposadr[joints]] = clip["joint_pos"][frame]
        if free.size:
            root, at = model.jnt_bodyid[free[0]], model.jnt_qposadr[free[0]]
            data.qpos[at : at + 3] = clip["body_pos_w"][frame, root]
            data.qpos[at + 3 : at + 7] = clip["body_quat_w"][frame, root]
        mujoco.mj_kinematics(model, data)
        distance = np.linalg.norm(clip["body_pos_w"][frame] - data.xpos[:bodies], axis=-1)
        cosine = np.abs(np.sum(clip["body_quat_w"][frame] * data.xquat[:bodies], axis=-1))
        angle = 2.0 * np.arccos(np.minimum(cosine, 1.0))
        off = (distance > _KINEMATICS_TOLERANCE[0]) | (angle > _KINEMATICS_TOLERANCE[1])
        if off.any():
            body = int(np.flatnonzero(off)[0])
            return (
                f"at frame {frame}, body {model.body(body).name!r} is {distance[body]:.3f} m and "
                f"{angle[body]:.2f} rad from where the model's kinematics puts it from the clip's "
                f"joint angles and root pose (joints in the model's order, bodies in MuJoCo "
                f"body-id order, quaternions wxyz)"
            )
    return ""
