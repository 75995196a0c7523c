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
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

__all__ = ["REFERENCE_ONLY_ACTOR", "actor_state_from_reference", "our_name"]

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


def actor_state_from_reference(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A reference FlashSAC checkpoint's ``actor`` state dict in our actor's names."""
    return {
        _module_name(name): value
        for name, value in state.items()
        if name not in REFERENCE_ONLY_ACTOR
    }
