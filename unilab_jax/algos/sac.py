"""FastSAC: config, state, losses and the pure update functions (reference §2.1); and HORA-SAC,
FastSAC with a privileged actor (`make_hora_sac`).

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
- HORA-SAC (`make_hora_sac`, the reference's `runtime_impl: hora_sac`): the actor is
  `PrivilegedSACActor` on `[obs | critic[..., obs_dim:]]` (the privileged values the critic
  observes beyond the actor); losses, critic, temperature and updates are FastSAC's, the actor
  rows of a batch being those inputs (`common.prepare_batch`).
  `update_critic` / `update_actor` also take an optional `noise`, the standard normal `[B, A]`
  draw itself (`B` the rows after augmentation, this device's), which then replaces the draw
  from `key`: the seam through which the tests feed the reference's recorded draws.
"""

from __future__ import annotations

import functools
import math
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
    gaussian_sample,
    init_networks,
    init_noise,
    init_state,
    make_agent,
    next_noise,
    project_target,
    step_alpha,
    train_member,
)
from unilab_jax.algos.gradients import reduce_metrics
from unilab_jax.algos.hyperparams import HoraSACConfig, SACConfig
from unilab_jax.algos.networks import CriticEnsemble, PrivilegedSACActor, SACActor
from unilab_jax.algos.normalizer import NormalizerState
from unilab_jax.algos.symmetry import make_augment
from unilab_jax.errors import ConfigError

__all__ = [
    "SACConfig",
    "SACNetworks",
    "SACState",
    "make_hora_sac",
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


class SACNetworks(NamedTuple):
    """The flax modules of one FastSAC agent."""

    actor: SACActor | PrivilegedSACActor
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


def make_sac_networks(config: SACConfig, action_dim: int, obs_dim: int = 0) -> SACNetworks:
    """Build the actor and critic modules from the config (a `HoraSACConfig`: the privileged
    actor, whose input's first `obs_dim` columns are the observation)."""
    actor_settings = dict(
        action_dim=action_dim,
        hidden_dim=config.actor_hidden_dim,
        use_layer_norm=config.use_layer_norm,
        log_std_min=config.log_std_min,
        log_std_max=config.log_std_max,
    )
    if isinstance(config, HoraSACConfig):
        actor = PrivilegedSACActor(
            obs_dim=obs_dim,
            priv_embed_dim=config.priv_embed_dim,
            priv_hidden_dims=tuple(config.priv_hidden_dims),
            **actor_settings,
        )
    else:
        actor = SACActor(**actor_settings)
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
    u, gaussian = gaussian_sample(mean, log_std, noise)
    action = jnp.tanh(u)
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
    # [E, B, K]: each target net i is the target of online net i
    target_probs, target_values, clipped = project_target(
        config, jax.nn.softmax(target_logits, axis=-1), soft_rewards, bootstrap
    )
    logits = networks.critic.apply(critic_params, batch.critic, batch.actions)  # [E, B, K]
    ce = categorical_cross_entropy(target_probs, logits, log_prob_floor=-30.0)  # [E, B]
    loss = jnp.sum(jnp.mean(ce, axis=-1))
    aux = {
        "next_log_prob": jax.lax.stop_gradient(next_log_prob),
        "target_q_max": jnp.max(target_values),
        "target_q_min": jnp.min(target_values),
        **clipped,
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
    q = jnp.mean(critic_values(config, logits), axis=0)  # [B]
    alpha = jax.lax.stop_gradient(jnp.exp(log_alpha))
    loss = jnp.mean(alpha * log_prob - q)
    aux = {
        "policy_entropy": -jnp.mean(log_prob),
        "action_std": jnp.mean(jnp.exp(log_std)),
    }
    return loss, jax.lax.stop_gradient(aux)


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
    privileged_dim = critic_dim - obs_dim if isinstance(config, HoraSACConfig) else 0
    parts = Parts(
        config=config,
        networks=make_sac_networks(config, action_dim, obs_dim),
        obs_dim=obs_dim,
        critic_dim=critic_dim,
        action_dim=action_dim,
        actor_opt=optax.adamw(config.actor_lr, b1=b1, b2=b2, weight_decay=config.weight_decay),
        critic_opt=optax.adamw(config.critic_lr, b1=b1, b2=b2, weight_decay=config.weight_decay),
        alpha_opt=optax.adam(config.alpha_lr, b1=b1, b2=b2),
        augment=make_augment(config.use_symmetry, mirror, obs_dim, critic_dim, action_dim),
        axis_name=axis_name,
        privileged_dim=privileged_dim,
    )
    functions = _init, _init_explore, _explore, _act, _update_critic, _update_actor
    return make_agent(parts, *functions)


def make_hora_sac(
    config: HoraSACConfig,
    obs_dim: int,
    critic_dim: int,
    action_dim: int,
    axis_name: str | None = None,
    mirror: MirrorMap | None = None,
    num_envs: int | None = None,
) -> Agent:
    """HORA-SAC: `make_sac` with the privileged actor, which reads the critic observation's
    columns beyond the actor's (`critic_dim - obs_dim` of them, the task's privileged values).
    A task whose critic observes nothing beyond the actor is refused (`ConfigError`)."""
    if not isinstance(config, HoraSACConfig):
        raise ConfigError(f"HORA-SAC takes a HoraSACConfig, not {type(config).__name__}")
    if critic_dim <= obs_dim:
        raise ConfigError(
            f"HORA-SAC's actor reads the critic observation's columns beyond the actor's, and "
            f"this task has none (actor {obs_dim}, critic {critic_dim}); use --algo sac, or a "
            "task with privileged critic values (SharpaInhandRotation)"
        )
    return make_sac(config, obs_dim, critic_dim, action_dim, axis_name, mirror, num_envs)


def _init(parts: Parts, key: jax.Array) -> SACState:
    return init_state(SACState, parts, *init_networks(parts.networks, key, 1, parts.dims))


def _init_explore(parts: Parts, key: jax.Array, num_envs: int) -> tuple | Array:
    """`()` with white noise (SAC exploration is then stateless), else each env's draw."""
    noise = init_noise(key, parts.config.noise_correlation, num_envs, parts.action_dim)
    return () if noise is None else noise


def _explore(
    parts: Parts,
    state: SACState,
    explore_state: tuple | Array,
    obs: Array,
    prev_done: Array,
    key: jax.Array,
) -> tuple[Array, tuple | Array]:
    """`tanh(mean + std * n)`; `n` a fresh draw (the reference ignores `prev_done` for SAC) or,
    with `noise_correlation`, each env's correlated draw (`common.next_noise`)."""
    mean, log_std = apply_actor(parts, state, obs)  # [N, A]
    fresh = jax.random.normal(key, mean.shape, mean.dtype)
    rho = parts.config.noise_correlation
    noise = next_noise(rho, explore_state if rho else None, fresh, prev_done)
    return jnp.tanh(mean + jnp.exp(log_std) * noise), (noise if rho else explore_state)


def _act(parts: Parts, state: SACState, obs: Array) -> Array:
    return jnp.tanh(apply_actor(parts, state, obs)[0])


def _update_critic(
    parts: Parts, state: SACState, batch: Transition, key: jax.Array, noise: Array | None = None
) -> tuple[SACState, dict[str, Array]]:
    """The critic step (`sac_critic_loss`), then the temperature's (`sac_alpha_loss`)."""
    state, qf_loss, aux, grad_norm = train_member(
        parts, state, "critic", sac_critic_loss, batch, ("next_action_noise", key, noise),
        target_critic_params=state.target_critic_params, actor_params=state.actor_params,
        log_alpha=state.log_alpha,
    )  # fmt: skip
    target_entropy = -parts.action_dim * parts.config.target_entropy_ratio
    alpha_loss = functools.partial(
        sac_alpha_loss, next_log_prob=aux["next_log_prob"], target_entropy=target_entropy
    )
    state, alpha_metrics = step_alpha(parts, state, alpha_loss)
    target = ("target_q_max", "target_q_min", "target_clip_low", "target_clip_high")
    metrics = {"qf_loss": qf_loss, "critic_grad_norm": grad_norm, **{k: aux[k] for k in target}}
    return state, reduce_metrics({**metrics, **alpha_metrics}, parts.axis_name)


def _update_actor(
    parts: Parts, state: SACState, batch: Transition, key: jax.Array, noise: Array | None = None
) -> tuple[SACState, dict[str, Array]]:
    state, loss, aux, grad_norm = train_member(
        parts, state, "actor", sac_actor_loss, batch, ("action_noise", key, noise),
        critic_params=state.critic_params, log_alpha=state.log_alpha,
    )  # fmt: skip
    metrics = {"actor_loss": loss, "actor_grad_norm": grad_norm, **aux}
    return state, reduce_metrics(metrics, parts.axis_name)
