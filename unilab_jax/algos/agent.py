"""The contract between an algorithm and the training loop.

- `Transition`: one replay batch of B rows (raw, unnormalised observations).
- `Agent`: the pure functions `make_sac` / `make_td3` build; the training loop calls nothing
  else, so a new algorithm is a new `make_*` returning an `Agent` (and a row in
  `unilab_jax.algos.registry.ALGOS`).
- `actor_observation`: what an agent's `explore` / `act` read from an env observation dict: the
  actor's group, and for a privileged actor (HORA-SAC) the critic group's columns beyond it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Agent", "AgentState", "ExploreState", "Transition", "actor_observation", "observer"]

Array = jax.Array
Key = jax.Array
# Each agent defines its own state dataclass (SACState / TD3State) and explore state.
AgentState = Any
ExploreState = Any


@flax.struct.dataclass
class Transition:
    """A batch of B replay rows. Observations are raw; the agent normalises them itself."""

    obs: Array  # [B, obs_dim] actor observation
    critic: Array  # [B, critic_dim] critic (privileged) observation
    actions: Array  # [B, A] in [-1, 1]
    rewards: Array  # [B]
    next_obs: Array  # [B, obs_dim] true next obs (the final obs when the episode ended)
    next_critic: Array  # [B, critic_dim]
    terminated: Array  # [B] float32 0/1
    truncated: Array  # [B] float32 0/1


class Agent(NamedTuple):
    """Pure, jit-able functions of one algorithm (built by `make_sac` / `make_td3`)."""

    init: Callable[[Key], AgentState]
    # (key, num_envs) -> explore state (TD3: per-env noise scales [num_envs]; SAC: `()`).
    init_explore: Callable[[Key, int], ExploreState]
    # (state, explore_state, obs [N, obs_dim] raw, prev_done [N] bool, key)
    #   -> (actions [N, A] in [-1, 1], explore_state)
    explore: Callable[[AgentState, ExploreState, Array, Array, Key], tuple[Array, ExploreState]]
    # Deterministic policy: (state, obs [N, obs_dim] raw) -> actions [N, A].
    act: Callable[[AgentState, Array], Array]
    # (state, batch, key) -> (state, metrics). FastSAC's, FastTD3's (critic) and FlashSAC's also
    # take `noise=`, the standard normal [B, A] draw itself instead of the one from `key`.
    update_critic: Callable[[AgentState, Transition, Key], tuple[AgentState, dict[str, Array]]]
    update_actor: Callable[[AgentState, Transition, Key], tuple[AgentState, dict[str, Array]]]
    update_target: Callable[[AgentState], AgentState]
    # (state, obs [M, obs_dim], critic [M, critic_dim]) -> state with updated normalisers.
    update_normalizers: Callable[[AgentState, Array, Array], AgentState]
    # (state, rewards [S, N], dones [S, N] bool: the collected env steps in order, this
    # device's envs) -> state; None when the algorithm keeps no per-env statistics of rewards
    # (FlashSAC scales rewards by each env's discounted return).
    observe_rewards: Callable[[AgentState, Array, Array], AgentState] | None = None
    # The critic observation's trailing columns the actor also reads (HORA-SAC's privileged
    # values: `critic[..., obs_dim:]`); 0 for an actor of the observation alone. `explore` and
    # `act` then take `actor_observation(agent, obs)`, `[N, obs_dim + privileged_dim]`.
    privileged_dim: int = 0


def actor_observation(agent: Agent, obs: Mapping[str, Array]) -> Array:
    """The actor's input from an env observation dict (``{"obs", "critic"}``): ``obs["obs"]``,
    followed by the critic group's last ``agent.privileged_dim`` columns for a privileged
    actor."""
    if not agent.privileged_dim:
        return obs["obs"]
    critic = obs["critic"]
    tail = critic[..., critic.shape[-1] - agent.privileged_dim :]
    xp = np if isinstance(critic, np.ndarray) and isinstance(obs["obs"], np.ndarray) else jnp
    return xp.concatenate([obs["obs"], tail], axis=-1)


def observer(agent: Agent) -> Callable[[Mapping[str, Array]], Array] | None:
    """What the evaluation loops (``make_evaluate``, ``mujoco_episodes``) read from an
    observation dict for ``agent``: None (their default, the ``"obs"`` group) for an actor of
    the observation alone, else ``actor_observation`` bound to the agent."""
    if not agent.privileged_dim:
        return None
    return functools.partial(actor_observation, agent)
