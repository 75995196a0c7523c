"""Runtime resolution helpers for off-policy script assembly.

An off-policy training script normally picks its learner from ``algo_type`` (``"sac"``,
``"td3"``, ``"flash_sac"``). A task config can instead name a *runtime resolver*:
``algo.runtime_resolver`` set to ``"module:attr"`` (or ``"module.attr"``). The resolver is
imported, called with the config given (the algo section, as the reference's script passes it,
or a whole config with an ``algo`` section) and must return an :class:`OffPolicyRuntime`, which
tells the script which learner class to build, which ``algo_type`` to hand the runner and
collector, which extra actor kwargs to use, whether symmetry augmentation is supported, and
which extra model kwargs to derive from the observation sizes. ``OffPolicyRuntime`` takes the
reference's arguments and defaults (all optional).

This project ships one custom runtime, HORA-SAC's (``runtime_impl: hora_sac`` with
``runtime_resolver: unilab.algos.torch.hora.sac:resolve_hora_sac_runtime``); configs and
third-party packages can plug in others.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OffPolicyRuntime", "resolve_custom_offpolicy_runtime"]

_FORMAT = '"module:attr" or "module.attr"'


@dataclass(frozen=True)
class OffPolicyRuntime:
    """What a custom off-policy runtime supplies to the training script.

    Every field is optional, as in the reference: a runtime declares only what it changes from
    the standard path (``OffPolicyRuntime()`` changes nothing).

    Attributes:
        learner_cls: learner class the script instantiates (it must honour the learner contract:
            ``actor``, ``update_critic``, ``update_actor``, ``soft_update_target``, ...); None:
            the script's own choice for ``algo_type``.
        algo_type: algorithm tag passed to the runner and the collector (a name of
            ``unilab.algos.torch.registry``); None: the script's.
        actor_kwargs: extra keyword arguments for the collector-side actor.
        supports_symmetry: whether the learner supports symmetry augmentation.
    """

    learner_cls: type | None = None
    algo_type: str | None = None
    actor_kwargs: dict = field(default_factory=dict)
    supports_symmetry: bool = True

    def build_model_kwargs(self, *, obs_dim: int, critic_obs_dim: int) -> dict:
        """Keyword arguments shared by the learner's and the collector actor's construction,
        derived from the actor and critic observation sizes.

        The script passes the result both as learner kwargs and as the collector's
        ``actor_kwargs``, so learner and collector build identical actors. The base runtime
        returns a copy of ``actor_kwargs``; subclasses override this (e.g. a privileged
        encoder's sizes).
        """
        del obs_dim, critic_obs_dim
        return dict(self.actor_kwargs)


def _get(cfg: Any, key: str) -> Any:
    """``cfg[key]`` for mappings (incl. OmegaConf ``DictConfig``), ``cfg.key`` otherwise.

    ``None`` when ``cfg`` is ``None`` or has no such entry.
    """
    if cfg is None:
        return None
    if isinstance(cfg, Mapping):
        return cfg.get(key)
    return getattr(cfg, key, None)


def _import_resolver(spec: str) -> Any:
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"algo.runtime_resolver={spec!r} is not a valid reference; use {_FORMAT}")
    spec = spec.strip()
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr or ":" in attr:
        raise ValueError(f"algo.runtime_resolver={spec!r} is not a valid reference; use {_FORMAT}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"algo.runtime_resolver={spec!r}: cannot import module {module_name!r} ({error}); "
            f"expected {_FORMAT}"
        ) from error
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as error:
            raise ValueError(
                f"algo.runtime_resolver={spec!r}: {module_name!r} has no attribute {attr!r}; "
                f"expected {_FORMAT}"
            ) from error
    return obj


def _algo_section(rl_cfg: Any) -> Any:
    """The section holding ``runtime_resolver``: ``rl_cfg.algo`` when there is one (the whole
    run config), else ``rl_cfg`` itself (the algo section, as the reference's script passes)."""
    algo = _get(rl_cfg, "algo")
    if algo is not None and not isinstance(algo, str):
        return algo
    return rl_cfg


def resolve_custom_offpolicy_runtime(rl_cfg: Any) -> OffPolicyRuntime | None:
    """Resolve ``runtime_resolver`` from ``rl_cfg`` into an :class:`OffPolicyRuntime`.

    ``rl_cfg`` is the algo section (the reference's script passes ``cfg.algo``) or a whole
    config with an ``algo`` section; a nested mapping or an attribute-style config (OmegaConf,
    namespaces). Returns ``None`` when no resolver is configured. Raises ``ValueError`` when
    ``runtime_impl`` is set without a resolver, the resolver reference cannot be imported or
    the resolver returns None, and ``TypeError`` when it is not callable or returns anything
    but an :class:`OffPolicyRuntime`.
    """
    algo = _algo_section(rl_cfg)
    resolver_spec = _get(algo, "runtime_resolver")
    if resolver_spec is None:
        runtime_impl = _get(algo, "runtime_impl")
        if runtime_impl is not None:
            raise ValueError(
                f"algo.runtime_impl={runtime_impl!r} is set but algo.runtime_resolver is not; "
                f"runtime_impl needs algo.runtime_resolver ({_FORMAT})"
            )
        return None
    resolver = _import_resolver(resolver_spec)
    if not callable(resolver):
        raise TypeError(
            f"algo.runtime_resolver={resolver_spec!r} resolved to a non-callable "
            f"{type(resolver).__name__}"
        )
    runtime = resolver(rl_cfg)
    if runtime is None:
        raise ValueError(f"algo.runtime_resolver={resolver_spec!r} returned None")
    if not isinstance(runtime, OffPolicyRuntime):
        raise TypeError(
            f"algo.runtime_resolver={resolver_spec!r} must return an OffPolicyRuntime, "
            f"got {type(runtime).__module__}.{type(runtime).__qualname__}"
        )
    return runtime
