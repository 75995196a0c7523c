"""Deterministic episodes on C MuJoCo: ``mujoco_episodes``, the loop the core's evaluation
(``TrainConfig(physics="mujoco")``), ``unilab_jax.policy.evaluate``, ``play`` and the locomotion
bench share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from unilab_jax.envs.task import Task
from unilab_jax.envs.vec_env import MujocoVecEnv

__all__ = ["mujoco_episodes"]


def mujoco_episodes(
    vec: MujocoVecEnv,
    act: Callable,
    agent_state: Any,
    seed: int,
    per_step: Callable[[dict, Any], dict[str, np.ndarray]] | None = None,
    steps: int | None = None,
    positions: bool = False,
    observe: Callable[[dict], Any] | None = None,
) -> dict:
    """One deterministic episode in every env of ``vec`` (C MuJoCo) with ``act(agent_state,
    obs)``, from unstaggered resets keyed by ``seed``; an episode stops counting at termination
    or the time limit. Returns per-episode numpy arrays: ``returns``, ``lengths``,
    ``time_limit`` (reached the time limit without terminating) and ``components``
    (``{"reward/<name>": mean per step of that reward component over the episode}``), to which
    ``per_step(obs, state)`` (``{name: [N]}`` from the observation the action was chosen on
    and the step's ``VecEnvState``) adds its own quantities. ``steps`` caps the control steps
    (default: the episode length). ``positions``: also ``qpos`` / ``qvel`` ``[T, N, ...]``
    before each step and ``alive [T, N]`` (play's video), for all ``steps``, and ``reference``
    ``[T, N, nq]`` for a task that has a pose to match (``Task.reference_qpos``). ``observe``:
    what ``act`` reads from an observation dict (default its ``"obs"`` group; a privileged
    actor's ``functools.partial(actor_observation, agent)``)."""
    device = vec._cpu
    policy = jax.device_put(agent_state, device)
    state = vec.init_state(seed, stagger=False)
    n = vec.num_envs
    alive = np.ones(n, bool)
    time_limit = np.zeros(n, bool)
    total = np.zeros(n, np.float64)
    length = np.zeros(n, np.int64)
    sums: dict[str, np.ndarray] = {}
    frames: dict[str, list] = {"qpos": [], "qvel": [], "alive": []}
    task = vec.task
    reference = None
    if positions and type(task).reference_qpos is not Task.reference_qpos:
        reference = jax.jit(jax.vmap(task.reference_qpos))
        frames["reference"] = []
    for _ in range(vec.max_episode_steps if steps is None else steps):
        if positions:
            frames["qpos"].append(np.array(vec.batch.qpos, np.float32))
            frames["qvel"].append(np.array(vec.batch.qvel, np.float32))
            frames["alive"].append(alive.copy())
            if reference is not None:
                with jax.default_device(device):
                    frames["reference"].append(np.asarray(reference(vec.task_state)))
        with jax.default_device(device):
            seen = state.obs["obs"] if observe is None else observe(state.obs)
            actions = np.asarray(act(policy, seen))
        obs, state = state.obs, vec.step(actions)
        total += np.where(alive, state.reward, 0.0)
        length += alive
        extra = per_step(obs, state) if per_step is not None else {}
        for name, values in {**state.info["components"], **extra}.items():
            sums[name] = sums.get(name, 0.0) + np.where(alive, values, 0.0)
        time_limit |= alive & state.truncated & ~state.terminated
        alive &= ~(state.terminated | state.truncated)
        if not alive.any() and not positions:
            break
    counted = np.maximum(length, 1)
    out = {
        "returns": total.astype(np.float32),
        "lengths": length.astype(np.int32),
        "time_limit": time_limit,
        "components": {k: (v / counted).astype(np.float32) for k, v in sums.items()},
    }
    if positions:
        out.update({k: np.stack(v) for k, v in frames.items()})
    return out
