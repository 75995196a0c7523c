"""The one table of algorithms the JAX core trains: name -> ``AlgoSpec``.

Adding an algorithm means one entry here (plus its module with ``make_<name>``); the CLI, the
trainer, the log-dir names and the default actor-update period all read this table. The
facade's torch side has its own table (``unilab.algos.torch.registry``) for the torch learner,
actor and weight converters.

This module imports no flax or jax: the CLI reads it to build ``--help`` and validate input
before any heavy import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from unilab_jax.algos.hyperparams import FlashSACConfig, HoraSACConfig, SACConfig, TD3Config
from unilab_jax.errors import ConfigError

__all__ = ["ALGOS", "AlgoSpec", "UnknownAlgoError", "get_algo"]


class UnknownAlgoError(ConfigError):
    """An algorithm name that is not in ``ALGOS``."""


@dataclass(frozen=True)
class AlgoSpec:
    """What the core needs to know about one algorithm."""

    name: str
    """Short name used on the command line and in configs (``"sac"``)."""
    display_name: str
    """Name shown in the console and summaries (``"FastSAC"``)."""
    log_name: str
    """Folder name under ``logs/`` (``"fast_sac"``)."""
    config_cls: type
    """The frozen hyperparameter dataclass."""
    maker: str
    """``"module:function"`` building the ``Agent``: ``(config, obs_dim, critic_dim,
    action_dim, axis_name=..., mirror=..., num_envs=...) -> Agent`` (``mirror``: the task's
    mirror map, for ``use_symmetry``; ``num_envs``: the run's envs, for a learner that keeps
    per-env state); imported on first use (it pulls in flax)."""
    default_policy_frequency: int
    """Actor update when ``u % policy_frequency == 0`` unless the run sets its own."""
    torch_actor: str
    """``"module:class"`` of the algorithm's torch actor (``unilab_jax.torch.actors``; needs
    torch): ``from_config(config, obs_dim, action_dim)``, ``settings(config)``,
    ``deterministic(obs)`` and ``jax_rows(prefix)``. The facade's learner trains it and
    ``unilab_jax.policy.export`` exports it."""

    def make_agent(self, config: Any, obs_dim: int, critic_dim: int, action_dim: int, **kwargs):
        module, function = self.maker.split(":")
        make: Callable = getattr(importlib.import_module(module), function)
        return make(config, obs_dim, critic_dim, action_dim, **kwargs)

    def torch_actor_class(self) -> type:
        """The torch actor class (imports torch)."""
        module, name = self.torch_actor.split(":")
        return getattr(importlib.import_module(module), name)


ALGOS: dict[str, AlgoSpec] = {
    spec.name: spec
    for spec in (  # fmt: skip
        AlgoSpec(
            "sac",
            "FastSAC",
            "fast_sac",
            SACConfig,
            "unilab_jax.algos.sac:make_sac",
            4,
            "unilab_jax.torch.actors:SACActor",
        ),
        AlgoSpec(
            "td3",
            "FastTD3",
            "fast_td3",
            TD3Config,
            "unilab_jax.algos.td3:make_td3",
            2,
            "unilab_jax.torch.actors:TD3Actor",
        ),
        AlgoSpec(
            "flash_sac",
            "FlashSAC",
            "flash_sac",
            FlashSACConfig,
            "unilab_jax.algos.flash_sac:make_flash_sac",
            2,
            "unilab_jax.torch.flash_actor:FlashSACActor",
        ),
        # FastSAC whose actor also reads the task's privileged values (the reference's
        # runtime_impl: hora_sac): a task with a critic observation wider than the actor's.
        AlgoSpec(
            "hora_sac",
            "HORA-SAC",
            "hora_sac",
            HoraSACConfig,
            "unilab_jax.algos.sac:make_hora_sac",
            4,
            "unilab_jax.torch.actors:PrivilegedSACActor",
        ),
    )
}


def get_algo(name: str) -> AlgoSpec:
    """The spec of ``name``; an unknown name fails with the list of known ones."""
    try:
        return ALGOS[name]
    except (KeyError, TypeError):
        raise UnknownAlgoError(f"unknown algo {name!r}; choose one of {', '.join(ALGOS)}") from None
