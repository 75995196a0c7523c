"""Flax (linen) networks of FlashSAC (arXiv 2604.04539): norm-bounded inverted-residual MLPs.

One trunk serves actor and critics, batched over a leading member axis E (the critic ensemble;
the actor is one member):

    x -> BatchNorm -> Dense(d, no bias)
      -> num_blocks x [x + ReLU(BN(Dense(d)(ReLU(BN(Dense(4d)(x))))))]   (inverted residual)
      -> RMSNorm -> head

- `FlashActor`: `obs [N, O] -> (mean, log_std)`, two heads with biases; `log_std` squashed
  smoothly into `[log_std_min, log_std_max]`.
- `FlashCritic`: `(critic_obs [N, C], action [N, A]) -> logits [E, N, K]`.
- `project_weights`: the projection applied after every optimiser step: every Dense kernel's
  per-output-unit weight vector to unit norm, each BatchNorm's `(scale, bias)` jointly to norm
  `sqrt(F)`, each RMSNorm scale to norm `sqrt(F)`; biases are left free.

BatchNorm (`MemberBatchNorm`) normalises with the batch's statistics in training mode (over the
rows of every device when `axis_name` is set, so the result does not depend on the layout) and
with its running statistics otherwise; the running statistics move only when the
``batch_stats`` collection is mutable: ``running <- (1 - m) * running + m * batch`` with the
unbiased batch variance (torch's ``BatchNorm1d`` rule), eps 1e-5. RMSNorm's eps is 1e-6.
Dense kernels start standard normal and are projected at once (the paper starts from
orthogonal matrices; see ``_member_normal``).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from unilab_jax.algos.networks import per_member

__all__ = [
    "FlashActor",
    "FlashCritic",
    "FlashTrunk",
    "MemberBatchNorm",
    "project_weights",
]

Array = jax.Array
BN_EPS = 1e-5
RMS_EPS = 1e-6
PROJECTION_EPS = 1e-8


def _member_normal(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> Array:
    """Standard normal `[E, in, out]`: once projected, each output unit's weights are a uniform
    random direction. (The paper starts from orthogonal matrices; a QR decomposition inside a
    jitted init hangs on jaxlib 0.10.2's CPU LAPACK, and in these widths random unit
    directions are nearly orthogonal.)"""
    return jax.random.normal(key, shape, dtype)


class MemberDense(nn.Module):
    """`[E, N, in] -> [E, N, out]`, a kernel (and optional bias) per member."""

    features: int
    use_bias: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        shape = (x.shape[0], x.shape[-1], self.features)
        kernel = self.param("kernel", _member_normal, shape)
        y = jnp.einsum("eni,eio->eno", x, kernel)
        if self.use_bias:
            y = y + per_member(self.param("bias", nn.initializers.zeros, shape[::2]), y.ndim)
        return y


class MemberBatchNorm(nn.Module):
    """BatchNorm over the rows of `[E, N, F]`, statistics and affine per member (see above)."""

    momentum: float = 0.01
    axis_name: str | None = None

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        shape = (x.shape[0], x.shape[-1])
        scale = self.param("scale", nn.initializers.ones, shape)
        bias = self.param("bias", nn.initializers.zeros, shape)
        running_mean = self.variable("batch_stats", "mean", jnp.zeros, shape, jnp.float32)
        running_var = self.variable("batch_stats", "var", jnp.ones, shape, jnp.float32)
        if train:
            rows = x.shape[1]
            mean = jnp.mean(x, axis=1)
            if self.axis_name is not None:
                mean = jax.lax.pmean(mean, self.axis_name)
            var = jnp.mean(jnp.square(x - mean[:, None]), axis=1)  # two-pass, as torch
            if self.axis_name is not None:
                var = jax.lax.pmean(var, self.axis_name)
                rows = jax.lax.psum(rows, self.axis_name)
            if self.is_mutable_collection("batch_stats") and not self.is_initializing():
                m = self.momentum
                unbiased = var * (rows / jnp.maximum(rows - 1, 1))
                running_mean.value = (1.0 - m) * running_mean.value + m * mean
                running_var.value = (1.0 - m) * running_var.value + m * unbiased
        else:
            mean, var = running_mean.value, running_var.value
        y = (x - mean[:, None]) * jax.lax.rsqrt(var[:, None] + BN_EPS)
        return y * scale[:, None] + bias[:, None]


class MemberRMSNorm(nn.Module):
    """`x / sqrt(mean(x^2) + 1e-6) * scale` over the last axis, a scale per member."""

    @nn.compact
    def __call__(self, x: Array) -> Array:
        scale = self.param("scale", nn.initializers.ones, (x.shape[0], x.shape[-1]))
        y = x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + RMS_EPS)
        return y * scale[:, None]


class FlashTrunk(nn.Module):
    """`[E, N, in] -> [E, N, width]`: input BatchNorm, embedding, blocks, RMSNorm."""

    width: int
    num_blocks: int
    momentum: float = 0.01
    axis_name: str | None = None

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        bn = lambda name: MemberBatchNorm(self.momentum, self.axis_name, name=name)  # noqa: E731
        x = MemberDense(self.width, name="embed")(bn("bn_in")(x, train))
        for i in range(self.num_blocks):
            h = MemberDense(4 * self.width, name=f"block_{i}_up")(x)
            h = nn.relu(bn(f"block_{i}_bn_up")(h, train))
            y = MemberDense(self.width, name=f"block_{i}_down")(h)
            x = x + nn.relu(bn(f"block_{i}_bn_down")(y, train))
        return MemberRMSNorm(name="rms")(x)


class FlashActor(nn.Module):
    """Tanh-Gaussian policy: `obs [N, O] -> (mean, log_std)`, each `[N, A]` (before tanh)."""

    action_dim: int
    width: int = 128
    num_blocks: int = 2
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    momentum: float = 0.01
    axis_name: str | None = None

    @nn.compact
    def __call__(self, obs: Array, train: bool = False) -> tuple[Array, Array]:
        trunk = FlashTrunk(self.width, self.num_blocks, self.momentum, self.axis_name, name="trunk")
        z = trunk(obs[None], train)
        mean = MemberDense(self.action_dim, use_bias=True, name="mu")(z)[0]
        raw = MemberDense(self.action_dim, use_bias=True, name="log_std")(z)[0]
        half_range = 0.5 * (self.log_std_max - self.log_std_min)
        return mean, self.log_std_min + half_range * (jnp.tanh(raw) + 1.0)


class FlashCritic(nn.Module):
    """`num_critics` distributional critics: `(critic_obs [N, C], action [N, A]) -> [E, N, K]`."""

    num_critics: int
    num_atoms: int
    width: int = 256
    num_blocks: int = 2
    momentum: float = 0.01
    axis_name: str | None = None

    @nn.compact
    def __call__(self, critic_obs: Array, action: Array, train: bool = False) -> Array:
        x = jnp.concatenate([critic_obs, action], axis=-1)
        x = jnp.broadcast_to(x, (self.num_critics, *x.shape))
        trunk = FlashTrunk(self.width, self.num_blocks, self.momentum, self.axis_name, name="trunk")
        return MemberDense(self.num_atoms, use_bias=True, name="logits")(trunk(x, train))


def _project_module(node: dict[str, Any]) -> dict[str, Any]:
    """One module's parameters projected (a Dense, a BatchNorm or an RMSNorm, told apart by
    their leaves)."""
    if "kernel" in node:  # [E, in, out]: each output unit's weights to unit norm
        norm = jnp.sqrt(jnp.sum(jnp.square(node["kernel"]), axis=-2, keepdims=True))
        return {**node, "kernel": node["kernel"] / jnp.maximum(norm, PROJECTION_EPS)}
    features = node["scale"].shape[-1]
    squares = sum(jnp.sum(jnp.square(leaf), axis=-1, keepdims=True) for leaf in node.values())
    factor = math.sqrt(features) / jnp.maximum(jnp.sqrt(squares), PROJECTION_EPS)
    return {name: leaf * factor for name, leaf in node.items()}


def project_weights(params: Any) -> Any:
    """``params`` (a ``{"params": ...}`` tree of these networks) projected onto the norm bounds
    of the module docstring."""

    def walk(node: Any) -> Any:
        if all(not isinstance(v, dict) for v in node.values()):
            return _project_module(node)
        return {name: walk(child) for name, child in node.items()}

    return walk(params)
