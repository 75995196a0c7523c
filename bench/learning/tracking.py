"""Motion tracking on this machine: how well a policy tracks its clip, one evaluator for every
side (ours, the reference's checkpoints read by our facade's learner).

``tracking_figures``: one deterministic episode per env on C MuJoCo, every episode from the
clip's first frame (the task's ``sampling_mode="start"``; its reset noise and observation
noise as the task has them), until it terminates or reaches the clip's end. Per policy: the
share of episodes that reach the clip's end (``clip_end_rate``), the mean distance between the
robot's 14 tracked bodies and the clip's (aligned to the robot as the task's rewards align
them), per frame tracked (``body_error_m``), the mean episode length and return. A policy
*tracks* the clip when at least 90% of the episodes reach its end with a mean body error under
10 cm (:func:`tracks`). Where no side tracks it within its budget, a policy *reaches* another
(the reference's best snapshot, :func:`best_tracking_row`) when it is at least as good on all
three figures: as many episodes to the clip's end, episodes from frame 0 as long, a body error
no larger (:func:`reaches`).

``python -m bench.learning.tracking evaluate RUN [--episodes 64]`` prints a run's newest
checkpoint beside the untrained policy.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bench.common import ensure_repo_on_path, evaluate_command, markdown_table

ensure_repo_on_path()

TRACK_CLIP_END, TRACK_BODY_ERROR = 0.9, 0.10


def tracking_figures(
    env: str,
    policies: dict[str, tuple],
    episodes: int,
    seed: int,
    overrides: dict | None = None,
) -> dict:
    """Tracking figures (module docstring) of each ``name: (act, agent_state)``."""
    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.registry import make_task
    from unilab_jax.envs.vec_env import MujocoVecEnv

    task = make_task(env, {**(overrides or {}), "sampling_mode": "start"})
    out = {}
    vec = MujocoVecEnv(task, env, episodes, seed)
    try:
        for name, (act, state) in policies.items():
            ep = mujoco_episodes(vec, act, state, seed)
            lengths = np.maximum(ep["lengths"], 1)
            error = ep["components"]["reward/error_body_pos"]
            out[name] = {
                "clip_end_rate": float(np.mean(ep["time_limit"])),
                "body_error_m": float(np.sum(error * lengths) / np.sum(lengths)),
                "mean_length": float(np.mean(ep["lengths"])),
                "mean_return": float(np.mean(ep["returns"])),
            }
    finally:
        vec.close()
    return out


def tracks(row: dict) -> bool:
    """The policy tracks its clip: 90% of episodes to the clip's end, body error under 10 cm."""
    return row["clip_end_rate"] >= TRACK_CLIP_END and row["body_error_m"] < TRACK_BODY_ERROR


def best_tracking_row(rows: list[dict]) -> dict:
    """The evaluated snapshot that tracks best: the most episodes to the clip's end, then the
    longest episodes from its first frame (how far into the clip it stays up: a policy that
    falls at once has a small error over its few frames), then the smallest body error (the
    later one on a tie)."""
    return max(
        reversed(rows),
        key=lambda r: (r["clip_end_rate"], r["mean_length"], -r["body_error_m"]),
    )


def reaches(row: dict, target: dict) -> bool:
    """``row`` is at least as good as ``target`` on every tracking figure: the share of episodes
    to the clip's end, the episodes' length from frame 0 and the body error (no larger)."""
    return (
        row["clip_end_rate"] >= target["clip_end_rate"]
        and row["mean_length"] >= target["mean_length"]
        and row["body_error_m"] <= target["body_error_m"]
    )


def evaluate(args: argparse.Namespace) -> None:
    """Tracking figures of a run's newest checkpoint beside the untrained policy."""
    import jax

    import unilab_jax

    policy = unilab_jax.load_policy(args.run)
    untrained = policy.agent.init(jax.random.PRNGKey(0))
    act = jax.jit(policy.agent.act)
    overrides = policy.config.get("train", {}).get("env_overrides")
    figures = tracking_figures(policy.env, {
        f"trained (iteration {policy.iteration})": (act, policy.state),
        "untrained": (act, untrained),
    }, args.episodes, args.seed, overrides)  # fmt: skip
    rows = [[name, f"{100 * f['clip_end_rate']:.0f}%", f"{100 * f['body_error_m']:.1f}",
             f"{f['mean_length']:.0f}", f"{f['mean_return']:.2f}"]
            for name, f in figures.items()]  # fmt: skip
    print(markdown_table(["policy", "reach the clip's end", "body error (cm)", "length",
                          "return"], rows))  # fmt: skip
    print(json.dumps(figures))


def main(argv: list[str] | None = None) -> None:
    evaluate_command(__doc__.split("\n\n")[0], evaluate, argv)


if __name__ == "__main__":
    main()
