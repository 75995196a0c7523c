"""FastSAC (PyTorch): `FastSACLearner` and its networks. See `learner` for the maths."""

from unilab.algos.torch.fast_sac.learner import (
    DistributionalQNetwork,
    FastSACLearner,
    SACActor,
    SACCritic,
)

__all__ = ["DistributionalQNetwork", "FastSACLearner", "SACActor", "SACCritic"]
