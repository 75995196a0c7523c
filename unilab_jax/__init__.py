"""unilab-jax: massively parallel off-policy RL (FastSAC, FastTD3) on JAX and MJX.

``unilab_jax.load_policy(run)`` and ``unilab_jax.evaluate(policy)`` (from
``unilab_jax.policy``) are imported on first use, so ``import unilab_jax`` stays light.
"""

__version__ = "0.1.0"
__all__ = ["evaluate", "load_policy"]


def __getattr__(name: str):
    if name in __all__:
        from unilab_jax import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
