"""The off-policy collector's actor: its dims, its build (checked against the learner's), its
normalised input and its exploration actions.

The documented helpers `resolve_collector_actor_dims`, `sample_offpolicy_actions` and
`resolve_offpolicy_actor_priv_info` live here and are re-exported by `worker`, their documented
home. The policy input is normalised with the learner's own formula `(x - mean) / (std + eps)`,
`eps = NORMALIZER_EPS` (the reference divided by `std + 1e-8` while the TD3 learner used
`1e-2`).

A privileged actor (HORA-SAC) reads `[obs | priv]`: `resolve_offpolicy_actor_priv_info` gives
the privileged values (`info["critic_info"]`, else the critic columns beyond the actor's),
`actor_inputs` joins and normalises them with the statistics the learner publishes for its
actor's whole input (`actor_input_statistics`: the critic's statistics of those columns, as
the learner normalises them; the reference normalised the observation only) and splits them
again for `sample_offpolicy_actions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from unilab.algos.torch.common.normalization import NORMALIZER_EPS
from unilab.algos.torch.registry import build_actor, get_torch_algo

__all__ = [
    "actor_input_statistics",
    "actor_inputs",
    "build_collector_actor",
    "policy_input",
    "resolve_collector_actor_dims",
    "resolve_offpolicy_actor_priv_info",
    "sample_offpolicy_actions",
]


def resolve_collector_actor_dims(
    env: Any, obs_dim: int | None = None, action_dim: int | None = None
) -> tuple[int, int]:
    """Resolve actor dims for the collector.

    Prefer explicit dims from the parent process so learner and collector build identical
    actor shapes on override-heavy env paths. Otherwise ``env.obs_groups_spec["obs"]`` (an int,
    the reference's env contract, or a shape ``(obs_dim,)``, our vectorised env's) and
    ``env.action_space.shape[0]``; an env without an ``"obs"`` group raises ``KeyError``.
    """
    if obs_dim is None:
        spec = env.obs_groups_spec
        if "obs" not in spec:
            raise KeyError(
                f"the env's obs_groups_spec has no 'obs' group (it has {sorted(spec)}); pass "
                "obs_dim explicitly"
            )
        size = spec["obs"]
        obs_dim = size if isinstance(size, int) else int(tuple(size)[0])
    if action_dim is None:
        action_dim = int(env.action_space.shape[0])
    return int(obs_dim), int(action_dim)


def sample_offpolicy_actions(
    actor: torch.nn.Module,
    algo_type: str,
    obs_torch: torch.Tensor,
    prev_dones_torch: torch.Tensor,
    priv_info_torch: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample collector actions using the algorithm's exploration policy.

    The policy is the torch registry's `explore` of `algo_type` (sac, td3, flash_sac and the
    reference's "flashsac": `actor.explore(obs, dones=prev_dones, deterministic=False)`; TD3
    resamples the noise scale of envs whose previous step ended; "hora_sac": `actor.explore(obs,
    priv_info, deterministic=False)`, `ValueError` without `priv_info_torch`). Other algorithms
    raise `ValueError` ("Unsupported off-policy algo_type ...").
    """
    explore = get_torch_algo(algo_type).explore
    return explore(actor, obs_torch, prev_dones_torch, priv_info_torch)


def resolve_offpolicy_actor_priv_info(
    *, algo_type: str, obs_np: np.ndarray, critic_np: np.ndarray | None, info: Mapping[str, Any]
) -> np.ndarray | None:
    """Collector-side actor context for privileged off-policy actors (float32 ``[N, P]``), None
    for the others.

    HORA-SAC (``algo_type="hora_sac"``): ``info["critic_info"]`` when it is an array with one
    row per env, else the critic observation's columns beyond the actor's; ``ValueError`` when
    there is neither (``split_hora_obs_with_priv_info``).
    """
    if get_torch_algo(algo_type).name != "hora_sac":
        return None
    from unilab.algos.torch.hora.observations import split_hora_obs_with_priv_info

    groups = {"obs": obs_np} if critic_np is None else {"obs": obs_np, "critic": critic_np}
    _, _, priv_info = split_hora_obs_with_priv_info(groups, info)
    if priv_info is None:
        raise ValueError(
            "HORA-SAC collector requires privileged info from info['critic_info'] "
            "or the critic observation tail."
        )
    return np.asarray(priv_info, dtype=np.float32)


def build_collector_actor(
    algo_type: str,
    obs_dim: int,
    action_dim: int,
    hidden_dim: int,
    use_layer_norm: bool,
    num_envs: int,
    actor_kwargs: dict,
    weight_param_shapes: Mapping[str, tuple[int, ...]],
) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """The collector's CPU actor in eval mode and its `state_dict`.

    Raises `ValueError` unless its parameter shapes are the learner's `weight_param_shapes`.
    """
    actor = build_actor(
        algo_type, obs_dim, action_dim, hidden_dim, use_layer_norm, "cpu", num_envs,
        **actor_kwargs,
    )  # fmt: skip
    actor.eval()
    actor_state = actor.state_dict()
    shapes = {k: tuple(v.shape) for k, v in actor_state.items()}
    expected = {k: tuple(v) for k, v in weight_param_shapes.items()}
    if shapes != expected:
        raise ValueError(
            f"collector actor {shapes} does not match the learner's actor {expected}; "
            "pass the learner's actor_hidden_dim / use_layer_norm / actor_kwargs"
        )
    return actor, actor_state


def actor_input_statistics(learner: Any) -> tuple[Any, Any]:
    """``(mean, std)`` of every column the learner's actor reads, which the collector
    normalises its input with: the learner's ``actor_input_statistics()`` (a privileged actor's
    covers its privileged columns too), else its observation normaliser's."""
    statistics = getattr(learner, "actor_input_statistics", None)
    if statistics is not None:
        return statistics()
    return learner.obs_normalizer.mean, learner.obs_normalizer.std


def actor_inputs(
    algo_type: str, obs: np.ndarray, critic: np.ndarray | None, info: Mapping[str, Any] | None,
    obs_stats: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """``(obs, priv_info)`` as the collector's actor reads them: for a privileged actor the
    privileged values (`resolve_offpolicy_actor_priv_info`) joined to ``obs``, normalised
    together (`policy_input`) and split again; otherwise ``policy_input(obs)`` and None."""
    priv = resolve_offpolicy_actor_priv_info(
        algo_type=algo_type, obs_np=obs, critic_np=critic, info=info or {}
    )
    if priv is None:
        return policy_input(obs, obs_stats), None
    joined = policy_input(np.concatenate([obs, priv], axis=-1).astype(np.float32), obs_stats)
    width = obs.shape[-1]
    return joined[..., :width], joined[..., width:]


def policy_input(obs: np.ndarray, obs_stats: Any) -> torch.Tensor:
    """`obs` as the policy sees it: normalised with the learner's shared statistics, if any."""
    x = torch.from_numpy(obs)
    stats = obs_stats.get() if obs_stats is not None else None
    if stats is None:
        return x
    mean, std = stats
    return (x - torch.from_numpy(mean)) / (torch.from_numpy(std) + NORMALIZER_EPS)
