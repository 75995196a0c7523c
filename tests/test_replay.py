"""Replay ring buffer: wrap-around, sampling range, in-place insert."""

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.algos.agent import Transition
from unilab_jax.collection.replay import init_replay, replay_insert, replay_sample, replay_size


def _rows(value: float, num_envs: int = 2) -> Transition:
    """One vectorised step whose every field encodes (step value, env index)."""
    env = jnp.arange(num_envs, dtype=jnp.float32)
    tag = value * 10 + env  # [N]
    return Transition(
        obs=jnp.stack([tag, tag], -1),
        critic=jnp.stack([tag, tag, tag], -1),
        actions=tag[:, None],
        rewards=tag,
        next_obs=jnp.stack([tag + 1, tag + 1], -1),
        next_critic=jnp.stack([tag + 1] * 3, -1),
        terminated=jnp.zeros(num_envs),
        truncated=jnp.zeros(num_envs),
    )


def test_insert_wraps_around_and_overwrites_oldest_slot():
    replay = init_replay(_rows(0.0), n_slots=3)
    insert = jax.jit(replay_insert)
    for step in range(1, 6):  # 5 steps into 3 slots: slots hold steps 4, 5, 3
        replay = insert(replay, _rows(float(step)))
    assert int(replay.filled) == 3
    assert int(replay.insert_slot) == 5 % 3
    assert int(replay_size(replay)) == 3 * 2
    np.testing.assert_array_equal(np.asarray(replay.data.rewards), [[40, 50, 30], [41, 51, 31]])
    np.testing.assert_array_equal(np.asarray(replay.data.obs[1, 2]), [31, 31])


def test_sample_draws_only_filled_rows_and_all_of_them():
    replay = init_replay(_rows(0.0, num_envs=4), n_slots=8)
    for step in range(1, 4):  # 3 of 8 slots filled
        replay = replay_insert(replay, _rows(float(step), num_envs=4))
    batch = jax.jit(replay_sample, static_argnums=2)(replay, jax.random.PRNGKey(0), 4096)
    tags = np.asarray(batch.rewards)
    valid = {s * 10 + e for s in (1, 2, 3) for e in range(4)}
    assert set(tags.tolist()) == valid  # never an empty slot, every stored row reachable
    counts = np.array([np.sum(tags == v) for v in sorted(valid)])
    expected = 4096 / len(valid)
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))  # uniform
    # Rows stay intact: every field of a sampled row comes from the same stored row.
    np.testing.assert_array_equal(np.asarray(batch.next_obs[:, 0]), tags + 1)
    np.testing.assert_array_equal(np.asarray(batch.critic[:, 2]), tags)


def test_donated_insert_updates_the_buffer_in_place():
    replay = init_replay(_rows(0.0), n_slots=4)
    hlo = jax.jit(replay_insert, donate_argnums=0).lower(replay, _rows(1.0)).compile().as_text()
    # The output buffer aliases the donated input: no whole-buffer copy per insert.
    assert "input_output_alias" in hlo
    jaxpr = str(jax.make_jaxpr(replay_insert)(replay, _rows(1.0)))
    assert "dynamic_update_slice" in jaxpr and "concatenate" not in jaxpr
