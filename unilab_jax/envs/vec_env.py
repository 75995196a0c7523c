"""The numpy-facing vectorised environment: ``make(env_name, num_envs, sim_backend, ...)``.

This is the env API the facade's torch collector (``unilab.algos.torch.offpolicy.worker``)
drives: numpy in, numpy out, one call steps every env, ended envs reset inside ``step``.
:func:`make` is the one place in ``unilab_jax.envs`` that reads ``sim_backend``; both physics
backends sit behind the same class interface and run the same task code (the step pipeline
of ``base.py``). This module holds :func:`make` and re-exports the classes, which live in
sibling modules (``from unilab_jax.envs.vec_env import ...`` reaches all of them):

* ``vec_env_base.py``: :class:`VecEnv`, the host side both backends share (validation,
  staggering, finite checks, ``close``), its result :class:`VecEnvState` and the policy's
  :class:`ActionSpace`;
* ``"mjx"`` (:class:`MjxVecEnv`, ``vec_env_mjx.py``): a thin numpy facade over
  ``jax.jit(jax.vmap(Env.step))``, the functional env the JAX core trains on, on the default
  JAX device.
* ``"mujoco"`` (:class:`MujocoVecEnv`, ``vec_env_mujoco.py``): C MuJoCo physics
  (``mujoco_backend.MujocoBatchPhysics``) stepped on CPU threads, the reference system's
  backend; ``ctrl_from_action`` and :func:`~unilab_jax.envs.base.post_physics` (observation,
  reward, termination, time limit, reset draw) are the same JAX code, run on the CPU device.
  Only applying the reset differs: the reset rows are written into the C batch.

Both draw episodes with the same keys (``jax.random.split(PRNGKey(seed), num_envs)`` for
:meth:`VecEnv.init_state`, ``post_physics``'s key splits afterwards) and stagger the step
counters with the same numpy generator, so one seed gives the same initial conditions, time
limits and resets on either backend: trajectories then differ only by the physics (float32 MJX
vs float64 C MuJoCo).

Contract of :meth:`VecEnv.step` (all arrays numpy, leading dimension ``num_envs``):

* ``obs``: observation groups (``"obs"``, ``"critic"``), float32, post-reset for ended envs;
* ``reward`` float32, ``terminated`` / ``truncated`` bool (the time limit; independent flags);
* ``final_observation``: the observation this step produced before any reset (== ``obs`` where
  nothing ended), which off-policy targets bootstrap from on truncation;
* ``info["log"]``: ``{"reward/<name>": float}``, batch means of this step's reward components;
  ``info["components"]``: the same components per env (``{"reward/<name>": [N]}``);
  ``info["episode_step"]``: per-env control steps into the current episode after this step
  (0 where the env was just reset).

Failures are loud, never masked: a non-finite observation or reward raises
``FloatingPointError`` naming the env index (the JAX training loop does the same), and so does
C MuJoCo reporting a diverged simulation (its automatic reset is disabled).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax

from unilab_jax.envs.adapters import ADAPTER_PREFIXES, load_adapter
from unilab_jax.envs.registry import make_task, refuse_mjx, registered_names
from unilab_jax.envs.vec_env_base import ActionSpace, VecEnv, VecEnvState
from unilab_jax.envs.vec_env_mjx import MjxVecEnv
from unilab_jax.envs.vec_env_mujoco import MujocoVecEnv

__all__ = [
    "VEC_SIM_BACKENDS",
    "ActionSpace",
    "MjxVecEnv",
    "MujocoVecEnv",
    "VecEnv",
    "VecEnvState",
    "make",
]

#: Physics backends :func:`make` accepts.
VEC_SIM_BACKENDS = ("mjx", "mujoco")


def make(
    env_name: str,
    num_envs: int,
    sim_backend: str = "mujoco",
    env_cfg_override: Mapping[str, Any] | None = None,
    seed: int = 0,
    *,
    nthread: int | None = None,
    device: jax.Device | None = None,
) -> VecEnv:
    """Build the numpy-facing vectorised env ``env_name`` with ``num_envs`` copies.

    Args:
        env_name: a registered task (unknown names raise ``UnknownEnvError`` listing them),
            or a ``"playground/<Name>"`` / ``"brax/<name>"`` adapter (``"mjx"`` only).
        num_envs: batch size.
        sim_backend: ``"mujoco"`` (C MuJoCo on CPU threads, the reference's backend and the
            default here, as in the reference) or ``"mjx"`` (MJX on the default JAX device).
        env_cfg_override: task config fields to replace (e.g. ``{"episode_length": 50}``).
        seed: seeds the episodes and the staggered step counters of :meth:`VecEnv.init_state`.
        nthread: C MuJoCo threads (default: the CPU cores this process may use); ``"mjx"``
            ignores it (MJX runs on the JAX device), so callers need not know the backend.
        device: ``"mujoco"`` only: the CPU device the task's JAX code runs on (default: the
            first CPU device).
    """
    is_adapter = env_name.startswith(ADAPTER_PREFIXES)
    if is_adapter and sim_backend != "mjx":
        raise ValueError(
            f"{env_name}: Playground and Brax environments are JAX environments and run on "
            f"sim_backend='mjx' only (got {sim_backend!r}); C MuJoCo ('mujoco') runs the "
            f"registered tasks: {', '.join(registered_names())}"
        )
    if sim_backend == "mjx" and not is_adapter:
        refuse_mjx(env_name)  # a C MuJoCo-only task, before it is built
    task = None if is_adapter else make_task(env_name, env_cfg_override)  # unknown names first
    if sim_backend == "mjx":
        if is_adapter:
            adapter = load_adapter(env_name, env_cfg_override)
            return MjxVecEnv(adapter, env_name, num_envs, seed, env=adapter)
        return MjxVecEnv(task, env_name, num_envs, seed)
    if sim_backend == "mujoco":
        return MujocoVecEnv(task, env_name, num_envs, seed, nthread=nthread, device=device)
    raise ValueError(f"Unknown sim_backend {sim_backend!r}; expected one of {VEC_SIM_BACKENDS}")
