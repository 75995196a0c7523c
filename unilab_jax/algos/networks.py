"""Flax (linen) networks of FastSAC and FastTD3.

Shapes follow the reference: hidden widths `H -> H/2 -> H/4` (integer division).

- `SACActor`: (Dense -> LayerNorm -> SiLU) x 3, zero-initialised `mu` / `log_std` heads;
  returns `(mean, log_std)` before the tanh squash (see `sac.py` for sampling).
- `PrivilegedSACActor`: HORA-SAC's actor (the reference's `HoraSACActor`): an encoder of the
  privileged values ((Dense -> LayerNorm -> SiLU) per width, 256-128-9, a projection when its
  last width is not the embedding's, tanh) whose embedding joins the observation into
  `SACActor`'s trunk and heads.
- `TD3Actor`: (Dense -> ReLU) x 3 -> Dense (kernel ~ N(0, init_scale), bias 0) -> tanh.
- `CriticEnsemble`: `num_critics` independent C51 Q-networks on `concat(critic_obs, action)`
  -> `[E, ..., K]` logits, parameters batched over a leading member axis E.

Deviations from the reference: none in structure. Hidden layers are initialised like
`torch.nn.Linear` (kernel and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))) rather than flax's
LeCun-normal default, and LayerNorm uses torch's epsilon 1e-5, so both paths start from the same
distribution; exact weights convert between the two (kernel = torch weight transposed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = [
    "CriticEnsemble",
    "MLP",
    "PrivilegedSACActor",
    "SACActor",
    "TD3Actor",
    "hidden_widths",
    "per_member",
]

Array = jax.Array

# torch.nn.Linear's default kernel init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
_torch_kernel_init = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def _torch_bias_init(fan_in: int) -> Callable:
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: Sequence[int], dtype=jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _torch_dense(features: int, fan_in: int, name: str) -> nn.Dense:
    return nn.Dense(
        features, kernel_init=_torch_kernel_init, bias_init=_torch_bias_init(fan_in), name=name
    )


def hidden_widths(hidden_dim: int) -> tuple[int, int, int]:
    """The reference's three hidden widths `(H, H // 2, H // 4)`."""
    return (hidden_dim, hidden_dim // 2, hidden_dim // 4)


class MLP(nn.Module):
    """Hidden stack: (Dense -> [LayerNorm] -> activation) per width."""

    widths: Sequence[int]
    activation: Callable[[Array], Array]
    use_layer_norm: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        for i, width in enumerate(self.widths):
            x = _torch_dense(width, x.shape[-1], name=f"dense_{i}")(x)
            if self.use_layer_norm:
                # Two-pass variance, as torch computes it.
                x = nn.LayerNorm(epsilon=1e-5, use_fast_variance=False, name=f"norm_{i}")(x)
            x = self.activation(x)
        return x


def _gaussian_heads(
    x: Array, action_dim: int, log_std_min: float, log_std_max: float
) -> tuple[Array, Array]:
    """The tanh-Gaussian policy's zero-initialised heads on the trunk's output `x`:
    `(mean, log_std)`, each `[..., A]` (the initial policy: mean 0, log_std at the range's
    midpoint)."""
    zeros = nn.initializers.zeros
    mean = nn.Dense(action_dim, kernel_init=zeros, bias_init=zeros, name="mu")(x)
    raw_log_std = nn.Dense(action_dim, kernel_init=zeros, bias_init=zeros, name="log_std")(x)
    half_range = 0.5 * (log_std_max - log_std_min)
    log_std = log_std_min + half_range * (jnp.tanh(raw_log_std) + 1.0)
    # The reference's NaN guards: mean clamped to +-10, NaN mean -> 0, NaN log_std -> min.
    mean = jnp.nan_to_num(jnp.clip(mean, -10.0, 10.0), nan=0.0)
    log_std = jnp.nan_to_num(log_std, nan=log_std_min)
    return mean, log_std


class SACActor(nn.Module):
    """Tanh-Gaussian policy trunk: `obs [..., obs_dim] -> (mean, log_std)`, each `[..., A]`."""

    action_dim: int
    hidden_dim: int = 512
    use_layer_norm: bool = True
    log_std_min: float = -5.0
    log_std_max: float = 0.0

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Array, Array]:
        x = MLP(hidden_widths(self.hidden_dim), nn.silu, self.use_layer_norm, name="trunk")(obs)
        return _gaussian_heads(x, self.action_dim, self.log_std_min, self.log_std_max)


class PrivilegedSACActor(nn.Module):
    """HORA-SAC's tanh-Gaussian policy: `[obs | priv] [..., obs_dim + P] -> (mean, log_std)`.

    The input's first `obs_dim` columns are the actor's observation, the rest the privileged
    values (the critic observation's columns beyond the actor's). `priv_encoder` ((Dense ->
    [LayerNorm] -> SiLU) per `priv_hidden_dims`, then `priv_projection` to `priv_embed_dim`
    when the last width differs) and a tanh give the embedding z; `trunk` and the heads are
    `SACActor`'s on `[obs | z]`. The module names are the reference's (`priv_encoder`,
    `actor_trunk` as `trunk`, `action_mean_head` as `mu`, `action_logstd_head` as `log_std`).
    """

    action_dim: int
    obs_dim: int
    hidden_dim: int = 512
    priv_embed_dim: int = 9
    priv_hidden_dims: tuple[int, ...] = (256, 128, 9)
    use_layer_norm: bool = True
    log_std_min: float = -5.0
    log_std_max: float = 0.0

    @nn.compact
    def __call__(self, actor_input: Array) -> tuple[Array, Array]:
        obs, priv = actor_input[..., : self.obs_dim], actor_input[..., self.obs_dim :]
        encoded = MLP(self.priv_hidden_dims, nn.silu, self.use_layer_norm, name="priv_encoder")(
            priv
        )
        if encoded.shape[-1] != self.priv_embed_dim:
            encoded = _torch_dense(self.priv_embed_dim, encoded.shape[-1], "priv_projection")(
                encoded
            )
        z = jnp.tanh(encoded)
        x = jnp.concatenate([obs, z], axis=-1)
        x = MLP(hidden_widths(self.hidden_dim), nn.silu, self.use_layer_norm, name="trunk")(x)
        return _gaussian_heads(x, self.action_dim, self.log_std_min, self.log_std_max)


class TD3Actor(nn.Module):
    """Deterministic policy: `obs [..., obs_dim] -> tanh(action) [..., A]`."""

    action_dim: int
    hidden_dim: int = 512
    init_scale: float = 0.01

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        x = MLP(hidden_widths(self.hidden_dim), nn.relu, name="trunk")(obs)
        out = nn.Dense(
            self.action_dim,
            kernel_init=nn.initializers.normal(self.init_scale),
            bias_init=nn.initializers.zeros,
            name="mu",
        )(x)
        return jnp.tanh(out)


class _MemberDense(nn.Module):
    """A Dense layer per ensemble member: `[E, ..., in] -> [E, ..., out]`."""

    features: int

    @nn.compact
    def __call__(self, x: Array) -> Array:
        members, fan_in = x.shape[0], x.shape[-1]
        kernel = self.param(
            "kernel", _torch_member_kernel_init, (members, fan_in, self.features)
        )  # [E, in, out]
        bias = self.param("bias", _torch_bias_init(fan_in), (members, self.features))
        y = jnp.einsum("e...i,eio->e...o", x, kernel)
        return y + per_member(bias, y.ndim)


class _MemberLayerNorm(nn.Module):
    """LayerNorm over the last axis with a scale and bias per ensemble member (eps 1e-5)."""

    @nn.compact
    def __call__(self, x: Array) -> Array:
        shape = (x.shape[0], x.shape[-1])
        scale = self.param("scale", nn.initializers.ones, shape)
        bias = self.param("bias", nn.initializers.zeros, shape)
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)  # two-pass, as torch
        y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
        return y * per_member(scale, x.ndim) + per_member(bias, x.ndim)


def per_member(p: Array, ndim: int) -> Array:
    """`[E, F] -> [E, 1, ..., 1, F]` to broadcast against `[E, ..., F]`."""
    return p.reshape(p.shape[0], *([1] * (ndim - 2)), p.shape[-1])


# torch.nn.Linear's kernel init per member: fan_in is the layer input, not E * input.
_torch_member_kernel_init = nn.initializers.variance_scaling(
    1.0 / 3.0, "fan_in", "uniform", in_axis=-2, out_axis=-1, batch_axis=(0,)
)


class CriticEnsemble(nn.Module):
    """`num_critics` independent C51 Q-networks on the same input.

    `(critic_obs [..., C], action [..., A]) -> logits [E, ..., K]`. Each member is
    concat -> (Dense -> [LayerNorm] -> activation) x 3 -> Dense(K). Parameters are stored
    batched (leading member axis E on every leaf, e.g. `dense_0/kernel [E, C + A, H]`), so the
    members run as batched matmuls and initialise with one RNG call per layer.
    """

    num_critics: int
    num_atoms: int
    hidden_dim: int
    activation: Callable[[Array], Array] = nn.relu
    use_layer_norm: bool = False

    @nn.compact
    def __call__(self, critic_obs: Array, action: Array) -> Array:
        x = jnp.concatenate([critic_obs, action], axis=-1)
        x = jnp.broadcast_to(x, (self.num_critics, *x.shape))  # [E, ..., C + A]
        for i, width in enumerate(hidden_widths(self.hidden_dim)):
            x = _MemberDense(width, name=f"dense_{i}")(x)
            if self.use_layer_norm:
                x = _MemberLayerNorm(name=f"norm_{i}")(x)
            x = self.activation(x)
        return _MemberDense(self.num_atoms, name="logits")(x)
