"""The exported policy as a torch ``nn.Module``, and the checkpoint's weights copied into it.

- ``build_module``: the exported module (``unilab_jax.torch.exported.ExportedPolicy``: the
  observation normaliser, then the algorithm's torch actor and its deterministic action) from
  the ``architecture`` dict a torch-format export stores;
- ``actor_structure``: a policy's architecture and float32 tensors, copied by the actor's
  exact table (``unilab_jax.torch.weights``); ``to_torch_module``: the module itself.

Torch is imported inside the functions only. ``unilab_jax.policy.export`` describes what the
network computes.
"""

from __future__ import annotations

from typing import Any

from unilab_jax.policy.export.common import ExportError, require

__all__ = ["build_module", "to_torch_module"]


def build_module(architecture: dict, state_dict: dict | None = None) -> Any:
    """The ``nn.Module`` described by ``architecture`` (the dict a torch-format export stores),
    in eval mode with its parameters frozen (``requires_grad`` False: an inference module), with
    ``state_dict`` loaded (strictly) when given. Needs torch (and this package's actors)."""
    from unilab_jax.torch.exported import ExportedPolicy

    module = ExportedPolicy(**architecture)
    if state_dict is not None:
        module.load_state_dict(state_dict, strict=True)
    return module.requires_grad_(False).eval()


def actor_structure(policy: Any) -> tuple[dict, dict]:
    """``(architecture, tensors)`` of the policy's export: the module's constructor arguments
    and its state dict as float32 numpy arrays, the actor's weights and the normaliser's
    statistics copied from ``policy.state`` by the actor's own table (``jax_rows``)."""
    from unilab_jax.algos.normalizer import NORMALIZER_EPS
    from unilab_jax.algos.registry import UnknownAlgoError, get_algo
    from unilab_jax.torch.weights import Row, jax_to_torch

    try:
        actor_cls = get_algo(policy.algo).torch_actor_class()
    except UnknownAlgoError as err:
        raise ExportError(f"cannot export a {policy.algo!r} policy: {err}") from None
    refuse_privileged(policy)
    config = policy.algo_config
    architecture = {
        "algorithm": policy.algo,
        "obs_dim": int(policy.obs_dim),
        "action_dim": int(policy.action_dim),
        "actor": actor_cls.settings(config),
        # FlashSAC has no running normaliser (its actor's input BatchNorm normalises).
        "normalize": bool(getattr(config, "obs_normalization", False)),
        "obs_eps": float(NORMALIZER_EPS),
    }
    module = build_module(architecture)
    rows = module.actor.jax_rows("actor")
    if architecture["normalize"]:
        rows += [
            Row("obs_mean", ("obs_normalizer", "mean"), "copy"),
            Row("obs_std", ("obs_normalizer", "var"), "sqrt"),
        ]
    try:
        jax_to_torch(policy.state, rows, module)
    except (ValueError, RuntimeError, KeyError) as err:
        raise ExportError(f"the checkpoint's actor does not fit its config: {err}") from None
    tensors = {name: value.numpy() for name, value in module.state_dict().items()}
    return architecture, tensors


def refuse_privileged(policy: Any) -> None:
    """``ExportError`` for a policy whose actor reads privileged values (HORA-SAC's teacher):
    a deployed policy observes its ``obs`` group only, so the message names what it would
    miss."""
    privileged = int(getattr(getattr(policy, "agent", None), "privileged_dim", 0) or 0)
    if not privileged:
        return
    from unilab_jax.algos.registry import get_algo
    from unilab_jax.envs.registry import make_task

    start = int(policy.obs_dim)
    train = dict((policy.config or {}).get("train") or {})
    try:
        named = make_task(policy.env, train.get("env_overrides")).privileged_values()
    except Exception:  # an adapter env, or one not buildable here: the columns alone
        named = None
    what = f"columns {start}-{start + privileged - 1} of {policy.env}'s critic observation"
    if named:
        what += " (" + ", ".join(f"{name} {s.stop - s.start}" for name, s in named.items()) + ")"
    name = get_algo(policy.algo).display_name
    raise ExportError(
        f"cannot export a {name} policy: its actor reads {privileged} "
        f"privileged values a deployed policy cannot observe, {what}. Deploy an actor of the "
        "observation alone (a student distilled from this teacher), or evaluate / play this "
        "one in simulation (unilab-jax evaluate / play)"
    )


def to_torch_module(policy: Any) -> Any:
    """The policy's deterministic actor as a plain ``torch.nn.Module`` (eval mode, frozen,
    float32; see ``build_module``):
    ``module(obs [N, obs_dim]) -> actions [N, action_dim]`` in [-1, 1], equal to
    ``policy(obs)`` up to float32 round-off; the observation normaliser is inside."""
    require("torch")
    import torch

    architecture, tensors = actor_structure(policy)
    return build_module(architecture, {k: torch.from_numpy(v) for k, v in tensors.items()})
