"""Adapters that expose foreign JAX environments through our :class:`~unilab_jax.envs.Env` API.

Two sources are supported, each behind a name prefix:

* ``"playground/<Name>"``: MuJoCo Playground's DM Control Suite tasks (``CheetahRun``,
  ``CartpoleBalance``, ...) and its locomotion tasks whose robot models an installed package
  ships (Go1 and G1, from mjlab; ``menagerie`` lays them out as Playground expects), built
  with MJX's pure-JAX implementation (``impl="jax"``, which runs on CPU and GPU; Playground's
  own default is Warp);
* ``"brax/<name>"``: Brax's registered environments (``ant``, ``halfcheetah``, ...), on
  Brax's ``"mjx"`` pipeline backend (MJX's JAX implementation on every device).

An adapter (``base.AdapterEnv``) is a :class:`~unilab_jax.envs.base.FunctionalEnv`, like
``Env``: it has exactly the members the training loop, the trainer and the CLI use (``name``,
``reset``, ``step``, ``obs_size``, ``action_size``, ``episode_length``, ``reward_bounds``) and
returns our :class:`~unilab_jax.envs.EnvState`. The foreign env's own state is kept, whole, in
``EnvState.physics`` (any pytree of arrays is allowed there). Only the foreign env's pure
``reset``/``step`` are used: the time limit and the automatic reset are ours (the same
``time_limit`` / ``auto_reset`` functions as our tasks', from ``unilab_jax.envs.base``), not
the foreign wrappers', so ``final_obs`` holds the true last observation of an ended episode
(Playground's ``AutoResetWrapper`` overwrites it with the reset observation).

Modules: ``base`` (``AdapterEnv``), ``playground`` and ``brax`` (one per source), ``menagerie``
(the robot files of Playground's locomotion tasks, offline); this package
maps names to them. Both packages are optional: they are imported only when such a name is
loaded or listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from unilab_jax.envs.adapters.base import AdapterEnv, quiet_import
from unilab_jax.envs.adapters.brax import brax_names, make_brax_env
from unilab_jax.envs.adapters.playground import make_playground_env, playground_names

__all__ = [
    "ADAPTER_PREFIXES",
    "AdapterEnv",
    "adapter_names",
    "load_adapter",
    "quiet_import",
]

PLAYGROUND_PREFIX = "playground/"
BRAX_PREFIX = "brax/"
ADAPTER_PREFIXES = (PLAYGROUND_PREFIX, BRAX_PREFIX)


def load_adapter(name: str, config_override: Mapping[str, Any] | None = None) -> AdapterEnv | None:
    """The adapter env for ``"playground/<Name>"`` or ``"brax/<name>"``; None for other names.

    Raises ``UnknownEnvError`` (listing that source's names) for an unknown sub-name and
    ``ImportError`` (naming the package to install) when the source is not installed."""
    if name.startswith(PLAYGROUND_PREFIX):
        return make_playground_env(name[len(PLAYGROUND_PREFIX) :], config_override)
    if name.startswith(BRAX_PREFIX):
        return make_brax_env(name[len(BRAX_PREFIX) :], config_override)
    return None


def adapter_names() -> list[str]:
    """All adapter names whose source package is installed, sorted per source."""
    return [PLAYGROUND_PREFIX + n for n in playground_names()] + [
        BRAX_PREFIX + n for n in brax_names()
    ]
