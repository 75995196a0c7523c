"""Running observation normaliser: exact running moments, formula, equal-count device merge."""

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.algos.agent import Transition
from unilab_jax.algos.normalizer import (
    init_normalizer,
    normalize,
    normalize_transition,
    update_normalizer,
)


def test_running_moments_equal_numpy_over_all_data_seen():
    rng = np.random.default_rng(0)
    state = init_normalizer(3)
    seen = []
    for size in (7, 64, 1, 300, 33):
        x = rng.normal([5.0, -2.0, 0.0], [3.0, 0.5, 10.0], size=(size, 3)).astype(np.float32)
        seen.append(x)
        state = jax.jit(update_normalizer)(state, jnp.asarray(x))
    data = np.concatenate(seen).astype(np.float64)
    np.testing.assert_allclose(state.mean, data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state.var, data.var(0), rtol=1e-5, atol=1e-5)
    assert float(state.count) == len(data)


def test_initial_state_is_identity_and_first_update_replaces_the_prior():
    state = init_normalizer(2)
    x = jnp.array([[1.0, 2.0], [3.0, 6.0]])
    np.testing.assert_allclose(normalize(state, x), x / 1.01, rtol=1e-6)
    state = update_normalizer(state, x)
    np.testing.assert_allclose(state.mean, [2.0, 4.0])
    np.testing.assert_allclose(state.var, [1.0, 4.0])


def test_normalize_formula():
    state = init_normalizer(2).replace(mean=jnp.array([1.0, 2.0]), var=jnp.array([4.0, 0.25]))
    x = jnp.array([[3.0, 1.0]])
    np.testing.assert_allclose(normalize(state, x), [[2.0 / 2.01, -1.0 / 0.51]], rtol=1e-6)


def test_equal_count_merge_across_an_axis_equals_one_big_batch():
    # vmap with an axis name runs the same collectives as shard_map: two "devices", 50 rows each.
    rng = np.random.default_rng(1)
    prior = update_normalizer(init_normalizer(4), jnp.asarray(rng.normal(size=(20, 4)) + 3.0))
    x = jnp.asarray(rng.normal(1.0, 2.0, size=(100, 4)), jnp.float32)
    split = jax.vmap(lambda xs: update_normalizer(prior, xs, "data"), axis_name="data")(
        x.reshape(2, 50, 4)
    )
    whole = update_normalizer(prior, x)
    for device in range(2):
        np.testing.assert_allclose(split.mean[device], whole.mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(split.var[device], whole.var, rtol=1e-5, atol=1e-6)
        assert float(split.count[device]) == 120.0


def test_normalize_transition_uses_the_actor_and_critic_statistics():
    obs_state = init_normalizer(2).replace(mean=jnp.array([1.0, 1.0]))
    critic_state = init_normalizer(3).replace(mean=jnp.array([2.0, 2.0, 2.0]))
    batch = Transition(
        obs=jnp.ones((1, 2)),
        critic=jnp.ones((1, 3)),
        actions=jnp.ones((1, 1)),
        rewards=jnp.ones((1,)),
        next_obs=jnp.ones((1, 2)),
        next_critic=jnp.ones((1, 3)),
        terminated=jnp.zeros((1,)),
        truncated=jnp.zeros((1,)),
    )
    out = normalize_transition(obs_state, critic_state, batch)
    np.testing.assert_allclose(out.obs, 0.0)
    np.testing.assert_allclose(out.next_obs, 0.0)
    np.testing.assert_allclose(out.critic, -1.0 / 1.01, rtol=1e-6)
    np.testing.assert_allclose(out.next_critic, -1.0 / 1.01, rtol=1e-6)
    np.testing.assert_allclose(out.actions, 1.0)
