"""A third algorithm added the way docs/layout.md says (a config class, a ``make_<name>``, one
registry row naming them and a torch actor), for tests/test_adding_an_algorithm.py.

DDPG with a distributional critic: FastTD3's networks and update without clipped double Q,
target-policy smoothing or a delayed actor (``policy_frequency`` 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from unilab_jax.algos.hyperparams import TD3Config
from unilab_jax.algos.registry import AlgoSpec
from unilab_jax.algos.td3 import make_td3


@dataclass(frozen=True)
class DDPGConfig(TD3Config):
    """TD3's settings with DDPG's defaults."""

    use_cdq: bool = False
    """Clipped double Q: off (DDPG bootstraps from the mean of its two critics)."""
    policy_noise: float = 0.0
    """Target-policy smoothing: none."""


def make_ddpg(config: DDPGConfig, obs_dim: int, critic_dim: int, action_dim: int, **kwargs):
    """The DDPG agent: FastTD3's update with DDPG's settings."""
    if not isinstance(config, DDPGConfig):
        raise TypeError(f"make_ddpg needs a DDPGConfig, got {type(config).__name__}")
    return make_td3(config, obs_dim, critic_dim, action_dim, **kwargs)


SPEC = AlgoSpec(
    "ddpg", "DDPG", "ddpg", DDPGConfig, "toy_algo:make_ddpg", 1,
    "unilab_jax.torch.actors:TD3Actor",
)  # fmt: skip
