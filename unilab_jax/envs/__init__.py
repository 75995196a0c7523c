"""Environments: a functional task API over MJX physics, a registry and built-in tasks.

>>> env = load("PendulumSwingup")            # doctest: +SKIP
>>> state = jax.vmap(env.reset)(keys)          # doctest: +SKIP
>>> state = jax.jit(jax.vmap(env.step))(state, actions)  # doctest: +SKIP
"""

from unilab_jax.envs.base import Env, EnvState, Task
from unilab_jax.envs.registry import (
    UnknownEnvError,
    default_config,
    load,
    register,
    registered_names,
)

__all__ = [
    "Env",
    "EnvState",
    "Task",
    "UnknownEnvError",
    "default_config",
    "load",
    "register",
    "registered_names",
]
