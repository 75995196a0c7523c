"""Adapters that expose foreign JAX environments through our :class:`~unilab_jax.envs.Env` API.

Two sources are supported, each behind a name prefix:

* ``"playground/<Name>"``: MuJoCo Playground's DM Control Suite tasks (``CheetahRun``,
  ``CartpoleBalance``, ...), built with MJX's pure-JAX implementation (``impl="jax"``, which
  runs on CPU and GPU; Playground's own default is Warp);
* ``"brax/<name>"``: Brax's registered environments (``ant``, ``halfcheetah``, ...), on
  Brax's ``"mjx"`` pipeline backend (MJX's JAX implementation on every device).

An adapter is "Env-like": it has exactly the members the training loop, the trainer and the CLI
use from ``Env`` (``name``, ``sim_backend``, ``reset``, ``step``, ``obs_size``,
``action_size``, ``episode_length``, ``value_bounds``) and returns our
:class:`~unilab_jax.envs.EnvState`. The foreign env's own state is kept, whole, in
``EnvState.physics`` (any pytree of arrays is allowed there). Only the foreign env's pure
``reset``/``step`` are used: the time limit and the automatic reset are ours, not the foreign
wrappers', so ``final_obs`` holds the true last observation of an ended episode (Playground's
``AutoResetWrapper`` overwrites it with the reset observation).

Both packages are optional: they are imported only when such a name is loaded or listed.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax import cpu_linalg
from unilab_jax.envs.base import CRITIC_KEY, OBS_KEY, EnvState

__all__ = [
    "ADAPTER_PREFIXES",
    "AdapterEnv",
    "adapter_names",
    "load_adapter",
    "quiet_import",
]

PLAYGROUND_PREFIX = "playground/"
BRAX_PREFIX = "brax/"
ADAPTER_PREFIXES = (PLAYGROUND_PREFIX, BRAX_PREFIX)
#: Keys of a dict observation used as the actor's and the critic's group (first one present).
ACTOR_KEYS = ("state", "obs")
CRITIC_KEYS = ("privileged_state", "critic")


@contextlib.contextmanager
def quiet_import():
    """Silence stdout while importing a package that prints optional-backend notices
    (``mujoco_playground`` and ``mujoco.mjx`` print Warp messages)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class AdapterEnv:
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

    sim_backend = "mjx"

    def __init__(
        self,
        name: str,
        foreign: Any,
        *,
        episode_length: int,
        value_bounds: tuple[float, float] | None = None,
        full_reset: bool = True,
    ) -> None:
        if int(episode_length) < 1:
            raise ValueError(f"{name}: episode_length must be >= 1, got {episode_length}")
        self.name = name
        self.foreign = foreign
        self.full_reset = bool(full_reset)
        self._action_size = int(foreign.action_size)
        self._episode_length = int(episode_length)
        self._value_bounds = value_bounds
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
    def value_bounds(self) -> tuple[float, float] | None:
        return self._value_bounds

    @cached_property
    def obs_size(self) -> dict[str, int]:
        """Sizes of the observation groups, derived by tracing ``reset`` (no compute)."""
        shapes = jax.eval_shape(self.reset, jax.random.PRNGKey(0))
        return {k: int(v.shape[-1]) for k, v in shapes.obs.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # ----------------------------------------------------------------- API
    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""
        key, k_env = jax.random.split(key)
        # Strong dtypes: foreign resets often build weakly typed leaves (``jnp.zeros(2)``)
        # that its step then returns strongly typed; a jitted step would compile twice.
        foreign = _strong(self._foreign_reset(k_env))
        obs, _, _, components = self._read(foreign)
        return EnvState(
            physics=foreign if self.full_reset else {"env": foreign, "first": foreign},
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            final_obs=obs,
            step_count=jnp.zeros((), jnp.int32),
            task_state={},
            metrics=jax.tree.map(jnp.zeros_like, components),
            key=key,
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        key, k_reset = jax.random.split(state.key)
        current = state.physics if self.full_reset else state.physics["env"]
        foreign = _strong(self._foreign_step(current, action))
        obs, reward, terminated, components = self._read(foreign)

        step_count = state.step_count + 1
        truncated = step_count >= self._episode_length
        done = terminated | truncated

        def pick(a: jax.Array, b: jax.Array) -> jax.Array:
            # Keep the reset state's dtype so the carried pytree never changes type.
            return jnp.where(done, a, b).astype(a.dtype)

        if self.full_reset:
            fresh = self.reset(k_reset)
            physics = jax.tree.map(pick, fresh.physics, foreign)
            fresh_obs = fresh.obs
        else:
            first = state.physics["first"]
            physics = {"env": jax.tree.map(pick, first, foreign), "first": first}
            fresh_obs = self._read(first)[0]

        return EnvState(
            physics=physics,
            obs=jax.tree.map(pick, fresh_obs, obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=obs,
            step_count=jnp.where(done, jnp.zeros_like(step_count), step_count),
            task_state={},
            metrics=components,
            key=key,
        )


def _strong(tree: Any) -> Any:
    """Every leaf as a strongly typed JAX array of its own dtype."""
    return jax.tree.map(lambda x: jnp.asarray(x).astype(jnp.asarray(x).dtype), tree)


def flat_groups(obs: Any, actor_keys: tuple[str, ...], critic_keys: tuple[str, ...], name: str):
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


def load_adapter(name: str, config_override: Mapping[str, Any] | None = None):
    """The adapter env for ``"playground/<Name>"`` or ``"brax/<name>"``; None for other names.

    Raises ``UnknownEnvError`` (listing that source's names) for an unknown sub-name and
    ``ImportError`` (naming the package to install) when the source is not installed."""
    if name.startswith(PLAYGROUND_PREFIX):
        from unilab_jax.envs.adapters.playground import make_playground_env

        return make_playground_env(name[len(PLAYGROUND_PREFIX) :], config_override)
    if name.startswith(BRAX_PREFIX):
        from unilab_jax.envs.adapters.brax import make_brax_env

        return make_brax_env(name[len(BRAX_PREFIX) :], config_override)
    return None


def adapter_names() -> list[str]:
    """All adapter names whose source package is installed, sorted per source."""
    from unilab_jax.envs.adapters.brax import brax_names
    from unilab_jax.envs.adapters.playground import playground_names

    return [PLAYGROUND_PREFIX + n for n in playground_names()] + [
        BRAX_PREFIX + n for n in brax_names()
    ]
