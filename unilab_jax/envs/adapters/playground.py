"""MuJoCo Playground's DM Control Suite and locomotion tasks as ``"playground/<Name>"`` envs.

Locomotion tasks (``Go1JoystickFlatTerrain``, ``G1JoystickFlatTerrain``, ``Go1Getup``, ...)
are listed and loadable only when their robot's MuJoCo Menagerie files are here, in
Playground's own Menagerie folder or in an installed package (mjlab ships the Go1 and G1 meshes;
see :mod:`~unilab_jax.envs.adapters.menagerie`): nothing is downloaded. Loading one whose files
are absent (Spot, H1, T1, OP3, ...) raises ``MissingModelError`` naming the missing files. Their
dict observation maps ``state`` to ``"obs"`` (the actor) and ``privileged_state`` to
``"critic"``.

Built from ``mujoco_playground.registry.load(name, config=...)`` with ``impl="jax"`` (MJX's
pure-JAX implementation: it runs on CPU, and on GPU it is the same code path as our own tasks;
Playground's default, Warp, needs a CUDA GPU). ``config_override={"impl": "warp"}`` selects Warp
on a GPU explicitly.

``config_override`` replaces fields of the task's ``ml_collections`` config (nested fields with
dotted names, e.g. ``"vision_config.nworld"``); ``episode_length`` sets our time limit;
``full_reset`` (not a Playground field) chooses fresh resets (default) or restarts from each
env's first state (default for ``CheetahRun`` and ``Go1Getup``, whose resets simulate 200 and
125 physics steps; see :class:`~unilab_jax.envs.adapters.AdapterEnv`; a locomotion task then
also replays its first command and noise sequence each episode, since they come from the
state's key). Only the task's pure ``reset``/``step`` are used; Playground's wrappers (episode
and auto-reset) are not, so the true last observation reaches ``final_obs``. ``terminated`` is
the task's ``done`` (DM Control tasks only end on non-finite physics; locomotion tasks on a
fall), ``truncated`` is the time limit.

Reward components: Playground's tasks already log them in ``metrics`` as ``"reward/<name>"``
(the locomotion tasks' terms times their weights, before the sum is scaled by ``ctrl_dt``);
those are passed through. A task without any gets ``"reward/total"``.

Playground's domain randomisation (``registry.get_domain_randomizer``) belongs to its training
wrappers and is not applied: every env simulates the nominal model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.adapters.base import AdapterEnv, quiet_import
from unilab_jax.envs.adapters.menagerie import (
    MissingModelError,
    menagerie_path,
    menagerie_root,
    missing_files,
)
from unilab_jax.envs.base import UnknownEnvError

__all__ = [
    "MissingModelError",
    "PlaygroundEnv",
    "make_playground_env",
    "playground_names",
    "unavailable_playground_names",
]

#: DM Control Suite rewards lie in [0, 1]; padded, so the support at gamma 0.97 is (-1, 40)
#: and at Brax's 0.99 (-3, 120).
DM_CONTROL_REWARD_BOUNDS = (-0.03, 1.2)
#: Per-step rewards of the locomotion tasks, by name prefix: a weighted sum of terms times
#: ``ctrl_dt`` (0.02). Go1: clipped at 0 and at most ~0.05 (joystick: tracking 1 + 0.5, pose
#: 0.5, a little air time; getup: four terms <= 1, 0.07; handstand: two, 0.04); its low edge
#: leaves room for SAC's entropy term, ``-alpha * log_prob``, which at the default alpha 0.001
#: reaches about -0.05 per step for a narrow 12-joint policy (with a low edge of 0, a tiny run
#: warned that 7% of the target mass fell below the support). G1 joystick: not clipped;
#: random actions average -0.09 per step, a fall costs -2 once (termination weight -100) and
#: walking earns up to ~0.1. The supports at gamma 0.97 are (-1.7, 3.3) for Go1 and (-8.3, 5)
#: for G1.
LOCOMOTION_REWARD_BOUNDS = {"Go1": (-0.05, 0.1), "G1": (-0.25, 0.15)}
#: Tasks whose reset simulates (CheetahRun settles for 200 physics steps, Go1Getup for 125):
#: by default they restart each env from its first initial state instead of computing a
#: reset on every step.
SIMULATING_RESETS = frozenset({"CheetahRun", "Go1Getup"})


def _suite():
    with quiet_import():
        from mujoco_playground import dm_control_suite, locomotion, registry
    return dm_control_suite, locomotion, registry


def _all_tasks() -> tuple[list[str], list[str]]:
    """``(DM Control names, locomotion names)``, each sorted ([] when not installed)."""
    try:
        suite, locomotion, _ = _suite()
    except ImportError:
        return [], []
    return sorted(suite.ALL_ENVS), sorted(locomotion.ALL_ENVS)


def playground_names() -> list[str]:
    """The Playground task names that load here: the DM Control Suite, and the locomotion
    tasks whose robot files are present (no download); [] when Playground is not installed."""
    dm_control, locomotion = _all_tasks()
    return sorted(dm_control + [n for n in locomotion if not missing_files(n)])


def unavailable_playground_names() -> dict[str, list[str]]:
    """``{locomotion task: the Menagerie files it lacks}`` for the tasks that cannot load."""
    _, locomotion = _all_tasks()
    return {n: missing for n in locomotion if (missing := missing_files(n))}


def _reward_bounds(name: str, locomotion: bool) -> tuple[float, float] | None:
    if not locomotion:
        return DM_CONTROL_REWARD_BOUNDS
    prefix = max((p for p in LOCOMOTION_REWARD_BOUNDS if name.startswith(p)), key=len, default="")
    return LOCOMOTION_REWARD_BOUNDS.get(prefix)


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

    def __init__(
        self,
        name: str,
        env: Any,
        episode_length: int,
        full_reset: bool,
        reward_bounds: tuple[float, float] | None = DM_CONTROL_REWARD_BOUNDS,
    ) -> None:
        super().__init__(
            f"playground/{name}",
            env,
            episode_length=episode_length,
            reward_bounds=reward_bounds,
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
    """``playground/<name>``: a DM Control Suite or locomotion task with config overrides.

    Raises ``UnknownEnvError`` for a name Playground does not have and ``MissingModelError``
    (an ``UnknownEnvError``) for a locomotion task whose robot files are not here."""
    try:
        _, _, registry = _suite()
    except ImportError as err:
        raise ImportError(
            f"playground/{name} needs MuJoCo Playground: pip install playground==0.2.0 ({err})"
        ) from err
    dm_control, locomotion = _all_tasks()
    if name not in dm_control and name not in locomotion:
        raise UnknownEnvError(
            f"Unknown Playground task {name!r}; available: "
            + ", ".join(f"playground/{n}" for n in playground_names())
        )
    is_locomotion = name in locomotion
    # Before anything is built: the robot files (raises, naming them, when they are absent).
    root = menagerie_root(name) if is_locomotion else None
    override = dict(config_override or {})
    full_reset = bool(override.pop("full_reset", name not in SIMULATING_RESETS))
    config = registry.get_default_config(name)
    if "impl" in config:
        config.impl = "jax"
    config = _apply_override(config, override, name)
    with quiet_import(), menagerie_path(root) if root else contextlib.nullcontext():
        env = registry.load(name, config=config)
    # Some tasks adjust their config in __init__ (e.g. vision cartpole's episode length).
    episode_length = int(getattr(env, "_config", config).episode_length)
    return PlaygroundEnv(name, env, episode_length, full_reset, _reward_bounds(name, is_locomotion))
