"""C51 critics and the categorical maths shared by the torch FastSAC and FastTD3 learners.

Layer layout follows the reference so that its checkpoints keep their parameter names:
hidden widths `H -> H/2 -> H/4`, each `Linear -> [LayerNorm] -> activation`, then
`Linear(num_atoms)`. FastSAC keeps a norm slot in every hidden layer (an `nn.Identity` when
`use_layer_norm=False`, so indices stay `net.0, net.3, net.6, net.9`); FastTD3 has no slot
(`net.0, net.2, net.4, net.6`).

The maths is a transcription of `unilab_jax.algos.c51`, with the same operation order, so that
the two paths agree to float rounding:
- `bootstrap_mask`: `1 - dones * (1 - truncated)`, i.e. stop only on termination without
  truncation.
- `categorical_projection`: `tz = clip(r + (bootstrap * gamma) * z)`, grid position
  `b = clip((tz - v_min) / dz, 0, K - 1)`, `l = floor(b)`, `u = ceil(b)`; when `l == u` move `l`
  down if `l > 0`, else `u` up (both tests read the original `l`); one flat `index_add_`.

Deviations from the reference:
- `b` is clipped to `[0, K - 1]` before the floor/ceil, as the JAX core does (the reference
  clamps the indices afterwards and can drop a row's mass when rounding puts `b` outside).
- The support buffer is `torch.linspace`, which can differ from `jnp.linspace` in the last bit
  of some atoms (a ~1e-7 relative effect on targets; weights convert exactly).
"""

from __future__ import annotations

import torch
from torch import nn

from unilab_jax.torch.actors import hidden_layers  # the actors' and critics' layers

__all__ = [
    "Critic",
    "DistributionalQNetwork",
    "bootstrap_mask",
    "categorical_cross_entropy",
    "categorical_projection",
    "clipped_target_mass",
    "expected_value",
    "hidden_layers",
]


def bootstrap_mask(dones: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """`1 - dones * (1 - truncated)`: `[B]`, 0 only for a termination that is not a time-out.

    A truncated row bootstraps from `next_obs`, which the collector fills with the true final
    observation, even if the task also flagged it done.
    """
    dones = dones.to(torch.float32)
    truncated = truncated.to(torch.float32)
    return 1.0 - dones * (1.0 - truncated)


def categorical_projection(
    next_probs: torch.Tensor,
    rewards: torch.Tensor,
    bootstrap: torch.Tensor,
    gamma: float,
    v_min: float,
    v_max: float,
    support: torch.Tensor,
) -> torch.Tensor:
    """Project `r + bootstrap * gamma * Z'` onto the fixed support (see the module docstring).

    Args:
        next_probs: `[..., B, K]` next-state probabilities (leading axes, e.g. the critics,
            broadcast against the per-row inputs).
        rewards, bootstrap: `[B]`.
        support: `[K]` atom values.
    Returns:
        `[..., B, K]`; each row keeps the mass of its input row.
    """
    num_atoms = next_probs.shape[-1]
    delta_z = (v_max - v_min) / (num_atoms - 1)
    target_z = (rewards[:, None] + (bootstrap * gamma)[:, None] * support).clamp(v_min, v_max)
    b = ((target_z - v_min) / delta_z).clamp(0.0, num_atoms - 1.0)  # [B, K]
    lower = torch.floor(b)
    upper = torch.ceil(b)
    on_point = lower == upper
    shift_lower = on_point & (lower > 0)
    shift_upper = on_point & (lower == 0)
    lower = torch.where(shift_lower, lower - 1.0, lower)
    upper = torch.where(shift_upper, upper + 1.0, upper)
    mass_lower = next_probs * (upper - b)  # [..., B, K]
    mass_upper = next_probs * (b - lower)

    shape = mass_lower.shape
    num_rows = mass_lower.numel() // num_atoms
    offsets = torch.arange(num_rows, device=next_probs.device) * num_atoms
    offsets = offsets.reshape(*shape[:-1], 1)

    def flat_index(index: torch.Tensor) -> torch.Tensor:
        # A no-op for finite inputs; for NaN it keeps the (NaN) mass inside its own row.
        index = index.to(torch.int64).clamp(0, num_atoms - 1)
        return (index.expand(shape) + offsets).reshape(-1)

    out = torch.zeros(num_rows * num_atoms, dtype=next_probs.dtype, device=next_probs.device)
    out.index_add_(0, flat_index(lower), mass_lower.reshape(-1))
    out.index_add_(0, flat_index(upper), mass_upper.reshape(-1))
    return out.reshape(shape)


def clipped_target_mass(
    next_probs: torch.Tensor,
    rewards: torch.Tensor,
    bootstrap: torch.Tensor,
    gamma: float,
    v_min: float,
    v_max: float,
    support: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The share of target probability the projection clips at `v_min` / `v_max` (scalars in
    [0, 1], means over the leading axes and rows), as `unilab_jax.algos.c51` computes it: a
    share that stays high means the returns outgrow the support."""
    target_z = rewards[:, None] + (bootstrap * gamma)[:, None] * support  # [B, K], unclipped
    low = torch.sum(next_probs * (target_z < v_min), dim=-1)
    high = torch.sum(next_probs * (target_z > v_max), dim=-1)
    return low.mean(), high.mean()


def expected_value(probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """`sum_k probs[..., k] * z[k]`: `[..., K] -> [...]`."""
    return torch.sum(probs * support, dim=-1)


def categorical_cross_entropy(
    target_probs: torch.Tensor, logits: torch.Tensor, log_prob_floor: float | None = None
) -> torch.Tensor:
    """`-sum_k target[k] * log_softmax(logits)[k]`: `[..., K] -> [...]`.

    `log_prob_floor` clamps the log-probabilities from below (FastSAC: -30, FastTD3: none).
    """
    log_probs = torch.log_softmax(logits, dim=-1)
    if log_prob_floor is not None:
        log_probs = log_probs.clamp_min(log_prob_floor)
    return -torch.sum(target_probs * log_probs, dim=-1)


class DistributionalQNetwork(nn.Module):
    """One C51 Q-network: `(critic_obs [B, C], action [B, A]) -> logits [B, K]`."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        num_atoms: int,
        v_min: float,
        v_max: float,
        hidden_dim: int,
        activation: str = "relu",
        use_layer_norm: bool = False,
        norm_slot: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        layers = hidden_layers(
            n_obs + n_act, hidden_dim, activation, use_layer_norm, norm_slot, device
        )
        layers.append(nn.Linear(hidden_dim // 4, num_atoms, device=device))
        self.net = nn.Sequential(*layers)
        self.num_atoms = num_atoms
        self.v_min = v_min
        self.v_max = v_max

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, actions], dim=-1))

    def projection(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        bootstrap: torch.Tensor,
        discount: float,
        q_support: torch.Tensor,
    ) -> torch.Tensor:
        """This net's next-state distribution at `(obs, actions)`, projected: `[B, K]`."""
        next_probs = torch.softmax(self(obs, actions), dim=-1)
        return categorical_projection(
            next_probs, rewards, bootstrap, discount, self.v_min, self.v_max, q_support
        )


class Critic(nn.Module):
    """FastTD3's twin C51 critic (ReLU, no LayerNorm), `qnet1` and `qnet2`."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        num_atoms: int,
        v_min: float,
        v_max: float,
        hidden_dim: int,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        # ReLU, no LayerNorm and no norm slot.
        args = (n_obs, n_act, num_atoms, v_min, v_max, hidden_dim, "relu", False, False, device)
        self.qnet1 = DistributionalQNetwork(*args)
        self.qnet2 = DistributionalQNetwork(*args)
        self.register_buffer("q_support", torch.linspace(v_min, v_max, num_atoms, device=device))

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both nets' logits, each `[B, K]`."""
        return self.qnet1(obs, actions), self.qnet2(obs, actions)

    def projection(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        bootstrap: torch.Tensor,
        discount: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both nets' projected next-state distributions, each `[B, K]`."""
        args = (obs, actions, rewards, bootstrap, discount, self.q_support)
        return self.qnet1.projection(*args), self.qnet2.projection(*args)

    def get_value(self, probs: torch.Tensor) -> torch.Tensor:
        """Expected value of `[..., K]` probabilities over the support."""
        return expected_value(probs, self.q_support)
