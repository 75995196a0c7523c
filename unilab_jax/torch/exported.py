"""``ExportedPolicy``: a run's deterministic policy as one torch module, the observation
normaliser then the algorithm's torch actor (``unilab_jax.policy.export`` builds it, copies the
checkpoint's weights in and writes it in each format)."""

from __future__ import annotations

import torch
from torch import nn

from unilab_jax.algos.registry import get_algo

__all__ = ["ExportedPolicy"]


class ExportedPolicy(nn.Module):
    """A unilab_jax deterministic policy: raw observations ``[..., obs_dim]`` in, actions
    ``[..., action_dim]`` in [-1, 1] out, the observation normaliser included.

    ``forward``: ``x = (obs - obs_mean) / (obs_std + obs_eps)`` (when ``normalize``), then
    ``actor.deterministic(x)``: ``actor`` is the algorithm's torch actor
    (``unilab_jax.torch.actors``) built with the ``actor`` settings.
    """

    def __init__(
        self,
        algorithm: str,
        obs_dim: int,
        action_dim: int,
        actor: dict,
        normalize: bool,
        obs_eps: float,
    ) -> None:
        super().__init__()
        actor_cls = get_algo(algorithm).torch_actor_class()
        self.actor = actor_cls(int(obs_dim), int(action_dim), **actor)
        self.register_buffer("obs_mean", torch.zeros(int(obs_dim)))
        self.register_buffer("obs_std", torch.ones(int(obs_dim)))
        self.normalize = bool(normalize)
        self.obs_eps = float(obs_eps)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(self.obs_mean.dtype)
        if self.normalize:
            x = (x - self.obs_mean) / (self.obs_std + self.obs_eps)
        return self.actor.deterministic(x)
