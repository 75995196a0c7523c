"""unilab-jax: massively parallel off-policy RL (FastSAC, FastTD3) on JAX and MJX."""

__version__ = "0.1.0"
