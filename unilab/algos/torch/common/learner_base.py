"""`LearnerBase`: the mechanics the torch FastSAC, FastTD3 and FlashSAC learners share.

A learner lists its checkpoint once, as attribute names in `CHECKPOINT_KEYS`: saving
(`get_state_dict`) and loading (`load_state_dict`) both follow that list, so they cannot drift
apart. An entry is a module's or optimiser's `state_dict()`, a tensor's detached copy
(`log_alpha`) or a plain value (`update_count`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from unilab.algos.torch.common.updates import guarded_step, polyak_update

__all__ = ["LearnerBase"]


class LearnerBase:
    """Mixin of the torch learners; they set `qnet`, `qnet_target`, `config` (`tau`,
    `max_grad_norm`), `world_size` and `CHECKPOINT_KEYS`."""

    #: The checkpoint's entries (attribute names), in order.
    CHECKPOINT_KEYS: tuple[str, ...] = ()
    #: Those of `CHECKPOINT_KEYS` a checkpoint may lack, keeping their value: our observation
    #: normalisers, which reference checkpoints do not (all) hold.
    OPTIONAL_CHECKPOINT_KEYS: tuple[str, ...] = ("obs_normalizer", "critic_normalizer")
    #: fp16 autocast's loss scaler (`torch.amp.GradScaler`, FastSAC's), else None.
    scaler: torch.amp.GradScaler | None = None

    def _step(
        self, loss: torch.Tensor, module: nn.Module, optimizer: torch.optim.Optimizer
    ) -> tuple[torch.Tensor, bool]:
        """One `guarded_step` of `module`'s parameters: gradients averaged over `world_size`
        ranks, clipped at `config.max_grad_norm`, the loss scaled by `scaler` if any."""
        clip, ranks = self.config.max_grad_norm, self.world_size
        return guarded_step(loss, module.parameters(), optimizer, clip, ranks, self.scaler)

    def soft_update_target(self) -> None:
        """Polyak-average the critic's parameters into `qnet_target` with rate `tau` (there is
        no actor target to update)."""
        polyak_update(self.qnet_target, self.qnet, self.config.tau)

    def get_state_dict(self) -> dict[str, Any]:
        """Checkpoint: the state of each of `CHECKPOINT_KEYS`, in that order."""
        state: dict[str, Any] = {}
        for key in self.CHECKPOINT_KEYS:
            part = getattr(self, key)
            if isinstance(part, torch.Tensor):
                state[key] = part.detach().clone()
            else:
                state[key] = part.state_dict() if hasattr(part, "state_dict") else part
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore `get_state_dict()` in place (a tensor in its own shape, a plain value as its
        type); reference checkpoints, lacking some `OPTIONAL_CHECKPOINT_KEYS`, load too."""
        for key in self.CHECKPOINT_KEYS:
            if key in self.OPTIONAL_CHECKPOINT_KEYS and key not in state_dict:
                continue
            part, value = getattr(self, key), state_dict[key]
            if isinstance(part, torch.Tensor):
                with torch.no_grad():
                    part.copy_(torch.as_tensor(value).reshape(part.shape))
            elif hasattr(part, "load_state_dict"):
                part.load_state_dict(value)
            else:
                setattr(self, key, type(part)(value))
