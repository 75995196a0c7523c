"""Symmetry augmentation for the torch learners, the same batch semantics as the JAX core's
``unilab_jax.algos.symmetry`` (reference §2.1, ``use_symmetry``).

An update given ``B`` rows trains on the first ``B / 2`` of them followed by their mirrors:
``obs``, ``actions``, ``next_obs``, ``critic`` and ``next_critic`` through the task's
``MirrorMap``, ``rewards``, ``dones`` and ``truncated`` repeated. So a gradient step sees ``B``
rows, the runner's ``batch_size`` keeps its meaning (the reference's runner halved it and its
learner doubled the batch back, the same rows per step), and an explicit ``noise`` ``[B, A]``
covers the augmented batch row for row, as the JAX core's per-row draw does.

A learner may instead hold the reference's augmentation contract (``symmetry_augmentation``:
``batch_multiplier``, ``augment_obs_and_actions(obs, actions, *, obs_group)`` returning the
rows followed by their ``batch_multiplier - 1`` images): the same semantics, ``B / m`` rows
and their images (``contract_batch``). Its maps are opaque, so nothing checks them against the
learner's sizes, and the JAX core (``sim_backend="mjx"``) cannot use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from unilab.algos.torch.common.batch import require_batch_keys

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap, SignedPermutation

__all__ = [
    "augmented",
    "check_mirror",
    "check_symmetry_source",
    "contract_batch",
    "mirror_rows",
    "symmetric_batch",
]

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


def _part(batch: Mapping[str, torch.Tensor], copies: int) -> int:
    """Rows of each copy: ``B / copies`` (``B`` from ``obs``, which every update reads)."""
    rows = int(batch["obs"].shape[0])
    if rows % copies:
        raise ValueError(
            f"use_symmetry trains on 1/{copies} of each update's {rows} rows plus their "
            f"mirrors, so the rows per update must be a multiple of {copies}; choose a "
            "batch_size that is"
        )
    return rows // copies


def symmetric_batch(mirror: MirrorMap, batch: Mapping[str, torch.Tensor]) -> dict:
    """``[first half; its mirror]`` of every entry: ``B`` rows in, ``B`` rows out.

    Raises ``ValueError`` for an odd ``B``.
    """
    half = _part(batch, 2)
    out = {}
    for key, value in batch.items():
        first = value[:half]
        other = getattr(mirror, _MIRRORED[key]) if key in _MIRRORED else None
        out[key] = torch.cat([first, first if other is None else mirror_rows(other, first)])
    return out


def contract_batch(augmentation: Any, batch: Mapping[str, torch.Tensor]) -> dict:
    """The reference contract's version of ``symmetric_batch``: the first ``B / m`` rows and
    their ``m - 1`` images (``m = augmentation.batch_multiplier``), ``B`` rows out."""
    copies = int(getattr(augmentation, "batch_multiplier", 2))
    part = _part(batch, copies)
    first = {key: value[:part] for key, value in batch.items()}
    out = {}
    for key, value in first.items():
        if key == "actions":
            _, out[key] = augmentation.augment_obs_and_actions(first["obs"], value, obs_group="obs")
        elif key in _MIRRORED:
            group = "critic" if key in ("critic", "next_critic") else "obs"
            out[key], _ = augmentation.augment_obs_and_actions(
                value, first["actions"], obs_group=group
            )
        else:
            out[key] = value.repeat(copies, *([1] * (value.dim() - 1)))
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


def check_symmetry_source(
    owner: str,
    use_symmetry: bool,
    mirror: Any,
    augmentation: Any,
    sizes: tuple[int, int, int],
    accepts_contract: bool = True,
) -> None:
    """At construction: ``use_symmetry=True`` needs one of ``mirror`` (a ``MirrorMap``,
    checked against ``sizes`` = obs, critic, action) and, where the learner takes it
    (``accepts_contract``), the reference's ``symmetry_augmentation`` contract; never both."""
    if mirror is not None and augmentation is not None:
        raise ValueError(f"{owner}: pass mirror= or symmetry_augmentation=, not both")
    if use_symmetry and mirror is None and augmentation is None:
        task_mirror = "mirror=unilab_jax.envs.load(ENV_NAME).mirror (the task's MirrorMap)"
        if accepts_contract:
            raise ValueError(
                f"{owner} use_symmetry=True requires a symmetry_augmentation contract (the "
                f"reference's) or {task_mirror}"
            )
        raise ValueError(f"{owner} use_symmetry=True requires {task_mirror}")
    if mirror is not None:
        check_mirror(mirror, *sizes, owner)


def augmented(
    learner: Any, batch: Mapping[str, torch.Tensor], keys: tuple[str, ...]
) -> Mapping[str, torch.Tensor]:
    """The entries ``keys`` of ``batch`` as ``learner`` trains on them: with its
    ``use_symmetry``, :func:`symmetric_batch` with its ``mirror`` (or :func:`contract_batch`
    with its ``symmetry``). A missing key raises ``common.batch.MissingBatchKeyError``."""
    require_batch_keys(batch, keys, type(learner).__name__)
    batch = {key: batch[key] for key in keys}
    if not learner.use_symmetry:
        return batch
    if learner.mirror is not None:
        return symmetric_batch(learner.mirror, batch)
    return contract_batch(learner.symmetry, batch)
