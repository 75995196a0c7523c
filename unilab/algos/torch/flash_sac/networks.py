"""FlashSAC's torch pieces besides the actor: the critic ensemble, the weight projection, the
stable tanh-Gaussian sample, the reward statistics and the learning-rate schedule.

Each is a transcription of its JAX original (``unilab_jax.algos.flash_networks``,
``flash_sac.sample_tanh_gaussian``, ``reward_scaling``, ``optax.cosine_decay_schedule``), with
the same formulas, constants and operation order, so that the torch learner agrees with the
JAX one to float32 rounding and ``unilab.algos.torch.convert`` maps every tensor exactly.

- ``FlashSACCritic``: ``num_q_networks`` members ``qnets.e`` (a ``FlashTrunk`` on
  ``[critic_obs, action]`` plus a ``Linear`` head ``logits``), one torch module per member of
  the JAX critic's batched leaves: ``(critic_obs [N, C], action [N, A]) -> logits [E, N, K]``.
- ``without_running_stats``: the target critic keeps no BatchNorm statistics (the JAX target
  always normalises with the batch's, and its statistics are not part of the JAX state).
- ``project_weights_``: every ``Linear`` weight row (one output unit) to unit norm, each
  BatchNorm's ``(weight, bias)`` jointly to norm ``sqrt(F)``, each RMSNorm weight to norm
  ``sqrt(F)``; biases of ``Linear`` layers stay free.
- ``RewardStatistics``: each env's carried discounted return and the running mean, variance,
  count and largest ``|G|`` of the returns (``observe`` / ``scale``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from unilab_jax.torch.flash_actor import FlagBatchNorm, FlashTrunk

__all__ = [
    "FlashSACCritic",
    "RewardStatistics",
    "cosine_lr",
    "project_weights_",
    "running_stats",
    "sample_tanh_gaussian",
    "without_running_stats",
]

PROJECTION_EPS = 1e-8  # flash_networks.PROJECTION_EPS
_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def sample_tanh_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tanh(u), log pi)`` for ``u = mean + exp(log_std) * noise``, ``[..., A] -> ([..., A],
    [...])``; ``log(1 - tanh(u)^2)`` in its exact form ``2 (log 2 - u - softplus(-2u))``, which
    keeps its digits for the saturated actions FlashSAC's actor often takes."""
    u = mean + torch.exp(log_std) * noise
    gaussian = -0.5 * (torch.square(noise) + 2.0 * log_std + _LOG_2PI)
    log_det = 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), torch.sum(gaussian - log_det, dim=-1)


class FlashCriticMember(nn.Module):
    """One distributional critic: ``FlashTrunk`` on ``[obs, action]``, then ``Linear(K)``."""

    def __init__(
        self, in_dim: int, width: int, num_blocks: int, num_atoms: int, momentum: float,
        device: torch.device | str | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.trunk = FlashTrunk(in_dim, width, num_blocks, momentum, device)
        self.logits = nn.Linear(width, num_atoms, device=device)

    def forward(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.logits(self.trunk(x, train))


class FlashSACCritic(nn.Module):
    """The critic ensemble (see the module docstring); ``train``: BatchNorm on the batch."""

    def __init__(
        self, n_obs: int, n_act: int, width: int, num_blocks: int, num_atoms: int,
        num_q_networks: int, momentum: float, device: torch.device | str | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.qnets = nn.ModuleList(
            FlashCriticMember(n_obs + n_act, width, num_blocks, num_atoms, momentum, device)
            for _ in range(num_q_networks)
        )

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor, train: bool = False
    ) -> torch.Tensor:
        x = torch.cat([obs, actions], dim=-1)
        return torch.stack([qnet(x, train) for qnet in self.qnets])


def without_running_stats(module: nn.Module) -> nn.Module:
    """``module`` with every BatchNorm's running statistics (and step counter) removed, so that
    it can only normalise with the batch and a forward pass never writes a buffer."""
    for bn in module.modules():
        if isinstance(bn, FlagBatchNorm):
            bn.track_running_stats = False
            bn.running_mean = None
            bn.running_var = None
            bn.num_batches_tracked = None
    return module


def running_stats(module: nn.Module) -> list[torch.Tensor]:
    """The running mean and variance buffers of every BatchNorm of ``module``."""
    return [
        buffer
        for bn in module.modules()
        if isinstance(bn, FlagBatchNorm)
        for buffer in (bn.running_mean, bn.running_var)
        if buffer is not None
    ]


@torch.no_grad()
def project_weights_(module: nn.Module) -> None:
    """Project ``module``'s parameters in place onto the bounds of the module docstring."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):  # [out, in]: each output unit's weights
            weight = layer.weight
            norm = torch.sqrt(torch.sum(torch.square(weight), dim=-1, keepdim=True))
            weight.copy_(weight / torch.clamp(norm, min=PROJECTION_EPS))
        elif isinstance(layer, FlagBatchNorm | nn.RMSNorm):
            leaves = [p for p in (layer.weight, getattr(layer, "bias", None)) if p is not None]
            squares = sum(torch.sum(torch.square(p), dim=-1, keepdim=True) for p in leaves)
            factor = math.sqrt(layer.weight.shape[-1]) / torch.clamp(
                torch.sqrt(squares), min=PROJECTION_EPS
            )
            for p in leaves:
                p.copy_(p * factor)


def cosine_lr(base_lr: float, step: int, decay_steps: int, final_ratio: float) -> float:
    """``optax.cosine_decay_schedule(base_lr, decay_steps, final_ratio)`` at ``step`` (the
    optimiser's steps so far), computed in float32 as optax does."""
    f32 = np.float32
    count = np.minimum(f32(step), f32(decay_steps))
    cosine = f32(0.5) * (f32(1.0) + np.cos(f32(np.pi) * count / f32(decay_steps)))
    decayed = (f32(1.0) - f32(final_ratio)) * cosine + f32(final_ratio)
    return float(f32(base_lr) * decayed)


class RewardStatistics(nn.Module):
    """Running statistics of every env's discounted return (``reward_scaling.RewardStats``):
    buffers ``carried [num_envs]``, ``mean``, ``var``, ``count``, ``abs_max`` (float32 scalars;
    no return seen: variance 1, so the scale starts at 1).

    ``num_envs=None`` (the reference's ``RewardNormalizer``, which takes no env count): the
    statistics size themselves on their first rewards, and restart the carried returns at 0
    when a later batch has another env count, as the reference does. Given ``num_envs``,
    ``observe`` refuses rewards of another env count (``resize`` changes it). Loading a state
    dict into unsized statistics takes its env count."""

    def __init__(
        self, num_envs: int | None = None, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        #: Whether the env count was given (then rewards of another count are refused).
        self.fixed_num_envs = num_envs is not None
        zero = torch.zeros((), dtype=torch.float32, device=device)
        self.register_buffer("carried", torch.zeros(num_envs or 0, device=device))
        self.register_buffer("mean", zero.clone())
        self.register_buffer("var", torch.ones((), device=device))
        self.register_buffer("count", zero.clone())
        self.register_buffer("abs_max", zero.clone())

    @property
    def num_envs(self) -> int:
        """The envs whose returns are carried (0: not sized yet)."""
        return int(self.carried.shape[0])

    def resize(self, num_envs: int) -> None:
        """Carry returns for ``num_envs`` envs: when that changes, every env's carried return
        restarts at 0 (as a new run's envs start new episodes); the statistics are kept."""
        if num_envs != self.num_envs:
            self.carried = torch.zeros(num_envs, device=self.carried.device)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        carried = state_dict.get(prefix + "carried")
        if not self.fixed_num_envs and carried is not None:  # sized by the checkpoint
            self.resize(int(carried.shape[0]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def observe(self, rewards: torch.Tensor, dones: torch.Tensor, gamma: float) -> None:
        """Merge env steps ``rewards`` / ``dones`` ``[S, num_envs]`` (in order; one step may
        be ``[num_envs]``): per step ``G = r + carried``, ``carried = gamma * (1 - done) * G``;
        the step's G values enter the mean and variance by Chan et al.'s pairwise rule, and
        the max."""
        rewards = rewards.to(self.carried.device, torch.float32)
        dones = dones.to(self.carried.device, torch.float32)
        if rewards.ndim == 1:
            rewards, dones = rewards.unsqueeze(0), dones.unsqueeze(0)
        if rewards.numel() == 0:
            return
        if not self.fixed_num_envs:
            self.resize(int(rewards.shape[-1]))
        if rewards.shape[-1] != self.num_envs:
            raise ValueError(
                f"rewards of {rewards.shape[-1]} envs, but the statistics carry {self.num_envs}"
            )
        for r, done in zip(rewards, dones, strict=True):
            g = r + self.carried
            n = torch.tensor(float(g.shape[0]), dtype=torch.float32, device=g.device)
            batch_mean = torch.mean(g)
            batch_var = torch.mean(torch.square(g - batch_mean))
            count = self.count + n
            delta = batch_mean - self.mean
            m2 = self.var * self.count + batch_var * n
            m2 = m2 + torch.square(delta) * self.count * n / count
            self.carried.copy_(gamma * (1.0 - done) * g)
            self.mean.copy_(self.mean + delta * n / count)
            self.var.copy_(m2 / count)
            self.count.copy_(count)
            self.abs_max.copy_(torch.maximum(self.abs_max, torch.max(torch.abs(g))))

    def scale(self, g_max: float) -> torch.Tensor:
        """The rewards' divisor ``max(sqrt(var + 1e-8), abs_max / g_max)`` (a scalar)."""
        # torch's float32 CPU sqrt may differ from XLA's in the last bit; the float64 root
        # rounded to float32 is correctly rounded, as XLA's is.
        root = torch.sqrt((self.var + 1e-8).to(torch.float64)).to(torch.float32)
        return torch.maximum(root, self.abs_max / g_max)
