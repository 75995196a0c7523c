"""FastTD3 (PyTorch): `FastTD3Learner` and `TD3Actor`. See `learner` for the maths."""

from unilab.algos.torch.fast_td3.learner import FastTD3Learner, TD3Actor

__all__ = ["FastTD3Learner", "TD3Actor"]
