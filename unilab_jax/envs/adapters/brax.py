"""Brax's registered environments as ``"brax/<name>"`` envs.

Built with ``brax.envs.get_environment(name, backend="mjx")``: Brax's MJX pipeline, which
resolves to MJX's pure-JAX implementation on CPU and on GPU (the same code path as our own
tasks). ``config_override`` may set ``episode_length`` (our time limit, default 1000, Brax's
usual), ``full_reset`` (default True: a fresh ``reset`` per episode; False: restart from each
env's first state, as Brax's ``AutoResetWrapper`` does), ``backend`` (``"mjx"``,
``"generalized"``, ``"positional"``, ``"spring"``) and any keyword the Brax env's constructor
accepts (``ctrl_cost_weight``, ``n_frames``, ...).

Only the env's pure ``reset``/``step`` are used (no ``EpisodeWrapper``/``AutoResetWrapper``):
``terminated`` is Brax's ``done`` (e.g. an unhealthy hopper), ``truncated`` our time limit, and
``final_obs`` the true last observation. Brax's ``metrics`` named ``reward_<term>`` become our
``reward/<term>`` components; an env without any gets ``"reward/total"``. Actions in [-1, 1]
go to the env unchanged, as Brax's own trainers do (envs whose actuators have another range,
e.g. ``inverted_pendulum``, rescale inside their ``step``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.adapters.base import AdapterEnv, quiet_import
from unilab_jax.envs.base import UnknownEnvError

__all__ = ["BraxEnv", "brax_names", "make_brax_env"]

DEFAULT_BACKEND = "mjx"
DEFAULT_EPISODE_LENGTH = 1000


def _envs():
    with quiet_import():
        from brax import envs
    return envs


def brax_names() -> list[str]:
    """Brax's registered environment names ([] when Brax is not installed)."""
    try:
        envs = _envs()
    except ImportError:
        return []
    return sorted(envs._envs)  # the registry dict behind get_environment/register_environment


class BraxEnv(AdapterEnv):
    """A Brax ``Env`` behind our time limit and automatic reset."""

    def __init__(self, name: str, env: Any, episode_length: int, full_reset: bool) -> None:
        super().__init__(
            f"brax/{name}",
            env,
            episode_length=episode_length,
            reward_bounds=None,  # reward scales differ too much between Brax envs to suggest one
            full_reset=full_reset,
        )

    def _reward_components(self, metrics: Mapping[str, Any]) -> dict[str, jax.Array]:
        """Brax names its reward terms ``reward_<name>``."""
        return {
            "reward/" + k[len("reward_") :]: jnp.asarray(v, jnp.float32)
            for k, v in metrics.items()
            if k.startswith("reward_") and jnp.ndim(v) == 0
        }


def make_brax_env(name: str, config_override: Mapping[str, Any] | None = None):
    """``brax/<name>`` with ``config_override`` (see the module docstring)."""
    try:
        envs = _envs()
    except ImportError as err:
        raise ImportError(f"brax/{name} needs Brax: pip install brax==0.14.2 ({err})") from err
    names = sorted(envs._envs)
    if name not in names:
        raise UnknownEnvError(
            f"Unknown Brax environment {name!r}; available: "
            + ", ".join(f"brax/{n}" for n in names)
        )
    kwargs = dict(config_override or {})
    episode_length = int(kwargs.pop("episode_length", DEFAULT_EPISODE_LENGTH))
    full_reset = bool(kwargs.pop("full_reset", True))
    kwargs.setdefault("backend", DEFAULT_BACKEND)
    try:
        with quiet_import():
            env = envs.get_environment(name, **kwargs)
    except TypeError as err:
        params = inspect.signature(envs._envs[name].__init__).parameters
        own = [p for p in params if p not in ("self", "kwargs")]
        valid = ["episode_length", "full_reset", *own]
        raise ValueError(
            f"Bad config override for brax/{name} ({err}); valid fields are: {', '.join(valid)}, "
            "n_frames, debug"
        ) from err
    return BraxEnv(name, env, episode_length, full_reset)
