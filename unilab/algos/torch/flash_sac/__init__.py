"""FlashSAC (PyTorch): `FlashSACLearner` and its networks. See `learner` for the maths."""

from unilab.algos.torch.flash_sac.learner import FlashSACActor, FlashSACCritic, FlashSACLearner
from unilab.algos.torch.flash_sac.networks import RewardStatistics

__all__ = ["FlashSACActor", "FlashSACCritic", "FlashSACLearner", "RewardStatistics"]
