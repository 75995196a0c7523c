"""A task MJX cannot run, as the core's env: :class:`MujocoTaskEnv`.

The trainer and the facade read a task's sizes, reward bounds, mirror map and the task itself
from a :class:`~unilab_jax.envs.base.FunctionalEnv` (``registry.load``), also when C MuJoCo
collects (``physics="mujoco"``: ``collection.mujoco`` builds its batch from ``env.task``). For
a task whose model MJX refuses (``Task.mjx_unsupported``) the MJX ``Env`` cannot be built, so
``registry.load(name, physics="mujoco")`` gives this one instead: the same description, its
observation sizes traced as the C MuJoCo batch traces the task (``mujoco_backend.trace_task``,
shapes only), and no MJX physics: ``reset`` and ``step`` refuse in the task's one line.
"""

from __future__ import annotations

from functools import cached_property

import jax

from unilab_jax.envs.base import EnvState, FunctionalEnv, Task
from unilab_jax.envs.mirror import MirrorMap
from unilab_jax.envs.mujoco_backend import trace_task
from unilab_jax.errors import ConfigError

__all__ = ["MujocoTaskEnv"]


class MujocoTaskEnv(FunctionalEnv):
    """A C MuJoCo-only task's description (module docstring)."""

    def __init__(self, task: Task, name: str, refusal: str) -> None:
        self.task = task
        self.name = name
        self.refusal = refusal

    @property
    def action_size(self) -> int:
        return self.task.action_size

    @property
    def episode_length(self) -> int:
        return self.task.episode_length

    @property
    def reward_bounds(self) -> tuple[float, float] | None:
        return self.task.reward_bounds

    @property
    def mirror(self) -> MirrorMap | None:
        return self.task.mirror

    @cached_property
    def obs_size(self) -> dict[str, int]:
        """Sizes of the observation groups, from the C MuJoCo trace of one step (no compute)."""
        state = trace_task(self.task, jax.devices("cpu")[0]).state
        return {k: int(v.shape[-1]) for k, v in state.obs.items()}

    def reset(self, key: jax.Array) -> EnvState:
        raise ConfigError(self.refusal)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        raise ConfigError(self.refusal)
