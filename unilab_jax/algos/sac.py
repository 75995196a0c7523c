"""FastSAC: config, state, losses and the pure update functions (reference §2.1).

Per critic step (`update_critic`):
  a', logpi' ~ pi(.|s') from the *current* actor; r' = r - gamma * bootstrap * alpha * logpi'
  (the entropy bonus folded into the reward); each *target* net i projects its own next
  distribution (no min over critics); loss = sum_i mean_b CE(target_i, max(log_softmax(online_i),
  -30)); AdamW(0.9, 0.95). Then, with `use_autotune`, the temperature step
  loss_alpha = -mean(alpha * (logpi' + target_entropy)) with Adam(0.9, 0.95).
Per actor step (`update_actor`): loss = mean(alpha * logpi - mean_i Q_i(s, a)), Q_i the expected
value of critic i's distribution. `update_target`: Polyak averaging of the critic only.

Deviations from the reference:
- Observation normalisation really works here (the reference flag was a no-op), with one
  normaliser for actor inputs and one for critic inputs, applied inside every function.
- The temperature step is skipped, like the others, when its loss is non-finite.
- Symmetry augmentation (`use_symmetry` with the task's mirror map) trains each update on the
  first half of the rows it is given plus their mirrors, so a gradient step sees `batch_size`
  rows, as in the reference's recipe (its runner halved `batch_size`, its learner doubled the
  batch back); raw rows are mirrored, then normalised (`unilab_jax.algos.symmetry`).
- No AMP or compile options (XLA compiles everything).
- Per-row noise is drawn from `fold_in(key, global_row)` (see `gradients.row_keys`).
  `update_critic` / `update_actor` also take an optional `noise`, the standard normal `[B, A]`
  draw itself (`B` the rows after augmentation, this device's), which then replaces the draw
  from `key`: the seam through which the tests feed the reference's recorded draws.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.algos.c51 import (
    bootstrap_mask,
    categorical_cross_entropy,
    categorical_projection,
    clipped_target_mass,
    expected_value,
    make_support,
)
from unilab_jax.algos.common import (
    init_networks,
    init_noise,
    make_agent,
    next_noise,
    prepare_batch,
    step_member,
)
from unilab_jax.algos.gradients import gradient_step, reduce_metrics, row_normal
from unilab_jax.algos.hyperparams import SACConfig
from unilab_jax.algos.networks import CriticEnsemble, SACActor
from unilab_jax.algos.normalizer import NormalizerState, init_normalizer, normalize
from unilab_jax.algos.symmetry import make_augment

__all__ = [
    "SACConfig",
    "SACNetworks",
    "SACState",
    "make_sac",
    "make_sac_networks",
    "sac_actor_loss",
    "sac_alpha_loss",
    "sac_critic_loss",
    "sample_tanh_gaussian",
]

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap

Array = jax.Array
Params = Any

# The reference's log-prob term for action_scale = 1: log(scale + 1e-6) per dimension.
_LOG_ACTION_SCALE = math.log(1.0 + 1e-6)
_LOG_2PI = math.log(2.0 * math.pi)


class SACNetworks(NamedTuple):
    """The flax modules of one FastSAC agent."""

    actor: SACActor
    critic: CriticEnsemble


@flax.struct.dataclass
class SACState:
    """Everything a FastSAC learner holds; all leaves are arrays."""

    actor_params: Params  # {"params": ...} of SACActor
    critic_params: Params  # {"params": ...} of CriticEnsemble, leaves [E, ...]
    target_critic_params: Params
    log_alpha: Array  # [] float32
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    alpha_opt_state: optax.OptState
    obs_normalizer: NormalizerState  # actor observation statistics
    critic_normalizer: NormalizerState  # critic observation statistics


def make_sac_networks(config: SACConfig, action_dim: int) -> SACNetworks:
    """Build the actor and critic modules from the config."""
    actor = SACActor(
        action_dim=action_dim,
        hidden_dim=config.actor_hidden_dim,
        use_layer_norm=config.use_layer_norm,
        log_std_min=config.log_std_min,
        log_std_max=config.log_std_max,
    )
    critic = CriticEnsemble(
        num_critics=config.num_q_networks,
        num_atoms=config.num_atoms,
        hidden_dim=config.critic_hidden_dim,
        activation=nn.silu,
        use_layer_norm=config.use_layer_norm,
    )
    return SACNetworks(actor, critic)


def sample_tanh_gaussian(mean: Array, log_std: Array, noise: Array) -> tuple[Array, Array]:
    """Reparameterised tanh-Gaussian sample and its log-probability.

    `u = mean + exp(log_std) * noise`, `a = tanh(u)`,
    `log pi(a) = sum_dims [log N(u; mean, std) - log(1 - tanh(u)^2 + 1e-6) - log(1 + 1e-6)]`.
    Shapes: `[..., A]` in, `([..., A], [...])` out.
    """
    u = mean + jnp.exp(log_std) * noise
    action = jnp.tanh(u)
    gaussian = -0.5 * (jnp.square(noise) + 2.0 * log_std + _LOG_2PI)
    log_prob = gaussian - jnp.log(1.0 - jnp.square(action) + 1e-6) - _LOG_ACTION_SCALE
    return action, jnp.sum(log_prob, axis=-1)


def sac_critic_loss(
    critic_params: Params,
    target_critic_params: Params,
    actor_params: Params,
    log_alpha: Array,
    batch: Transition,
    next_action_noise: Array,
    *,
    networks: SACNetworks,
    config: SACConfig,
) -> tuple[Array, dict[str, Array]]:
    """Distributional critic loss on a *normalised* batch; differentiable in `critic_params`.

    `next_action_noise`: `[B, A]` standard normal for the next-action sample. Returns
    `(loss, aux)` with aux `next_log_prob [B]`, `target_q_max`, `target_q_min`, the clipped
    target mass `target_clip_low` / `target_clip_high`, `target_probs [E, B, K]`.
    """
    bootstrap = bootstrap_mask(batch.terminated, batch.truncated)  # [B]
    next_mean, next_log_std = networks.actor.apply(actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(next_mean, next_log_std, next_action_noise)
    alpha = jnp.exp(log_alpha)
    # Entropy folded into the reward, so the projection of r' + gamma * z equals the soft target.
    soft_rewards = batch.rewards - config.gamma * bootstrap * alpha * next_log_prob
    target_logits = networks.critic.apply(target_critic_params, batch.next_critic, next_action)
    next_probs = jax.nn.softmax(target_logits, axis=-1)
    clip_low, clip_high = clipped_target_mass(
        next_probs, soft_rewards, bootstrap, config.gamma, config.v_min, config.v_max
    )
    target_probs = categorical_projection(
        next_probs,
        soft_rewards,
        bootstrap,
        config.gamma,
        config.v_min,
        config.v_max,
    )  # [E, B, K]: each target net i is the target of online net i
    target_probs = jax.lax.stop_gradient(target_probs)

    logits = networks.critic.apply(critic_params, batch.critic, batch.actions)  # [E, B, K]
    ce = categorical_cross_entropy(target_probs, logits, log_prob_floor=-30.0)  # [E, B]
    loss = jnp.sum(jnp.mean(ce, axis=-1))

    support = make_support(config.v_min, config.v_max, config.num_atoms)
    target_values = expected_value(target_probs, support)  # [E, B]
    aux = {
        "next_log_prob": jax.lax.stop_gradient(next_log_prob),
        "target_q_max": jnp.max(target_values),
        "target_q_min": jnp.min(target_values),
        "target_clip_low": jax.lax.stop_gradient(clip_low),
        "target_clip_high": jax.lax.stop_gradient(clip_high),
        "target_probs": target_probs,
    }
    return loss, aux


def sac_alpha_loss(
    log_alpha: Array, next_log_prob: Array, *, target_entropy: float
) -> tuple[Array, dict[str, Array]]:
    """`-mean(alpha * (logpi' + target_entropy))`: alpha rises while entropy is below target."""
    entropy_error = jax.lax.stop_gradient(jnp.mean(next_log_prob + target_entropy))
    return -(jnp.exp(log_alpha) * entropy_error), {}


def sac_actor_loss(
    actor_params: Params,
    critic_params: Params,
    log_alpha: Array,
    batch: Transition,
    action_noise: Array,
    *,
    networks: SACNetworks,
    config: SACConfig,
) -> tuple[Array, dict[str, Array]]:
    """`mean(alpha * logpi - mean_i Q_i)` on a *normalised* batch; differentiable in the actor.

    `action_noise`: `[B, A]` standard normal. The critic and alpha are constants here (only
    `actor_params` is differentiated).
    """
    mean, log_std = networks.actor.apply(actor_params, batch.obs)
    action, log_prob = sample_tanh_gaussian(mean, log_std, action_noise)
    logits = networks.critic.apply(critic_params, batch.critic, action)  # [E, B, K]
    support = make_support(config.v_min, config.v_max, config.num_atoms)
    q = jnp.mean(expected_value(jax.nn.softmax(logits, axis=-1), support), axis=0)  # [B]
    alpha = jax.lax.stop_gradient(jnp.exp(log_alpha))
    loss = jnp.mean(alpha * log_prob - q)
    aux = {
        "policy_entropy": -jnp.mean(log_prob),
        "action_std": jnp.mean(jnp.exp(log_std)),
    }
    return loss, jax.lax.stop_gradient(aux)


class _SACParts(NamedTuple):
    """What the pure FastSAC functions are built from (`make_sac`)."""

    config: SACConfig
    networks: SACNetworks
    obs_dim: int
    critic_dim: int
    action_dim: int
    actor_opt: optax.GradientTransformation
    critic_opt: optax.GradientTransformation
    alpha_opt: optax.GradientTransformation
    augment: Callable[[Transition], Transition]
    axis_name: str | None


def make_sac(
    config: SACConfig,
    obs_dim: int,
    critic_dim: int,
    action_dim: int,
    axis_name: str | None = None,
    mirror: MirrorMap | None = None,
    num_envs: int | None = None,
) -> Agent:
    """Build the pure FastSAC functions. With `axis_name`, updates reduce over that mesh axis.

    `mirror`: the task's mirror map, used when `config.use_symmetry` (each update trains on the
    first half of its rows and their mirrors, `unilab_jax.algos.symmetry`). `num_envs` is not
    used (the learner keeps no per-env state; FlashSAC's maker needs it).
    """
    del num_envs
    b1, b2 = config.betas
    parts = _SACParts(
        config=config,
        networks=make_sac_networks(config, action_dim),
        obs_dim=obs_dim,
        critic_dim=critic_dim,
        action_dim=action_dim,
        actor_opt=optax.adamw(config.actor_lr, b1=b1, b2=b2, weight_decay=config.weight_decay),
        critic_opt=optax.adamw(config.critic_lr, b1=b1, b2=b2, weight_decay=config.weight_decay),
        alpha_opt=optax.adam(config.alpha_lr, b1=b1, b2=b2),
        augment=make_augment(config.use_symmetry, mirror, obs_dim, critic_dim, action_dim),
        axis_name=axis_name,
    )
    functions = _init, _init_explore, _explore, _act, _update_critic, _update_actor
    return make_agent(parts, *functions)


def _init(parts: _SACParts, key: jax.Array) -> SACState:
    dims = parts.obs_dim, parts.critic_dim, parts.action_dim
    actor_params, critic_params = init_networks(parts.networks, key, 1, dims)
    log_alpha = jnp.asarray(math.log(parts.config.alpha_init), jnp.float32)
    return SACState(
        actor_params=actor_params,
        critic_params=critic_params,
        target_critic_params=critic_params,
        log_alpha=log_alpha,
        actor_opt_state=parts.actor_opt.init(actor_params),
        critic_opt_state=parts.critic_opt.init(critic_params),
        alpha_opt_state=parts.alpha_opt.init(log_alpha),
        obs_normalizer=init_normalizer(parts.obs_dim),
        critic_normalizer=init_normalizer(parts.critic_dim),
    )


def _init_explore(parts: _SACParts, key: jax.Array, num_envs: int) -> tuple | Array:
    """`()` with white noise (SAC exploration is then stateless), else each env's draw."""
    noise = init_noise(key, parts.config.noise_correlation, num_envs, parts.action_dim)
    return () if noise is None else noise


def _policy(parts: _SACParts, state: SACState, obs: Array) -> tuple[Array, Array]:
    if parts.config.obs_normalization:
        obs = normalize(state.obs_normalizer, obs)
    return parts.networks.actor.apply(state.actor_params, obs)


def _explore(
    parts: _SACParts,
    state: SACState,
    explore_state: tuple | Array,
    obs: Array,
    prev_done: Array,
    key: jax.Array,
) -> tuple[Array, tuple | Array]:
    """`tanh(mean + std * n)`; `n` a fresh draw (the reference ignores `prev_done` for SAC) or,
    with `noise_correlation`, each env's correlated draw (`common.next_noise`)."""
    mean, log_std = _policy(parts, state, obs)  # [N, A]
    fresh = jax.random.normal(key, mean.shape, mean.dtype)
    rho = parts.config.noise_correlation
    noise = next_noise(rho, explore_state if rho else None, fresh, prev_done)
    return jnp.tanh(mean + jnp.exp(log_std) * noise), (noise if rho else explore_state)


def _act(parts: _SACParts, state: SACState, obs: Array) -> Array:
    return jnp.tanh(_policy(parts, state, obs)[0])


def _update_critic(
    parts: _SACParts,
    state: SACState,
    batch: Transition,
    key: jax.Array,
    noise: Array | None = None,
) -> tuple[SACState, dict[str, Array]]:
    config, axis_name = parts.config, parts.axis_name
    state, qf_loss, aux, grad_norm = _step(
        parts, state, batch, key, noise, "critic", sac_critic_loss, "next_action_noise",
        target_critic_params=state.target_critic_params, actor_params=state.actor_params,
        log_alpha=state.log_alpha,
    )  # fmt: skip
    log_alpha, alpha_opt_state = state.log_alpha, state.alpha_opt_state
    alpha_loss_value = jnp.zeros((), jnp.float32)
    if config.use_autotune:
        target_entropy = -parts.action_dim * config.target_entropy_ratio
        alpha_loss = functools.partial(
            sac_alpha_loss, next_log_prob=aux["next_log_prob"], target_entropy=target_entropy
        )
        log_alpha, alpha_opt_state, alpha_loss_value, _, _ = gradient_step(
            alpha_loss, log_alpha, alpha_opt_state, parts.alpha_opt, 0.0, axis_name
        )
    state = state.replace(log_alpha=log_alpha, alpha_opt_state=alpha_opt_state)
    metrics = {
        "qf_loss": qf_loss,
        "critic_grad_norm": grad_norm,
        "target_q_max": aux["target_q_max"],
        "target_q_min": aux["target_q_min"],
        "target_clip_low": aux["target_clip_low"],
        "target_clip_high": aux["target_clip_high"],
        "alpha_loss": alpha_loss_value,
        "alpha": jnp.exp(log_alpha),
    }
    return state, reduce_metrics(metrics, axis_name)


def _update_actor(
    parts: _SACParts,
    state: SACState,
    batch: Transition,
    key: jax.Array,
    noise: Array | None = None,
) -> tuple[SACState, dict[str, Array]]:
    state, loss, aux, grad_norm = _step(
        parts, state, batch, key, noise, "actor", sac_actor_loss, "action_noise",
        critic_params=state.critic_params, log_alpha=state.log_alpha,
    )  # fmt: skip
    metrics = {"actor_loss": loss, "actor_grad_norm": grad_norm, **aux}
    return state, reduce_metrics(metrics, parts.axis_name)


def _step(
    parts: _SACParts,
    state: SACState,
    batch: Transition,
    key: jax.Array,
    noise: Array | None,
    member: str,
    loss: Callable,
    noise_name: str,
    **states: Any,
):
    """One guarded step of `member` (`"critic"`, `"actor"`) on `loss` over the prepared batch
    (mirrored, normalised), with its `[B, A]` standard normal draws as `noise_name` (`noise`,
    or drawn from `key`), `states` the other members the loss reads."""
    config = parts.config
    batch = prepare_batch(state, batch, parts.augment, config.obs_normalization)
    if noise is None:
        noise = row_normal(key, batch.rewards.shape[0], parts.action_dim, parts.axis_name)
    loss_fn = functools.partial(
        loss, batch=batch, networks=parts.networks, config=config, **{noise_name: noise}, **states
    )
    optimizer = getattr(parts, f"{member}_opt")
    return step_member(state, member, loss_fn, optimizer, config.max_grad_norm, parts.axis_name)
