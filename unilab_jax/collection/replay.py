"""Device-resident replay ring buffer.

Layout: every field is stored as ``[num_envs, replay_buffer_n, ...]``, a per-env ring of
``replay_buffer_n`` slots (capacity ``replay_buffer_n * num_envs`` rows, as in the reference,
where ``replay_buffer_n`` is the number of vectorised env steps kept). One vectorised env step
writes one slot for every env with a single ``dynamic_update_slice``: no whole-buffer copy per
insert (Brax's FIFO rolls the whole buffer), and the write never wraps mid-insert.

The env axis comes first so that under ``shard_map`` the buffer shards with the envs along
axis 0: each device owns the rows of its own envs and samples from them. The two counters
(next slot to write, filled slots) are device arrays, identical on every device because all
devices insert in lockstep; there is no host-side counter.

Sampling is uniform with replacement over the filled rows, as in the reference
(``ReplayBuffer.sample``).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from unilab_jax.algos.agent import Transition

__all__ = ["ReplayState", "init_replay", "replay_insert", "replay_sample", "replay_size"]


@flax.struct.dataclass
class ReplayState:
    """Ring buffer of transitions.

    Attributes:
        data: a ``Transition`` whose leaves are ``[num_envs, n_slots, ...]``.
        insert_slot: [] int32, the slot the next insert writes.
        filled: [] int32, number of slots holding data (saturates at ``n_slots``).
    """

    data: Transition
    insert_slot: jax.Array
    filled: jax.Array

    @property
    def n_slots(self) -> int:
        return self.data.rewards.shape[1]


def init_replay(example: Transition, n_slots: int) -> ReplayState:
    """An empty buffer shaped after ``example``, one env step of the batch: leaves ``[N, ...]``."""
    if n_slots <= 0:
        raise ValueError(f"replay_buffer_n must be positive, got {n_slots}")
    data = jax.tree.map(lambda x: jnp.zeros((x.shape[0], n_slots, *x.shape[1:]), x.dtype), example)
    return ReplayState(data=data, insert_slot=jnp.int32(0), filled=jnp.int32(0))


def replay_insert(replay: ReplayState, rows: Transition) -> ReplayState:
    """Write one vectorised env step (leaves ``[N, ...]``) into the current slot."""
    slot = replay.insert_slot

    def write(buf: jax.Array, x: jax.Array) -> jax.Array:
        start = (0, slot) + (0,) * (buf.ndim - 2)
        return jax.lax.dynamic_update_slice(buf, x[:, None].astype(buf.dtype), start)

    data = jax.tree.map(write, replay.data, rows)
    n = replay.n_slots
    return ReplayState(
        data=data,
        insert_slot=(slot + 1) % n,
        filled=jnp.minimum(replay.filled + 1, n),
    )


def replay_size(replay: ReplayState) -> jax.Array:
    """Rows stored in this (local) buffer: filled slots × envs."""
    return replay.filled * replay.data.rewards.shape[0]


def replay_sample(replay: ReplayState, key: jax.Array, batch_size: int) -> Transition:
    """``batch_size`` rows drawn uniformly with replacement over the filled rows.

    Every row is equally likely: the env index is uniform over all envs and the slot index
    uniform over the filled slots, and every env has the same number of filled slots.
    The caller must only sample a non-empty buffer (``filled > 0``).
    """
    num_envs = replay.data.rewards.shape[0]
    k_env, k_slot = jax.random.split(key)
    env_idx = jax.random.randint(k_env, (batch_size,), 0, num_envs)
    slot_idx = jax.random.randint(k_slot, (batch_size,), 0, jnp.maximum(replay.filled, 1))
    return jax.tree.map(lambda buf: buf[env_idx, slot_idx], replay.data)
