"""C51 maths: hand-worked projections on a 5-atom support, the bootstrap rule, mass conservation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.algos.c51 import (
    bootstrap_mask,
    categorical_cross_entropy,
    categorical_projection,
    clipped_target_mass,
    expected_value,
    make_support,
)

# Support z = [-2, -1, 0, 1, 2], dz = 1: atom index = value + 2.
V_MIN, V_MAX, K = -2.0, 2.0, 5


def np_projection(probs, rewards, bootstrap, gamma, v_min, v_max):
    """Row-by-row float64 transcription of the reference projection (index_add_ version)."""
    probs = np.asarray(probs, np.float64)
    num_atoms = probs.shape[-1]
    z = np.linspace(v_min, v_max, num_atoms)
    dz = (v_max - v_min) / (num_atoms - 1)
    out = np.zeros_like(probs)
    for row in range(probs.shape[0]):
        tz = np.clip(rewards[row] + bootstrap[row] * gamma * z, v_min, v_max)
        for j in range(num_atoms):
            b = (tz[j] - v_min) / dz
            lo, up = int(np.floor(b)), int(np.ceil(b))
            if lo == up:
                if lo > 0:
                    lo -= 1
                else:
                    up += 1
            lo, up = min(max(lo, 0), num_atoms - 1), min(max(up, 0), num_atoms - 1)
            out[row, lo] += probs[row, j] * (up - b)
            out[row, up] += probs[row, j] * (b - lo)
    return out


def project(probs, rewards, bootstrap, gamma=0.5):
    return np.asarray(
        categorical_projection(
            jnp.asarray(probs, jnp.float32),
            jnp.asarray(rewards, jnp.float32),
            jnp.asarray(bootstrap, jnp.float32),
            gamma,
            V_MIN,
            V_MAX,
        )
    )


UNIFORM = np.full((1, K), 1.0 / K)


def test_support_is_linspace():
    np.testing.assert_allclose(make_support(V_MIN, V_MAX, K), [-2, -1, 0, 1, 2])


def test_atom_on_support_point_with_lower_above_zero_keeps_its_mass_there():
    # bootstrap 0, r = 1: every atom lands on z = 1 (b = 3, l == u == 3 -> l = 2, mass to u).
    np.testing.assert_allclose(project(UNIFORM, [1.0], [0.0]), [[0, 0, 0, 1, 0]], atol=1e-6)


def test_atom_on_first_support_point_keeps_its_mass_there():
    # r = v_min: b = 0, l == u == 0 -> u = 1 and mass (u - b) = 1 stays at index 0.
    np.testing.assert_allclose(project(UNIFORM, [-2.0], [0.0]), [[1, 0, 0, 0, 0]], atol=1e-6)


def test_atom_between_points_splits_its_mass_linearly():
    # One atom at z = 1, r = 0.25, gamma 0.5: tz = 0.75 -> b = 2.75: 0.25 to idx 2, 0.75 to idx 3.
    probs = np.array([[0, 0, 0, 1.0, 0]])
    np.testing.assert_allclose(project(probs, [0.25], [1.0]), [[0, 0, 0.25, 0.75, 0]], atol=1e-6)


def test_full_distribution_hand_worked():
    # tz = 0.5 + 0.5 z = [-0.5, 0, 0.5, 1, 1.5] -> b = [1.5, 2, 2.5, 3, 3.5]:
    #   p0 .10 -> .05 idx1, .05 idx2 | p1 .20 -> idx2 (exact) | p2 .30 -> .15 idx2, .15 idx3
    #   p3 .25 -> idx3 (exact)      | p4 .15 -> .075 idx3, .075 idx4
    probs = np.array([[0.1, 0.2, 0.3, 0.25, 0.15]])
    expected = [[0.0, 0.05, 0.4, 0.475, 0.075]]
    np.testing.assert_allclose(project(probs, [0.5], [1.0]), expected, atol=1e-6)


def test_targets_above_v_max_are_clamped_to_last_atom():
    np.testing.assert_allclose(project(UNIFORM, [7.0], [1.0]), [[0, 0, 0, 0, 1]], atol=1e-6)


def test_targets_below_v_min_are_clamped_to_first_atom():
    np.testing.assert_allclose(project(UNIFORM, [-7.0], [1.0]), [[1, 0, 0, 0, 0]], atol=1e-6)


def test_bootstrap_zero_puts_all_mass_at_reward():
    probs = np.array([[0.1, 0.2, 0.3, 0.25, 0.15], [0.1, 0.2, 0.3, 0.25, 0.15]])
    out = project(probs, [0.0, -0.5], [0.0, 0.0])
    np.testing.assert_allclose(out, [[0, 0, 1, 0, 0], [0, 0.5, 0.5, 0, 0]], atol=1e-6)


def test_matches_reference_transcription_on_random_inputs():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(11), size=64)
    rewards = rng.uniform(-8, 8, size=64)
    rewards[:8] = np.arange(-4, 4)  # some atoms exactly on support points
    bootstrap = rng.integers(0, 2, size=64).astype(np.float64)
    out = categorical_projection(
        jnp.asarray(probs, jnp.float32),
        jnp.asarray(rewards, jnp.float32),
        jnp.asarray(bootstrap, jnp.float32),
        0.97,
        -5.0,
        5.0,
    )
    expected = np_projection(probs, rewards, bootstrap, 0.97, -5.0, 5.0)
    np.testing.assert_allclose(out, expected, atol=2e-6)


def test_projection_preserves_expected_value_without_clipping():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(K), size=16)
    rewards = rng.uniform(-0.5, 0.5, size=16)
    out = project(probs, rewards, np.ones(16), gamma=0.5)
    z = np.linspace(V_MIN, V_MAX, K)
    np.testing.assert_allclose(out @ z, rewards + 0.5 * probs @ z, atol=1e-5)


def test_mass_is_conserved_under_jit_and_vmap():
    key = jax.random.key(0)
    logits = jax.random.normal(key, (3, 2, 256, 101)) * 3.0  # [vmap, ensemble, B, K]
    rewards = jax.random.uniform(jax.random.key(1), (3, 256), minval=-40.0, maxval=40.0)
    bootstrap = (jax.random.uniform(jax.random.key(2), (3, 256)) < 0.7).astype(jnp.float32)

    def proj(lg, r, bs):
        return categorical_projection(jax.nn.softmax(lg), r, bs, 0.97, -20.0, 20.0)

    out = jax.jit(jax.vmap(proj))(logits, rewards, bootstrap)
    assert out.shape == (3, 2, 256, 101)
    assert bool(jnp.all(out >= -1e-7))
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("terminated", "truncated", "expected"),
    [(0.0, 0.0, 1.0), (0.0, 1.0, 1.0), (1.0, 0.0, 0.0), (1.0, 1.0, 1.0)],
)
def test_bootstrap_stops_only_on_termination_without_truncation(terminated, truncated, expected):
    assert float(bootstrap_mask(jnp.float32(terminated), jnp.float32(truncated))) == expected


def test_expected_value_and_cross_entropy():
    z = make_support(V_MIN, V_MAX, K)
    probs = jnp.array([0.1, 0.2, 0.3, 0.25, 0.15])
    assert float(expected_value(probs, z)) == pytest.approx(0.15, abs=1e-6)
    logits = jnp.log(jnp.array([0.5, 0.5, 1e-20, 1e-20, 1e-20]))
    target = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0])
    # log p(idx 2) ~ -46: unclamped it dominates; the FastSAC floor caps it at 30.
    assert float(categorical_cross_entropy(target, logits)) > 40.0
    assert float(categorical_cross_entropy(target, logits, log_prob_floor=-30.0)) == 30.0


def test_non_finite_reward_poisons_its_row_instead_of_vanishing():
    # A NaN row must make the cross-entropy NaN (so the step is skipped), not leave a zero row.
    out = project(np.vstack([UNIFORM, UNIFORM]), [np.nan, 0.0], [1.0, 1.0])
    assert np.isnan(out[0]).any()
    assert np.isfinite(out[1]).all()


def test_clipped_target_mass_is_the_share_projected_onto_an_edge_hand_worked():
    # z = [-1, 0, 1], gamma 0.5: reward 0.8 gives targets [0.3, 0.8, 1.3] (the top one clips),
    # reward -0.8 gives [-1.3, -0.8, -0.3] (the bottom one clips).
    probs = jnp.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    low, high = clipped_target_mass(
        probs, jnp.array([0.8, -0.8]), jnp.ones(2), gamma=0.5, v_min=-1.0, v_max=1.0
    )
    np.testing.assert_allclose([low, high], [0.2 / 2, 0.5 / 2], atol=1e-7)
    # Inside the support nothing clips, and termination (bootstrap 0) keeps r alone.
    low, high = clipped_target_mass(
        probs, jnp.array([0.0, 0.9]), jnp.array([1.0, 0.0]), 0.5, -1.0, 1.0
    )
    assert float(low) == 0.0 and float(high) == 0.0
