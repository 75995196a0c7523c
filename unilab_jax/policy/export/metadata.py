"""The metadata every export carries, and the environment it describes.

- ``export_metadata``: the one JSON-serialisable dict each format stores (task, algorithm,
  iteration, input and output, normaliser, network, unilab_jax version, the run's
  configuration);
- ``env_description``: what the network's input is (the env's raw ``"obs"`` group), how
  the env maps the policy's action in [-1, 1] to actuator controls (``action_scaling``: the
  identity, an adapter's pass-through, a task's ``clip(bias + scale * action, lo, hi)`` found
  by ``_affine_scaling`` at probe actions, or the name of the task's own method), and the data
  the task was built from (``task_data``: a motion tracker's clips; ``Task.data_description``).

``unilab_jax.policy.export`` describes where each format keeps it.
"""

from __future__ import annotations

import json
from typing import Any

from unilab_jax.policy.export.module import actor_structure

__all__ = ["export_metadata"]


def env_description(
    env_name: str, overrides: dict | None, obs_dim: int, action_dim: int
) -> tuple[dict, dict, dict | None]:
    """``(observation layout, action scaling, task data)``: what the network's input is, how
    the env turns the policy's action in [-1, 1] into actuator controls, and the data the task
    was built from (None: none)."""
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES
    from unilab_jax.envs.base import Task
    from unilab_jax.envs.registry import make_task

    observation = {
        "group": "obs",
        "obs_dim": int(obs_dim),
        "dtype": "float32",
        "normalized": False,
        "description": "the env's raw actor observation group 'obs' (the normaliser is "
        "inside the exported network)",
    }
    in_range = "actions in [-1, 1]: the env clips the action to [-1, 1] first"
    if env_name.startswith(ADAPTER_PREFIXES):
        return (
            observation,
            {
                "kind": "adapter",
                "action_scale": 1.0,
                "action_bias": 0.0,
                "description": f"{in_range}, then passes it to the wrapped Playground / Brax "
                "environment's step unchanged (any scaling is that environment's own)",
            },
            None,
        )
    task = make_task(env_name, overrides)
    data = task.data_description()
    cls = type(task)
    # The tasks name no observation entries; each documents its layout in its docstring.
    observation["documented_in"] = f"{cls.__module__}.{cls.__qualname__}"
    if cls.ctrl_from_action is Task.ctrl_from_action:
        return (
            observation,
            {
                "kind": "identity",
                "action_scale": 1.0,
                "action_bias": 0.0,
                "description": f"{in_range}; the actuator controls are the action itself "
                "(ctrl = action)",
            },
            data,
        )
    # A task with a mapping of its own: described as clip(bias + scale * action, lo, hi) when
    # that is what it computes (the robot tasks' joint position targets), checked at sample
    # actions; otherwise the metadata names the method.
    where = f"{cls.__module__}.{cls.__qualname__}.ctrl_from_action"
    described = {"kind": "task_specific", "description": f"{in_range}; then {where}"}
    return observation, _affine_scaling(task, action_dim, in_range, where) or described, data


def _affine_scaling(task: Any, action_dim: int, in_range: str, where: str) -> dict | None:
    """``ctrl = clip(action_bias + action_scale * action, ctrl_min, ctrl_max)`` with the
    task's ``config.action_scale``, when its ``ctrl_from_action`` computes exactly that at 18
    probe actions; None otherwise."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    scale = getattr(task.config, "action_scale", None)
    if not isinstance(scale, int | float) or isinstance(scale, bool):
        return None
    task_state = task.init_task_state(jax.random.PRNGKey(0))

    def ctrl(action: np.ndarray) -> np.ndarray:
        out = task.ctrl_from_action(jnp.asarray(action, jnp.float32), task_state)
        return np.asarray(out, np.float64)

    bias = ctrl(np.zeros(action_dim))
    lo, hi = ctrl(np.full(action_dim, -1e6)), ctrl(np.full(action_dim, 1e6))
    probes = np.random.default_rng(0).uniform(-1.0, 1.0, (16, action_dim))
    probes = np.concatenate([probes, np.ones((1, action_dim)), -np.ones((1, action_dim))])
    if bias.shape != (action_dim,) or not all(
        np.allclose(ctrl(a), np.clip(bias + scale * a, lo, hi), atol=1e-5) for a in probes
    ):
        return None

    def floats(x: np.ndarray) -> list[float]:  # float32 values, written shortest
        return [float(str(np.float32(v))) for v in x]

    return {
        "kind": "affine_clipped",
        "action_scale": float(scale),
        "action_bias": floats(bias),
        "ctrl_min": floats(lo),
        "ctrl_max": floats(hi),
        "description": f"{in_range}; ctrl = clip(action_bias + action_scale * action, ctrl_min, "
        f"ctrl_max) (joint position targets; {where})",
    }


def export_metadata(policy: Any, fmt: str, architecture: dict | None = None) -> dict:
    """The metadata every export carries (JSON-serialisable)."""
    import unilab_jax
    from unilab_jax.algos.registry import get_algo

    if architecture is None:
        architecture, _ = actor_structure(policy)
    train = dict(policy.config.get("train") or {})
    normalize = architecture["normalize"]
    observation, action_scaling, task_data = env_description(
        policy.env, train.get("env_overrides"), policy.obs_dim, policy.action_dim
    )
    actor_cls = get_algo(policy.algo).torch_actor_class()
    head = " ".join((actor_cls.deterministic.__doc__ or "").split())
    metadata = {
        "format": fmt,
        "task": policy.env,
        "algorithm": policy.algo,
        "algorithm_name": get_algo(policy.algo).display_name,
        "iteration": int(policy.iteration),
        "checkpoint": getattr(policy, "checkpoint", None),
        "unilab_jax_version": unilab_jax.__version__,
        "obs_dim": int(policy.obs_dim),
        "action_dim": int(policy.action_dim),
        "input": {"name": "obs", "shape": ["batch", int(policy.obs_dim)], "dtype": "float32"},
        "output": {
            "name": "action",
            "shape": ["batch", int(policy.action_dim)],
            "dtype": "float32",
            "range": [-1.0, 1.0],
        },
        "observation": observation,
        "action_scaling": action_scaling,
        "task_data": task_data,
        "normalizer": {
            "included": bool(normalize),
            "formula": f"(obs - mean) / (sqrt(var) + {architecture['obs_eps']})"
            if normalize
            else "none: the run trained without a separate observation normaliser",
            "epsilon": architecture["obs_eps"],
            "clip": None,
            "count": float(policy.state.obs_normalizer.count) if normalize else None,
        },
        "policy": head,
        "network": architecture,
        "config": policy.config,
    }
    # A JSON round trip: plain dicts, lists and scalars only (what every format can hold).
    return json.loads(json.dumps(metadata, default=str))
