"""The pieces the learners (FastSAC, FastTD3; FlashSAC for its `Agent`) build from, written once.

- `make_agent`: the `Agent` of a learner module, its functions bound to the agent's parts,
  with the shared target and normaliser updates; `bind`, one such function.
- `init_networks`: a fresh actor's and critic's variables.
- `step_member`: one guarded optimiser step (`gradients.gradient_step`) of an agent state's
  `<member>_params` with its `<member>_opt_state` (`"actor"`, `"critic"`).
- `prepare_batch`: a replay batch as the losses see it: mirrored (symmetry augmentation, raw
  rows), then normalised with the agent's running statistics.
- `update_normalizers` / `update_target`: the two state updates that do not differentiate.
- `init_noise` / `next_noise`: temporally correlated exploration noise, an AR(1) process of unit
  variance per env (`noise_correlation` rho of both configs):
  `n <- rho * n + sqrt(1 - rho^2) * N(0, 1)`, redrawn from N(0, 1) when an episode starts. A
  swing-up or a gait needs the same push for many steps, which independent draws average out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.algos.gradients import gradient_step, polyak_update
from unilab_jax.algos.normalizer import normalize_transition, update_agent_normalizers

__all__ = [
    "bind",
    "init_networks",
    "init_noise",
    "make_agent",
    "next_noise",
    "prepare_batch",
    "step_member",
    "update_normalizers",
    "update_target",
]

Array = jax.Array


def bind(name: str, fn: Callable, *args: Any, **kwargs: Any) -> Callable:
    """`functools.partial(fn, *args, **kwargs)` named `name` (an `Agent` field: profiles,
    tracebacks and trace counters see which of the agent's functions it is)."""
    bound = functools.partial(fn, *args, **kwargs)
    bound.__name__ = bound.__qualname__ = name
    bound.__doc__ = fn.__doc__
    return bound


def make_agent(parts: Any, *functions: Callable, **more: Callable) -> Agent:
    """The `Agent` of a learner module: `functions` are its `init`, `init_explore`, `explore`,
    `act`, `update_critic` and `update_actor` in that order (`Agent`'s), `more` any optional
    field (`observe_rewards=`); each takes `parts` first and is bound to it. `update_target`
    runs at `parts.config.tau`, `update_normalizers` is a no-op unless
    `parts.config.obs_normalization`."""
    config = parts.config
    enabled = getattr(config, "obs_normalization", False)
    names = ("init", "init_explore", "explore", "act", "update_critic", "update_actor")
    bound = {**dict(zip(names, functions, strict=True)), **more}
    return Agent(
        update_target=bind("update_target", update_target, tau=config.tau),
        update_normalizers=bind(
            "update_normalizers", update_normalizers, enabled=enabled, axis_name=parts.axis_name
        ),
        **{name: bind(name, fn, parts) for name, fn in bound.items()},
    )


def init_networks(networks: Any, key: jax.Array, batch: int, dims: tuple[int, int, int]):
    """`(actor variables, critic variables)` of `networks` initialised from `key` on zero
    inputs of `batch` rows; `dims`: `(obs_dim, critic_dim, action_dim)`."""
    obs_dim, critic_dim, action_dim = dims
    actor_key, critic_key = jax.random.split(key)
    actor = networks.actor.init(actor_key, jnp.zeros((batch, obs_dim)))
    zeros = jnp.zeros((batch, critic_dim)), jnp.zeros((batch, action_dim))
    return actor, networks.critic.init(critic_key, *zeros)


def step_member(
    state: Any,
    member: str,
    loss_fn: Callable[[Any], tuple[Array, Any]],
    optimizer: optax.GradientTransformation,
    max_grad_norm: float,
    axis_name: str | None,
) -> tuple[Any, Array, Any, Array]:
    """`gradient_step` on `state.<member>_params` and `state.<member>_opt_state`; returns
    `(state with both replaced, loss, aux, grad_norm)`."""
    params, opt_state, loss, aux, grad_norm = gradient_step(
        loss_fn,
        getattr(state, f"{member}_params"),
        getattr(state, f"{member}_opt_state"),
        optimizer,
        max_grad_norm,
        axis_name,
    )
    state = state.replace(**{f"{member}_params": params, f"{member}_opt_state": opt_state})
    return state, loss, aux, grad_norm


def prepare_batch(
    state: Any, batch: Transition, augment: Callable[[Transition], Transition], normalise: bool
) -> Transition:
    """Mirror the raw rows (`augment`, the identity without symmetry), then normalise them with
    the state's `obs_normalizer` / `critic_normalizer` when `normalise`."""
    batch = augment(batch)
    if not normalise:
        return batch
    return normalize_transition(state.obs_normalizer, state.critic_normalizer, batch)


def update_normalizers(
    state: Any, obs: Array, critic: Array, *, enabled: bool, axis_name: str | None
) -> Any:
    """The agent state with its normalisers updated by fresh rows (unchanged if not `enabled`)."""
    if not enabled:
        return state
    return update_agent_normalizers(state, obs, critic, axis_name)


def update_target(state: Any, *, tau: float) -> Any:
    """Polyak averaging of the critic into `target_critic_params` at rate `tau`."""
    target = polyak_update(state.target_critic_params, state.critic_params, tau)
    return state.replace(target_critic_params=target)


def init_noise(key: jax.Array, rho: float, num_envs: int, action_dim: int) -> Array | None:
    """Each env's first correlated draw `[num_envs, A]` (from `fold_in(key, 1)`, so whatever
    else is drawn from `key` stays as with white noise), or None when `rho` is 0."""
    if rho == 0:
        return None
    return jax.random.normal(jax.random.fold_in(key, 1), (num_envs, action_dim), jnp.float32)


def next_noise(rho: float, previous: Array | None, fresh: Array, prev_done: Array) -> Array:
    """The next unit-variance draw per env: `fresh` (standard normal `[N, A]`) with white noise
    (`rho` 0) and in envs whose episode just started (`prev_done [N]`), else the AR(1) step."""
    if rho == 0:
        return fresh
    carried = rho * previous + math.sqrt(1.0 - rho * rho) * fresh
    return jnp.where(prev_done[:, None], fresh, carried)
