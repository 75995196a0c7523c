"""The collector's copy of the actor: `build_actor` and `actor_kwargs_from_learner`.

The collector process builds an actor of the same shape as the learner's from plain settings
(it never sees the learner) and then receives the learner's weights through the weight sync.
`actor_kwargs_from_learner` reads the exploration settings that are not weights (log-std
bounds) off a learner, so the runner can hand them to the collector (reference: the TD3 noise
parameters travel in `actor_kwargs`, [M] PR #503).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from unilab.algos.torch.fast_sac.learner import FastSACLearner, SACActor
from unilab.algos.torch.fast_td3.learner import FastTD3Learner, TD3Actor

__all__ = ["ACTOR_ALGOS", "actor_kwargs_from_learner", "build_actor"]

#: Algorithms whose actor the collector can build.
ACTOR_ALGOS = ("sac", "td3")


def _check_algo(algo_type: str) -> None:
    if algo_type not in ACTOR_ALGOS:
        raise ValueError(
            f"unknown algo_type {algo_type!r}; supported: {', '.join(map(repr, ACTOR_ALGOS))}"
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
    """A fresh actor for `algo_type` ("sac": `SACActor`, "td3": `TD3Actor`).

    `actor_kwargs`: sac `log_std_min`, `log_std_max`; td3 `log_std_min`, `log_std_max`,
    `init_scale`. `use_layer_norm` applies to SAC only (the TD3 actor has no LayerNorm).
    """
    _check_algo(algo_type)
    if algo_type == "sac":
        return SACActor(
            obs_dim, action_dim, actor_hidden_dim, use_layer_norm, device=device, **actor_kwargs
        )
    return TD3Actor(
        obs_dim, action_dim, num_envs, hidden_dim=actor_hidden_dim, device=device, **actor_kwargs
    )


def actor_kwargs_from_learner(learner: Any) -> dict[str, Any]:
    """The non-weight actor settings of `learner` that the collector's actor must share."""
    if isinstance(learner, FastSACLearner):
        return {"log_std_min": learner.actor.log_std_min, "log_std_max": learner.actor.log_std_max}
    if isinstance(learner, FastTD3Learner):
        return {
            "log_std_min": math.log(learner.actor.std_min),
            "log_std_max": math.log(learner.actor.std_max),
        }
    return {}


def actor_layout_mismatch(reference: nn.Module, candidate: nn.Module) -> str | None:
    """Why `candidate`'s state_dict cannot receive `reference`'s weights (None if it can)."""
    ref = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    cand = {k: tuple(v.shape) for k, v in candidate.state_dict().items()}
    if ref.keys() != cand.keys():
        missing = sorted(ref.keys() - cand.keys())
        extra = sorted(cand.keys() - ref.keys())
        return f"parameter names differ (missing {missing}, unexpected {extra})"
    for name, shape in ref.items():
        if cand[name] != shape:
            return f"{name}: the learner's actor has shape {shape}, the collector's {cand[name]}"
    return None
