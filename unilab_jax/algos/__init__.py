"""FastSAC and FastTD3 as pure JAX functions: networks, losses and update steps.

`make_sac` / `make_td3` return an `Agent` (a NamedTuple of pure, jit-able functions over a
pytree state); the training loop calls nothing else.
"""

from unilab_jax.algos.sac import SACConfig, SACState, make_sac
from unilab_jax.algos.td3 import TD3Config, TD3ExploreState, TD3State, make_td3
from unilab_jax.algos.types import Agent, Transition, row_keys, row_normal

__all__ = [
    "Agent",
    "SACConfig",
    "SACState",
    "TD3Config",
    "TD3ExploreState",
    "TD3State",
    "Transition",
    "make_sac",
    "make_td3",
    "row_keys",
    "row_normal",
]
