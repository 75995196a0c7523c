"""UniLab's documented PyTorch API, kept on top of the JAX core (`unilab_jax`).

Only the off-policy algorithms live here (`unilab.algos.torch`); they import torch, which is the
optional `[torch]` extra. The JAX core never imports this package.
"""

__all__: list[str] = []
