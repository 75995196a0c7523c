"""``unilab-jax play RUN --video out.mp4``: watch a trained policy (``unilab_jax.policy.play``,
whose module docstring describes the episodes, the video, the cameras and the GL backends)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from tyro.conf import Positional

from unilab_jax.cli.options import STEP_HELP, documented, error, parse, values
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


def main(argv: list[str] | None = None) -> int:
    args = parse(documented(Play, step=STEP_HELP), argv, prog="unilab-jax play")
    try:
        played = play.play_run(**values(args))
    except play.PLAY_ERRORS as err:
        return error(str(err))
    policy, result = played.policy, played.result
    for e in range(args.episodes):
        print(f"{policy.env} ({policy.algo}, iteration {policy.iteration}): episode {e + 1} "
              f"return {result.returns[e]:.3f} over {result.lengths[e]} steps")  # fmt: skip
    if args.episodes > 1:
        print(f"mean return {float(np.mean(result.returns)):.3f} over {args.episodes} episodes")
    if played.video:
        camera = "free" if played.camera == -1 else played.camera
        print(f"video: {played.video} ({played.frames} frames, {args.width}x{args.height} at "
              f"{played.fps:g} fps, camera {camera}, MUJOCO_GL={played.backend})")  # fmt: skip
    if played.wandb_run:
        print(f"wandb: logged video/policy and video/mean_return to run {played.wandb_run} "
              f"({played.wandb_where})")  # fmt: skip
    return 0
