"""``unilab-jax play RUN --video out.mp4``: watch a trained policy.

RUN is a run's log dir (as written by ``python -m unilab_jax.train``), its ``checkpoints/``
folder, or one checkpoint's folder (``unilab_jax.policy.load_policy``). The deterministic
policy plays ``--episodes`` episodes (in parallel, on MJX) of the run's task with the run's env
overrides, for at most ``--steps`` control steps each (default: the task's episode length); the
return of each episode is printed. With ``--video`` the episodes are rendered offscreen with
MuJoCo, one frame per control step (the state the policy acted on), one episode after another,
and encoded as an H.264 mp4 at ``--fps`` (default: the task's control rate, ``1 / control_dt``).

Examples::

    unilab-jax play logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx
    unilab-jax play RUN --video out.mp4
    unilab-jax play RUN --wandb
    unilab-jax play RUN --video out.mp4 --episodes 3 --steps 300 --width 1280 \\
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

This module holds what is played: how an env is drawn (``render_source``), the deterministic
episodes (``rollout`` on MJX, ``rollout_mujoco`` on C MuJoCo) and the whole command
(``play_run``: checks, episodes, video, wandb, as a :class:`Played`). The GL backend
choice is ``unilab_jax.policy.gl_backends``, the video and ``--wandb`` ``unilab_jax.policy.video``
(their
names are importable from here too); the command line is ``unilab_jax.cli.play``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unilab_jax.algos.agent import actor_observation, observer
from unilab_jax.errors import CheckpointError
from unilab_jax.policy.gl_backends import (
    GL_BACKENDS,
    RenderError,
    choose_gl_backend,
    no_backend_message,
    probe_gl_backend,
    use_gl_backend,
)
from unilab_jax.policy.video import (
    VIDEO_EXTRA,
    VIDEO_SUFFIXES,
    find_wandb_run,
    imageio_module,
    log_to_wandb,
    resolve_camera,
    write_video,
)

__all__ = [
    "GL_BACKENDS",
    "VIDEO_EXTRA",
    "VIDEO_SUFFIXES",
    "RenderError",
    "PLAY_ERRORS",
    "Played",
    "RenderSource",
    "Rollout",
    "choose_gl_backend",
    "find_wandb_run",
    "imageio_module",
    "log_to_wandb",
    "no_backend_message",
    "play_checks",
    "play_policy",
    "play_run",
    "probe_gl_backend",
    "render_source",
    "resolve_camera",
    "rollout",
    "rollout_mujoco",
    "use_gl_backend",
    "write_video",
]


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
    from unilab_jax.envs.mujoco_task_env import MujocoTaskEnv

    if isinstance(env, Env | MujocoTaskEnv):  # our tasks (MujocoTaskEnv: C MuJoCo only)
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
    of each episode (false after it ended); ``reference`` ``[T, E, nq]``: the pose the task asks
    for at each step (a tracker's clip frame; ``Task.reference_qpos``), drawn as a ghost."""

    returns: np.ndarray
    lengths: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    alive: np.ndarray
    reference: np.ndarray | None = None

    def episode(self, index: int) -> Rollout:
        """Episode ``index`` alone (``E = 1``)."""
        one = slice(index, index + 1)
        return Rollout(
            self.returns[one], self.lengths[one], self.qpos[:, one], self.qvel[:, one],
            self.alive[:, one], None if self.reference is None else self.reference[:, one],
        )  # fmt: skip


def rollout(policy: Any, env: Any, source: RenderSource, episodes: int, steps: int, seed: int):
    """Play ``episodes`` episodes of at most ``steps`` control steps with the deterministic
    ``policy`` from fresh resets drawn from ``seed``; returns a :class:`Rollout`."""
    import jax
    import jax.numpy as jnp

    from unilab_jax.envs.task import Task

    act = policy.agent.act
    task = getattr(env, "task", None)
    wants = task is not None and type(task).reference_qpos is not Task.reference_qpos

    def run(agent_state, key):
        state = jax.vmap(env.reset)(jax.random.split(key, episodes))

        def body(carry, _):
            env_state, alive, total, length = carry
            qpos, qvel = jax.vmap(source.positions)(env_state.physics)
            actions = act(agent_state, actor_observation(policy.agent, env_state.obs))
            nxt = env.step_batch(env_state, actions)
            total = total + jnp.where(alive, nxt.reward, 0.0)
            length = length + alive.astype(jnp.int32)
            reference = jax.vmap(task.reference_qpos)(env_state.task_state) if wants else qpos
            record = (qpos, qvel, alive, reference)
            alive = alive & ~(nxt.terminated | nxt.truncated)
            return (nxt, alive, total, length), record

        zeros = jnp.zeros((episodes,), jnp.float32)
        init = (state, jnp.ones((episodes,), bool), zeros, zeros.astype(jnp.int32))
        (_, _, total, length), records = jax.lax.scan(body, init, None, length=steps)
        return total, length, *records

    *out, reference = (np.asarray(x) for x in jax.jit(run)(policy.state, jax.random.PRNGKey(seed)))
    return Rollout(*out, reference=reference if wants else None)


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
                vec, jax.jit(policy.agent.act), policy.state, seed, steps=steps, positions=True,
                observe=observer(policy.agent),
            )  # fmt: skip
    finally:
        vec.close()
    return Rollout(
        out["returns"], out["lengths"], out["qpos"], out["qvel"], out["alive"], out.get("reference")
    )


# ------------------------------------------------------------------------- the command
@dataclass(frozen=True)
class Played:
    """What :func:`play_run` did: the policy, its episodes, and (with a video) the file, its
    frames, rate, camera and GL backend, and the wandb run it was logged to."""

    policy: Any
    result: Rollout
    video: Path | None = None
    frames: int = 0
    fps: float = 0.0
    camera: int = -1
    backend: str | None = None
    wandb_run: str | None = None
    wandb_where: str | None = None


def play_checks(
    *, episodes: int, steps: int | None, fps: float | None, wandb: bool, video: Path | None,
    width: int, height: int,
) -> None:  # fmt: skip
    """What makes a play request unplayable, found before anything loads: ``ValueError``."""
    if episodes < 1 or (steps is not None and steps < 1):
        raise ValueError(f"--episodes and --steps must be >= 1, got {episodes} and {steps}")
    if fps is not None and not fps > 0:
        raise ValueError(f"--fps must be > 0, got {fps}")
    if wandb and importlib.util.find_spec("wandb") is None:
        raise ValueError("--wandb needs wandb: pip install 'unilab-jax[wandb]'")
    if video and (width < 2 or height < 2 or width % 2 or height % 2):
        raise ValueError(
            f"--width and --height must be even and >= 2 for H.264 (yuv420p), got {width}x{height}"
        )
    if video and Path(video).suffix.lower() not in VIDEO_SUFFIXES:
        raise ValueError(f"--video must end in {', '.join(VIDEO_SUFFIXES)}, got {video}")


def play_run(
    run: str, *, video: Path | None = None, episodes: int = 1, steps: int | None = None,
    width: int = 640, height: int = 480, camera: str | None = None, fps: float | None = None,
    step: int | str | None = None, seed: int = 0, physics: str | None = None,
    wandb: bool = False,
) -> Played:  # fmt: skip
    """``unilab-jax play`` (the module docstring): play ``run``'s deterministic policy, render
    the episodes into ``video`` and log them to the run's wandb run when asked. Bad input, a
    missing GL backend or a failed render raise one of :data:`PLAY_ERRORS` with one line."""
    from unilab_jax.policy.load import load_policy

    video = None if video is None else Path(video)
    play_checks(episodes=episodes, steps=steps, fps=fps, wandb=wandb, video=video, width=width,
                height=height)  # fmt: skip
    wandb_dir, record = find_wandb_run(run) if wandb else (None, None)
    backend = _gl_backend() if video or wandb else None  # before anything imports mujoco
    policy = load_policy(run, step)
    if wandb and video is None:
        video = wandb_dir / "videos" / f"iteration_{policy.iteration}.mp4"
    played = play_policy(policy, video=video, episodes=episodes, steps=steps, width=width,
                         height=height, camera=camera, fps=fps, seed=seed, physics=physics,
                         backend=backend)  # fmt: skip
    if wandb:
        where = log_to_wandb(record, wandb_dir, video, policy.iteration, played.result.returns)
        played = dataclasses.replace(played, wandb_run=record["id"], wandb_where=where)
    return played


def play_policy(
    policy: Any, *, video: Path | None = None, episodes: int = 1, steps: int | None = None,
    width: int = 640, height: int = 480, camera: str | None = None, fps: float | None = None,
    seed: int = 0, physics: str | None = None, backend: str | None = None,
    pick: Callable[[Rollout], int] | None = None,
) -> Played:  # fmt: skip
    """Play a loaded ``policy`` (``unilab_jax.policy.load.Policy``, from disk or built in
    memory) as :func:`play_run` does, rendering into ``video`` when given (through ``backend``,
    else the one :func:`choose_gl_backend` finds). With ``pick`` (the :class:`Rollout` of the
    ``episodes`` played -> the index of one), only that episode is kept and rendered."""
    from unilab_jax.envs import load

    if video and backend is None:
        backend = _gl_backend()
    physics = physics or policy.config.get("train", {}).get("physics", "mjx")
    env = load(
        policy.env, config_override=policy.config["train"].get("env_overrides"), physics=physics
    )
    source = render_source(env)
    cam = resolve_camera(source.model, camera) if video else -1
    if physics == "mujoco" and getattr(env, "task", None) is None:
        raise ValueError(f"{policy.env} is a JAX environment and runs on MJX only")
    steps = steps or env.episode_length
    if physics == "mujoco":
        result = rollout_mujoco(policy, env, episodes, steps, seed)
    else:
        result = rollout(policy, env, source, episodes, steps, seed)
    if pick is not None:
        result = result.episode(int(pick(result)))
    if not video:
        return Played(policy, result)
    video = Path(video)
    fps = fps or 1.0 / source.control_dt
    video.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # glfw/PyOpenGL notices; failures raise
            frames = write_video(video, source.model, result, width=width, height=height,
                                 camera=cam, fps=fps)  # fmt: skip
    except RenderError:
        raise
    except Exception as err:  # a GL context that fails in this process: one line, as above
        raise RenderError(
            f"rendering with MUJOCO_GL={backend} failed: {type(err).__name__}: {err}"
        ) from None
    return Played(policy, result, video, frames, fps, cam, backend)


def _gl_backend() -> str:
    """The GL backend that renders here (``choose_gl_backend``), set for this process."""
    imageio_module()
    backend, failures = choose_gl_backend()
    if backend is None:
        raise RenderError(no_backend_message(failures))
    use_gl_backend(backend)
    return backend


#: What :func:`play_run` raises on bad input or a failed render (``UnknownEnvError`` is a
#: ``ValueError``).
PLAY_ERRORS = (FileNotFoundError, CheckpointError, ValueError, RenderError)
