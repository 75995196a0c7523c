"""C51 (categorical distributional RL) maths shared by FastSAC and FastTD3.

The projection follows the reference (`DistributionalQNetwork.projection`): target atoms
`tz = clip(r + bootstrap * gamma * z, v_min, v_max)`, positions `b = (tz - v_min) / dz`,
`l = floor(b)`, `u = ceil(b)`; when `l == u` (an atom lands exactly on a support point) `l` moves
down by one if `l > 0`, otherwise `u` moves up by one, so the whole mass lands on that point; the
mass `p * (u - b)` goes to `l` and `p * (b - l)` to `u`.

Deviations from the reference:
- `b` is clipped to `[0, K - 1]` before the floor/ceil. With `tz` already clipped this only
  matters when float rounding puts `b` a hair outside the range; there the reference clamps the
  indices *after* computing the masses and loses the row's mass (`u - l == 0`).

The mass is added with one flat scatter-add, like the reference's `index_add_` (a dense
compare-and-sum over `[..., K, K]` was 30x slower on CPU at batch 8192). On GPU the scatter uses
atomics, so the summation order, and the last float bit, may vary from run to run.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = [
    "bootstrap_mask",
    "categorical_cross_entropy",
    "categorical_projection",
    "clipped_target_mass",
    "expected_value",
    "make_support",
    "value_support",
]

Array = jax.Array


def value_support(
    reward_bounds: tuple[float, float], gamma: float, episode_length: int
) -> tuple[float, float]:
    """The C51 support ``(v_min, v_max)`` for per-step rewards within ``reward_bounds``.

    A critic bootstraps through the time limit (from the true final observation), so it
    estimates the infinite-horizon discounted return, bounded by ``r / (1 - gamma)``;
    termination only cuts it short, so the same bounds hold. With ``gamma == 1`` the horizon
    is the episode. The task's bounds carry its margin; the result is rounded to 4 decimals
    (so that (-0.15, 1.2) at 0.97 gives exactly (-5, 40)).
    """
    horizon = 1.0 / (1.0 - gamma) if gamma < 1.0 else float(episode_length)
    low, high = reward_bounds
    return round(min(low, 0.0) * horizon, 4), round(max(high, 0.0) * horizon, 4)


def make_support(v_min: float, v_max: float, num_atoms: int) -> Array:
    """The atom values `z = linspace(v_min, v_max, K)`: `[K]` float32."""
    return jnp.linspace(v_min, v_max, num_atoms, dtype=jnp.float32)


def bootstrap_mask(terminated: Array, truncated: Array) -> Array:
    """`1 - terminated * (1 - truncated)`: 0 only on termination without truncation.

    A truncated row (time limit) bootstraps from `next_obs`, which holds the true final
    observation, even if the task also flagged it terminated.
    """
    return 1.0 - terminated * (1.0 - truncated)


@jax.named_scope("c51_projection")  # a name in profiles (bench/speed/profile.py)
def categorical_projection(
    next_probs: Array, rewards: Array, bootstrap: Array, gamma: float, v_min: float, v_max: float
) -> Array:
    """Project the distribution of `r + bootstrap * gamma * Z'` onto the fixed support.

    Args:
        next_probs: `[..., B, K]` next-state probabilities (leading axes, e.g. an ensemble,
            broadcast against the per-row inputs).
        rewards: `[B]`.
        bootstrap: `[B]` (see `bootstrap_mask`).
    Returns:
        `[..., B, K]` projected probabilities; each row sums to the mass of its input row.
    """
    num_atoms = next_probs.shape[-1]
    z = make_support(v_min, v_max, num_atoms)
    dz = (v_max - v_min) / (num_atoms - 1)
    tz = jnp.clip(rewards[:, None] + (bootstrap * gamma)[:, None] * z, v_min, v_max)  # [B, K]
    b = jnp.clip((tz - v_min) / dz, 0.0, num_atoms - 1.0)
    lower = jnp.floor(b)
    upper = jnp.ceil(b)
    on_point = lower == upper
    # Both masks read the *original* lower: exactly one of them fires for an on-point atom.
    shift_lower = on_point & (lower > 0)
    shift_upper = on_point & (lower == 0)
    lower = jnp.where(shift_lower, lower - 1.0, lower)
    upper = jnp.where(shift_upper, upper + 1.0, upper)
    mass_lower = next_probs * (upper - b)  # [..., B, K]
    mass_upper = next_probs * (b - lower)

    # Scatter-add into a flat [rows * K] buffer, each row offset by row * K (the reference's
    # index_add_). The index clip is a no-op for finite inputs (b is already in range); for a
    # NaN input it keeps the NaN mass in its row, so the loss turns non-finite and the step is
    # skipped instead of silently training on an empty target.
    shape = mass_lower.shape
    num_rows = math.prod(shape[:-1])
    offsets = (jnp.arange(num_rows, dtype=jnp.int32) * num_atoms).reshape(*shape[:-1], 1)

    def flat_index(index: Array) -> Array:
        index = jnp.clip(index.astype(jnp.int32), 0, num_atoms - 1)
        return (jnp.broadcast_to(index, shape) + offsets).reshape(-1)

    out = jnp.zeros((num_rows * num_atoms,), next_probs.dtype)
    out = out.at[flat_index(lower)].add(mass_lower.reshape(-1))
    out = out.at[flat_index(upper)].add(mass_upper.reshape(-1))
    return out.reshape(shape)


def clipped_target_mass(
    next_probs: Array, rewards: Array, bootstrap: Array, gamma: float, v_min: float, v_max: float
) -> tuple[Array, Array]:
    """The share of target probability that the projection clips at ``v_min`` and ``v_max``.

    Mass whose target atom ``r + bootstrap * gamma * z`` falls outside the support is moved onto
    its edge, so the critic cannot represent values beyond it; when the returns outgrow the
    support (a discount too close to 1 for ``v_max``) this share stays high and learning
    stalls without any error. Returns two scalars in [0, 1]: the mean over the leading axes and
    rows of the clipped mass below ``v_min`` and above ``v_max``.
    """
    z = make_support(v_min, v_max, next_probs.shape[-1])
    tz = rewards[:, None] + (bootstrap * gamma)[:, None] * z  # [B, K], unclipped
    low = jnp.sum(next_probs * (tz < v_min), axis=-1)  # [..., B]
    high = jnp.sum(next_probs * (tz > v_max), axis=-1)
    return jnp.mean(low), jnp.mean(high)


def expected_value(probs: Array, support: Array) -> Array:
    """`sum_k probs[..., k] * z[k]`: `[..., K] -> [...]`."""
    return jnp.sum(probs * support, axis=-1)


def categorical_cross_entropy(
    target_probs: Array, logits: Array, log_prob_floor: float | None = None
) -> Array:
    """`-sum_k target[k] * log_softmax(logits)[k]`: `[..., K] -> [...]`.

    `log_prob_floor` clamps the log-probabilities from below (FastSAC uses -30; FastTD3 none).
    """
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    if log_prob_floor is not None:
        log_probs = jnp.maximum(log_probs, log_prob_floor)
    return -jnp.sum(target_probs * log_probs, axis=-1)
