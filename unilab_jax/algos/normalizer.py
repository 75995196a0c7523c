"""Running observation normaliser (mean / variance / count), mergeable across devices.

Statistics are merged with Chan et al.'s parallel formula in float32 and
`normalize(x) = (x - mean) / (sqrt(var) + 1e-2)`.

Deviations from the reference (`EmpiricalNormalization` in UniLab / FastTD3):
- One function normalises for both acting and learning, with epsilon 1e-2 (the reference learner
  uses 1e-2, its collector 1e-8).
- FastSAC gets a working normaliser (its reference flag was a no-op), and the critic's
  observations get their own normaliser (the reference TD3 normalises actor inputs only).
- Under data parallelism, each device's batch moments are combined before the merge
  (equal row counts per device): the global mean is the `pmean` of the local means and the
  global variance the `pmean` of the local mean squared deviation *from the global mean*, which
  equals the pmean-of-squares formula without its cancellation.
- The initial count is 0, as in the reference: the first update replaces the prior (mean 0,
  var 1) exactly.
- The merge is Chan et al.'s exactly; the reference's Welford step took the correction term's
  mean difference after the merge (`batch_mean - new_mean`), which underestimates the variance
  while the mean moves (`tests/test_reference_learners.py` checks both against its update).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from unilab_jax.algos.agent import Transition
from unilab_jax.algos.gradients import pmean_if

__all__ = [
    "NORMALIZER_EPS",
    "NormalizerState",
    "init_normalizer",
    "normalize",
    "normalize_tail",
    "normalize_transition",
    "update_agent_normalizers",
    "update_normalizer",
]

Array = jax.Array

NORMALIZER_EPS = 1e-2


@flax.struct.dataclass
class NormalizerState:
    """Running statistics of one observation group."""

    mean: Array  # [D] float32
    var: Array  # [D] float32, population variance
    count: Array  # [] float32, rows seen (summed over devices)


def init_normalizer(dim: int) -> NormalizerState:
    """Mean 0, variance 1, count 0 (the identity until the first update)."""
    return NormalizerState(
        mean=jnp.zeros((dim,), jnp.float32),
        var=jnp.ones((dim,), jnp.float32),
        count=jnp.zeros((), jnp.float32),
    )


def update_normalizer(
    state: NormalizerState, x: Array, axis_name: str | None = None
) -> NormalizerState:
    """Merge the rows `x` `[M, D]` (on every device of `axis_name`) into the statistics."""
    x = x.astype(jnp.float32)
    num_devices = 1 if axis_name is None else jax.lax.psum(1, axis_name)
    batch_count = jnp.asarray(x.shape[0] * num_devices, jnp.float32)
    batch_mean = pmean_if(jnp.mean(x, axis=0), axis_name)
    batch_var = pmean_if(jnp.mean(jnp.square(x - batch_mean), axis=0), axis_name)

    total = state.count + batch_count
    delta = batch_mean - state.mean
    mean = state.mean + delta * (batch_count / total)
    m2 = state.var * state.count + batch_var * batch_count
    m2 = m2 + jnp.square(delta) * (state.count * batch_count / total)
    return NormalizerState(mean=mean, var=m2 / total, count=total)


def normalize(state: NormalizerState, x: Array) -> Array:
    """`(x - mean) / (sqrt(var) + 1e-2)` over the last axis."""
    return (x - state.mean) / (jnp.sqrt(state.var) + NORMALIZER_EPS)


def normalize_tail(state: NormalizerState, x: Array) -> Array:
    """`normalize` of the last `x.shape[-1]` columns of the statistics' group: `x` holds a
    group's trailing columns (a privileged actor's share of the critic observation)."""
    width = x.shape[-1]
    tail = NormalizerState(mean=state.mean[-width:], var=state.var[-width:], count=state.count)
    return normalize(tail, x)


def normalize_transition(
    obs_state: NormalizerState, critic_state: NormalizerState, batch: Transition
) -> Transition:
    """Normalise the actor (obs, next_obs) and critic (critic, next_critic) groups of a batch.

    The statistics are constants of the update (stop-gradient); nothing else changes.
    """
    obs_state, critic_state = jax.lax.stop_gradient((obs_state, critic_state))
    return batch.replace(
        obs=normalize(obs_state, batch.obs),
        next_obs=normalize(obs_state, batch.next_obs),
        critic=normalize(critic_state, batch.critic),
        next_critic=normalize(critic_state, batch.next_critic),
    )


def update_agent_normalizers(
    state: Any, obs: Array, critic: Array, axis_name: str | None = None
) -> Any:
    """Update an agent state's `obs_normalizer` with `obs` `[M, obs_dim]` and its
    `critic_normalizer` with `critic` `[M, critic_dim]` (any dataclass with those fields)."""
    return state.replace(
        obs_normalizer=update_normalizer(state.obs_normalizer, obs, axis_name),
        critic_normalizer=update_normalizer(state.critic_normalizer, critic, axis_name),
    )
