"""A rollout as a video: the camera, the offscreen render encoded as an H.264 mp4, and the
video logged into the wandb run the training run logged to.

``write_video`` renders every step of a ``play.Rollout`` with MuJoCo (through the GL backend
``unilab_jax.policy.gl_backends`` chose) and encodes it with ``imageio`` and ``imageio-ffmpeg``
(``imageio_module``: ``VIDEO_EXTRA`` names the extra when they are missing);
``resolve_camera`` reads ``--camera``; ``find_wandb_run`` and ``log_to_wandb`` are ``--wandb``.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import numpy as np

from unilab_jax.policy.gl_backends import RenderError

__all__ = [
    "VIDEO_EXTRA",
    "VIDEO_SUFFIXES",
    "find_wandb_run",
    "imageio_module",
    "log_to_wandb",
    "resolve_camera",
    "write_video",
]

VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov")
VIDEO_EXTRA = "pip install 'unilab-jax[video]' (imageio==2.38.1 imageio-ffmpeg==0.8.1)"


def imageio_module():
    """``imageio.v2`` with its ffmpeg binary, or RenderError naming the extra."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg
    except ImportError as err:
        raise RenderError(
            f"--video needs imageio and imageio-ffmpeg ({err}): {VIDEO_EXTRA}"
        ) from err
    try:
        imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as err:
        raise RenderError(f"imageio-ffmpeg has no ffmpeg binary ({err}): {VIDEO_EXTRA}") from err
    return imageio


def resolve_camera(model: Any, camera: str | None) -> int:
    """A camera index of ``model`` from a name, an index or -1 (free); None: the first
    camera, or the free camera when the model has none."""
    import mujoco

    if camera is None:
        return 0 if model.ncam > 0 else -1
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
    available = ", ".join(
        ["-1 (free)", *(f"{i} ({n})" if n else str(i) for i, n in enumerate(names))]
    )
    try:
        index = int(camera)
    except ValueError:
        index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if index < 0:
            raise ValueError(f"no camera named {camera!r}; cameras: {available}") from None
        return index
    if not -1 <= index < model.ncam:
        raise ValueError(f"no camera {index}; cameras: {available}")
    return index


def write_video(
    path: Path,
    model: Any,
    result: Any,
    *,
    width: int,
    height: int,
    camera: int,
    fps: float,
) -> int:
    """Render every alive step of ``result`` (a ``play.Rollout``), episode after episode, into
    ``path``, with the pose the task asks for (``result.reference``, a tracker's clip frame)
    drawn as a translucent orange ghost; returns the number of frames written."""
    import mujoco
    from mujoco.rendering.classic.renderer import Renderer  # raises what mujoco.Renderer hides

    imageio = imageio_module()
    model = copy.deepcopy(model)  # the render's changes go to a copy of the task's model
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)  # the offscreen buffer
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    scene_option = _robot_visible(model)
    view = _follow(model) if camera == -1 else camera
    data = mujoco.MjData(model)
    ghost = None if getattr(result, "reference", None) is None else mujoco.MjData(model)
    renderer = Renderer(model, height, width)
    frames = 0
    try:
        writer = imageio.get_writer(
            str(path),
            format="FFMPEG",
            mode="I",
            fps=fps,
            codec="libx264",
            pixelformat="yuv420p",
            macro_block_size=1,
            ffmpeg_log_level="error",
        )
        with writer:
            for episode in range(result.alive.shape[1]):
                for t in np.flatnonzero(result.alive[:, episode]):
                    data.qpos[:] = result.qpos[t, episode]
                    data.qvel[:] = result.qvel[t, episode]
                    mujoco.mj_forward(model, data)
                    renderer.update_scene(data, camera=view, scene_option=scene_option)
                    if ghost is not None:
                        _add_ghost(model, ghost, result.reference[t, episode], renderer.scene,
                                   scene_option)  # fmt: skip
                    writer.append_data(renderer.render())
                    frames += 1
    finally:
        with contextlib.suppress(Exception):
            renderer.close()
    return frames


#: The ghost's colour: translucent orange.
GHOST_RGBA = (1.0, 0.55, 0.1, 0.35)


def _add_ghost(model: Any, ghost: Any, qpos: np.ndarray, scene: Any, option: Any) -> None:
    """Add the moving bodies' geoms at ``qpos`` to ``scene``, translucent (:data:`GHOST_RGBA`)."""
    import mujoco

    ghost.qpos[:] = qpos
    mujoco.mj_kinematics(model, ghost)
    first = scene.ngeom
    mujoco.mjv_addGeoms(
        model, ghost, option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC, scene
    )
    for i in range(first, scene.ngeom):
        scene.geoms[i].rgba[:] = GHOST_RGBA


def _robot_visible(model: Any) -> Any:
    """The scene option that shows the robot: MuJoCo's default (geom groups 0-2) when every
    body with geoms has one there; else, as in models built for physics only (the reference's
    G1 and Go2: collision primitives in group 3, no meshes; its Sharpa hand: collision meshes in
    group 3 beside an object drawn in group 0), also the groups of the bodies drawn by none of
    their geoms, those bodies' geoms made opaque (on ``model``, a copy)."""
    import mujoco

    option = mujoco.MjvOption()
    body = model.geom_bodyid
    drawn = np.bincount(body, weights=model.geom_group < 3, minlength=model.nbody) > 0
    undrawn = (np.bincount(body, minlength=model.nbody) > 0) & ~drawn
    undrawn[0] = False  # the world's geoms (floor, walls) stay as the model draws them
    if not np.any(undrawn):
        return option
    hidden = undrawn[body]  # the geoms of those bodies
    for group in np.unique(model.geom_group[hidden]):
        option.geomgroup[group] = 1
    model.geom_rgba[hidden, 3] = 1.0
    grey = hidden & np.all(model.geom_rgba[:, :3] == 0.5, axis=1)  # MuJoCo's default colour,
    model.geom_rgba[grey, :3] = (0.35, 0.55, 0.8)  # the floor's too: blue to stand out on it
    if model.nlight == 0:  # the headlight alone, at MuJoCo's default, leaves it dim
        model.vis.headlight.ambient[:] = 0.4
        model.vis.headlight.diffuse[:] = 0.7
    return option


def _follow(model: Any) -> Any:
    """The free camera (``-1``): for a floating robot (a free joint at its root), one that
    follows it from the front left, as the tasks' own tracking cameras do; for a robot fixed in
    place that handles a free body (the in-hand task's hand and object), one held on the box
    around the robot's moving parts and that body where they start (MuJoCo's own free
    camera frames the whole scene, floor included: the hand was a few pixels far off); else
    MuJoCo's."""
    import mujoco

    free = [
        b
        for b in range(1, model.nbody)
        if model.body_jntnum[b] >= 1
        and model.jnt_type[model.body_jntadr[b]] == mujoco.mjtJoint.mjJNT_FREE
    ]
    if not free:
        return -1
    view = mujoco.MjvCamera()
    if free[0] == 1:
        view.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        view.trackbodyid = 1
        view.distance = 2.5 * model.stat.extent
        view.azimuth, view.elevation = 145.0, -15.0
        return view
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    moving = data.xpos[model.body_weldid != 0]  # bodies with joints of their own or below one
    low, high = moving.min(axis=0), moving.max(axis=0)
    view.type = mujoco.mjtCamera.mjCAMERA_FREE
    view.lookat[:] = (low + high) / 2
    view.distance = 2.4 * max(float(np.linalg.norm(high - low)) / 2, 0.05)
    view.azimuth, view.elevation = -35.0, -40.0
    return view


def find_wandb_run(run: str | Path) -> tuple[Path, dict]:
    """``(run dir, record)`` of the ``wandb_run.json`` in ``run`` or the folders above it (a
    checkpoint's folder sits two levels below its run dir)."""
    path = Path(run).resolve()
    for folder in (path, *path.parents[:2]):
        record = folder / "wandb_run.json"
        if record.is_file():
            return folder, json.loads(record.read_text())
    raise FileNotFoundError(
        f"--wandb: no wandb_run.json in {run} or above it: only runs trained with --logger "
        "wandb record their wandb run"
    )


def log_to_wandb(record: dict, run_dir: Path, video: Path, iteration: int, returns) -> str:
    """Log ``video`` (as ``video/policy``) and the episodes' mean return (``video/mean_return``)
    into the wandb run ``record`` names, resuming it; returns where wandb keeps it."""
    import wandb

    run = wandb.init(
        id=record["id"],
        project=record.get("project") or None,
        entity=record.get("entity") or None,
        mode=record.get("mode") or None,
        dir=str(run_dir),
        resume="allow",
    )
    try:
        run.log(
            {
                "video/policy": wandb.Video(str(video), format=video.suffix.lstrip(".").lower()),
                "video/mean_return": float(np.mean(returns)),
                "video/iteration": iteration,
            }
        )
        return str(getattr(run, "url", None) or run.dir)
    finally:
        run.finish()
