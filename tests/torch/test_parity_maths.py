"""Parity of the shared maths: the C51 projection and the observation normaliser compute the
same numbers in torch (`unilab.algos.torch.common`) and in JAX (`unilab_jax.algos`).

The update-level parity (one SAC / TD3 update on identical weights, batch and noise) is in
`test_convert.py`; the physics parity of both backends in `tests/test_vec_env.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from unilab.algos.torch.common.networks import categorical_projection as torch_projection
from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab_jax.algos.c51 import categorical_projection as jax_projection
from unilab_jax.algos.c51 import make_support
from unilab_jax.algos.normalizer import init_normalizer, normalize, update_normalizer

pytestmark = pytest.mark.parity


def both_projections(probs, rewards, bootstrap, gamma, v_min, v_max):
    k = probs.shape[-1]
    t = torch_projection(
        torch.from_numpy(probs), torch.from_numpy(rewards), torch.from_numpy(bootstrap),
        gamma, v_min, v_max, torch.linspace(v_min, v_max, k),
    )  # fmt: skip
    j = jax.jit(jax_projection, static_argnums=(3, 4, 5))(
        jnp.asarray(probs), jnp.asarray(rewards), jnp.asarray(bootstrap), gamma, v_min, v_max
    )
    return t.numpy(), np.asarray(j)


def test_projection_edge_cases_are_identical():
    """On-point atoms (l == u, with l > 0 and with l == 0), clipping at both ends, terminal
    rows, and the support points themselves: the same output to the last bit."""
    v_min, v_max, k = -2.0, 2.0, 5
    support = np.asarray(make_support(v_min, v_max, k))
    np.testing.assert_array_equal(support, torch.linspace(v_min, v_max, k).numpy())
    probs = np.full((6, k), 0.2, np.float32)
    rewards = np.array([0.0, 1.0, -2.0, 7.0, -9.0, 0.25], np.float32)
    bootstrap = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0], np.float32)
    t, j = both_projections(probs, rewards, bootstrap, 0.5, v_min, v_max)
    np.testing.assert_allclose(t, j, rtol=1e-5, atol=1e-6)
    expected_rows = [[0, 0.3, 0.4, 0.3, 0], [0, 0, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]]
    np.testing.assert_allclose(t[:4], expected_rows, atol=1e-7)
    np.testing.assert_allclose(t.sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("gamma", [0.97, 0.99])
def test_projection_on_random_distributions(gamma):
    """Ensemble-shaped `[2, B, 101]` inputs at the reference's support, 256 rows including
    terminal and clipped ones.

    Measured bound 7.7e-6 (both gammas): XLA divides by `delta_z` as a multiplication by its
    reciprocal, so the bin position `b = (tz - v_min) / delta_z` can differ by one float32 ulp
    (7.6e-6 at b ~ 94), which moves that much mass between the two neighbouring atoms of a
    terminal row. The tolerance is 2x that; mass is conserved in both."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 256, 101)).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    rewards = rng.normal(0.0, 8.0, 256).astype(np.float32)
    bootstrap = (rng.random(256) > 0.1).astype(np.float32)
    t, j = both_projections(probs.astype(np.float32), rewards, bootstrap, gamma, -20.0, 20.0)
    diff = np.abs(t - j).max()
    print(f"projection max |torch - jax| = {diff:.2e}")
    assert diff <= 1.6e-5
    np.testing.assert_allclose(t.sum(-1), probs.sum(-1), rtol=1e-5)


def test_normaliser_updates_are_identical():
    """The same sequence of batches (sizes 1 to 257, scales 1e-3 to 1e3) gives the same count
    exactly and the same mean, variance and normalised outputs to float32 rounding.

    Measured: the first update is bit-identical; later means differ by at most ~1 ulp (2.8e-7
    relative), the summation order of the batch mean (XLA's tree reduction vs torch's); a
    variance inherits that ulp amplified by mean / std (5.9e-5 relative on a column with
    std / mean = 2e-4)."""
    rng = np.random.default_rng(1)
    scale = np.array([1e-3, 1.0, 30.0, 1e3], np.float32)
    offset = np.array([5.0, -2.0, 0.0, 100.0], np.float32)
    torch_norm = EmpiricalNormalization(4)
    jax_state = init_normalizer(4)
    update = jax.jit(update_normalizer)
    for size in (1, 7, 64, 257, 2, 33):
        x = (rng.normal(size=(size, 4)) * scale + offset).astype(np.float32)
        torch_norm.update(torch.from_numpy(x))
        jax_state = update(jax_state, jnp.asarray(x))
        np.testing.assert_allclose(torch_norm.mean.numpy(), jax_state.mean, rtol=2e-6, atol=0)
        # Column 0 has std / mean ~ 2e-4: one ulp of the mean (4.8e-7 at 5.0) shifts every
        # deviation by ~1e-4 of its size, hence up to 6e-5 relative on that variance.
        np.testing.assert_allclose(torch_norm._var[0].numpy(), jax_state.var, rtol=2e-4, atol=0)
        assert float(torch_norm.count) == float(jax_state.count)
        if size == 1:
            np.testing.assert_array_equal(torch_norm.mean.numpy(), np.asarray(jax_state.mean))
    probe = (rng.normal(size=(16, 4)) * scale + offset).astype(np.float32)
    t = torch_norm(torch.from_numpy(probe)).numpy()
    j = np.asarray(jax.jit(normalize)(jax_state, jnp.asarray(probe)))
    np.testing.assert_allclose(t, j, rtol=1e-5, atol=1e-6)
