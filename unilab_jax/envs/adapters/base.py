"""The adapter env: our time limit and automatic reset around a foreign env's pure functions.

:class:`AdapterEnv` is the :class:`~unilab_jax.envs.base.FunctionalEnv` that the Playground
(``playground.py``) and Brax (``brax.py``) adapters subclass. Its ``step`` ends with the same
two functions as our tasks' ``Env.step``: :func:`~unilab_jax.envs.base.time_limit` and
:func:`~unilab_jax.envs.base.auto_reset`.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs import cpu_linalg
from unilab_jax.envs.base import (
    CRITIC_KEY,
    OBS_KEY,
    EnvState,
    FunctionalEnv,
    auto_reset,
    time_limit,
)

__all__ = ["ACTOR_KEYS", "CRITIC_KEYS", "AdapterEnv", "flat_groups", "quiet_import"]

#: Keys of a dict observation used as the actor's and the critic's group (first one present).
ACTOR_KEYS = ("state", "obs")
CRITIC_KEYS = ("privileged_state", "critic")


@contextlib.contextmanager
def quiet_import() -> Iterator[None]:
    """Silence stdout while importing a package that prints optional-backend notices
    (``mujoco_playground`` and ``mujoco.mjx`` print Warp messages)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class AdapterEnv(FunctionalEnv):
    """Our time limit and automatic reset around a foreign env's pure ``reset``/``step``.

    The foreign env (``foreign``) has the shape Brax and Playground share: ``reset(key)``,
    ``step(state, action)`` and ``action_size``; its states carry ``obs`` (an array or a dict
    of groups), ``reward``, ``done`` and ``metrics``. Subclasses only say which metrics are
    reward components (:meth:`_reward_components`). ``task_state`` is empty.

    ``full_reset=True`` (our tasks' behaviour): an ended episode restarts from a fresh
    ``reset(key)``, i.e. new random initial conditions every episode. Under ``vmap`` the reset
    is computed on every step (a select, not a branch), which is cheap for most tasks but not
    for one whose reset simulates (Playground's ``CheetahRun`` settles for 200 physics steps).
    ``full_reset=False`` (what Brax's and Playground's auto-reset wrappers do by default): each
    env restarts from the first state of its first episode, kept in the state; no reset is
    computed while stepping. ``EnvState.physics`` is the foreign state (full reset) or
    ``{"env": foreign state, "first": its first state}``.
    """

    def __init__(
        self,
        name: str,
        foreign: Any,
        *,
        episode_length: int,
        reward_bounds: tuple[float, float] | None = None,
        full_reset: bool = True,
    ) -> None:
        if int(episode_length) < 1:
            raise ValueError(f"{name}: episode_length must be >= 1, got {episode_length}")
        self.name = name
        self.foreign = foreign
        self.full_reset = bool(full_reset)
        self._action_size = int(foreign.action_size)
        self._episode_length = int(episode_length)
        self._reward_bounds = reward_bounds
        # MJX underneath: keep jaxlib 0.10.2's batched LAPACK kernels off the CPU (cpu_linalg).
        cpu_linalg.install_on_cpu()

    # ----------------------------------------------------------------- foreign state
    def _reward_components(self, metrics: Mapping[str, Any]) -> dict[str, jax.Array]:
        """``reward/<name>`` components among the foreign scalar metrics (subclasses)."""
        del metrics
        return {}

    def _foreign_reset(self, key: jax.Array) -> Any:
        return self.foreign.reset(key)

    def _foreign_step(self, state: Any, action: jax.Array) -> Any:
        return self.foreign.step(state, action)

    def _read(
        self, state: Any
    ) -> tuple[dict[str, jax.Array], jax.Array, jax.Array, dict[str, jax.Array]]:
        """``foreign state -> (obs groups, reward, terminated, reward components)``; the
        total reward stands in as ``reward/total`` when no component is reported."""
        obs = flat_groups(state.obs, ACTOR_KEYS, CRITIC_KEYS, self.name)
        reward = jnp.asarray(state.reward, jnp.float32)
        terminated = jnp.asarray(state.done) > 0
        components = self._reward_components(state.metrics) or {"reward/total": reward}
        return obs, reward, terminated, components

    # ----------------------------------------------------------------- Env properties
    @property
    def action_size(self) -> int:
        return self._action_size

    @property
    def episode_length(self) -> int:
        return self._episode_length

    @property
    def reward_bounds(self) -> tuple[float, float] | None:
        return self._reward_bounds

    # ----------------------------------------------------------------- API
    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""
        key, k_env = jax.random.split(key)
        # Strong dtypes: foreign resets often build weakly typed leaves (``jnp.zeros(2)``)
        # that its step then returns strongly typed; a jitted step would compile twice.
        foreign = _strong(self._foreign_reset(k_env))
        obs, _, _, components = self._read(foreign)
        physics = foreign if self.full_reset else {"env": foreign, "first": foreign}
        return EnvState.initial(physics, obs, {}, components, key)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        key, k_reset = jax.random.split(state.key)
        current = state.physics if self.full_reset else state.physics["env"]
        foreign = _strong(self._foreign_step(current, action))
        obs, reward, terminated, components = self._read(foreign)
        first = None if self.full_reset else state.physics["first"]
        state = time_limit(
            physics=foreign if self.full_reset else {"env": foreign, "first": first},
            obs=obs,
            reward=reward,
            terminated=terminated,
            metrics=components,
            task_state={},
            key=key,
            step_count=state.step_count,
            episode_length=self._episode_length,
        )
        if self.full_reset:
            fresh = self.reset(k_reset)
            return auto_reset(state, fresh.physics, fresh.obs)
        return auto_reset(state, {"env": first, "first": first}, self._read(first)[0])


def _strong(tree: Any) -> Any:
    """Every leaf as a strongly typed JAX array of its own dtype."""
    return jax.tree.map(lambda x: jnp.asarray(x).astype(jnp.asarray(x).dtype), tree)


def flat_groups(
    obs: Any, actor_keys: tuple[str, ...], critic_keys: tuple[str, ...], name: str
) -> dict[str, jax.Array]:
    """Map a foreign observation (an array, or a dict of arrays) to our float32 groups.

    A dict uses the first of ``actor_keys`` present as ``"obs"`` and the first of
    ``critic_keys`` present as ``"critic"`` (``"obs"`` when none is)."""
    if isinstance(obs, Mapping):
        actor = next((k for k in actor_keys if k in obs), None)
        if actor is None:
            raise ValueError(
                f"{name}: observation dict has keys {sorted(obs)}; none of {list(actor_keys)} "
                "to use as the policy observation"
            )
        critic = next((k for k in critic_keys if k in obs), actor)
        groups = {OBS_KEY: obs[actor], CRITIC_KEY: obs[critic]}
    else:
        groups = {OBS_KEY: obs, CRITIC_KEY: obs}
    return {k: jnp.asarray(v, jnp.float32).reshape(-1) for k, v in groups.items()}
