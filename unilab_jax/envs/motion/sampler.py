"""Where a tracking episode starts in its clips: the reference's frame sampler, as pure functions.

Frames are global indices into the clips laid end to end (``MotionClips``). The modes are the
reference's ``MotionSampler`` modes:

* ``"start"``: frame 0; ``"clip_start"``: the first frame of a clip drawn uniformly;
* ``"uniform"``: any frame, uniformly;
* ``"mixed"``: frame 0 with probability ``start_ratio``, else uniform;
* ``"adaptive"`` (BeyondMimic's): the frames are cut into ``bins`` equal bins
  (``bins = frames // fps + 1``: one a second); a bin is drawn with probability proportional to
  its failure rate plus ``uniform_ratio / bins`` (:func:`bin_probabilities`), then a frame
  uniformly inside it (:func:`adaptive_frame`). The failure rate is an exponential moving
  average, per bin, of the episodes that terminated while tracking a frame of that bin
  (:func:`update_failures`); it only moves on a step where some episode terminated, as the
  reference's does.

The failure rates are the batch's, one vector for every env (a ``persistent_state`` of the
task, updated in ``update_batch``). Deviation from the reference: it updates the rates before
drawing the resets of the same step, ours after (the draw happens inside each env's step); with
the rate's smoothing factor of 0.001 that moves a draw's probabilities by at most 0.1 % of
their size. Under several devices each device keeps the rates of its own share of the batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "MODES",
    "adaptive_frame",
    "bin_of",
    "bin_probabilities",
    "default_bins",
    "draw_frame",
    "mixed_frame",
    "update_failures",
]

MODES = ("start", "clip_start", "uniform", "adaptive", "mixed")


def default_bins(num_frames: int, fps: int) -> int:
    """The reference's bin count: one bin per second of the clips, plus one."""
    return int(num_frames // fps) + 1


def bin_probabilities(failures: jax.Array, uniform_ratio: float) -> jax.Array:
    """``failures + uniform_ratio / bins``, normalised (float32, as the reference's)."""
    bins = failures.shape[-1]
    p = failures + jnp.float32(uniform_ratio / float(bins))
    return p / jnp.sum(p, axis=-1, keepdims=True)


def adaptive_frame(
    bin_index: jax.Array, offset: jax.Array, bins: int, num_frames: int
) -> jax.Array:
    """The frame of a draw: ``int((bin + offset) / bins * (num_frames - 1))``, ``offset`` in
    [0, 1)."""
    x = (bin_index.astype(jnp.float32) + offset) / jnp.float32(bins) * jnp.float32(num_frames - 1)
    return x.astype(jnp.int32)


def mixed_frame(coin: jax.Array, uniform_frame: jax.Array, start_ratio: float) -> jax.Array:
    """``mixed``: frame 0 where ``coin`` (``U(0, 1)``) is below ``start_ratio``, else the
    uniformly drawn ``uniform_frame`` (the reference's Bernoulli, then its uniform frame)."""
    return jnp.where(coin < jnp.float32(start_ratio), 0, uniform_frame).astype(jnp.int32)


def bin_of(frame: jax.Array, bins: int, num_frames: int) -> jax.Array:
    """The bin a frame falls in: ``frame * bins // num_frames``, clipped to the bins."""
    return jnp.clip((frame * bins) // max(num_frames, 1), 0, bins - 1)


def update_failures(
    failures: jax.Array, frames: jax.Array, terminated: jax.Array, alpha: float, num_frames: int
) -> jax.Array:
    """The failure rates ``[bins]`` after a step whose terminated episodes (``terminated`` [N])
    were tracking ``frames`` [N]: ``alpha * counts + (1 - alpha) * failures`` where any episode
    terminated, unchanged otherwise."""
    bins = failures.shape[-1]
    counts = jnp.sum(
        jax.nn.one_hot(bin_of(frames, bins, num_frames), bins, dtype=jnp.float32)
        * terminated[:, None].astype(jnp.float32),
        axis=0,
    )
    moved = jnp.float32(alpha) * counts + jnp.float32(1.0 - alpha) * failures
    return jnp.where(jnp.any(terminated), moved, failures)


def draw_frame(
    key: jax.Array,
    mode: str,
    failures: jax.Array,
    *,
    num_frames: int,
    clip_offsets: jax.Array,
    start_ratio: float,
    uniform_ratio: float,
) -> jax.Array:
    """One episode's first frame (int32) in ``mode`` (module docstring)."""
    k_choice, k_offset = jax.random.split(key)
    if mode == "start":
        return jnp.zeros((), jnp.int32)
    if mode == "clip_start":
        clip = jax.random.randint(k_choice, (), 0, clip_offsets.shape[0])
        return clip_offsets[clip].astype(jnp.int32)
    uniform = jax.random.randint(k_offset, (), 0, num_frames).astype(jnp.int32)
    if mode == "uniform":
        return uniform
    if mode == "mixed":
        return mixed_frame(jax.random.uniform(k_choice), uniform, start_ratio)
    if mode == "adaptive":
        p = bin_probabilities(failures, uniform_ratio)
        bin_index = jax.random.choice(k_choice, failures.shape[-1], p=p)
        offset = jax.random.uniform(k_offset)
        return adaptive_frame(bin_index, offset, failures.shape[-1], num_frames)
    raise ValueError(f"unknown sampling mode {mode!r}; known: {', '.join(MODES)}")
