"""The LAPACK-free CPU Cholesky (unilab_jax.envs.cpu_linalg) computes what LAPACK computes."""

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.cpu_linalg import pure_cholesky


def test_pure_cholesky_matches_lapack():
    a = jax.random.normal(jax.random.PRNGKey(0), (64, 9, 9))
    spd = a @ jnp.swapaxes(a, -1, -2) + 9.0 * jnp.eye(9)
    np.testing.assert_allclose(pure_cholesky(spd), jnp.linalg.cholesky(spd), rtol=2e-5, atol=2e-5)
    # (Gradients are not pure_cholesky's business: install() swaps only the lowering of
    # cholesky_p, whose JVP rule stays jax's own.)
    assert jnp.all(jnp.triu(pure_cholesky(spd), 1) == 0)
