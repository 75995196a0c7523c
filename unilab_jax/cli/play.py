"""``unilab-jax play RUN --video out.mp4``: watch a trained policy (``unilab_jax.policy.play``,
whose module docstring describes the episodes, the video, the cameras and the GL backends)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from unilab_jax.policy.play import (
    VIDEO_SUFFIXES,
    RenderError,
    choose_gl_backend,
    find_wandb_run,
    imageio_module,
    log_to_wandb,
    no_backend_message,
    render_source,
    resolve_camera,
    rollout,
    rollout_mujoco,
    use_gl_backend,
    write_video,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-jax play",
        allow_abbrev=False,
        description="Play a training run's deterministic policy; print each episode's return "
        "and, with --video, render it offscreen with MuJoCo into an mp4.",
    )
    parser.add_argument("run", help="a run's log dir, its checkpoints/ folder or one checkpoint")
    parser.add_argument("--video", type=Path, default=None, help="write an mp4 here")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play (1)")
    parser.add_argument(
        "--steps", type=int, default=None, help="control steps per episode (the episode length)"
    )
    parser.add_argument("--width", type=int, default=640, help="frame width (640)")
    parser.add_argument("--height", type=int, default=480, help="frame height (480)")
    parser.add_argument(
        "--camera",
        default=None,
        help="camera name or index, -1 for the free camera (the model's first camera, else -1)",
    )
    parser.add_argument(
        "--fps", type=float, default=None, help="frames per second (the task's control rate)"
    )
    parser.add_argument("--step", type=int, default=None, help="checkpoint iteration (newest)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial states (0)")
    parser.add_argument(
        "--physics",
        choices=("mjx", "mujoco"),
        default=None,
        help="physics of the rollout: mjx or mujoco (C MuJoCo; our tasks) (default: the run's)",
    )
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="also log the video and the mean return into the run's own wandb run (a run "
        "trained with --logger wandb records it in RUN/wandb_run.json); the video goes to "
        "RUN/videos/iteration_<N>.mp4 unless --video is given",
    )
    return parser


def _check_args(args: argparse.Namespace) -> str | None:
    if args.episodes < 1:
        return f"--episodes must be >= 1, got {args.episodes}"
    if args.steps is not None and args.steps < 1:
        return f"--steps must be >= 1, got {args.steps}"
    if args.fps is not None and not args.fps > 0:
        return f"--fps must be > 0, got {args.fps}"
    if args.wandb:
        if importlib.util.find_spec("wandb") is None:
            return "--wandb needs wandb: pip install 'unilab-jax[wandb]'"
        try:
            find_wandb_run(args.run)
        except FileNotFoundError as err:
            return str(err)
    if args.video is not None:
        if args.width < 2 or args.height < 2 or args.width % 2 or args.height % 2:
            return (
                f"--width and --height must be even and >= 2 for H.264 (yuv420p), got "
                f"{args.width}x{args.height}"
            )
        if args.video.suffix.lower() not in VIDEO_SUFFIXES:
            return f"--video must end in {', '.join(VIDEO_SUFFIXES)}, got {args.video}"
    return None


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _rendering_backend() -> str:
    """The GL backend the video will render with, set up before anything imports mujoco;
    ``RenderError`` when the video cannot be made (no encoder, no backend): seconds, before
    any rollout."""
    imageio_module()
    backend, failures = choose_gl_backend()
    if backend is None:
        raise RenderError(no_backend_message(failures))
    use_gl_backend(backend)
    return backend


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(None if argv is None else list(argv))
    problem = _check_args(args)
    if problem:
        return _error(problem)
    wandb_dir, wandb_record = find_wandb_run(args.run) if args.wandb else (None, None)
    video = args.video is not None or args.wandb
    try:
        backend = _rendering_backend() if video else None
    except RenderError as err:
        return _error(str(err))

    from unilab_jax.envs import UnknownEnvError, load
    from unilab_jax.policy import load_policy
    from unilab_jax.training.checkpoint import CheckpointError

    try:
        policy = load_policy(args.run, args.step)
        env = load(policy.env, config_override=policy.config["train"].get("env_overrides"))
        source = render_source(env)
        camera = resolve_camera(source.model, args.camera) if video else -1
    except (FileNotFoundError, CheckpointError, UnknownEnvError, ValueError, RenderError) as err:
        return _error(str(err))
    steps = args.steps or env.episode_length
    if args.wandb and args.video is None:
        args.video = wandb_dir / "videos" / f"iteration_{policy.iteration}.mp4"
    physics = args.physics or policy.config.get("train", {}).get("physics", "mjx")
    if physics == "mujoco" and getattr(env, "task", None) is None:
        return _error(f"{policy.env} is a JAX environment and runs on MJX only")
    if physics == "mujoco":
        result = rollout_mujoco(policy, env, args.episodes, steps, args.seed)
    else:
        result = rollout(policy, env, source, args.episodes, steps, args.seed)
    for e in range(args.episodes):
        print(
            f"{policy.env} ({policy.algo}, iteration {policy.iteration}): episode {e + 1} "
            f"return {result.returns[e]:.3f} over {result.lengths[e]} steps"
        )
    if args.episodes > 1:
        print(f"mean return {float(np.mean(result.returns)):.3f} over {args.episodes} episodes")
    if args.video is None:
        return 0
    code = _video(args, source, result, camera, backend)
    if code == 0 and args.wandb:
        where = log_to_wandb(wandb_record, wandb_dir, args.video, policy.iteration, result.returns)
        print(f"wandb: logged video/policy and video/mean_return to run {wandb_record['id']} "
              f"({where})")  # fmt: skip
    return code


def _video(args: argparse.Namespace, source, result, camera, backend: str) -> int:
    """Render ``result`` into ``args.video`` and say so; 2 when rendering fails."""
    fps = args.fps or 1.0 / source.control_dt
    args.video.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # glfw/PyOpenGL notices; failures raise
            frames = write_video(
                args.video,
                source.model,
                result,
                width=args.width,
                height=args.height,
                camera=camera,
                fps=fps,
            )
    except RenderError as err:
        return _error(str(err))
    except Exception as err:  # a GL context that fails in this process
        return _error(f"rendering with MUJOCO_GL={backend} failed: {type(err).__name__}: {err}")
    camera_name = "free" if camera == -1 else str(camera)
    print(
        f"video: {args.video} ({frames} frames, {args.width}x{args.height} at {fps:g} fps, "
        f"camera {camera_name}, MUJOCO_GL={backend})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
