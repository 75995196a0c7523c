"""``sim_backend="mjx"``: :class:`MjxVecEnv`, a numpy facade over ``jit(vmap(Env.step))``.

The functional env the JAX core trains on (:class:`~unilab_jax.envs.base.Env`, or a Playground
/ Brax adapter), batched with ``jax.vmap`` and run on the default JAX device; the host side
(validation, staggering, finite checks) is :class:`~unilab_jax.envs.vec_env_base.VecEnv`'s.
Built by :func:`~unilab_jax.envs.vec_env.make`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.base import Env, EnvState, Task
from unilab_jax.envs.vec_env_base import VecEnv, VecEnvState

__all__ = ["MjxVecEnv"]


class MjxVecEnv(VecEnv):
    """``sim_backend="mjx"``: numpy facade over ``jit(vmap(Env.step))`` on the default device.

    ``jax_state`` is the underlying batched :class:`EnvState` (device arrays); it is public so
    that tests and tools can inspect or set the physics state directly.
    """

    sim_backend = "mjx"

    def __init__(
        self, task: Task, name: str, num_envs: int, seed: int = 0, *, env: Any = None
    ) -> None:
        # ``env``: an already built Env-like (a Playground / Brax adapter); ``task`` is then
        # that env, which has the ``episode_length`` and ``action_size`` VecEnv reads.
        self.env = env if env is not None else Env(task, name=name)
        super().__init__(task, name, num_envs, seed, self.env.obs_size)
        shapes = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))
        self._set_reward_keys(shapes.metrics)
        self._reset_fn = jax.jit(jax.vmap(self.env.reset))
        self._step_fn = jax.jit(self.env.step_batch)
        self.jax_state: EnvState | None = None

    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        state = self._reset_fn(keys)
        self.jax_state = state.replace(step_count=jnp.asarray(step_count, jnp.int32))
        return {k: np.asarray(v) for k, v in jax.device_get(state.obs).items()}

    def _step(self, actions: np.ndarray) -> VecEnvState:
        self.jax_state = self._step_fn(self.jax_state, jnp.asarray(actions))
        s = self.jax_state
        # One transfer of everything the host needs; the physics stays on the device.
        obs, final_obs, reward, term, trunc, metrics, count = jax.device_get(
            (s.obs, s.final_obs, s.reward, s.terminated, s.truncated, s.metrics, s.step_count)
        )
        return VecEnvState(
            obs={k: np.asarray(v) for k, v in obs.items()},
            reward=np.asarray(reward),
            terminated=np.asarray(term),
            truncated=np.asarray(trunc),
            final_observation={k: np.asarray(v) for k, v in final_obs.items()},
            info=self._step_info(metrics, count),
        )

    def _release(self) -> None:
        self.jax_state = None
