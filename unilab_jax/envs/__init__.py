"""Environments: a functional task API over MJX physics, a registry and built-in tasks.

Start at ``base.py``: it defines the task API, the step pipeline every physics backend shares
and the MJX env, and says where everything else lives (``registry.py``: names -> tasks and
``load``; ``vec_env.py``: the numpy-facing ``make``, the one place that picks a physics backend;
``mujoco_backend.py``: C MuJoCo physics; ``adapters/``: Playground and Brax envs).

Functional and jittable (MJX), for the JAX core:

>>> env = load("PendulumSwingup")            # doctest: +SKIP
>>> state = jax.vmap(env.reset)(keys)          # doctest: +SKIP
>>> state = jax.jit(env.step_batch)(state, actions)  # doctest: +SKIP

Vectorised and numpy-facing, on C MuJoCo (CPU threads) or MJX, for the torch collector:

>>> with make("CheetahRun", 1024, sim_backend="mujoco") as venv:  # doctest: +SKIP
...     state = venv.step(actions)            # obs, reward, terminated, truncated, ...
"""

from unilab_jax.envs.base import Env, EnvState, FunctionalEnv, Task, UnknownEnvError
from unilab_jax.envs.registry import (
    available_names,
    default_config,
    load,
    make_task,
    register,
    registered_names,
)
from unilab_jax.envs.vec_env import (
    VEC_SIM_BACKENDS,
    ActionSpace,
    MjxVecEnv,
    MujocoVecEnv,
    VecEnv,
    VecEnvState,
    make,
)

__all__ = [
    "VEC_SIM_BACKENDS",
    "ActionSpace",
    "Env",
    "EnvState",
    "FunctionalEnv",
    "MjxVecEnv",
    "MujocoVecEnv",
    "Task",
    "UnknownEnvError",
    "VecEnv",
    "VecEnvState",
    "available_names",
    "default_config",
    "load",
    "make",
    "make_task",
    "register",
    "registered_names",
]
