"""FlashSAC (arXiv 2604.04539): SAC with norm-bounded networks, written from the paper's
description: config, state, losses and the pure update functions.

Networks (``flash_networks``): inverted-residual MLPs with BatchNorm before every ReLU, RMSNorm
after the blocks, and every weight projected back onto its norm bound after each optimiser
step (``project_weights``); 2 distributional critics over a fixed support (101 atoms on
``[-g_max, g_max]``).

Per critic step (``update_critic``), on rewards scaled by the running statistics of each env's
discounted return (``observe_rewards``; ``r / max(sqrt(var G + 1e-8), max|G| / g_max)``):
  a', logpi' ~ pi(.|s') from the actor with its running statistics; current and next rows go
  through each critic as one batch of 2B ("cross-batch value prediction": both halves share
  the batch's BatchNorm statistics); the target critic's next half, per row the member of
  lowest expected value, is projected at ``r + gamma * bootstrap * (z - alpha * logpi')``; both
  online members regress onto it (mean cross-entropy). Adam, cosine-decayed learning rate.
Per actor step (``update_actor``): the actor on ``[s; s']`` (its batch statistics from both),
loss ``mean(alpha * logpi - min_i Q_i(s, a))`` with the critics on their running statistics;
then the temperature step ``-alpha * (mean logpi + target_entropy)``.
``update_target``: Polyak averaging of the critic's parameters (not its statistics: the
target always normalises with the batch's).

Exploration holds each env's standard normal draw for ``k`` steps, ``k`` from a Zeta
distribution truncated to ``[1, noise_repeat_max]`` (``noise repetition``); actions
``tanh(mean + std * n)`` with the actor on its running statistics, uniform random actions
before the actor's first update. Evaluation: ``tanh(mean)``.

Where this differs from the paper's recipe: the loop's order within an update is critic, then
actor (every ``policy_frequency``-th), then target (the paper steps the actor first); each env
draws its own hold length (the paper's code shares one counter over all envs); there is no
n-step return; the random-action warm-up lasts until the first actor update (the run's
``learning_starts``). There is no running observation normaliser: the
input BatchNorm normalises observations.

``update_critic`` / ``update_actor`` draw their standard normal ``[B, A]`` noise per row from
``key`` (``gradients.row_normal``), or take it as the optional ``noise`` argument: the seam
through which the tests feed the reference's recorded draws.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import optax

from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.algos.c51 import bootstrap_mask, categorical_cross_entropy, expected_value
from unilab_jax.algos.common import (
    Parts,
    critic_values,
    draw_noise,
    gaussian_sample,
    init_networks,
    init_state,
    make_agent,
    project_target,
    step_alpha,
    step_member,
    support,
)
from unilab_jax.algos.flash_networks import FlashActor, FlashCritic, project_weights
from unilab_jax.algos.gradients import reduce_metrics
from unilab_jax.algos.hyperparams import FlashSACConfig
from unilab_jax.algos.reward_scaling import (
    RewardStats,
    init_reward_stats,
    reward_scale,
    update_reward_stats,
)

__all__ = [
    "FlashSACConfig",
    "FlashSACNetworks",
    "FlashSACState",
    "RewardStats",
    "flash_actor_loss",
    "flash_critic_loss",
    "make_flash_sac",
    "reward_scale",
    "sample_tanh_gaussian",
    "update_reward_stats",
]

Array = jax.Array
Params = Any


class FlashSACNetworks(NamedTuple):
    """The flax modules of one FlashSAC agent."""

    actor: FlashActor
    critic: FlashCritic


@flax.struct.dataclass
class FlashSACState:
    """Everything a FlashSAC learner holds; all leaves are arrays."""

    actor_params: Params  # {"params": ...} of FlashActor
    actor_stats: Params  # {"batch_stats": ...}: its BatchNorm running statistics
    critic_params: Params  # {"params": ...} of FlashCritic, leaves [E, ...]
    critic_stats: Params
    target_critic_params: Params
    log_alpha: Array  # [] float32
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    alpha_opt_state: optax.OptState
    rewards: RewardStats


def make_flash_sac_networks(
    config: FlashSACConfig, action_dim: int, axis_name: str | None = None
) -> FlashSACNetworks:
    """The actor and critic modules; with ``axis_name`` their BatchNorm statistics in training
    mode span every device's rows."""
    shared = {"num_blocks": config.num_blocks, "momentum": config.batch_norm_momentum}
    actor = FlashActor(
        action_dim, config.actor_hidden_dim, log_std_min=config.log_std_min,
        log_std_max=config.log_std_max, axis_name=axis_name, **shared,
    )  # fmt: skip
    critic = FlashCritic(
        config.num_q_networks, config.num_atoms, config.critic_hidden_dim, axis_name=axis_name,
        **shared,
    )  # fmt: skip
    return FlashSACNetworks(actor, critic)


_LOG_2 = math.log(2.0)


def sample_tanh_gaussian(mean: Array, log_std: Array, noise: Array) -> tuple[Array, Array]:
    """Reparameterised tanh-Gaussian sample and its log-probability, ``[..., A] -> ([..., A],
    [...])``: ``u = mean + exp(log_std) * noise``, ``a = tanh(u)``, ``log pi = sum_dims [log
    N(u; mean, std) - log(1 - tanh(u)^2)]`` with the last term in its exact stable form
    ``2 (log 2 - u - softplus(-2u))`` (FastSAC's ``log(1 - a^2 + 1e-6)`` loses every digit of a
    saturated action in float32; FlashSAC's actor saturates often)."""
    u, gaussian = gaussian_sample(mean, log_std, noise)
    log_det = 2.0 * (_LOG_2 - u - jax.nn.softplus(-2.0 * u))
    return jnp.tanh(u), jnp.sum(gaussian - log_det, axis=-1)


def flash_critic_loss(
    critic_params: Params,
    state: FlashSACState,
    batch: Transition,
    next_action: Array,
    next_log_prob: Array,
    *,
    networks: FlashSACNetworks,
    config: FlashSACConfig,
) -> tuple[Array, dict[str, Array]]:
    """Cross-entropy of both critics against the projected soft target, on ``[s; s']`` rows
    (rewards already scaled). Returns ``(loss, aux)``; aux holds the critic's new BatchNorm
    statistics (``critic_stats``) and the target's range and clipped mass."""
    b = batch.rewards.shape[0]
    obs2 = jnp.concatenate([batch.critic, batch.next_critic])
    act2 = jnp.concatenate([batch.actions, next_action])
    stats = state.critic_stats["batch_stats"]
    target_vars = {"params": state.target_critic_params["params"], "batch_stats": stats}
    next_probs = jax.nn.softmax(networks.critic.apply(target_vars, obs2, act2, True)[:, b:], -1)
    lowest = jnp.argmin(expected_value(next_probs, support(config)), axis=0)  # [B]
    next_probs = jnp.take_along_axis(next_probs, lowest[None, :, None], axis=0)[0]  # [B, K]
    bootstrap = bootstrap_mask(batch.terminated, batch.truncated)
    alpha = jnp.exp(state.log_alpha)
    soft_rewards = batch.rewards - config.gamma * bootstrap * alpha * next_log_prob
    target_probs, target_values, clipped = project_target(
        config, next_probs, soft_rewards, bootstrap
    )
    logits, new_stats = networks.critic.apply(
        {"params": critic_params["params"], "batch_stats": stats}, obs2, act2, True,
        mutable=["batch_stats"],
    )  # fmt: skip
    loss = jnp.mean(categorical_cross_entropy(target_probs, logits[:, :b]))
    aux = {
        "critic_stats": new_stats,
        "target_q_max": jnp.max(target_values),
        "target_q_min": jnp.min(target_values),
        **clipped,
    }
    return loss, aux


def flash_actor_loss(
    actor_params: Params,
    state: FlashSACState,
    batch: Transition,
    action_noise: Array,
    *,
    networks: FlashSACNetworks,
    config: FlashSACConfig,
) -> tuple[Array, dict[str, Array]]:
    """``mean(alpha * logpi - min_i Q_i)`` over the current rows; the actor runs on ``[s; s']``
    in training mode (aux: its new statistics ``actor_stats`` and ``log_prob``)."""
    b = batch.rewards.shape[0]
    (mean, log_std), new_stats = networks.actor.apply(
        {"params": actor_params["params"], "batch_stats": state.actor_stats["batch_stats"]},
        jnp.concatenate([batch.obs, batch.next_obs]), True, mutable=["batch_stats"],
    )  # fmt: skip
    action, log_prob = sample_tanh_gaussian(mean[:b], log_std[:b], action_noise)
    critic_vars = {**state.critic_params, **state.critic_stats}
    logits = networks.critic.apply(critic_vars, batch.critic, action, False)  # [E, B, K]
    q = jnp.min(critic_values(config, logits), axis=0)
    loss = jnp.mean(jax.lax.stop_gradient(jnp.exp(state.log_alpha)) * log_prob - q)
    aux = {
        "actor_stats": new_stats,
        "log_prob": log_prob,
        "policy_entropy": -jnp.mean(log_prob),
        "action_std": jnp.mean(jnp.exp(log_std[:b])),
    }
    return loss, jax.lax.stop_gradient(aux)


def _optimizer(config: FlashSACConfig, lr: float, decay: bool = True):
    schedule = optax.cosine_decay_schedule(lr, config.lr_decay_steps, config.lr_final_ratio)
    if decay and config.weight_decay > 0:
        return optax.adamw(schedule, weight_decay=config.weight_decay)
    return optax.adam(schedule)


def make_flash_sac(
    config: FlashSACConfig,
    obs_dim: int,
    critic_dim: int,
    action_dim: int,
    axis_name: str | None = None,
    mirror: Any = None,
    num_envs: int = 1,
) -> Agent:
    """Build the pure FlashSAC functions. With ``axis_name``, updates (and BatchNorm statistics)
    reduce over that mesh axis. ``num_envs``: the run's envs (each keeps its discounted return
    for reward scaling). ``mirror``: refused (no symmetry augmentation here)."""
    if mirror is not None:
        raise ValueError("FlashSAC has no symmetry augmentation; leave use_symmetry off")
    parts = Parts(
        config=config,
        networks=make_flash_sac_networks(config, action_dim, axis_name),
        obs_dim=obs_dim,
        critic_dim=critic_dim,
        action_dim=action_dim,
        num_envs=num_envs,
        actor_opt=_optimizer(config, config.actor_lr),
        critic_opt=_optimizer(config, config.critic_lr),
        alpha_opt=_optimizer(config, config.alpha_lr, decay=False),
        axis_name=axis_name,
    )
    functions = _init, _init_explore, _explore, _act, _update_critic, _update_actor
    return make_agent(parts, *functions, observe_rewards=_observe_rewards)


def _init(parts: Parts, key: jax.Array) -> FlashSACState:
    actor_vars, critic_vars = init_networks(parts.networks, key, 2, parts.dims)  # 2 rows: BatchNorm
    return init_state(
        FlashSACState, parts,
        actor_params=project_weights({"params": actor_vars["params"]}),
        critic_params=project_weights({"params": critic_vars["params"]}),
        actor_stats={"batch_stats": actor_vars["batch_stats"]},
        critic_stats={"batch_stats": critic_vars["batch_stats"]},
        rewards=init_reward_stats(parts.num_envs),
    )  # fmt: skip


def _observe_rewards(parts: Parts, state: FlashSACState, rewards: Array, dones: Array):
    """The reward statistics after the collected steps (``[S, N_local]``; with an axis, every
    device's envs in order, so each device holds the same statistics)."""
    if parts.axis_name is not None:
        gather = functools.partial(jax.lax.all_gather, axis_name=parts.axis_name, axis=1)
        rewards, dones = gather(rewards, tiled=True), gather(dones, tiled=True)
    stats = update_reward_stats(state.rewards, rewards, dones, parts.config.gamma)
    return state.replace(rewards=stats)


def _zeta_holds(parts: Parts, key: jax.Array, shape: tuple[int, ...]) -> Array:
    """Hold lengths ``k`` in ``[1, noise_repeat_max]`` with ``P(k) ~ k^-mu``."""
    k = jnp.arange(1, parts.config.noise_repeat_max + 1, dtype=jnp.float32)
    logits = -parts.config.noise_repeat_exponent * jnp.log(k)
    return jax.random.categorical(key, logits, shape=shape).astype(jnp.int32) + 1


def _init_explore(parts: Parts, key: jax.Array, num_envs: int) -> tuple[Array, Array]:
    """Each env's draw ``[N, A]`` and the steps it is still held for ``[N]`` (0: redraw)."""
    noise = jax.random.normal(key, (num_envs, parts.action_dim), jnp.float32)
    return noise, jnp.zeros((num_envs,), jnp.int32)


def _policy(parts: Parts, state: FlashSACState, obs: Array) -> tuple[Array, Array]:
    variables = {**state.actor_params, **state.actor_stats}
    return parts.networks.actor.apply(variables, obs, False)


def _explore(parts, state, explore_state, obs, prev_done, key):
    """``tanh(mean + std * n)``, each env's ``n`` redrawn when its hold runs out; uniform
    random actions until the actor's first update (the paper's random warm-up, here as long as
    the run's ``learning_starts``)."""
    del prev_done
    noise, left = explore_state
    k_noise, k_hold, k_uniform = jax.random.split(key, 3)
    redraw = left <= 0
    fresh = jax.random.normal(k_noise, noise.shape, noise.dtype)
    noise = jnp.where(redraw[:, None], fresh, noise)
    left = jnp.where(redraw, _zeta_holds(parts, k_hold, left.shape), left) - 1
    mean, log_std = _policy(parts, state, obs)
    actions = jnp.tanh(mean + jnp.exp(log_std) * noise)
    uniform = jax.random.uniform(k_uniform, actions.shape, actions.dtype, -1.0, 1.0)
    warm_up = state.actor_opt_state[0].count == 0  # ScaleByAdamState: the actor's steps
    return jnp.where(warm_up, uniform, actions), (noise, left)


def _act(parts: Parts, state: FlashSACState, obs: Array) -> Array:
    return jnp.tanh(_policy(parts, state, obs)[0])


def _step_projected(parts: Parts, state: FlashSACState, member: str, loss_fn, optimizer):
    """``common.step_member`` on the actor or the critic, then its weights projected back onto
    their bounds and its BatchNorm statistics (``aux["<member>_stats"]``) taken, unless the
    guarded step was skipped as non-finite. Returns ``(state, loss, aux, grad_norm)``."""
    old_stats = getattr(state, f"{member}_stats")
    state, loss, aux, grad_norm = step_member(
        state, member, loss_fn, optimizer, parts.config.max_grad_norm, parts.axis_name
    )
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    stats = jax.tree.map(
        lambda a, b: jnp.where(finite, a, b), aux.pop(f"{member}_stats"), old_stats
    )
    params = project_weights(getattr(state, f"{member}_params"))
    state = state.replace(**{f"{member}_params": params, f"{member}_stats": stats})
    return state, loss, aux, grad_norm


def _update_critic(
    parts: Parts, state: FlashSACState, batch: Transition, key: Array, noise: Array | None = None
):
    config = parts.config
    if config.reward_scaling:
        batch = batch.replace(rewards=batch.rewards / reward_scale(state.rewards, config.g_max))
    noise = draw_noise(parts, key, batch.rewards.shape[0], noise)
    next_mean, next_log_std = _policy(parts, state, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(next_mean, next_log_std, noise)
    loss_fn = functools.partial(
        flash_critic_loss, state=state, batch=batch, next_action=next_action,
        next_log_prob=next_log_prob, networks=parts.networks, config=config,
    )  # fmt: skip
    state, loss, aux, grad_norm = _step_projected(parts, state, "critic", loss_fn, parts.critic_opt)
    metrics = {"qf_loss": loss, "critic_grad_norm": grad_norm, **aux}
    metrics["reward_scale"] = reward_scale(state.rewards, config.g_max)
    return state, reduce_metrics(metrics, parts.axis_name)


def _update_actor(
    parts: Parts, state: FlashSACState, batch: Transition, key: Array, noise: Array | None = None
):
    """The actor step (``flash_actor_loss``), then the temperature's on its ``log_prob``."""
    config = parts.config
    loss_fn = functools.partial(
        flash_actor_loss, state=state, batch=batch,
        action_noise=draw_noise(parts, key, batch.rewards.shape[0], noise),
        networks=parts.networks, config=config,
    )  # fmt: skip
    state, loss, aux, grad_norm = _step_projected(parts, state, "actor", loss_fn, parts.actor_opt)
    log_prob = aux.pop("log_prob")
    std = config.target_entropy_std
    target_entropy = 0.5 * parts.action_dim * math.log(2.0 * math.pi * math.e * std**2)
    error = jnp.mean(log_prob) + target_entropy  # local; gradient_step averages
    state, alpha_metrics = step_alpha(parts, state, lambda a: (-(jnp.exp(a) * error), {}))
    metrics = {"actor_loss": loss, "actor_grad_norm": grad_norm, **aux, **alpha_metrics}
    return state, reduce_metrics(metrics, parts.axis_name)
