"""The reference UniLab's FlashSAC parameter names, and ours.

The networks compute the same functions (held to the reference by
``tests/test_reference_learners.py``), but the reference names its modules after their roles
(``embedder``, ``encoder``, ``predictor``) and keeps each critic member in a stacked ``[E, ...]``
tensor, while ours are ``trunk`` / ``fc_*`` modules and one critic module per member:

========================================  =========================================
reference (actor / critic ``[E, ...]``)   ours (actor / critic member ``e``)
========================================  =========================================
``embedder.norm.*``                       ``trunk.bn_in.*``
``embedder.w.w.weight`` / ``.w.weight``   ``trunk.embed.weight``
``encoder.i.w1.*`` / ``norm1.*``          ``trunk.blocks.i.up.*`` / ``bn_up.*``
``encoder.i.w2.*`` / ``norm2.*``          ``trunk.blocks.i.down.*`` / ``bn_down.*``
``post_norm.weight``                      ``trunk.rms.weight``
``predictor.mean_w.w.weight`` / ``_bias`` ``fc_mu.weight`` / ``.bias``
``predictor.std_w.w.weight`` / ``_bias``  ``fc_logstd.weight`` / ``.bias``
``predictor.logit_w.weight`` / ``_bias``  ``qnets.e.logits.weight`` / ``.bias``
``critic.predictor.support``              ``support`` (the learner's)
``critic`` / ``target_critic``            ``qnet`` / ``qnet_target``
``temperature.log_temp``                  ``log_alpha``
``reward_normalizer.rms.{mean,var,count}`` ``reward_stats.{mean,var,count}``
``reward_normalizer.g_r_max``             ``reward_stats.abs_max``
========================================  =========================================

The reference actor's ``zeta_cdf`` (its exploration noise's hold probabilities) has no
parameter here: our actor computes them from ``actor_noise_zeta_mu`` / ``_max``.

``learner_state_from_reference`` turns a whole reference checkpoint (``model_<it>.pt``) into
our ``FlashSACLearner.get_state_dict()`` layout, optimiser moments included (a torch optimiser
keys them by parameter index; the reference's index order is its ``state_dict`` order less the
buffers), so ``FlashSACLearner.load_state_dict`` reads reference checkpoints too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = [
    "REFERENCE_ONLY_ACTOR",
    "is_reference_checkpoint",
    "learner_state_from_reference",
    "our_name",
]

_TRUNK = (
    ("embedder.norm.", "trunk.bn_in."),
    ("embedder.w.w.weight", "trunk.embed.weight"),
    ("embedder.w.weight", "trunk.embed.weight"),
    ("post_norm.weight", "trunk.rms.weight"),
    ("predictor.mean_w.w.weight", "fc_mu.weight"),
    ("predictor.mean_bias", "fc_mu.bias"),
    ("predictor.std_w.w.weight", "fc_logstd.weight"),
    ("predictor.std_bias", "fc_logstd.bias"),
    ("predictor.logit_w.weight", "logits.weight"),
    ("predictor.logit_bias", "logits.bias"),
)
_BLOCK = (
    ("w1.w.", "up."), ("w1.", "up."), ("norm1.", "bn_up."),
    ("w2.w.", "down."), ("w2.", "down."), ("norm2.", "bn_down."),
)  # fmt: skip
_FIXED = {
    "temperature.log_temp": "log_alpha",
    "critic.predictor.support": "support",
    "reward_normalizer.rms.mean": "reward_stats.mean",
    "reward_normalizer.rms.var": "reward_stats.var",
    "reward_normalizer.rms.count": "reward_stats.count",
    "reward_normalizer.g_r_max": "reward_stats.abs_max",
}
REFERENCE_ONLY_ACTOR = frozenset({"zeta_cdf"})
"""Reference actor entries with no counterpart among our actor's parameters."""


def _module_name(rest: str) -> str:
    """Ours for a name inside one reference network (``embedder...``, ``encoder.i...``)."""
    if rest.startswith("encoder."):
        _, i, tail = rest.split(".", 2)
        for ref, ours in _BLOCK:
            if tail.startswith(ref):
                return f"trunk.blocks.{i}.{ours}{tail[len(ref) :]}"
    for ref, ours in _TRUNK:
        if rest.startswith(ref):
            return ours + rest[len(ref) :]
    raise KeyError(f"no counterpart of the reference's FlashSAC parameter {rest!r}")


def our_name(name: str, num_members: int = 2) -> list[str] | str:
    """Our name for the reference learner's ``name`` (``actor.``/``critic.``/``target_critic.``
    prefixed, or a learner-level one): one name, or one per critic member."""
    if name in _FIXED:
        return _FIXED[name]
    component, rest = name.split(".", 1)
    if component == "actor":
        return f"actor.{_module_name(rest)}"
    root = {"critic": "qnet", "target_critic": "qnet_target"}[component]
    return [f"{root}.qnets.{e}.{_module_name(rest)}" for e in range(num_members)]


# Buffers of the reference's networks (not optimised): its optimisers index the rest.
_BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked", "zeta_cdf", "support")
# Those its target critic keeps and never uses (ours keeps no BatchNorm statistics there).
_UNUSED_TARGET_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")


def is_reference_checkpoint(state: Mapping[str, Any]) -> bool:
    """Whether ``state`` is a reference FlashSAC checkpoint (``critic``/``temperature``)."""
    return "critic" in state and "temperature" in state and "qnet" not in state


def _network(ours: dict, ref: Mapping[str, torch.Tensor], prefix: str, members: int) -> None:
    """Write the reference network ``prefix``'s tensors over ``ours`` (our names, one learner
    state dict section per root), member by member for the critics' ``[E, ...]`` tensors."""
    for name, value in ref.items():
        if prefix == "actor" and name in REFERENCE_ONLY_ACTOR:
            continue
        if name == "predictor.support":
            continue  # the learner's own; `learner_state_from_reference` checks it
        if prefix == "target_critic" and name.endswith(_UNUSED_TARGET_STATISTICS):
            continue
        targets = our_name(f"{prefix}.{name}", members)
        for e, full in enumerate([targets] if isinstance(targets, str) else targets):
            root, key = full.split(".", 1)
            if key not in ours[root]:
                raise KeyError(f"the reference's {prefix}.{name} has no counterpart {full}")
            part = value if isinstance(targets, str) else value[e]
            if tuple(part.shape) != tuple(ours[root][key].shape):
                raise ValueError(
                    f"the reference's {prefix}.{name} is {tuple(part.shape)}, ours {full} is "
                    f"{tuple(ours[root][key].shape)}: the checkpoint was trained with other sizes"
                )
            ours[root][key] = part.detach().clone().to(ours[root][key].dtype)


def _optimiser(
    ours: Mapping[str, Any], ref: Mapping[str, Any], ref_net: Mapping[str, torch.Tensor],
    prefix: str, our_params: list[str], members: int,
) -> dict[str, Any]:  # fmt: skip
    """Our optimiser state dict (``ours``: the learner's own, for its param groups) with the
    reference's moments, moved from the reference's parameter indices to ours."""
    ref_params = [n for n in ref_net if not n.endswith(_BUFFER_SUFFIXES)]
    index = {name: i for i, name in enumerate(our_params)}
    state: dict[int, dict[str, torch.Tensor]] = {}
    for i, name in enumerate(ref_params):
        slots = ref["state"].get(i)
        if slots is None:
            continue  # never stepped
        targets = our_name(f"{prefix}.{name}", members)
        for e, full in enumerate([targets] if isinstance(targets, str) else targets):
            key = full.split(".", 1)[1]
            state[index[key]] = {
                slot: v.clone() if slot == "step" or isinstance(targets, str) else v[e].clone()
                for slot, v in slots.items()
            }
    groups = [{**g, "params": list(g["params"])} for g in ours["param_groups"]]
    return {"state": state, "param_groups": groups}


def learner_state_from_reference(state: Mapping[str, Any], learner: Any) -> dict[str, Any]:
    """A reference FlashSAC checkpoint as ``learner.get_state_dict()`` (``learner``: our
    ``FlashSACLearner`` built with the run's sizes): networks, temperature, optimiser moments,
    reward statistics and update count. ``ValueError`` names a size that differs."""
    ours = learner.get_state_dict()
    members = len(learner.qnet.qnets)
    support = state["critic"].get("predictor.support")
    mine = learner.support.cpu()
    if support is not None and (
        support.shape != mine.shape or not torch.allclose(support.cpu(), mine)
    ):
        raise ValueError(
            f"the reference's value support is [{float(support[0])}, {float(support[-1])}] "
            f"with {support.numel()} atoms, ours [{learner.config.v_min}, "
            f"{learner.config.v_max}] with {learner.config.num_atoms}: build the learner with "
            "the run's critic_min_v / critic_max_v / num_atoms"
        )
    nets = {"actor": dict(ours["actor"]), "qnet": dict(ours["qnet"]),
            "qnet_target": dict(ours["qnet_target"])}  # fmt: skip
    _network(nets, state["actor"], "actor", members)
    _network(nets, state["critic"], "critic", members)
    _network(nets, state["target_critic"], "target_critic", members)
    actor_params = [n for n, _ in learner.actor.named_parameters()]
    critic_params = [n for n, _ in learner.qnet.named_parameters()]
    rms = state["reward_normalizer"]["rms"]
    as_tensor = lambda x: torch.as_tensor(x, dtype=torch.float32).reshape(())  # noqa: E731
    return {
        **nets,
        "log_alpha": state["temperature"]["log_temp"].detach().clone().reshape(1),
        "actor_optimizer": _optimiser(ours["actor_optimizer"], state["actor_optimizer"],
                                      state["actor"], "actor", actor_params, members),
        "q_optimizer": _optimiser(ours["q_optimizer"], state["critic_optimizer"],
                                  state["critic"], "critic", critic_params, members),
        "alpha_optimizer": {
            "state": {k: dict(v) for k, v in state["temperature_optimizer"]["state"].items()},
            "param_groups": ours["alpha_optimizer"]["param_groups"],
        },
        "reward_stats": {
            "carried": torch.as_tensor(state["reward_normalizer"]["g_r"], dtype=torch.float32),
            "mean": as_tensor(rms["mean"]),
            "var": as_tensor(rms["var"]),
            "count": as_tensor(rms["count"]),
            "abs_max": as_tensor(state["reward_normalizer"]["g_r_max"]),
        },
        "update_count": int(state["update_count"]),
    }  # fmt: skip
