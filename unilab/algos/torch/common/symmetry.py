"""Symmetry augmentation for the torch learners, the same batch semantics as the JAX core's
``unilab_jax.algos.symmetry`` (reference §2.1, ``use_symmetry``).

An update given ``B`` rows trains on the first ``B / 2`` of them followed by their mirrors:
``obs``, ``actions``, ``next_obs``, ``critic`` and ``next_critic`` through the task's
``MirrorMap``, ``rewards``, ``dones`` and ``truncated`` repeated. So a gradient step sees ``B``
rows, the runner's ``batch_size`` keeps its meaning (the reference's runner halved it and its
learner doubled the batch back, the same rows per step), and an explicit ``noise`` ``[B, A]``
covers the augmented batch row for row, as the JAX core's per-row draw does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap, SignedPermutation

__all__ = ["augmented", "check_mirror", "mirror_rows", "symmetric_batch"]

# Keys mirrored by which map; the rest of a batch (rewards, dones, truncated) is repeated.
_MIRRORED = {
    "obs": "obs",
    "next_obs": "obs",
    "critic": "critic",
    "next_critic": "critic",
    "actions": "action",
}


def mirror_rows(perm: SignedPermutation, x: torch.Tensor) -> torch.Tensor:
    """``x[..., index] * sign`` on ``x``'s device and dtype."""
    index = torch.as_tensor(perm.index, device=x.device)
    sign = torch.as_tensor(perm.sign, device=x.device, dtype=x.dtype)
    return x[..., index] * sign


def symmetric_batch(mirror: MirrorMap, batch: Mapping[str, torch.Tensor]) -> dict:
    """``[first half; its mirror]`` of every entry: ``B`` rows in, ``B`` rows out.

    A batch without ``critic`` / ``next_critic`` keeps them absent: the learner then falls back
    to the (mirrored) ``obs``. Raises ``ValueError`` for an odd ``B``.
    """
    rows = int(batch["rewards"].shape[0])
    if rows % 2:
        raise ValueError(
            f"use_symmetry trains on half of each update's {rows} rows plus their mirrors, so "
            "the rows per update must be even; choose an even batch_size"
        )
    half = rows // 2
    out = {}
    for key, value in batch.items():
        first = value[:half]
        other = getattr(mirror, _MIRRORED[key]) if key in _MIRRORED else None
        out[key] = torch.cat([first, first if other is None else mirror_rows(other, first)])
    return out


def check_mirror(
    mirror: Any, obs_dim: int, critic_obs_dim: int, action_dim: int, owner: str
) -> None:
    """Raise ``ValueError`` unless ``mirror`` (a ``MirrorMap``) fits the learner's sizes."""
    sizes = {
        "obs": (mirror.obs.size, obs_dim),
        "critic": (mirror.critic.size, critic_obs_dim),
        "action": (mirror.action.size, action_dim),
    }
    wrong = [f"{k} maps {m} entries for size {n}" for k, (m, n) in sizes.items() if m != n]
    if wrong:
        raise ValueError(f"{owner}: the mirror map does not fit its sizes: {', '.join(wrong)}")


def augmented(learner: Any, batch: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    """The batch ``learner`` trains on: with its ``use_symmetry``, :func:`symmetric_batch` with
    its ``mirror``; otherwise ``batch`` itself."""
    if not learner.use_symmetry:
        return batch
    if learner.mirror is None:
        raise ValueError(
            f"{type(learner).__name__}(use_symmetry=True) needs the task's mirror map: pass "
            "mirror=unilab_jax.envs.load(ENV_NAME).mirror, or train through OffPolicyRunner, "
            "which fills it in from its task"
        )
    return symmetric_batch(learner.mirror, batch)
