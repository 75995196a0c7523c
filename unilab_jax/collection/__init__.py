"""Collection and the device program, one interface per physics (``make_collection``): MJX
collection inside the fused step (``mjx``; the step with its learner updates: ``step``; the
replay buffer: ``replay``) and C MuJoCo collection on CPU threads (``mujoco``: the schedule the
trainer drives; ``collector``: the threads and their device); compiling them off the critical
path (``compiling``: the persistent compilation cache, compiles in a background thread)."""

from __future__ import annotations

from typing import Any


def make_collection(config: Any, env: Any, agent: Any, mesh: Any, trace_counter: list[int]):
    """The collection ``config.physics`` names (``config.PHYSICS``): ``MjxCollection`` for
    ``"mjx"``, ``MujocoCollection`` for ``"mujoco"``; both give ``init_state``,
    ``compile_step``, ``precompile_evaluator``, ``evaluate_episodes`` and ``close``."""
    if config.physics == "mujoco":
        from unilab_jax.collection.mujoco import MujocoCollection as collection
    else:
        from unilab_jax.collection.mjx import MjxCollection as collection
    return collection(config, env, agent, mesh, trace_counter)
