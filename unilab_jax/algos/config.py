"""The algorithms' hyperparameters: frozen, documented dataclasses, free of flax and jax.

Each field's docstring is its documentation everywhere (``--help`` reads it). The CLI, the
Python API and the facade's torch learners all build these.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["SACConfig", "TD3Config"]


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """FastSAC hyperparameters (defaults are the reference learner's)."""

    gamma: float = 0.97
    """Discount factor."""
    tau: float = 0.125
    """Polyak rate of the target critic: `target <- tau * online + (1 - tau) * target`."""
    actor_lr: float = 3e-4
    """Actor AdamW learning rate."""
    critic_lr: float = 3e-4
    """Critic AdamW learning rate."""
    alpha_lr: float = 3e-4
    """Temperature (log-alpha) Adam learning rate."""
    alpha_init: float = 0.001
    """Initial entropy temperature alpha (log_alpha starts at log(alpha_init))."""
    target_entropy_ratio: float = 0.0
    """Target entropy is `-action_dim * target_entropy_ratio`."""
    use_autotune: bool = True
    """Learn alpha; when False alpha stays at `alpha_init`."""
    weight_decay: float = 0.001
    """Decoupled weight decay of the actor and critic AdamW (the temperature gets none)."""
    betas: tuple[float, float] = (0.9, 0.95)
    """Adam (b1, b2) of all three optimisers."""
    max_grad_norm: float = 0.0
    """Global-norm gradient clipping of actor and critic; 0 disables it."""
    actor_hidden_dim: int = 512
    """Actor widths H, H/2, H/4."""
    critic_hidden_dim: int = 768
    """Critic widths C, C/2, C/4."""
    use_layer_norm: bool = True
    """LayerNorm after every hidden Dense (actor and critic)."""
    num_q_networks: int = 2
    """Number of independent distributional critics."""
    num_atoms: int = 101
    """C51 support size K."""
    v_min: float = -20.0
    """Lowest support value."""
    v_max: float = 20.0
    """Highest support value."""
    log_std_min: float = -5.0
    """Lower end of the policy's log-std range."""
    log_std_max: float = 0.0
    """Upper end of the policy's log-std range."""
    obs_normalization: bool = True
    """Normalise actor and critic inputs with running statistics (`update_normalizers`)."""


@dataclasses.dataclass(frozen=True)
class TD3Config:
    """FastTD3 hyperparameters (defaults are the reference yaml's)."""

    gamma: float = 0.97
    """Discount factor."""
    tau: float = 0.1
    """Polyak rate of the target critic: `target <- tau * online + (1 - tau) * target`."""
    actor_lr: float = 3e-4
    """Actor AdamW learning rate."""
    critic_lr: float = 3e-4
    """Critic AdamW learning rate."""
    weight_decay: float = 0.1
    """Decoupled weight decay of both AdamW optimisers (default betas 0.9, 0.999)."""
    max_grad_norm: float = 10.0
    """Global-norm gradient clipping of actor and critic; 0 disables it."""
    actor_hidden_dim: int = 512
    """Actor widths H, H/2, H/4."""
    critic_hidden_dim: int = 1024
    """Critic widths C, C/2, C/4."""
    num_atoms: int = 101
    """C51 support size K."""
    v_min: float = -10.0
    """Lowest support value."""
    v_max: float = 10.0
    """Highest support value."""
    policy_noise: float = 0.2
    """Std of the target-policy smoothing noise."""
    noise_clip: float = 0.5
    """The smoothing noise is clipped to +-noise_clip."""
    std_min: float = math.exp(-1.6)
    """Lower end of the per-env exploration std (uniformly drawn on reset)."""
    std_max: float = math.exp(-0.22)
    """Upper end of the per-env exploration std."""
    init_scale: float = 0.01
    """Std of the actor's output-layer kernel init (bias 0)."""
    use_cdq: bool = True
    """Clipped double Q: per-row lower target distribution, and min(Q1, Q2) for the actor."""
    obs_normalization: bool = True
    """Normalise actor and critic inputs with running statistics (`update_normalizers`)."""
