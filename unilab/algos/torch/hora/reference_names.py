"""A reference UniLab HORA-SAC checkpoint (``model_<it>.pt`` of its ``hora_sac`` runtime), read
into our ``HoraSACLearner``.

The reference's ``HoraSACActor`` registers ``priv_encoder``, ``priv_projection``, then its trunk
and heads as ``actor_trunk``, ``action_mean_head`` and ``action_logstd_head``; ours (FastSAC's
actor with the privileged encoder, ``unilab_jax.torch.actors.PrivilegedSACActor``) registers the
trunk and heads first, as ``net``, ``fc_mu`` and ``fc_logstd``, then the encoder. Layer for
layer the two are the same modules (Linear, LayerNorm, SiLU per width), so a checkpoint converts
by renaming the actor's entries and moving the actor optimiser's per-parameter moments from the
reference's parameter order to ours. The critic, its target, the temperature, their optimisers
and the update count are FastSAC's, named alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_reference_checkpoint", "learner_state_from_reference", "our_actor_name"]

#: The reference's actor module names and ours.
ACTOR_RENAMES = (
    ("actor_trunk.", "net."),
    ("action_mean_head.", "fc_mu."),
    ("action_logstd_head.", "fc_logstd."),
)


def our_actor_name(name: str) -> str:
    """Our name of a reference ``HoraSACActor`` state-dict entry (the rest are named alike)."""
    for ref, ours in ACTOR_RENAMES:
        if name.startswith(ref):
            return ours + name[len(ref) :]
    return name


def is_reference_checkpoint(state: Mapping[str, Any]) -> bool:
    """Whether ``state`` is a reference HORA-SAC learner state (its actor's trunk is named
    ``actor_trunk``)."""
    actor = state.get("actor")
    return isinstance(actor, Mapping) and any(k.startswith("actor_trunk.") for k in actor)


def learner_state_from_reference(state: Mapping[str, Any], learner: Any) -> dict[str, Any]:
    """``state`` (a reference HORA-SAC checkpoint) as ``learner.get_state_dict()`` lays it
    out: the actor's entries renamed, the actor optimiser's moments in our parameter order.
    Raises ``ValueError`` naming the parameters when the two actors differ in layout (another
    width or encoder: build the learner with the run's recorded settings)."""
    actor = {our_actor_name(k): v for k, v in state["actor"].items()}
    buffers = {name for name, _ in learner.actor.named_buffers()}
    # The reference's parameters in its registration order: the optimiser's indices.
    theirs = [name for name in actor if name not in buffers]
    ours = [name for name, _ in learner.actor.named_parameters()]
    if sorted(theirs) != sorted(ours):
        missing, extra = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
        raise ValueError(
            "the reference HORA-SAC checkpoint's actor does not match this learner's: "
            f"missing {missing}, unexpected {extra}; build the learner with the run's recorded "
            "actor_hidden_dim, priv_info_embed_dim and priv_mlp_hidden_dims"
        )
    position = {name: i for i, name in enumerate(ours)}
    optimizer = state["actor_optimizer"]
    moved = {
        "state": {position[theirs[int(i)]]: s for i, s in optimizer["state"].items()},
        "param_groups": [
            {**group, "params": sorted(position[theirs[int(i)]] for i in group["params"])}
            for group in optimizer["param_groups"]
        ],
    }
    return {**state, "actor": actor, "actor_optimizer": moved}
