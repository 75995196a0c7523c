"""Which runtime an algo config selects: its ``runtime_impl`` marker (the reference's names).

An algo section (a mapping, as the reference's script hands it) selects HORA-SAC with
``runtime_impl: hora_sac`` beside ``runtime_resolver: unilab.algos.torch.hora.sac:
resolve_hora_sac_runtime`` (``unilab.algos.torch.offpolicy.runtime``). The PPO / APPO markers
are the reference's too; this project has no HORA PPO or APPO runtime, so nothing selects them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "HORA_APPO_RUNTIME_IMPL",
    "HORA_PPO_RUNTIME_IMPL",
    "HORA_SAC_RUNTIME_IMPL",
    "is_hora_appo_runtime",
    "is_hora_ppo_runtime",
    "is_hora_sac_runtime",
    "resolve_hora_runtime_impl",
]

HORA_APPO_RUNTIME_IMPL = "hora_appo"
HORA_PPO_RUNTIME_IMPL = "hora_ppo"
HORA_SAC_RUNTIME_IMPL = "hora_sac"


def resolve_hora_runtime_impl(rl_cfg: Mapping[str, Any] | Any) -> str | None:
    """The config's ``runtime_impl`` as a string; None when it is absent or empty. ``rl_cfg``:
    the algo section, a mapping or an attribute-style config."""
    if isinstance(rl_cfg, Mapping):
        marker = rl_cfg.get("runtime_impl")
    else:
        marker = getattr(rl_cfg, "runtime_impl", None)
    return None if marker in (None, "") else str(marker)


def is_hora_appo_runtime(rl_cfg: Mapping[str, Any] | Any) -> bool:
    """Whether the config selects the HORA APPO runtime (``runtime_impl: hora_appo``)."""
    return resolve_hora_runtime_impl(rl_cfg) == HORA_APPO_RUNTIME_IMPL


def is_hora_ppo_runtime(rl_cfg: Mapping[str, Any] | Any) -> bool:
    """Whether the config selects the HORA PPO runtime (``runtime_impl: hora_ppo``)."""
    return resolve_hora_runtime_impl(rl_cfg) == HORA_PPO_RUNTIME_IMPL


def is_hora_sac_runtime(rl_cfg: Mapping[str, Any] | Any) -> bool:
    """Whether the config selects the HORA-SAC runtime (``runtime_impl: hora_sac``)."""
    return resolve_hora_runtime_impl(rl_cfg) == HORA_SAC_RUNTIME_IMPL
