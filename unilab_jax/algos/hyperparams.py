"""The algorithms' hyperparameters: frozen, documented dataclasses, free of flax and jax.

Each field's docstring is its documentation everywhere (``--help`` reads it). The CLI, the
Python API and the facade's torch learners all build these, and ``validate()`` checks every
setting before anything is built or compiled: one line naming the setting, its value and the
valid range.
"""

from __future__ import annotations

import dataclasses
import math

from unilab_jax.errors import ConfigError

__all__ = [
    "FlashSACConfig",
    "HoraSACConfig",
    "SACConfig",
    "TD3Config",
    "check_common_settings",
    "settings_from_json",
]


def settings_from_json(settings: dict) -> dict:
    """Algorithm settings read back from JSON (``run_config.json``, a checkpoint's
    ``meta`` item): JSON has no tuples, so lists become tuples again (``betas``)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}


def _require(ok: bool, name: str, value, valid: str) -> None:
    if not ok:
        raise ConfigError(f"{name} is {value!r}; it must be {valid}")


def _require_int(config, name: str, minimum: int, why: str = "") -> None:
    value = getattr(config, name)
    valid = f"an integer >= {minimum}{why}"
    _require(isinstance(value, int) and value >= minimum, name, value, valid)


def _require_below(config, low: str, high: str, why: str = "") -> None:
    value, bound = getattr(config, low), getattr(config, high)
    _require(value < bound, low, value, f"below {high} ({bound}){why}")


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_common_settings(config) -> None:
    """The checks every algorithm's config shares (discount, Polyak rate, learning rates,
    optimiser, C51 support, widths, initial temperature); raises ``ConfigError``."""
    for name, value in dataclasses.asdict(config).items():
        if isinstance(value, float | int) and not isinstance(value, bool):
            _require(_is_number(value), name, value, "a finite number")
    if hasattr(config, "use_symmetry"):
        _require(
            isinstance(config.use_symmetry, bool), "use_symmetry", config.use_symmetry, "a bool"
        )
    if hasattr(config, "noise_correlation"):
        rho = config.noise_correlation
        _require(0 <= rho < 1, "noise_correlation", rho, "in [0, 1) (0: white noise)")
    _require(0.0 < config.gamma <= 1.0, "gamma", config.gamma, "in (0, 1]")
    _require(0.0 < config.tau <= 1.0, "tau", config.tau, "in (0, 1]")
    for name in ("actor_lr", "critic_lr", "alpha_lr"):
        if hasattr(config, name):
            value = getattr(config, name)
            _require(value > 0, name, value, "a positive learning rate")
    _require(config.weight_decay >= 0, "weight_decay", config.weight_decay, ">= 0")
    _require(config.max_grad_norm >= 0, "max_grad_norm", config.max_grad_norm, ">= 0 (0: off)")
    _require_int(config, "num_atoms", 2, " (the C51 support needs two ends)")
    _require_below(config, "v_min", "v_max", ": the C51 support is [v_min, v_max]")
    for name in ("actor_hidden_dim", "critic_hidden_dim"):
        _require_int(config, name, 4, " (the layers are H, H/2, H/4 wide)")
    if hasattr(config, "alpha_init"):
        _require(config.alpha_init > 0, "alpha_init", config.alpha_init, "> 0 (log alpha)")


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
    lr_decay_steps: int = 0
    """Critic updates over which the actor's and critic's learning rates decay (cosine) to
    `lr_final_ratio` of their start, then stay there. Both follow the critic's update count, so
    they decay over the same stretch of the run whatever the policy frequency; the temperature's
    stays constant. 0: constant learning rates (the reference)."""
    lr_final_ratio: float = 1.0
    """The learning rates' end value as a share of their start, with `lr_decay_steps`."""
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
    noise_correlation: float = 0.0
    """Step-to-step correlation rho of each env's standard normal draw in exploration, an AR(1)
    process of unit variance (`n <- rho * n + sqrt(1 - rho^2) * N(0, 1)`, redrawn when an
    episode starts), so actions `tanh(mean + std * n)`; 0: independent draws (the reference)."""
    obs_normalization: bool = True
    """Normalise actor and critic inputs with running statistics (`update_normalizers`)."""
    use_symmetry: bool = False
    """Symmetry augmentation: each update trains on half its rows plus their left-right mirrors
    (the task's mirror map), so the rows per gradient step stay `batch_size` (even per device)."""

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first setting that cannot work."""
        check_common_settings(self)
        _require_int(self, "num_q_networks", 1)
        _require_int(self, "lr_decay_steps", 0, " (0: constant learning rates)")
        _require(
            0.0 < self.lr_final_ratio <= 1.0, "lr_final_ratio", self.lr_final_ratio, "in (0, 1]"
        )
        _require(
            len(self.betas) == 2 and all(0.0 <= b < 1.0 for b in self.betas),
            "betas",
            self.betas,
            "two Adam decay rates in [0, 1)",
        )
        _require_below(self, "log_std_min", "log_std_max")


@dataclasses.dataclass(frozen=True)
class HoraSACConfig(SACConfig):
    """HORA-SAC: FastSAC whose actor also reads the privileged values, the critic observation's
    columns beyond the actor's, through an encoder (the reference's ``runtime_impl: hora_sac``;
    defaults are its ``HoraSACActor``'s). Everything else is FastSAC's."""

    priv_embed_dim: int = 9
    """Width of the privileged values' embedding (tanh) that joins the actor's observation."""
    priv_hidden_dims: tuple[int, ...] = (256, 128, 9)
    """The privileged encoder's widths (Dense -> LayerNorm -> SiLU each); a projection to
    `priv_embed_dim` follows when the last width differs."""

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first setting that cannot work."""
        super().validate()
        _require_int(self, "priv_embed_dim", 1)
        dims = self.priv_hidden_dims
        _require(
            isinstance(dims, tuple) and len(dims) > 0
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims),
            "priv_hidden_dims", dims, "a non-empty tuple of positive widths",
        )  # fmt: skip
        _require(
            not self.use_symmetry,
            "use_symmetry",
            self.use_symmetry,
            "False for HORA-SAC (a mirror map has no mirror of the privileged values; the "
            "reference refuses it too)",
        )


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
    noise_correlation: float = 0.0
    """Step-to-step correlation rho of each env's exploration noise, an AR(1) process of unit
    variance (`n <- rho * n + sqrt(1 - rho^2) * N(0, 1)`, redrawn when an episode starts),
    scaled by the env's std; 0: independent draws each step (the reference)."""
    init_scale: float = 0.01
    """Std of the actor's output-layer kernel init (bias 0)."""
    use_cdq: bool = True
    """Clipped double Q: per-row lower target distribution, and min(Q1, Q2) for the actor."""
    obs_normalization: bool = True
    """Normalise actor and critic inputs with running statistics (`update_normalizers`)."""
    use_symmetry: bool = False
    """Symmetry augmentation: each update trains on half its rows plus their left-right mirrors
    (the task's mirror map), so the rows per gradient step stay `batch_size` (even per device)."""

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first setting that cannot work."""
        check_common_settings(self)
        _require(self.policy_noise >= 0, "policy_noise", self.policy_noise, ">= 0")
        _require(self.noise_clip >= 0, "noise_clip", self.noise_clip, ">= 0")
        _require(self.std_min > 0, "std_min", self.std_min, "> 0")
        _require(
            self.std_min <= self.std_max,
            "std_min",
            self.std_min,
            f"at most std_max ({self.std_max}): exploration stds are drawn from [std_min, std_max]",
        )
        _require(self.init_scale > 0, "init_scale", self.init_scale, "> 0")


@dataclasses.dataclass(frozen=True)
class FlashSACConfig:
    """FlashSAC hyperparameters (defaults: the paper's recipe, arXiv 2604.04539)."""

    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.01
    """Polyak rate of the target critic (its parameters; batch statistics are not averaged)."""
    actor_lr: float = 3e-4
    """Actor Adam learning rate at the start of its cosine decay."""
    critic_lr: float = 3e-4
    """Critic Adam learning rate at the start of its cosine decay."""
    alpha_lr: float = 3e-4
    """Temperature (log-alpha) Adam learning rate at the start of its cosine decay."""
    lr_decay_steps: int = 500_000
    """Optimiser steps over which each learning rate decays (cosine) to `lr_final_ratio` of its
    start, then stays there; each optimiser counts its own steps."""
    lr_final_ratio: float = 0.5
    """The learning rates' end value as a share of their start (3e-4 -> 1.5e-4)."""
    alpha_init: float = 0.01
    """Initial entropy temperature alpha (log_alpha starts at log(alpha_init))."""
    target_entropy_std: float = 0.15
    """The target entropy is that of a Gaussian of this std per action dimension,
    `action_dim / 2 * log(2 pi e std^2)` (about -0.48 per dimension at 0.15)."""
    use_autotune: bool = True
    """Learn alpha after every actor step; when False alpha stays at `alpha_init`."""
    weight_decay: float = 0.0
    """Decoupled weight decay of the actor and critic optimisers (the paper: none; the weight
    projection bounds the weights)."""
    max_grad_norm: float = 0.0
    """Global-norm gradient clipping of actor and critic; 0 disables it (the paper: off)."""
    actor_hidden_dim: int = 128
    """Actor width d (its inverted-residual blocks expand to 4d)."""
    critic_hidden_dim: int = 256
    """Critic width d (its inverted-residual blocks expand to 4d)."""
    num_blocks: int = 2
    """Inverted-residual blocks of actor and critic."""
    num_q_networks: int = 2
    """Number of distributional critics (the target takes, per row, the one of lowest value)."""
    num_atoms: int = 101
    """C51 support size K."""
    v_min: float = -5.0
    """Lowest support value (the scaled rewards keep returns within [-g_max, g_max])."""
    v_max: float = 5.0
    """Highest support value."""
    g_max: float = 5.0
    """Reward scaling: rewards are divided by `max(sqrt(var(G) + 1e-8), max|G| / g_max)`, G each
    env's running discounted return, so scaled returns stay within +-g_max."""
    reward_scaling: bool = True
    """Scale rewards by the running statistics of the discounted return (above); when False,
    rewards are used as they are and the support is derived like SAC's."""
    batch_norm_momentum: float = 0.01
    """Rate of the BatchNorm running statistics: `running <- (1 - m) * running + m * batch`."""
    log_std_min: float = -10.0
    """Lower end of the policy's log-std range."""
    log_std_max: float = 2.0
    """Upper end of the policy's log-std range."""
    noise_repeat_max: int = 16
    """Exploration holds each env's standard normal draw for k steps, k drawn from a Zeta
    distribution truncated to [1, noise_repeat_max]; 1: a fresh draw every step."""
    noise_repeat_exponent: float = 2.0
    """The Zeta distribution's exponent mu, `P(k) ~ k^-mu` (2: k = 1 with probability 0.63)."""

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first setting that cannot work."""
        check_common_settings(self)
        _require(self.target_entropy_std > 0, "target_entropy_std", self.target_entropy_std, "> 0")
        for name in ("num_blocks", "num_q_networks", "lr_decay_steps", "noise_repeat_max"):
            _require_int(self, name, 1)
        _require(
            0.0 < self.lr_final_ratio <= 1.0, "lr_final_ratio", self.lr_final_ratio, "in (0, 1]"
        )
        _require(self.g_max > 0, "g_max", self.g_max, "> 0")
        _require(
            0.0 < self.batch_norm_momentum <= 1.0,
            "batch_norm_momentum",
            self.batch_norm_momentum,
            "in (0, 1]",
        )
        _require(
            self.noise_repeat_exponent > 1.0,
            "noise_repeat_exponent",
            self.noise_repeat_exponent,
            "> 1 (a Zeta distribution)",
        )
        _require_below(self, "log_std_min", "log_std_max")
