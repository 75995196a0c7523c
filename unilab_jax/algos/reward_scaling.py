"""Reward scaling by the running statistics of each env's discounted return (FlashSAC's):
rewards are divided by ``max(sqrt(var G + 1e-8), max|G| / g_max)``, so that the scaled returns
stay within a fixed value support ``[-g_max, g_max]`` whatever the task's reward scale.

``RewardStats`` is part of the agent state (replicated): each env's carried return and the
running mean, variance, count and largest ``|G|`` over all envs and steps seen.

Deviations from the reference UniLab's ``RewardNormalizer`` (``tests/test_reference_learners.py``
replays its recorded feed with both applied):
- Its recursion ``G_t = gamma (1 - d_t) G_{t-1} + r_t`` drops the past at the step that ends
  an episode (``d_t`` is that transition's done), so an episode's last reward starts a new
  return; here ``G_t = r_t + gamma (1 - d_{t-1}) G_{t-1}``, the next episode starts afresh.
- Its running statistics start from a prior (mean 0, variance 1, count 1e-4); here from count
  0, so the first returns replace the prior exactly.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

__all__ = ["RewardStats", "init_reward_stats", "reward_scale", "update_reward_stats"]

Array = jax.Array


@flax.struct.dataclass
class RewardStats:
    """Running statistics of every env's discounted return, for reward scaling."""

    carried: Array  # [num_envs] gamma * (1 - done) * G of each env's last step
    mean: Array  # [] running mean of G (all envs, all steps)
    var: Array  # [] running variance of G
    count: Array  # [] float32 number of G values seen
    abs_max: Array  # [] largest |G| seen


def init_reward_stats(num_envs: int) -> RewardStats:
    """No return seen yet (variance 1, so the scale starts at 1)."""
    zero = jnp.zeros((), jnp.float32)
    return RewardStats(jnp.zeros((num_envs,), jnp.float32), zero, jnp.ones((), jnp.float32),
                       zero, zero)  # fmt: skip


def reward_scale(stats: RewardStats, g_max: float) -> Array:
    """The divisor of the rewards: ``max(sqrt(var G + 1e-8), max|G| / g_max)`` (1 before any
    return was seen)."""
    return jnp.maximum(jnp.sqrt(stats.var + 1e-8), stats.abs_max / g_max)


def update_reward_stats(stats: RewardStats, rewards: Array, dones: Array, gamma: float):
    """The statistics after env steps ``rewards`` / ``dones`` (``[S, num_envs]``, in order):
    per step ``G = r + carried``, then ``carried = gamma * (1 - done) * G``; the step's G values
    merge into the running mean and variance (Chan et al.'s pairwise rule) and the max."""

    def step(s: RewardStats, inputs):
        r, done = inputs
        g = r + s.carried
        n = jnp.asarray(g.shape[0], jnp.float32)
        batch_mean = jnp.mean(g)
        batch_var = jnp.mean(jnp.square(g - batch_mean))
        count = s.count + n
        delta = batch_mean - s.mean
        m2 = s.var * s.count + batch_var * n + jnp.square(delta) * s.count * n / count
        s = RewardStats(
            carried=gamma * (1.0 - done.astype(jnp.float32)) * g,
            mean=s.mean + delta * n / count,
            var=m2 / count,
            count=count,
            abs_max=jnp.maximum(s.abs_max, jnp.max(jnp.abs(g))),
        )
        return s, None

    return jax.lax.scan(step, stats, (rewards, dones))[0]
