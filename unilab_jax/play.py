"""``python -m unilab_jax.play RUN --video out.mp4``: watch a trained policy.

RUN is a run's log dir (as written by ``python -m unilab_jax.train``), its ``checkpoints/``
folder, or one checkpoint's folder (``unilab_jax.policy.load_policy``). The deterministic
policy plays ``--episodes`` episodes (in parallel, on MJX) of the run's task with the run's env
overrides, for at most ``--steps`` control steps each (default: the task's episode length); the
return of each episode is printed. With ``--video`` the episodes are rendered offscreen with
MuJoCo, one frame per control step (the state the policy acted on), one episode after another,
and encoded as an H.264 mp4 at ``--fps`` (default: the task's control rate, ``1 / control_dt``).

Examples::

    python -m unilab_jax.play logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx
    python -m unilab_jax.play RUN --video out.mp4
    python -m unilab_jax.play RUN --wandb
    python -m unilab_jax.play RUN --video out.mp4 --episodes 3 --steps 300 --width 1280 \\
        --height 720 --camera -1 --fps 30 --step 500 --seed 1

With ``--wandb`` the video (``video/policy``) and the episodes' mean return
(``video/mean_return``) are logged into the wandb run the training run logged to (recorded in
``RUN/wandb_run.json`` when it was trained with ``--logger wandb``; an offline run stays
offline), and the video is kept as ``RUN/videos/iteration_<N>.mp4`` unless ``--video`` names
another file.

``--camera`` is a camera name or index of the task's MJCF, or -1 for MuJoCo's free camera
(default: the model's first camera, the free camera when it has none).

OpenGL backend: MuJoCo renders offscreen through EGL (GPU or Mesa), OSMesa (software) or GLFW
(needs a display), chosen by the ``MUJOCO_GL`` environment variable before ``mujoco`` creates a
GL context. When ``MUJOCO_GL`` is not set, ``egl``, ``osmesa`` and ``glfw`` are tried in that
order, each in a short-lived subprocess (a failed backend cannot be undone inside a process:
PyOpenGL fixes its platform on first use), and the first that renders is used. When none does,
the command exits with status 2 and one line saying what each backend failed on and what to
install. A ``MUJOCO_GL`` set by the user is used as is; its failure is reported the same way.

Encoding needs ``imageio`` and ``imageio-ffmpeg`` (which ships an ffmpeg binary; no system
ffmpeg is needed): ``pip install 'unilab-jax[video]'``.

Supported envs: our registered tasks, ``playground/<Name>`` and ``brax/<name>`` (Brax envs
built from MJCF, whose ``sys.mj_model`` is set).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "GL_BACKENDS",
    "RenderError",
    "Rollout",
    "choose_gl_backend",
    "probe_gl_backend",
    "render_source",
    "rollout",
]

#: Backends tried, in order, when ``MUJOCO_GL`` is not set.
GL_BACKENDS = ("egl", "osmesa", "glfw")
VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov")
VIDEO_EXTRA = "pip install 'unilab-jax[video]' (imageio==2.38.1 imageio-ffmpeg==0.8.1)"
_INSTALL_HINT = (
    "install EGL (Debian/Ubuntu: apt-get install libegl1 libgl1, with a GPU driver or Mesa's "
    "libegl-mesa0) or OSMesa for software rendering (apt-get install libosmesa6), or run under "
    "a display (e.g. xvfb-run) for glfw; or set MUJOCO_GL to a backend that works here"
)
_DISABLED = ("disable", "disabled", "off", "false", "0")


class RenderError(RuntimeError):
    """Rendering or encoding cannot run here (the message says why and what to install)."""


# ------------------------------------------------------------------------- GL backend
# A tiny model rendered in a fresh interpreter; prints "ok" or "fail <reason>" as its last line.
_PROBE = r"""
import ctypes.util, os, sys, warnings
backend = os.environ.get("MUJOCO_GL", "")
libs = {"egl": "EGL", "osmesa": "OSMesa"}
if backend in libs and ctypes.util.find_library(libs[backend]) is None:
    print(f"fail lib{libs[backend]}.so not found"); sys.stdout.flush(); os._exit(0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        import mujoco
        # Directly: ``mujoco.Renderer`` is silently absent when its GL context fails to import.
        from mujoco.rendering.classic.renderer import Renderer
        xml = "<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        r = Renderer(m, 8, 8)
        r.update_scene(d)
        px = r.render()
        assert px.shape == (8, 8, 3), px.shape
        r.close()
        print("ok")
    except BaseException as err:
        try:
            text = str(err)
        except Exception:
            text = ""
        text = " ".join(text.split())[:120]
        notes = [" ".join(str(w.message).split()) for w in caught][:1]
        reason = f"{type(err).__name__}: {text}" if text else type(err).__name__
        print("fail " + "; ".join([*notes, reason]))
sys.stdout.flush()
os._exit(0)
"""


def probe_gl_backend(backend: str, timeout: float = 60.0) -> str | None:
    """None when MuJoCo renders with ``MUJOCO_GL=backend`` in a fresh process, else why not
    (the answer is kept for the rest of this process)."""
    if backend not in _PROBED:
        _PROBED[backend] = _probe(backend, timeout)
    return _PROBED[backend]


_PROBED: dict[str, str | None] = {}


def _probe(backend: str, timeout: float) -> str | None:
    env = {**os.environ, "MUJOCO_GL": backend}
    try:
        # close_fds=False lets Python use posix_spawn rather than fork (JAX warns on fork).
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            close_fds=False,
        )
    except subprocess.TimeoutExpired:
        return f"no frame within {timeout:.0f} s"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if last == "ok":
        return None
    if last.startswith("fail "):
        return last[len("fail ") :]
    tail = " ".join(proc.stderr.strip().splitlines()[-1:])
    return f"exit status {proc.returncode}" + (f": {tail}" if tail else "")


def choose_gl_backend() -> tuple[str | None, dict[str, str]]:
    """``(backend, failures)``: the user's ``MUJOCO_GL`` when set, else the first of
    :data:`GL_BACKENDS` that renders; ``backend`` is None when none does, and ``failures``
    maps every backend tried and failed to its reason."""
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested:
        if requested in _DISABLED:
            return None, {requested: f"MUJOCO_GL={requested} turns MuJoCo's rendering off"}
        reason = probe_gl_backend(requested)
        return (requested, {}) if reason is None else (None, {requested: reason})
    failures: dict[str, str] = {}
    for backend in GL_BACKENDS:
        reason = probe_gl_backend(backend)
        if reason is None:
            return backend, failures
        failures[backend] = reason
    return None, failures


def no_backend_message(failures: dict[str, str]) -> str:
    """One line: what was tried, why each failed, what to do."""
    tried = "; ".join(f"{b} ({why})" for b, why in failures.items())
    if os.environ.get("MUJOCO_GL", "").strip():
        return (
            f"MuJoCo cannot render offscreen with MUJOCO_GL={os.environ['MUJOCO_GL']}: {tried}; "
            f"unset MUJOCO_GL to try {', '.join(GL_BACKENDS)} in turn, or {_INSTALL_HINT}"
        )
    return f"no OpenGL backend renders offscreen here (MUJOCO_GL tried: {tried}); {_INSTALL_HINT}"


def use_gl_backend(backend: str) -> None:
    """Make ``mujoco.Renderer`` create its GL context with ``backend`` in this process."""
    if "mujoco" not in sys.modules:
        os.environ["MUJOCO_GL"] = backend  # read when mujoco is imported
        return
    from mujoco.rendering.classic import gl_context  # what mujoco.Renderer reads

    if getattr(gl_context, "_MUJOCO_GL", None) == backend:
        return
    # mujoco was imported before the choice (MUJOCO_GL unset: glfw): swap in the chosen one.
    name = backend if backend in ("egl", "osmesa") else "glfw"
    try:
        module = importlib.import_module(f"mujoco.{name}")
    except (ImportError, OSError, AttributeError) as err:
        raise RenderError(
            f"the {backend} GL backend renders in a fresh process but cannot be set up in this "
            f"one, which imported mujoco/PyOpenGL for another backend ({err}); set "
            f"MUJOCO_GL={backend} before importing mujoco"
        ) from err
    gl_context.GLContext = module.GLContext
    os.environ["MUJOCO_GL"] = backend


# ------------------------------------------------------------------------- what to render
@dataclass(frozen=True)
class RenderSource:
    """How to draw an env: its MuJoCo model, ``physics -> (qpos, qvel)`` (jit-able, one env)
    and the seconds per control step."""

    model: Any
    positions: Callable[[Any], tuple[Any, Any]]
    control_dt: float


def render_source(env: Any) -> RenderSource:
    """The :class:`RenderSource` of one of our envs, a Playground or a Brax adapter."""
    from unilab_jax.envs.adapters.brax import BraxEnv
    from unilab_jax.envs.adapters.playground import PlaygroundEnv
    from unilab_jax.envs.base import Env

    if isinstance(env, Env):
        return RenderSource(
            env.task.model, lambda data: (data.qpos, data.qvel), float(env.task.control_dt)
        )

    def foreign_state(physics):
        return physics if env.full_reset else physics["env"]

    if isinstance(env, PlaygroundEnv):
        return RenderSource(
            env.foreign.mj_model,
            lambda physics: (foreign_state(physics).data.qpos, foreign_state(physics).data.qvel),
            float(env.foreign.dt),
        )
    if isinstance(env, BraxEnv):
        model = getattr(env.foreign.sys, "mj_model", None)
        if model is None:
            raise RenderError(f"{env.name}: its Brax System carries no mj_model to render")

        def positions(physics):
            pipeline = foreign_state(physics).pipeline_state
            qpos = getattr(pipeline, "qpos", None)
            qvel = getattr(pipeline, "qvel", None)
            return (pipeline.q if qpos is None else qpos), (pipeline.qd if qvel is None else qvel)

        return RenderSource(model, positions, float(env.foreign.dt))
    raise RenderError(
        f"cannot render {getattr(env, 'name', env)!r} ({type(env).__name__}): rendering supports "
        "our registered tasks, playground/<Name> and brax/<name> envs"
    )


# ------------------------------------------------------------------------- rollout
@dataclass(frozen=True)
class Rollout:
    """Deterministic episodes played in parallel: ``returns``/``lengths`` ``[E]``; ``qpos``
    ``[T, E, nq]``, ``qvel`` ``[T, E, nv]`` before each step; ``alive [T, E]`` marks the steps
    of each episode (false after it ended)."""

    returns: np.ndarray
    lengths: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    alive: np.ndarray


def rollout(policy: Any, env: Any, source: RenderSource, episodes: int, steps: int, seed: int):
    """Play ``episodes`` episodes of at most ``steps`` control steps with the deterministic
    ``policy`` from fresh resets drawn from ``seed``; returns a :class:`Rollout`."""
    import jax
    import jax.numpy as jnp

    act = policy.agent.act

    def run(agent_state, key):
        state = jax.vmap(env.reset)(jax.random.split(key, episodes))

        def body(carry, _):
            env_state, alive, total, length = carry
            qpos, qvel = jax.vmap(source.positions)(env_state.physics)
            actions = act(agent_state, env_state.obs["obs"])
            nxt = jax.vmap(env.step)(env_state, actions)
            total = total + jnp.where(alive, nxt.reward, 0.0)
            length = length + alive.astype(jnp.int32)
            record = (qpos, qvel, alive)
            alive = alive & ~(nxt.terminated | nxt.truncated)
            return (nxt, alive, total, length), record

        zeros = jnp.zeros((episodes,), jnp.float32)
        init = (state, jnp.ones((episodes,), bool), zeros, zeros.astype(jnp.int32))
        (_, _, total, length), (qpos, qvel, alive) = jax.lax.scan(body, init, None, length=steps)
        return total, length, qpos, qvel, alive

    out = jax.jit(run)(policy.state, jax.random.PRNGKey(seed))
    return Rollout(*(np.asarray(x) for x in out))


def rollout_mujoco(policy: Any, env: Any, episodes: int, steps: int, seed: int) -> Rollout:
    """:func:`rollout` on C MuJoCo (the physics a ``physics="mujoco"`` run trained on): the
    evaluation's episodes (``envs.episodes.mujoco_episodes``, keyed by ``seed``), qpos/qvel before
    each step."""
    import jax

    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.vec_env import MujocoVecEnv

    vec = MujocoVecEnv(env.task, policy.env, episodes, seed)
    try:
        with policy.precision():
            out = mujoco_episodes(
                vec, jax.jit(policy.agent.act), policy.state, seed, steps=steps, positions=True
            )
    finally:
        vec.close()
    return Rollout(out["returns"], out["lengths"], out["qpos"], out["qvel"], out["alive"])


# ------------------------------------------------------------------------- video
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
    result: Rollout,
    *,
    width: int,
    height: int,
    camera: int,
    fps: float,
) -> int:
    """Render every alive step of ``result``, episode after episode, into ``path``; returns
    the number of frames written."""
    import mujoco
    from mujoco.rendering.classic.renderer import Renderer  # raises what mujoco.Renderer hides

    imageio = imageio_module()
    if model.vis.global_.offwidth < width or model.vis.global_.offheight < height:
        model = copy.deepcopy(model)  # a larger offscreen buffer, on a copy of the task's model
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
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
                    renderer.update_scene(data, camera=camera)
                    writer.append_data(renderer.render())
                    frames += 1
    finally:
        with contextlib.suppress(Exception):
            renderer.close()
    return frames


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


if __name__ == "__main__":  # python -m unilab_jax.play starts the program, unilab_jax.cli.play
    import runpy

    runpy.run_module("unilab_jax.cli.play", run_name="__main__")
