"""MuJoCo Playground's DM Control Suite tasks as ``"playground/<Name>"`` envs.

Built from ``mujoco_playground.registry.load(name, config=...)`` with ``impl="jax"`` (MJX's
pure-JAX implementation: it runs on CPU, and on GPU it is the same code path as our own tasks;
Playground's default, Warp, needs a CUDA GPU). ``config_override={"impl": "warp"}`` selects Warp
on a GPU explicitly.

``config_override`` replaces fields of the task's ``ml_collections`` config (nested fields with
dotted names, e.g. ``"vision_config.nworld"``); ``episode_length`` sets our time limit;
``full_reset`` (not a Playground field) chooses fresh resets (default) or restarts from each
env's first state (default for ``CheetahRun``, whose reset simulates 200 steps; see
:class:`~unilab_jax.envs.adapters.AdapterEnv`). Only the
task's pure ``reset``/``step`` are used; Playground's wrappers (episode and auto-reset) are not,
so the true last observation reaches ``final_obs``. ``terminated`` is the task's ``done``
(DM Control tasks only end on non-finite physics), ``truncated`` is the time limit.

Reward components: Playground's DM Control tasks already log them in ``metrics`` as
``"reward/<name>"``; those are passed through. A task without any gets ``"reward/total"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.adapters.base import AdapterEnv, quiet_import
from unilab_jax.envs.base import UnknownEnvError

__all__ = ["PlaygroundEnv", "make_playground_env", "playground_names"]

#: DM Control Suite rewards lie in [0, 1] per step: returns at gamma 0.97 are at most ~33.
#: DM Control Suite rewards lie in [0, 1]; padded, so the support at gamma 0.97 is (-1, 40)
#: and at Brax's 0.99 (-3, 120).
DM_CONTROL_REWARD_BOUNDS = (-0.03, 1.2)
#: Tasks whose reset simulates (CheetahRun settles for 200 physics steps): by default they
#: restart each env from its first initial state instead of computing a reset on every step.
SIMULATING_RESETS = frozenset({"CheetahRun"})


def _suite():
    with quiet_import():
        from mujoco_playground import dm_control_suite, registry
    return dm_control_suite, registry


def playground_names() -> list[str]:
    """Playground's DM Control Suite task names ([] when the package is not installed)."""
    try:
        suite, _ = _suite()
    except ImportError:
        return []
    return sorted(suite.ALL_ENVS)


def _apply_override(config: Any, override: Mapping[str, Any], name: str) -> Any:
    for key, value in override.items():
        node, *path = key.split(".")
        parent = config
        parts = [node, *path]
        for part in parts[:-1]:
            if part not in parent:
                break
            parent = parent[part]
        if parts[-1] not in parent:
            raise ValueError(
                f"Unknown config field {key!r} for playground/{name}; valid fields are: "
                f"{', '.join(sorted([*config.keys(), 'full_reset']))}"
            )
        parent[parts[-1]] = value
    return config


class PlaygroundEnv(AdapterEnv):
    """A Playground ``MjxEnv`` behind our time limit and automatic reset."""

    def __init__(self, name: str, env: Any, episode_length: int, full_reset: bool) -> None:
        super().__init__(
            f"playground/{name}",
            env,
            episode_length=episode_length,
            reward_bounds=DM_CONTROL_REWARD_BOUNDS,
            full_reset=full_reset,
        )

    def _reward_components(self, metrics: Mapping[str, Any]) -> dict[str, jax.Array]:
        """Playground tasks that report reward terms name them ``reward/<name>``."""
        return {
            k: jnp.asarray(v, jnp.float32)
            for k, v in metrics.items()
            if k.startswith("reward/") and jnp.ndim(v) == 0
        }


def make_playground_env(name: str, config_override: Mapping[str, Any] | None = None):
    """``playground/<name>``: the DM Control Suite task ``name`` with config overrides."""
    try:
        suite, registry = _suite()
    except ImportError as err:
        raise ImportError(
            f"playground/{name} needs MuJoCo Playground: pip install playground==0.2.0 ({err})"
        ) from err
    names = sorted(suite.ALL_ENVS)
    if name not in names:
        raise UnknownEnvError(
            f"Unknown Playground DM Control Suite task {name!r}; available: "
            + ", ".join(f"playground/{n}" for n in names)
        )
    override = dict(config_override or {})
    full_reset = bool(override.pop("full_reset", name not in SIMULATING_RESETS))
    config = registry.get_default_config(name)
    if "impl" in config:
        config.impl = "jax"
    config = _apply_override(config, override, name)
    with quiet_import():
        env = registry.load(name, config=config)
    # Some tasks adjust their config in __init__ (e.g. vision cartpole's episode length).
    episode_length = int(getattr(env, "_config", config).episode_length)
    return PlaygroundEnv(name, env, episode_length, full_reset)
