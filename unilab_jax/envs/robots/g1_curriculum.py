"""The penalty curriculum of G1WalkFlat: penalties grow as the episodes get long.

The reference (UniLab's ``EpisodeLengthTracker`` + ``PenaltyCurriculum``) keeps one running
mean ``L`` of the lengths of *terminated* episodes (truncated ones do not count) and one scale
``s`` of every penalty weight, for the whole batch. After each control step on which some
episodes terminated, with ``n`` of them of mean length ``m``::

    w = min(n / window, 1);     L = (1 - w) L + w m
    s = s (1 - degree)  if L < level_down,  s (1 + degree)  if L > level_up;   s = clip(s, min, max)

``window = max(1, int(curriculum_window * num_envs / curriculum_batch))``: 1000 episodes at the
reference's 4096 envs, 1 at 8 or fewer (then ``L`` is the mean of the last step's terminations).
``L`` starts at 0 and ``s`` at ``curriculum_initial_scale``. The new scale weighs the next
step's reward. Here ``L`` and ``s`` are float32 (the reference's are float64; the golden test
states the difference over 1600 updates).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from unilab_jax.envs.robots.g1_config import G1WalkFlatConfig

__all__ = ["curriculum_window", "update_penalty_curriculum"]


def curriculum_window(num_envs: int, config: G1WalkFlatConfig) -> int:
    """Averaging window (episodes) of the mean episode length for a batch of ``num_envs``."""
    return max(1, int(config.curriculum_window * num_envs / config.curriculum_batch))


def update_penalty_curriculum(
    scale: jax.Array,
    mean_length: jax.Array,
    lengths: jax.Array,
    terminated: jax.Array,
    window: int,
    config: G1WalkFlatConfig,
) -> tuple[jax.Array, jax.Array]:
    """``(scale, mean_length)`` after one control step (module docstring).

    ``scale`` / ``mean_length`` []: the batch's values before the step; ``lengths`` [N]: each
    env's episode length (control steps, counting this one); ``terminated`` [N]: the episodes
    that terminated on this step. Unchanged when none did.
    """
    count = jnp.sum(terminated.astype(jnp.float32))
    total = jnp.sum(jnp.where(terminated, lengths, 0).astype(jnp.float32))
    batch_mean = total / jnp.maximum(count, 1.0)
    weight = jnp.minimum(count / window, 1.0)
    average = mean_length * (1.0 - weight) + batch_mean * weight
    degree = config.curriculum_degree
    change = jnp.where(
        average < config.curriculum_level_down,
        -degree,
        jnp.where(average > config.curriculum_level_up, degree, 0.0),
    )
    # s + s * change, not s * (1 + change): float32(1.001) is 4.7e-8 off, a bias that
    # compounds over the updates (1.5e-5 after 1600 of them); this way only rounding remains.
    new_scale = jnp.clip(
        scale + scale * change, config.curriculum_min_scale, config.curriculum_max_scale
    )
    ended = count > 0
    return jnp.where(ended, new_scale, scale), jnp.where(ended, average, mean_length)
