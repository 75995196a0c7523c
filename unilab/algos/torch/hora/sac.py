"""HORA-SAC's off-policy runtime: what an algo config with ``runtime_impl: hora_sac`` selects.

``resolve_hora_sac_runtime`` is the resolver an algo section names
(``runtime_resolver: unilab.algos.torch.hora.sac:resolve_hora_sac_runtime``, read by
``unilab.algos.torch.offpolicy.runtime.resolve_custom_offpolicy_runtime``). Its
``HoraSACRuntime`` tells the caller to build a ``HoraSACLearner``, to hand the runner
``algo_type="hora_sac"`` and to build the learner and the collector's actor with
``build_model_kwargs(obs_dim=, critic_obs_dim=)``: the privileged values' width (the critic
observation's columns beyond the actor's) and the encoder's sizes from the section's ``actor``
entry (``priv_info_embed_dim``, ``priv_mlp_hidden_dims``; the reference's defaults 9 and
(256, 128, 9)). Symmetry is not supported.

``OffPolicyRunner(learner, env, algo_type="sac", ...)`` with a ``HoraSACLearner`` also runs
HORA-SAC (the runner takes the learner's algorithm), as does ``algo_type="hora_sac"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unilab.algos.torch.hora.runtime import HORA_SAC_RUNTIME_IMPL, is_hora_sac_runtime
from unilab.algos.torch.hora.sac_learner import HoraSACLearner
from unilab.algos.torch.offpolicy.runtime import OffPolicyRuntime

__all__ = ["HoraSACRuntime", "resolve_hora_sac_runtime"]

_DEFAULT_EMBED_DIM = 9
_DEFAULT_HIDDEN_DIMS = (256, 128, 9)


@dataclass(frozen=True)
class HoraSACRuntime(OffPolicyRuntime):
    """The HORA-SAC runtime: ``HoraSACLearner``, ``algo_type="hora_sac"``, no symmetry;
    ``actor_cfg``: the algo section's ``actor`` entry (the encoder's sizes)."""

    learner_cls: type | None = HoraSACLearner
    algo_type: str | None = HORA_SAC_RUNTIME_IMPL
    supports_symmetry: bool = False
    actor_cfg: dict[str, Any] = field(default_factory=dict)

    def build_model_kwargs(self, *, obs_dim: int, critic_obs_dim: int) -> dict[str, Any]:
        """``{"priv_info_dim", "priv_info_embed_dim", "priv_mlp_hidden_dims"}`` for the
        learner and the collector's actor; ``ValueError`` when the critic observation has no
        columns beyond the actor's (no privileged tail)."""
        priv_info_dim = int(critic_obs_dim) - int(obs_dim)
        if priv_info_dim <= 0:
            raise ValueError(
                "HORA-SAC requires critic observations to contain privileged tail features "
                f"beyond the actor's; got obs_dim={obs_dim}, critic_obs_dim={critic_obs_dim}."
            )
        hidden = self.actor_cfg.get("priv_mlp_hidden_dims", _DEFAULT_HIDDEN_DIMS)
        embed = self.actor_cfg.get("priv_info_embed_dim", _DEFAULT_EMBED_DIM)
        return {
            "priv_info_dim": priv_info_dim,
            "priv_info_embed_dim": int(embed),
            "priv_mlp_hidden_dims": tuple(int(width) for width in hidden),
        }


def _section(rl_cfg: Any) -> Any:
    """The algo section: ``rl_cfg["algo"]`` of a whole config, else ``rl_cfg`` itself."""
    algo = rl_cfg.get("algo") if isinstance(rl_cfg, Mapping) else getattr(rl_cfg, "algo", None)
    return rl_cfg if algo is None or isinstance(algo, str) else algo


def _as_dict(value: Any) -> dict[str, Any]:
    """A plain dict of a mapping or an attribute-style config (OmegaConf, a namespace)."""
    if isinstance(value, Mapping):
        return dict(value)
    if value is not None and hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return {}


def resolve_hora_sac_runtime(rl_cfg: Any) -> HoraSACRuntime | None:
    """The HORA-SAC runtime when the algo section says ``runtime_impl: hora_sac`` (else None);
    ``rl_cfg``: the algo section (the reference's script passes it) or a whole config with an
    ``algo`` section."""
    section = _section(rl_cfg)
    if not is_hora_sac_runtime(section):
        return None
    if isinstance(section, Mapping):
        return HoraSACRuntime(actor_cfg=_as_dict(section.get("actor")))
    return HoraSACRuntime(actor_cfg=_as_dict(getattr(section, "actor", None)))
