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

from typing import TYPE_CHECKING, Any, NamedTuple

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.algos.c51 import bootstrap_mask, categorical_cross_entropy
from unilab_jax.algos.common import (
    Parts,
    apply_actor,
    critic_values,
    init_networks,
    init_noise,
    init_state,
    make_agent,
    next_noise,
    project_target,
    train_member,
)
from unilab_jax.algos.gradients import reduce_metrics
from unilab_jax.algos.hyperparams import TD3Config
from unilab_jax.algos.networks import CriticEnsemble, TD3Actor
from unilab_jax.algos.normalizer import NormalizerState
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
    projected, values, clipped = project_target(
        config, jax.nn.softmax(target_logits, axis=-1), batch.rewards, bootstrap
    )  # [2, B, K], [2, B]
    if config.use_cdq:
        lower = jnp.where((values[0] < values[1])[:, None], projected[0], projected[1])  # [B, K]
        target_probs = jnp.broadcast_to(lower, projected.shape)
    else:
        target_probs = projected

    logits = networks.critic.apply(critic_params, batch.critic, batch.actions)  # [2, B, K]
    loss = jnp.sum(jnp.mean(categorical_cross_entropy(target_probs, logits), axis=-1))
    aux = {
        "qf_max": jnp.max(values[0]),
        "qf_min": jnp.min(values[0]),
        **clipped,
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
    q = critic_values(config, logits)  # [2, B]
    q = jnp.min(q, axis=0) if config.use_cdq else jnp.mean(q, axis=0)
    return -jnp.mean(q), {}


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
    parts = Parts(
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
    functions = _init, _init_explore, _explore, apply_actor, _update_critic, _update_actor
    return make_agent(parts, *functions)


def _init(parts: Parts, key: jax.Array) -> TD3State:
    return init_state(TD3State, parts, *init_networks(parts.networks, key, 1, parts.dims))


def _sample_scales(config: TD3Config, key: jax.Array, num_envs: int) -> Array:
    return jax.random.uniform(
        key, (num_envs,), jnp.float32, minval=config.std_min, maxval=config.std_max
    )


def _init_explore(parts: Parts, key: jax.Array, num_envs: int) -> TD3ExploreState:
    config = parts.config
    return TD3ExploreState(
        noise_scales=_sample_scales(config, key, num_envs),
        noise=init_noise(key, config.noise_correlation, num_envs, parts.action_dim),
    )


def _explore(
    parts: Parts,
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
    mu = apply_actor(parts, state, obs)  # [N, A]
    fresh = jax.random.normal(noise_key, mu.shape, mu.dtype)
    noise = next_noise(config.noise_correlation, explore_state.noise, fresh, prev_done)
    action = jnp.clip(mu + noise * scales[:, None], -1.0, 1.0)
    kept = noise if config.noise_correlation else None
    return action, TD3ExploreState(noise_scales=scales, noise=kept)


def _update_critic(
    parts: Parts, state: TD3State, batch: Transition, key: jax.Array, noise: Array | None = None
) -> tuple[TD3State, dict[str, Array]]:
    state, qf_loss, aux, grad_norm = train_member(
        parts, state, "critic", td3_critic_loss, batch, ("smoothing_noise", key, noise),
        target_critic_params=state.target_critic_params, actor_params=state.actor_params,
    )  # fmt: skip
    target = ("qf_max", "qf_min", "target_clip_low", "target_clip_high")
    metrics = {"qf_loss": qf_loss, **{k: aux[k] for k in target}, "critic_grad_norm": grad_norm}
    return state, reduce_metrics(metrics, parts.axis_name)


def _update_actor(
    parts: Parts, state: TD3State, batch: Transition, key: jax.Array
) -> tuple[TD3State, dict[str, Array]]:
    del key  # the deterministic actor loss draws no noise
    state, loss, _, grad_norm = train_member(
        parts, state, "actor", td3_actor_loss, batch, critic_params=state.critic_params
    )
    metrics = {"actor_loss": loss, "actor_grad_norm": grad_norm}
    return state, reduce_metrics(metrics, parts.axis_name)
