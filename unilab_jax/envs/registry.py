"""Name -> task registry and the :func:`load` entry point.

Each entry is a factory (``config -> Task``, usually the task class) plus its default frozen
dataclass config. ``load(name, config_override)`` replaces config fields, builds the task and
binds it to MJX physics: an :class:`~unilab_jax.envs.base.Env`, the functional, jittable API
the JAX core trains on (``"playground/..."`` / ``"brax/..."`` names give an adapter env, also
MJX). ``load`` always means MJX; choosing a physics backend is ``unilab_jax.envs.make``'s job
(``vec_env.py``, the numpy-facing batch), which builds its task with :func:`make_task`. Later
issues add tasks with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, is_dataclass
from typing import Any

from unilab_jax.envs.adapters import ADAPTER_PREFIXES, adapter_names, load_adapter
from unilab_jax.envs.base import (
    Env,
    FunctionalEnv,
    Task,
    UnknownEnvError,
    apply_config_override,
)
from unilab_jax.envs.cartpole import CartpoleBalance, CartpoleBalanceConfig
from unilab_jax.envs.cheetah import CheetahRun, CheetahRunConfig
from unilab_jax.envs.manipulation.sharpa import SharpaInhandConfig, SharpaInhandRotation
from unilab_jax.envs.motion.flip import FLIP, WALL_FLIP, G1FlipTracking
from unilab_jax.envs.motion.tracking import G1MotionTracking, TrackingConfig
from unilab_jax.envs.motion.tracking_obs import G1WBTObs, WBTObsConfig
from unilab_jax.envs.mujoco_task_env import MujocoTaskEnv
from unilab_jax.envs.pendulum import PendulumSwingup, PendulumSwingupConfig
from unilab_jax.envs.robots.g1 import G1WalkFlat, G1WalkFlatConfig, G1WalkRough
from unilab_jax.envs.robots.go2 import Go2JoystickFlat, Go2JoystickFlatConfig
from unilab_jax.envs.robots.quadruped import Go1JoystickFlat, Go1JoystickFlatConfig
from unilab_jax.errors import ConfigError

__all__ = [
    "UnknownEnvError",
    "available_names",
    "default_config",
    "load",
    "make_task",
    "mirrored_names",
    "mjx_refusal",
    "refuse_mjx",
    "register",
    "registered_names",
    "task_family",
]


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[Any], Task]
    default_config: Any
    family: str | None


_REGISTRY: dict[str, _Entry] = {}


def register(
    name: str,
    factory: Callable[[Any], Task],
    default_config: Any,
    *,
    family: str | None = None,
    overwrite: bool = False,
) -> None:
    """Register ``factory(config) -> Task`` under ``name`` with a frozen dataclass config.

    ``family``: the preset family whose settings ``python -m unilab_jax.train`` starts the
    task from (``unilab_jax.training.presets.FAMILIES``: ``"dm_control"``, ``"locomotion"``); None,
    the bare algorithm defaults."""
    if not is_dataclass(default_config) or isinstance(default_config, type):
        raise TypeError(f"default_config for {name!r} must be a dataclass instance")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"Environment {name!r} is already registered")
    _REGISTRY[name] = _Entry(factory, default_config, family)


def registered_names() -> list[str]:
    """All registered environment names, sorted."""
    return sorted(_REGISTRY)


def mirrored_names() -> list[str]:
    """Registered tasks that declare a left-right mirror map (their class overrides
    ``Task.mirror``), i.e. the tasks symmetry augmentation works on; read from the classes,
    so no model is built."""
    return [
        name
        for name, entry in sorted(_REGISTRY.items())
        if isinstance(entry.factory, type)
        and issubclass(entry.factory, Task)
        and entry.factory.mirror is not Task.mirror
    ]


def available_names() -> list[str]:
    """Registered tasks plus the Playground / Brax adapter names (installed packages only)."""
    return registered_names() + adapter_names()


def _entry(name: str) -> _Entry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownEnvError(
            f"Unknown environment {name!r}; registered environments: "
            f"{', '.join(registered_names())}"
        ) from None


def task_family(name: str) -> str | None:
    """The preset family a registered task was registered with (None: none, or not a
    registered name)."""
    entry = _REGISTRY.get(name)
    return entry.family if entry is not None else None


def mjx_refusal(name: str) -> str | None:
    """Why MJX cannot run the registered task ``name``, as the one line every MJX entry point
    raises (``Task.mjx_unsupported``, read from the class: nothing is built); None: it can, or
    ``name`` is not a registered task."""
    entry = _REGISTRY.get(name)
    if entry is None or not (isinstance(entry.factory, type) and issubclass(entry.factory, Task)):
        return None
    reason = entry.factory.mjx_unsupported
    if reason is None:
        return None
    return f'{name} runs on C MuJoCo only: {reason}; use physics="mujoco"'


def refuse_mjx(name: str) -> None:
    """Raise :class:`~unilab_jax.errors.ConfigError` with :func:`mjx_refusal`'s line when MJX
    cannot run ``name``."""
    refusal = mjx_refusal(name)
    if refusal is not None:
        raise ConfigError(refusal)


def default_config(name: str) -> Any:
    """The default config of a registered environment."""
    return _entry(name).default_config


def make_task(name: str, config_override: Mapping[str, Any] | None = None) -> Task:
    """Build the task ``name`` with config field overrides, unbound to any physics backend."""
    entry = _entry(name)
    return entry.factory(apply_config_override(entry.default_config, config_override))


def load(
    name: str, config_override: Mapping[str, Any] | None = None, *, physics: str = "mjx"
) -> FunctionalEnv:
    """Build the environment ``name`` on MJX physics with optional config field overrides.

    ``"playground/<Name>"`` and ``"brax/<name>"`` load a MuJoCo Playground DM Control Suite
    task or a Brax environment through ``unilab_jax.envs.adapters``; other names are registered
    tasks (an :class:`~unilab_jax.envs.base.Env`; unknown names raise ``UnknownEnvError``).
    A task MJX cannot run (``Task.mjx_unsupported``) is refused in one line before it is built
    (:func:`mjx_refusal`), unless ``physics="mujoco"``: the env a C MuJoCo run reads the task
    and its sizes from, which for such a task is a :class:`~unilab_jax.envs.mujoco_task_env.
    MujocoTaskEnv` (no MJX physics) and for every other task the MJX env as with ``"mjx"``.
    """
    if name.startswith(ADAPTER_PREFIXES):
        return load_adapter(name, config_override)
    refusal = mjx_refusal(name)
    if refusal is None:
        return Env(make_task(name, config_override), name=name)
    if physics == "mujoco":
        return MujocoTaskEnv(make_task(name, config_override), name, refusal)
    raise ConfigError(refusal)  # before the task is built


register("PendulumSwingup", PendulumSwingup, PendulumSwingupConfig(), family="dm_control")
register("CartpoleBalance", CartpoleBalance, CartpoleBalanceConfig(), family="dm_control")
register("CheetahRun", CheetahRun, CheetahRunConfig(), family="dm_control")
register("G1WalkFlat", G1WalkFlat, G1WalkFlatConfig(), family="locomotion")
register("G1WalkRough", G1WalkRough, G1WalkFlatConfig(), family="locomotion")
register("Go1JoystickFlat", Go1JoystickFlat, Go1JoystickFlatConfig(), family="locomotion")
register("Go2JoystickFlat", Go2JoystickFlat, Go2JoystickFlatConfig(), family="locomotion")
register("G1MotionTrackingSAC", G1MotionTracking, TrackingConfig(), family="tracking")
register("G1FlipTrackingSAC", G1FlipTracking, FLIP, family="tracking")
register("G1WallFlipTrackingSAC", G1FlipTracking, WALL_FLIP, family="tracking")
register("G1WBTObs", G1WBTObs, WBTObsConfig(), family="tracking")
register("SharpaInhandRotation", SharpaInhandRotation, SharpaInhandConfig(), family="inhand")
