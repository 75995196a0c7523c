"""FastTD3: config, state, losses and the pure update functions (reference §2.3).

Per critic step (`update_critic`): target-policy smoothing with the *online* actor,
`a' = clip(mu(s') + clip(policy_noise * N(0, 1), -noise_clip, noise_clip), -1, 1)`; both target
nets project `r + bootstrap * gamma * Z'`; with clipped double Q (`use_cdq`) the projected
distribution whose expected value is lower (per row; ties pick net 2, as the reference's
`where(q1 < q2, ...)`) is the target of both online nets, otherwise each net has its own;
loss = CE_1 + CE_2; AdamW with global-norm clipping. Per actor step: loss = -mean(min(Q1, Q2))
(mean of the two without CDQ). `update_target`: Polyak averaging of the critic only; there is no
target actor.

Deviations from the reference:
- The per-env exploration std lives in a separate `TD3ExploreState`, outside the learner state,
  so weight sync can never overwrite it (the reference kept it in an actor buffer).
- Critic inputs get their own observation normaliser (the reference normalised actor inputs
  only); normaliser updates are a separate call (`update_normalizers`), not a side effect of
  `update_critic`; one epsilon (1e-2) for acting and learning.
- Clipping uses `max_grad_norm` (0 = off) instead of "10 whenever weight_decay > 0"; a skipped
  (non-finite) step still reports the computed metrics instead of zeros.
- Per-row noise is drawn from `fold_in(key, global_row)` (see `gradients.row_keys`);
  `update_critic` also takes an optional `noise`, the standard normal `[B, A]` smoothing draw
  itself, which then replaces the draw from `key` (the tests feed recorded draws through it).
- Symmetry augmentation (`use_symmetry`, which the reference offered for FastSAC only) works the
  same way as FastSAC's: each update trains on the first half of its rows plus their mirrors
  (`unilab_jax.algos.symmetry`).
"""

from __future__ import annotations

import functools
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
from unilab_jax.algos.gradients import reduce_metrics, row_normal
from unilab_jax.algos.hyperparams import TD3Config
from unilab_jax.algos.networks import CriticEnsemble, TD3Actor
from unilab_jax.algos.normalizer import NormalizerState, init_normalizer, normalize
from unilab_jax.algos.symmetry import make_augment

__all__ = [
    "TD3Config",
    "TD3ExploreState",
    "TD3Networks",
    "TD3State",
    "make_td3",
    "make_td3_networks",
    "td3_actor_loss",
    "td3_critic_loss",
]

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap

Array = jax.Array
Params = Any


class TD3Networks(NamedTuple):
    """The flax modules of one FastTD3 agent."""

    actor: TD3Actor
    critic: CriticEnsemble  # twin (E = 2) ReLU C51 critics


@flax.struct.dataclass
class TD3State:
    """Everything a FastTD3 learner holds; all leaves are arrays."""

    actor_params: Params  # {"params": ...} of TD3Actor
    critic_params: Params  # {"params": ...} of CriticEnsemble, leaves [2, ...]
    target_critic_params: Params
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    obs_normalizer: NormalizerState  # actor observation statistics
    critic_normalizer: NormalizerState  # critic observation statistics


@flax.struct.dataclass
class TD3ExploreState:
    """Per-env exploration noise std, resampled when an env's episode ends, and (with
    `noise_correlation > 0`) each env's current unit-variance noise."""

    noise_scales: Array  # [num_envs] in [std_min, std_max]
    noise: Array | None = None  # [num_envs, A]; None for white noise


def make_td3_networks(config: TD3Config, action_dim: int) -> TD3Networks:
    """Build the actor and twin critic modules from the config."""
    actor = TD3Actor(
        action_dim=action_dim, hidden_dim=config.actor_hidden_dim, init_scale=config.init_scale
    )
    critic = CriticEnsemble(
        num_critics=2,
        num_atoms=config.num_atoms,
        hidden_dim=config.critic_hidden_dim,
        activation=nn.relu,
        use_layer_norm=False,
    )
    return TD3Networks(actor, critic)


def td3_critic_loss(
    critic_params: Params,
    target_critic_params: Params,
    actor_params: Params,
    batch: Transition,
    smoothing_noise: Array,
    *,
    networks: TD3Networks,
    config: TD3Config,
) -> tuple[Array, dict[str, Array]]:
    """Twin distributional critic loss on a *normalised* batch; differentiable in the critic.

    `smoothing_noise`: `[B, A]` standard normal, scaled by `policy_noise` and clipped here.
    Returns `(loss, aux)` with aux `qf_max` / `qf_min` (net 1's projected target values, as the
    reference logs), the clipped target mass `target_clip_low` / `target_clip_high` (both
    target nets) and `target_probs [2, B, K]`.
    """
    bootstrap = bootstrap_mask(batch.terminated, batch.truncated)  # [B]
    noise = jnp.clip(smoothing_noise * config.policy_noise, -config.noise_clip, config.noise_clip)
    next_action = jnp.clip(networks.actor.apply(actor_params, batch.next_obs) + noise, -1.0, 1.0)
    target_logits = networks.critic.apply(target_critic_params, batch.next_critic, next_action)
    next_probs = jax.nn.softmax(target_logits, axis=-1)
    clip_low, clip_high = clipped_target_mass(
        next_probs, batch.rewards, bootstrap, config.gamma, config.v_min, config.v_max
    )
    projected = categorical_projection(
        next_probs,
        batch.rewards,
        bootstrap,
        config.gamma,
        config.v_min,
        config.v_max,
    )  # [2, B, K]
    support = make_support(config.v_min, config.v_max, config.num_atoms)
    values = expected_value(projected, support)  # [2, B]
    if config.use_cdq:
        lower = jnp.where((values[0] < values[1])[:, None], projected[0], projected[1])  # [B, K]
        target_probs = jnp.broadcast_to(lower, projected.shape)
    else:
        target_probs = projected
    target_probs = jax.lax.stop_gradient(target_probs)

    logits = networks.critic.apply(critic_params, batch.critic, batch.actions)  # [2, B, K]
    loss = jnp.sum(jnp.mean(categorical_cross_entropy(target_probs, logits), axis=-1))
    aux = {
        "qf_max": jnp.max(values[0]),
        "qf_min": jnp.min(values[0]),
        "target_clip_low": clip_low,
        "target_clip_high": clip_high,
        "target_probs": target_probs,
    }
    return loss, jax.lax.stop_gradient(aux)


def td3_actor_loss(
    actor_params: Params,
    critic_params: Params,
    batch: Transition,
    *,
    networks: TD3Networks,
    config: TD3Config,
) -> tuple[Array, dict[str, Array]]:
    """`-mean(min(Q1, Q2))` (mean of the two without CDQ) on a *normalised* batch."""
    action = networks.actor.apply(actor_params, batch.obs)
    logits = networks.critic.apply(critic_params, batch.critic, action)  # [2, B, K]
    support = make_support(config.v_min, config.v_max, config.num_atoms)
    q = expected_value(jax.nn.softmax(logits, axis=-1), support)  # [2, B]
    q = jnp.min(q, axis=0) if config.use_cdq else jnp.mean(q, axis=0)
    return -jnp.mean(q), {}


class _TD3Parts(NamedTuple):
    """What the pure FastTD3 functions are built from (`make_td3`)."""

    config: TD3Config
    networks: TD3Networks
    obs_dim: int
    critic_dim: int
    action_dim: int
    actor_opt: optax.GradientTransformation
    critic_opt: optax.GradientTransformation
    augment: Callable[[Transition], Transition]
    axis_name: str | None


def make_td3(
    config: TD3Config,
    obs_dim: int,
    critic_dim: int,
    action_dim: int,
    axis_name: str | None = None,
    mirror: MirrorMap | None = None,
    num_envs: int | None = None,
) -> Agent:
    """Build the pure FastTD3 functions. With `axis_name`, updates reduce over that mesh axis.

    `mirror`: the task's mirror map, used when `config.use_symmetry` (each update trains on the
    first half of its rows and their mirrors, `unilab_jax.algos.symmetry`). `num_envs` is not
    used (the learner keeps no per-env state; FlashSAC's maker needs it).
    """
    del num_envs
    parts = _TD3Parts(
        config=config,
        networks=make_td3_networks(config, action_dim),
        obs_dim=obs_dim,
        critic_dim=critic_dim,
        action_dim=action_dim,
        actor_opt=optax.adamw(config.actor_lr, weight_decay=config.weight_decay),
        critic_opt=optax.adamw(config.critic_lr, weight_decay=config.weight_decay),
        augment=make_augment(config.use_symmetry, mirror, obs_dim, critic_dim, action_dim),
        axis_name=axis_name,
    )
    functions = _init, _init_explore, _explore, _act, _update_critic, _update_actor
    return make_agent(parts, *functions)


def _init(parts: _TD3Parts, key: jax.Array) -> TD3State:
    dims = parts.obs_dim, parts.critic_dim, parts.action_dim
    actor_params, critic_params = init_networks(parts.networks, key, 1, dims)
    return TD3State(
        actor_params=actor_params,
        critic_params=critic_params,
        target_critic_params=critic_params,
        actor_opt_state=parts.actor_opt.init(actor_params),
        critic_opt_state=parts.critic_opt.init(critic_params),
        obs_normalizer=init_normalizer(parts.obs_dim),
        critic_normalizer=init_normalizer(parts.critic_dim),
    )


def _sample_scales(config: TD3Config, key: jax.Array, num_envs: int) -> Array:
    return jax.random.uniform(
        key, (num_envs,), jnp.float32, minval=config.std_min, maxval=config.std_max
    )


def _init_explore(parts: _TD3Parts, key: jax.Array, num_envs: int) -> TD3ExploreState:
    config = parts.config
    return TD3ExploreState(
        noise_scales=_sample_scales(config, key, num_envs),
        noise=init_noise(key, config.noise_correlation, num_envs, parts.action_dim),
    )


def _act(parts: _TD3Parts, state: TD3State, obs: Array) -> Array:
    if parts.config.obs_normalization:
        obs = normalize(state.obs_normalizer, obs)
    return parts.networks.actor.apply(state.actor_params, obs)


def _explore(
    parts: _TD3Parts,
    state: TD3State,
    explore_state: TD3ExploreState,
    obs: Array,
    prev_done: Array,
    key: jax.Array,
) -> tuple[Array, TD3ExploreState]:
    """`clip(mu + std_env * n, -1, 1)`: envs that just reset start their new episode with a
    fresh std; `n` a fresh draw or, with `noise_correlation`, each env's correlated draw."""
    config = parts.config
    scale_key, noise_key = jax.random.split(key)
    scales = jnp.where(
        prev_done, _sample_scales(config, scale_key, obs.shape[0]), explore_state.noise_scales
    )  # [N]
    mu = _act(parts, state, obs)  # [N, A]
    fresh = jax.random.normal(noise_key, mu.shape, mu.dtype)
    noise = next_noise(config.noise_correlation, explore_state.noise, fresh, prev_done)
    action = jnp.clip(mu + noise * scales[:, None], -1.0, 1.0)
    kept = noise if config.noise_correlation else None
    return action, TD3ExploreState(noise_scales=scales, noise=kept)


def _update_critic(
    parts: _TD3Parts,
    state: TD3State,
    batch: Transition,
    key: jax.Array,
    noise: Array | None = None,
) -> tuple[TD3State, dict[str, Array]]:
    config, axis_name = parts.config, parts.axis_name
    batch = prepare_batch(state, batch, parts.augment, config.obs_normalization)
    if noise is None:
        noise = row_normal(key, batch.rewards.shape[0], parts.action_dim, axis_name)  # [B, A]
    loss_fn = functools.partial(
        td3_critic_loss,
        target_critic_params=state.target_critic_params,
        actor_params=state.actor_params,
        batch=batch,
        smoothing_noise=noise,
        networks=parts.networks,
        config=config,
    )
    state, qf_loss, aux, grad_norm = step_member(
        state, "critic", loss_fn, parts.critic_opt, config.max_grad_norm, axis_name
    )
    metrics = {
        "qf_loss": qf_loss,
        "qf_max": aux["qf_max"],
        "qf_min": aux["qf_min"],
        "target_clip_low": aux["target_clip_low"],
        "target_clip_high": aux["target_clip_high"],
        "critic_grad_norm": grad_norm,
    }
    return state, reduce_metrics(metrics, axis_name)


def _update_actor(
    parts: _TD3Parts, state: TD3State, batch: Transition, key: jax.Array
) -> tuple[TD3State, dict[str, Array]]:
    del key  # the deterministic actor loss draws no noise
    config = parts.config
    batch = prepare_batch(state, batch, parts.augment, config.obs_normalization)
    loss_fn = functools.partial(
        td3_actor_loss,
        critic_params=state.critic_params,
        batch=batch,
        networks=parts.networks,
        config=config,
    )
    state, loss, _, grad_norm = step_member(
        state, "actor", loss_fn, parts.actor_opt, config.max_grad_norm, parts.axis_name
    )
    metrics = {"actor_loss": loss, "actor_grad_norm": grad_norm}
    return state, reduce_metrics(metrics, parts.axis_name)
