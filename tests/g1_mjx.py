"""The G1WalkFlat MJX step that both G1 test files run (``test_reference_g1.py``,
``test_robots_g1.py``): one definition, so its compiled program (over a minute on a 2-core CPU:
42 collision geoms, a 100-iteration Newton solver, a full forward pass for the reset) is
compiled once and shared through the persistent compile cache.

States are built here without running ``reset`` (whose compile would cost as much again): the
physics is the model's blank data at the given ``(qpos, qvel)``, which a step needs nothing
else of (it starts with a full forward pass and, G1 running without solver warm start, reads
no derived field). A state whose ``step_count`` is one short of the episode length is
truncated by its first step, which resets it through the step's own reset path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from unilab_jax.envs import load
from unilab_jax.envs.base import Env, EnvState
from unilab_jax.envs.robots.g1 import REWARD_TERMS

#: Envs per call of the shared step.
BATCH = 8


@functools.cache
def shared() -> tuple[Env, Callable[[EnvState, jax.Array], EnvState]]:
    """The registered G1WalkFlat on MJX and ``jit(env.step_batch)`` (every env's step, then
    the batch's curriculum update), built once per process, for batches of :data:`BATCH`
    states from :func:`states`."""
    env = load("G1WalkFlat")
    return env, jax.jit(env.step_batch)


def states(
    env: Env,
    qpos: jax.Array,
    qvel: jax.Array,
    task_state: dict,
    step_count: jax.Array,
    key: jax.Array,
) -> EnvState:
    """A batch of states ``[B, ...]`` at ``(qpos, qvel)`` with the task carry ``task_state``;
    every leaf has the dtype ``reset`` gives it (one compiled step for every caller)."""
    batch = len(qpos)
    physics = jax.tree.map(
        lambda x: jnp.broadcast_to(x, (batch, *x.shape)), env.physics._template
    ).replace(qpos=jnp.asarray(qpos, jnp.float32), qvel=jnp.asarray(qvel, jnp.float32))
    like = jax.eval_shape(jax.vmap(env.task.init_task_state), jax.random.split(key, batch))
    task_state = jax.tree.map(lambda s, x: jnp.asarray(x, s.dtype), like, task_state)
    obs = {k: jnp.zeros((batch, n), jnp.float32) for k, n in (("obs", 98), ("critic", 101))}
    zeros = jnp.zeros((batch,), jnp.float32)
    metrics = {f"reward/{k}": zeros for k in (*REWARD_TERMS, "penalty_scale")}
    return EnvState(
        physics=physics,
        obs=obs,
        reward=zeros,
        terminated=jnp.zeros((batch,), bool),
        truncated=jnp.zeros((batch,), bool),
        final_obs=obs,
        step_count=jnp.asarray(step_count, jnp.int32),
        task_state=task_state,
        metrics=metrics,
        key=jax.random.split(key, batch),
    )


def fresh_states(env: Env, key: jax.Array) -> EnvState:
    """:data:`BATCH` states that the first step truncates and resets (module docstring)."""
    keys = jax.random.split(key, BATCH)
    qpos, qvel = jax.vmap(env.task.init_qpos_qvel)(keys)
    task_state = jax.vmap(env.task.init_task_state)(keys)
    step_count = jnp.full((BATCH,), env.episode_length - 1, jnp.int32)
    return states(env, qpos, qvel, task_state, step_count, key)
