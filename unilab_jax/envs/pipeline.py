"""The step pipeline every backend shares: :class:`EnvState` and the pure functions of a step.

:func:`draw_initial_conditions` (the random part of a reset), :func:`observation_groups` and
:func:`reward_metrics` (a task's observation and reward components in the form every backend
returns), :func:`reset_observation` (a fresh episode's first observation and task state),
:func:`post_physics` (everything after the physics of a control step) with
:func:`next_episode` (what crosses an automatic reset), and the two
end pieces every env's ``step`` shares, adapters included: :func:`time_limit` and
:func:`auto_reset` (with :func:`where_done`, their per-leaf select). All are pure JAX
functions of one env, called under ``vmap``. The order in which a control step runs them is
in ``base.py``'s module docstring (steps 1-4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from unilab_jax.envs.task import Task

__all__ = [
    "CRITIC_KEY",
    "OBS_KEY",
    "EnvState",
    "auto_reset",
    "draw_initial_conditions",
    "finish_batch",
    "next_episode",
    "observation_groups",
    "post_physics",
    "reset_observation",
    "reward_metrics",
    "time_limit",
    "where_done",
]

OBS_KEY = "obs"
CRITIC_KEY = "critic"


@struct.dataclass
class EnvState:
    """State of one environment; all leaves are JAX arrays so it can be vmapped and jitted."""

    physics: Any
    """The physics state: an ``mjx.Data`` for :class:`Env`, the foreign state for adapters."""
    obs: dict[str, jax.Array]
    """Observation groups: ``"obs"`` (actor) and ``"critic"`` (privileged, or a copy of obs)."""
    reward: jax.Array
    """[] float32, reward of the step that produced this state (0 after reset)."""
    terminated: jax.Array
    """[] bool, the task's termination condition on this step."""
    truncated: jax.Array
    """[] bool, the time limit was reached on this step (independent of ``terminated``)."""
    final_obs: dict[str, jax.Array]
    """Observation at the end of this step before any automatic reset (== obs if not done)."""
    step_count: jax.Array
    """[] int32, control steps since the current episode began (0 after reset)."""
    task_state: dict[str, jax.Array]
    """Task-specific carry (may be empty)."""
    metrics: dict[str, jax.Array]
    """This step's reward components, keys ``"reward/<name>"`` (zeros after reset)."""
    key: jax.Array
    """PRNG key; split on every step, one part seeds the automatic reset."""

    @classmethod
    def initial(
        cls,
        physics: Any,
        obs: dict[str, jax.Array],
        task_state: dict[str, jax.Array],
        metrics: dict[str, jax.Array],
        key: jax.Array,
    ) -> EnvState:
        """The state at the start of an episode (``metrics``: zeros of their shapes)."""
        return cls(
            physics=physics,
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            final_obs=obs,
            step_count=jnp.zeros((), jnp.int32),
            task_state=task_state,
            metrics=jax.tree.map(jnp.zeros_like, metrics),
            key=key,
        )

    @property
    def done(self) -> jax.Array:
        """The episode ended on this step (terminated or truncated)."""
        return self.terminated | self.truncated


def draw_initial_conditions(
    task: Task, key: jax.Array, carried: Mapping[str, jax.Array] | None = None
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array], jax.Array]:
    """The random part of a reset: ``(qpos, qvel, task_state, carried_key)`` from ``key``
    (:meth:`Task.init_episode`; ``carried``: the ending episode's persistent task state, None
    at the first reset).

    Shared by :meth:`Env.reset` and the C-MuJoCo backend so that both backends draw exactly the
    same episode from the same key (the parity tests rely on it).
    """
    key, k_init, k_task = jax.random.split(key, 3)
    qpos, qvel, task_state = task.init_episode(k_init, k_task, carried)
    return qpos, qvel, task_state, key


def observation_groups(
    task: Task, data: Any, task_state: dict[str, jax.Array]
) -> dict[str, jax.Array]:
    """``task.observe`` with the ``"critic"`` group defaulted to ``"obs"`` and float32 leaves.

    One function for every backend, so the groups and dtypes cannot drift between them.
    """
    groups = dict(task.observe(data, task_state))
    if OBS_KEY not in groups:
        raise KeyError(f"{type(task).__name__}.observe must return an {OBS_KEY!r} group")
    groups.setdefault(CRITIC_KEY, groups[OBS_KEY])
    return {k: jnp.asarray(v, jnp.float32) for k, v in groups.items()}


def reset_observation(
    task: Task, data: Any, task_state: dict[str, jax.Array]
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """A fresh episode's first observation groups and task state: :meth:`Task.start_episode`
    on its first physics state, then :func:`observation_groups`. One function for every
    backend."""
    task_state = task.start_episode(data, task_state)
    return observation_groups(task, data, task_state), task_state


def reward_metrics(components: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Reward components as logged metrics: keys ``"reward/<name>"``, float32 values."""
    return {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in components.items()}


# --------------------------------------------------------------------- time limit and reset
def where_done(done: jax.Array, fresh: Any, current: Any) -> Any:
    """Per leaf: ``fresh`` where ``done``, ``current`` elsewhere, in ``fresh``'s dtype.

    A select, not a branch, so it works under ``vmap``; keeping the fresh (reset) dtype means a
    carried pytree never changes type from one step to the next.
    """
    return jax.tree.map(lambda a, b: jnp.where(done, a, b).astype(a.dtype), fresh, current)


def time_limit(
    *,
    physics: Any,
    obs: dict[str, jax.Array],
    reward: jax.Array,
    terminated: jax.Array,
    metrics: dict[str, jax.Array],
    task_state: dict[str, jax.Array],
    key: jax.Array,
    step_count: jax.Array,
    episode_length: int,
    ended: jax.Array | None = None,
) -> EnvState:
    """The state after a control step, with the time limit applied; not reset yet.

    ``step_count`` is the count before the step. ``truncated`` (``step_count + 1 >=
    episode_length``, or ``ended``: the task's own truncation, :meth:`Task.ends_episode`) is
    independent of ``terminated``; the returned count is already 0 where
    the episode ended (the next step starts a new one). ``obs`` is also ``final_obs``:
    :func:`auto_reset` then swaps in the fresh episode's physics and observation.
    """
    step_count = step_count + 1
    truncated = step_count >= episode_length
    if ended is not None:
        truncated = truncated | ended
    done = terminated | truncated
    return EnvState(
        physics=physics,
        obs=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        final_obs=obs,
        step_count=where_done(done, jnp.zeros_like(step_count), step_count),
        task_state=task_state,
        metrics=metrics,
        key=key,
    )


def auto_reset(state: EnvState, fresh_physics: Any, fresh_obs: dict[str, jax.Array]) -> EnvState:
    """Where ``state.done``: the fresh episode's physics and observation (``final_obs`` keeps
    the ended episode's last observation)."""
    done = state.done
    return state.replace(
        physics=where_done(done, fresh_physics, state.physics),
        obs=where_done(done, fresh_obs, state.obs),
    )


def post_physics(
    task: Task,
    data: Any,
    action: jax.Array,
    task_state: dict[str, jax.Array],
    key: jax.Array,
    step_count: jax.Array,
) -> tuple[EnvState, tuple[jax.Array, jax.Array]]:
    """The post-physics half of one env's control step, the same for every physics backend.

    ``data`` is the physics after the step (an ``mjx.Data`` or C MuJoCo's view), ``action`` the
    clipped action, ``task_state`` / ``key`` / ``step_count`` the carry before the step.
    Returns the :func:`time_limit` state (``physics`` is ``data``; the carry is already the
    fresh episode's where ``done``) and the reset draw's ``(qpos, qvel)``, which the backend
    applies where ``done`` (steps 3a-3f of ``base.py``'s module docstring, in that order).
    """
    key, k_reset, k_task = jax.random.split(key, 3)
    reward, components = task.reward(data, action, task_state)
    terminated = jnp.asarray(task.terminated(data, task_state), bool)
    task_state = task.update_task_state(data, action, task_state, k_task)
    ended = jnp.asarray(task.ends_episode(task_state), bool) & ~terminated
    state = time_limit(
        physics=data,
        obs=observation_groups(task, data, task_state),
        reward=jnp.asarray(reward, jnp.float32),
        terminated=terminated,
        metrics=reward_metrics(components),
        task_state=task_state,
        key=key,
        step_count=step_count,
        episode_length=task.episode_length,
        ended=ended,
    )
    qpos0, qvel0, task_state0 = next_episode(task, k_reset, state.task_state)
    state = state.replace(task_state=where_done(state.done, task_state0, state.task_state))
    return state, (qpos0, qvel0)


def next_episode(
    task: Task, key: jax.Array, task_state: dict[str, jax.Array]
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """The episode an env starts should its current one have ended: the reset draw's
    ``(qpos, qvel)`` and task state, whose :attr:`Task.persistent_state` leaves are carried
    from ``task_state`` and every other leaf is the fresh episode's (its last action, its
    clocks). The one rule of what crosses an automatic reset, for every backend (and the
    golden replays, which feed the reference's draws on top of it)."""
    carried = {k: task_state[k] for k in task.persistent_state}
    qpos0, qvel0, task_state0, _ = draw_initial_conditions(task, key, carried)
    return qpos0, qvel0, {**task_state0, **carried}


def finish_batch(task: Task, before: EnvState, after: EnvState) -> EnvState:
    """The batch's part of a control step, after every env's (``before`` / ``after``: batched
    states around ``vmap(step)``): :meth:`Task.update_batch` with the ended episodes'
    lengths. Not under ``vmap``."""
    if not task.has_batch_update:
        return after
    task_state = task.update_batch(
        after.task_state, after.terminated, after.truncated, before.step_count + 1
    )
    return after.replace(task_state=task_state)
