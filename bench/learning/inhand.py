"""In-hand rotation on this machine: how well a policy turns the object, one evaluator for every
side (ours, the reference's checkpoints read by our facade's learner).

``inhand_figures``: one deterministic episode per env on C MuJoCo under the task's
randomisation and noise (object scale per env, gains, friction, mass, COM, gravity direction,
random object forces, tactile latency and noise, all as the task draws them; episodes start from
the grasp caches), for the task's full 20 s unless the object leaves its height band. Per
policy: the share of episodes that keep the object to the time limit (``time_limit_rate``), the
object's mean angular velocity about the task's rotation axis over the steps it is held, from
its orientation before and after each step, unclipped (``rotation_rate``, rad/s; the reward
clips it at 0.5), the angle turned about the axis per episode while held (``turned_rad``: both
at once, the figure :func:`best_inhand_row` ranks by), the mean episode length and return.

``python -m bench.learning.inhand evaluate RUN [--episodes 64]`` prints a run's newest
checkpoint beside the untrained policy.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bench.common import ensure_repo_on_path, evaluate_command, markdown_table

ensure_repo_on_path()

#: The object's orientation in ``qpos`` (wxyz), after the 22 hand joints and its position.
OBJECT_QUAT = slice(25, 29)


def turn_about(q0: np.ndarray, q1: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The signed angle (rad) about the world ``axis`` of the rotation taking orientation
    ``q0`` to ``q1`` (unit wxyz quaternions, ``[..., 4]``): the axis-angle vector of
    ``q1 q0^-1`` (the shortest rotation) projected on ``axis``."""
    w0, v0 = q0[..., :1], -q0[..., 1:]  # q0's conjugate
    w1, v1 = q1[..., :1], q1[..., 1:]
    w = w1 * w0 - np.sum(v1 * v0, axis=-1, keepdims=True)
    v = w1 * v0 + w0 * v1 + np.cross(v1, v0)
    v = np.where(w < 0.0, -v, v)
    w = np.abs(w)
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(norm, w)
    rotvec = np.where(norm > 1e-12, v / np.maximum(norm, 1e-12) * angle, 2.0 * v)
    return rotvec @ (axis / np.linalg.norm(axis))


def turned_per_episode(qpos: np.ndarray, alive: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The angle (rad) each episode turned the object about ``axis`` while holding it, from
    ``qpos [T, E, nq]`` before each step and ``alive [T, E]`` (step t kept the object into t + 1
    when ``alive[t + 1]``); ``[E]``."""
    quat = np.asarray(qpos[..., OBJECT_QUAT], np.float64)
    held = np.asarray(alive[1:], bool)
    return np.where(held, turn_about(quat[:-1], quat[1:], axis), 0.0).sum(axis=0)


def turning_video(policy, path, seed: int = 1, candidates: int = 16,
                  size: tuple[int, int] = (480, 360)) -> int:  # fmt: skip
    """Of ``candidates`` deterministic episodes of ``policy`` on C MuJoCo from ``seed``'s
    resets (``unilab_jax.policy.play.play_policy``), the one that turned the object furthest
    while holding it, rendered into ``path`` (mp4); returns the frames written. One episode
    chosen so, not a typical one: the evaluator's figures say how typical it is."""
    from unilab_jax.envs.registry import default_config
    from unilab_jax.policy.play import play_policy

    overrides = policy.config.get("train", {}).get("env_overrides") or {}
    axis = np.asarray(overrides.get("rot_axis", default_config(policy.env).rot_axis), np.float64)
    played = play_policy(
        policy, video=path, episodes=candidates, width=size[0], height=size[1], seed=seed,
        physics="mujoco", pick=lambda r: int(np.argmax(turned_per_episode(r.qpos, r.alive, axis))),
    )  # fmt: skip
    return played.frames


def inhand_figures(
    env: str,
    policies: dict[str, tuple],
    episodes: int,
    seed: int,
    overrides: dict | None = None,
) -> dict:
    """In-hand figures (module docstring) of each ``name: (act, agent_state)`` or ``name:
    (act, agent_state, observe)`` (``observe``: what ``act`` reads from an observation dict,
    ``unilab_jax.algos.agent.observer`` of a privileged actor; None: the ``"obs"`` group)."""
    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.registry import make_task
    from unilab_jax.envs.vec_env import MujocoVecEnv

    task = make_task(env, overrides)
    axis = np.asarray(task.config.rot_axis, np.float64)
    dt = float(task.config.control_dt)
    out = {}
    vec = MujocoVecEnv(task, env, episodes, seed)
    try:
        for name, (act, state, *observe) in policies.items():
            ep = mujoco_episodes(vec, act, state, seed, positions=True,
                                 observe=observe[0] if observe else None)  # fmt: skip
            turned = turned_per_episode(ep["qpos"], ep["alive"], axis)
            steps = max(int(np.sum(ep["alive"][1:])), 1)
            out[name] = {
                "time_limit_rate": float(np.mean(ep["time_limit"])),
                "rotation_rate": float(turned.sum() / (steps * dt)),
                "turned_rad": float(turned.sum() / episodes),
                "mean_length": float(np.mean(ep["lengths"])),
                "mean_return": float(np.mean(ep["returns"])),
            }
    finally:
        vec.close()
    return out


def best_inhand_row(rows: list[dict]) -> dict:
    """The evaluated snapshot that turns the object furthest per episode while holding it
    (``turned_rad``: rate and holding at once; the later one on a tie)."""
    return max(reversed(rows), key=lambda r: r["turned_rad"])


def reaches(row: dict, target: dict) -> bool:
    """``row`` turns at least as fast as ``target`` and keeps the object at least as often."""
    return (
        row["rotation_rate"] >= target["rotation_rate"]
        and row["time_limit_rate"] >= target["time_limit_rate"]
    )


def evaluate(args: argparse.Namespace) -> None:
    """In-hand figures of a run's newest checkpoint beside the untrained policy."""
    import jax

    import unilab_jax
    from unilab_jax.algos.agent import observer

    policy = unilab_jax.load_policy(args.run)
    untrained = policy.agent.init(jax.random.PRNGKey(0))
    act = jax.jit(policy.agent.act)
    observe = observer(policy.agent)
    overrides = policy.config.get("train", {}).get("env_overrides")
    figures = inhand_figures(policy.env, {
        f"trained (iteration {policy.iteration})": (act, policy.state, observe),
        "untrained": (act, untrained, observe),
    }, args.episodes, args.seed, overrides)  # fmt: skip
    rows = [[name, f"{100 * f['time_limit_rate']:.0f}%", f"{f['rotation_rate']:.3f}",
             f"{f['turned_rad']:.2f}", f"{f['mean_length']:.0f}", f"{f['mean_return']:.2f}"]
            for name, f in figures.items()]  # fmt: skip
    print(markdown_table(["policy", "keep the object", "rotation (rad/s)", "turned (rad)",
                          "length", "return"], rows))  # fmt: skip
    print(json.dumps(figures))


def main(argv: list[str] | None = None) -> None:
    evaluate_command(__doc__.split("\n\n")[0], evaluate, argv)


if __name__ == "__main__":
    main()
