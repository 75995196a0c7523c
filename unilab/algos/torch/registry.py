"""The one table of algorithms the torch facade trains: name -> ``TorchAlgoSpec``.

The facts both sides share (display name, hyperparameter dataclass, default actor-update period)
live in the core's ``unilab_jax.algos.registry`` and are read from there (``spec.core``); this
table adds the torch side of each algorithm: its learner class, how the collector builds a copy
of its actor, which non-weight actor settings the collector needs from a learner, the exact
torch <-> JAX state converters (``unilab.algos.torch.convert``, imported on first use: they
pull in flax) and the exploration policy the collector samples from.

Adding an algorithm means one entry here (plus one in the core's table); the runners, the
collector, the ``"mjx"`` dispatch and the multi-learner path all read it.

HORA-SAC (``"hora_sac"``, the reference's ``runtime_impl: hora_sac``) is FastSAC with a
privileged actor: the same converters (the actor lists its own rows), its exploration takes the
collector's privileged values (``priv_info``). A learner's algorithm is the entry of the nearest
base of its class (``spec_of_learner``: a ``HoraSACLearner`` is HORA-SAC's).

Names: ``get_torch_algo`` also takes the reference's spellings of a name (``ALGO_ALIASES``:
``"flashsac"`` for ``"flash_sac"``), so every facade entry point that takes an ``algo_type``
(the runners, ``validate_capabilities``, the collector's ``sample_offpolicy_actions``) accepts
them; ``spec.name`` is the canonical name the core and the checkpoints use.

``learner_kwargs_from_config`` / ``build_learner`` build a learner whose hyperparameters are
exactly a core config's: every field is passed explicitly, so the facade's class defaults (the
reference's, which differ from the core's presets on purpose) never reach a learner built for
one of our runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from unilab.algos.torch.fast_sac.learner import FastSACLearner, SACActor
from unilab.algos.torch.fast_td3.learner import FastTD3Learner, TD3Actor
from unilab.algos.torch.flash_sac.learner import FlashSACActor, FlashSACLearner
from unilab.algos.torch.hora.sac_learner import HoraSACLearner
from unilab_jax.algos.registry import AlgoSpec, get_algo
from unilab_jax.torch.actors import PrivilegedSACActor

__all__ = [
    "ALGO_ALIASES",
    "TORCH_ALGOS",
    "TorchAlgoSpec",
    "actor_kwargs_from_learner",
    "build_actor",
    "build_learner",
    "get_torch_algo",
    "learner_kwargs_from_config",
    "spec_of_learner",
]


def _explore(
    actor: nn.Module,
    obs: torch.Tensor,
    prev_dones: torch.Tensor,
    priv_info: torch.Tensor | None = None,
) -> torch.Tensor:
    """``actor.explore(obs, dones=prev_dones, deterministic=False)`` (TD3 resamples the noise
    scale of envs whose previous step ended)."""
    del priv_info
    return actor.explore(obs, dones=prev_dones, deterministic=False)


def _hora_sac_explore(
    actor: nn.Module,
    obs: torch.Tensor,
    prev_dones: torch.Tensor,
    priv_info: torch.Tensor | None = None,
) -> torch.Tensor:
    """HORA-SAC: ``actor.explore(obs, priv_info, deterministic=False)``, the reference's call
    (and ``dones=prev_dones`` for an actor with correlated noise, which restarts where an
    episode ended); ``ValueError`` without ``priv_info``."""
    if priv_info is None:
        raise ValueError("HORA-SAC collector action sampling requires priv_info_torch.")
    if getattr(actor, "noise_correlation", 0.0):
        return actor.explore(obs, priv_info, deterministic=False, dones=prev_dones)
    return actor.explore(obs, priv_info, deterministic=False)


def _sac_actor(obs_dim, action_dim, hidden_dim, use_layer_norm, device, num_envs, **kwargs):
    del num_envs
    return SACActor(obs_dim, action_dim, hidden_dim, use_layer_norm, device=device, **kwargs)


#: HORA-SAC's actor settings under the reference's names (``build_model_kwargs``) -> ours.
_HORA_ACTOR_NAMES = {
    "priv_info_dim": "priv_dim",
    "priv_info_embed_dim": "priv_embed_dim",
    "priv_mlp_hidden_dims": "priv_hidden_dims",
}


def _hora_sac_actor(obs_dim, action_dim, hidden_dim, use_layer_norm, device, num_envs, **kwargs):
    """``PrivilegedSACActor``; ``kwargs`` in our names (``priv_dim``, ``priv_embed_dim``,
    ``priv_hidden_dims``) or the reference's (``priv_info_dim``, ``priv_info_embed_dim``,
    ``priv_mlp_hidden_dims``), plus SAC's (``log_std_min``, ...)."""
    del num_envs
    settings = {_HORA_ACTOR_NAMES.get(name, name): value for name, value in kwargs.items()}
    if settings.get("priv_dim") is None:
        raise ValueError("build_actor(algo_type='hora_sac') requires priv_info_dim.")
    if "priv_hidden_dims" in settings:
        settings["priv_hidden_dims"] = tuple(int(w) for w in settings["priv_hidden_dims"])
    return PrivilegedSACActor(
        obs_dim, action_dim, hidden_dim=hidden_dim, use_layer_norm=use_layer_norm, device=device,
        **settings,
    )  # fmt: skip


def _td3_actor(obs_dim, action_dim, hidden_dim, use_layer_norm, device, num_envs, **kwargs):
    del use_layer_norm  # the TD3 actor has no LayerNorm
    return TD3Actor(obs_dim, action_dim, num_envs, hidden_dim=hidden_dim, device=device, **kwargs)


def _flash_sac_actor(obs_dim, action_dim, hidden_dim, use_layer_norm, device, num_envs, **kwargs):
    del use_layer_norm, num_envs  # BatchNorm / RMSNorm always; per-env noise sizes itself
    return FlashSACActor(obs_dim, action_dim, hidden_dim=hidden_dim, device=device, **kwargs)


def _sac_actor_kwargs(learner: FastSACLearner) -> dict[str, Any]:
    return {
        "log_std_min": learner.actor.log_std_min,
        "log_std_max": learner.actor.log_std_max,
        "noise_correlation": learner.actor.noise_correlation,
    }


def _hora_sac_actor_kwargs(learner: HoraSACLearner) -> dict[str, Any]:
    config = learner.config
    return {
        **_sac_actor_kwargs(learner),
        "priv_dim": learner.priv_info_dim,
        "priv_embed_dim": config.priv_embed_dim,
        "priv_hidden_dims": tuple(config.priv_hidden_dims),
    }


def _td3_actor_kwargs(learner: FastTD3Learner) -> dict[str, Any]:
    return {
        "log_std_min": math.log(learner.actor.std_min),
        "log_std_max": math.log(learner.actor.std_max),
        "noise_correlation": learner.actor.noise_correlation,
    }


def _flash_sac_actor_kwargs(learner: FlashSACLearner) -> dict[str, Any]:
    settings = FlashSACActor.settings(learner.config)
    del settings["hidden_dim"]  # the collector's actor_hidden_dim
    return settings


def _function(reference: str) -> Callable:
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class TorchAlgoSpec:
    """The torch side of one algorithm (the shared facts are in ``core``)."""

    name: str
    """The core's algorithm name (``"sac"``), also the facade's ``algo_type``."""
    learner_cls: type
    """The torch learner (``FastSACLearner``); its ``config`` is ``core.config_cls``."""
    actor_builder: Callable[..., nn.Module]
    """``(obs_dim, action_dim, hidden_dim, use_layer_norm, device, num_envs, **actor_kwargs)``
    -> a fresh actor of the learner's layout (the collector's copy)."""
    actor_kwargs: Callable[[Any], dict[str, Any]]
    """learner -> the non-weight actor settings the collector's actor must share."""
    to_jax: str
    """``"module:function"``: ``(learner, jax_agent_state) -> jax_agent_state``."""
    to_torch: str
    """``"module:function"``: ``(jax_agent_state, learner) -> None`` (in place)."""
    explore: Callable[..., torch.Tensor] = _explore
    """``(actor, obs, prev_dones, priv_info) -> actions``: the collector's exploration."""
    config_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Config fields the learner takes under another name (HORA-SAC's ``priv_embed_dim`` is
    its ``priv_info_embed_dim``)."""

    @property
    def core(self) -> AlgoSpec:
        return get_algo(self.name)

    def torch_to_jax(self, learner: Any, jax_agent_state: Any) -> Any:
        return _function(self.to_jax)(learner, jax_agent_state)

    def jax_to_torch(self, jax_agent_state: Any, learner: Any) -> None:
        _function(self.to_torch)(jax_agent_state, learner)


_CONVERT = "unilab.algos.torch.convert"

TORCH_ALGOS: dict[str, TorchAlgoSpec] = {
    spec.name: spec
    for spec in (
        TorchAlgoSpec(
            "sac", FastSACLearner, _sac_actor, _sac_actor_kwargs,
            f"{_CONVERT}:torch_sac_to_jax", f"{_CONVERT}:jax_sac_to_torch",
        ),
        TorchAlgoSpec(
            "td3", FastTD3Learner, _td3_actor, _td3_actor_kwargs,
            f"{_CONVERT}:torch_td3_to_jax", f"{_CONVERT}:jax_td3_to_torch",
        ),
        TorchAlgoSpec(
            "hora_sac", HoraSACLearner, _hora_sac_actor, _hora_sac_actor_kwargs,
            f"{_CONVERT}:torch_sac_to_jax", f"{_CONVERT}:jax_sac_to_torch", _hora_sac_explore,
            {"priv_embed_dim": "priv_info_embed_dim", "priv_hidden_dims": "priv_mlp_hidden_dims"},
        ),
        TorchAlgoSpec(
            "flash_sac", FlashSACLearner, _flash_sac_actor, _flash_sac_actor_kwargs,
            f"{_CONVERT}:torch_flash_sac_to_jax", f"{_CONVERT}:jax_flash_sac_to_torch",
        ),
    )
}  # fmt: skip


#: The reference's spellings of our algorithm names (its hydra group and ``algo_type``).
ALGO_ALIASES: dict[str, str] = {"flashsac": "flash_sac"}


def get_torch_algo(algo_type: str) -> TorchAlgoSpec:
    """The spec of ``algo_type`` (a name of ``TORCH_ALGOS`` or of ``ALGO_ALIASES``); an unknown
    name raises ``ValueError`` in the reference's words, listing the known ones."""
    try:
        return TORCH_ALGOS[ALGO_ALIASES.get(algo_type, algo_type)]
    except (KeyError, TypeError):
        known = ", ".join(map(repr, TORCH_ALGOS))
        aliases = ", ".join(f"{alias!r} for {name!r}" for alias, name in ALGO_ALIASES.items())
        raise ValueError(
            f"Unsupported off-policy algo_type {algo_type!r}; supported: {known} (also {aliases})"
        ) from None


def learner_kwargs_from_config(algo_type: str, config: Any) -> dict[str, Any]:
    """The learner's keyword arguments that reproduce ``config`` (the algorithm's core config,
    e.g. a ``TD3Config``) field for field: every field the learner takes, TD3's exploration
    range as log-stds (``log_std_min`` / ``log_std_max``). FlashSAC takes the config's names
    (keyword-only beside the reference's) and ``learning_rate_peak=None``: each optimiser at
    its own rate (the reference's one peak rate would override ``actor_lr`` / ``critic_lr``)."""
    spec = get_torch_algo(algo_type)
    learner_cls = spec.learner_cls
    values = dataclasses.asdict(config)
    values = {spec.config_names.get(name, name): value for name, value in values.items()}
    for name in ("std_min", "std_max"):
        if name in values:
            values[f"log_{name}"] = math.log(values.pop(name))
    accepted = inspect.signature(learner_cls).parameters
    if "lr_decay_steps" not in accepted and "lr_decay_steps" in values:
        # SAC's core decays its learning rates on request; the torch learner, as the
        # reference's, has constant ones.
        steps = values.pop("lr_decay_steps")
        values.pop("lr_final_ratio")
        if steps:
            raise ValueError(
                f"{learner_cls.__name__} has constant learning rates (the reference's learner "
                f"has no schedule), so lr_decay_steps={steps} runs on the JAX core only "
                "(sim_backend='mjx' or python -m unilab_jax.train); pass lr_decay_steps=0 for "
                "the torch learner"
            )
    missing = sorted(set(values) - set(accepted) - {"betas"})  # betas: fixed, not an argument
    if missing:
        raise TypeError(f"{learner_cls.__name__} takes no {missing} (from {type(config).__name__})")
    kwargs = {name: value for name, value in values.items() if name in accepted}
    if spec.name == "flash_sac":
        kwargs["learning_rate_peak"] = None
    return kwargs


def build_learner(
    algo_type: str,
    config: Any,
    obs_dim: int,
    critic_obs_dim: int,
    action_dim: int,
    **kwargs: Any,
) -> Any:
    """A learner of ``algo_type`` with exactly ``config``'s hyperparameters
    (``learner_kwargs_from_config``); ``kwargs``: the rest (``device``, ``num_envs``,
    ``mirror``, ...), which also override a config field of the same name."""
    learner_cls = get_torch_algo(algo_type).learner_cls
    settings = {**learner_kwargs_from_config(algo_type, config), **kwargs}
    return learner_cls(
        obs_dim=obs_dim, action_dim=action_dim, critic_obs_dim=critic_obs_dim, **settings
    )


def build_actor(
    algo_type: str,
    obs_dim: int,
    action_dim: int,
    actor_hidden_dim: int,
    use_layer_norm: bool,
    device: torch.device | str,
    num_envs: int,
    **actor_kwargs: Any,
) -> nn.Module:
    """A fresh actor for ``algo_type`` ("sac": ``SACActor``, "td3": ``TD3Actor``,
    "flash_sac": ``FlashSACActor``, "hora_sac": ``PrivilegedSACActor``).

    ``actor_kwargs``: sac ``log_std_min``, ``log_std_max``, ``noise_correlation``; td3
    ``log_std_min``, ``log_std_max``, ``init_scale``, ``noise_correlation``; flash_sac
    ``FlashSACActor.settings`` but ``hidden_dim`` (``num_blocks``, ``log_std_min``,
    ``log_std_max``, ``momentum``, ``noise_repeat_max``, ``noise_repeat_exponent``);
    hora_sac SAC's and ``priv_dim`` (required), ``priv_embed_dim``, ``priv_hidden_dims``, or
    under the reference's names ``priv_info_dim``, ``priv_info_embed_dim``,
    ``priv_mlp_hidden_dims`` (``HoraSACRuntime.build_model_kwargs``).
    ``use_layer_norm`` applies to SAC only.
    """
    builder = get_torch_algo(algo_type).actor_builder
    return builder(obs_dim, action_dim, actor_hidden_dim, use_layer_norm, device, num_envs,
                   **actor_kwargs)  # fmt: skip


def spec_of_learner(learner: Any) -> TorchAlgoSpec | None:
    """The spec of ``learner``'s algorithm: the one whose learner class is the nearest base of
    its class (a ``HoraSACLearner`` is HORA-SAC's, not FastSAC's, whose subclass it is); None
    for a learner of no registered algorithm."""
    by_class = {spec.learner_cls: spec for spec in TORCH_ALGOS.values()}
    for cls in type(learner).__mro__:
        if cls in by_class:
            return by_class[cls]
    return None


def actor_kwargs_from_learner(learner: Any) -> dict[str, Any]:
    """The non-weight actor settings of ``learner`` that the collector's actor must share
    (``{}`` for a learner of no registered algorithm)."""
    spec = spec_of_learner(learner)
    return {} if spec is None else spec.actor_kwargs(learner)
