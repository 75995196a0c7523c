"""Algorithms of the UniLab API. The PyTorch learners are in `unilab.algos.torch`."""

__all__: list[str] = []
