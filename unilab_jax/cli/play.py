"""``unilab-jax play RUN --video out.mp4``: watch a trained policy (``unilab_jax.policy.play``,
whose module docstring describes the episodes, the video, the cameras and the GL backends)."""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from tyro.conf import Positional

from unilab_jax.cli.options import STEP_HELP, documented, error, parse
from unilab_jax.policy import play

__all__ = ["Play", "main"]


@dataclass(frozen=True)
class Play:
    """Play a training run's deterministic policy; print each episode's return and, with
    --video, render it offscreen with MuJoCo into an mp4."""

    run: Positional[str]
    """A run's log dir, its checkpoints/ folder or one checkpoint."""
    video: Path | None = None
    """Write an mp4 here."""
    episodes: int = 1
    """Episodes to play."""
    steps: int | None = None
    """Control steps per episode; None: the episode length."""
    width: int = 640
    """Frame width."""
    height: int = 480
    """Frame height."""
    camera: str | None = None
    """Camera name or index, -1 for the free camera; None: the model's first camera, else -1."""
    fps: float | None = None
    """Frames per second; None: the task's control rate."""
    step: int | Literal["best"] | None = None
    seed: int = 0
    """Seed of the initial states."""
    physics: Literal["mjx", "mujoco"] | None = None
    """mjx or mujoco (C MuJoCo; our tasks) for the rollout; None: the run's."""
    wandb: bool = False
    """Also log the video and the mean return into the run's own wandb run (recorded in
    RUN/wandb_run.json by --logger wandb); the video goes to RUN/videos/iteration_<N>.mp4
    unless --video is given."""


def _problem(args: Play) -> str | None:
    """What makes ``args`` unplayable, found in seconds, before any rollout; None if nothing."""
    if args.episodes < 1 or (args.steps is not None and args.steps < 1):
        return f"--episodes and --steps must be >= 1, got {args.episodes} and {args.steps}"
    if args.fps is not None and not args.fps > 0:
        return f"--fps must be > 0, got {args.fps}"
    if args.wandb and importlib.util.find_spec("wandb") is None:
        return "--wandb needs wandb: pip install 'unilab-jax[wandb]'"
    if args.video and (args.width < 2 or args.height < 2 or args.width % 2 or args.height % 2):
        size = f"{args.width}x{args.height}"
        return f"--width and --height must be even and >= 2 for H.264 (yuv420p), got {size}"
    if args.video and args.video.suffix.lower() not in play.VIDEO_SUFFIXES:
        return f"--video must end in {', '.join(play.VIDEO_SUFFIXES)}, got {args.video}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse(documented(Play, step=STEP_HELP), argv, prog="unilab-jax play")
    problem, backend = _problem(args), None
    if problem:
        return error(problem)
    try:
        wandb_dir, record = play.find_wandb_run(args.run) if args.wandb else (None, None)
        if args.video or args.wandb:  # the GL backend, set before anything imports mujoco
            play.imageio_module()
            backend, failures = play.choose_gl_backend()
            if backend is None:
                raise play.RenderError(play.no_backend_message(failures))
            play.use_gl_backend(backend)
    except (FileNotFoundError, play.RenderError) as err:
        return error(str(err))
    from unilab_jax.envs import UnknownEnvError, load
    from unilab_jax.policy import load_policy
    from unilab_jax.training.checkpoint import CheckpointError

    try:
        policy = load_policy(args.run, args.step)
        env = load(policy.env, config_override=policy.config["train"].get("env_overrides"))
        source = play.render_source(env)
        camera = play.resolve_camera(source.model, args.camera) if backend else -1
    except (FileNotFoundError, CheckpointError, UnknownEnvError, ValueError, play.RenderError) as e:
        return error(str(e))
    physics = args.physics or policy.config.get("train", {}).get("physics", "mjx")
    if physics == "mujoco" and getattr(env, "task", None) is None:
        return error(f"{policy.env} is a JAX environment and runs on MJX only")
    steps = args.steps or env.episode_length
    if physics == "mujoco":
        result = play.rollout_mujoco(policy, env, args.episodes, steps, args.seed)
    else:
        result = play.rollout(policy, env, source, args.episodes, steps, args.seed)
    for e in range(args.episodes):
        print(f"{policy.env} ({policy.algo}, iteration {policy.iteration}): episode {e + 1} "
              f"return {result.returns[e]:.3f} over {result.lengths[e]} steps")  # fmt: skip
    if args.episodes > 1:
        print(f"mean return {float(np.mean(result.returns)):.3f} over {args.episodes} episodes")
    if not (args.video or args.wandb):
        return 0
    if args.video is None:
        args = replace(args, video=wandb_dir / "videos" / f"iteration_{policy.iteration}.mp4")
    fps = args.fps or 1.0 / source.control_dt
    args.video.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # glfw/PyOpenGL notices; failures raise
            frames = play.write_video(args.video, source.model, result, width=args.width,
                                      height=args.height, camera=camera, fps=fps)  # fmt: skip
    except play.RenderError as err:
        return error(str(err))
    except Exception as err:  # a GL context that fails in this process
        return error(f"rendering with MUJOCO_GL={backend} failed: {type(err).__name__}: {err}")
    print(f"video: {args.video} ({frames} frames, {args.width}x{args.height} at {fps:g} fps, "
          f"camera {'free' if camera == -1 else camera}, MUJOCO_GL={backend})")  # fmt: skip
    if args.wandb:
        returns = result.returns
        where = play.log_to_wandb(record, wandb_dir, args.video, policy.iteration, returns)
        print(f"wandb: logged video/policy and video/mean_return to run {record['id']} ({where})")
    return 0
