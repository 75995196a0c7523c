"""The pieces the learners (FastSAC, FastTD3; FlashSAC for its `Agent`) build from, written once.

- `Parts`: what a learner's pure functions are built from; `make_agent`: the `Agent` of a
  learner module, its functions bound to the parts, with the shared target and normaliser
  updates; `bind`, one such function.
- `init_networks` / `init_state`: a fresh actor's and critic's variables, and a learner state
  around them.
- `apply_actor`: the actor on observations normalised with the agent's running statistics.
- `draw_noise`: an update's standard normal `[B, A]` draw, per row from its key.
- `step_member`: one guarded optimiser step (`gradients.gradient_step`) of an agent state's
  `<member>_params` with its `<member>_opt_state` (`"actor"`, `"critic"`); `train_member`, the
  same on a loss over a prepared batch; `step_alpha`, the temperature step of the SACs.
- `prepare_batch`: a replay batch as the losses see it: mirrored (symmetry augmentation, raw
  rows), then normalised with the agent's running statistics.
- `support` / `critic_values` / `project_target`: the C51 maths (`c51`) on a config's support.
- `gaussian_sample`: the Gaussian half of a tanh-Gaussian sample.
- `update_normalizers` / `update_target`: the two state updates that do not differentiate.
- `init_noise` / `next_noise`: temporally correlated exploration noise, an AR(1) process of unit
  variance per env (`noise_correlation` rho of both configs):
  `n <- rho * n + sqrt(1 - rho^2) * N(0, 1)`, redrawn from N(0, 1) when an episode starts. A
  swing-up or a gait needs the same push for many steps, which independent draws average out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.algos.c51 import (
    categorical_projection,
    clipped_target_mass,
    expected_value,
    make_support,
)
from unilab_jax.algos.gradients import gradient_step, polyak_update, row_normal
from unilab_jax.algos.normalizer import (
    init_normalizer,
    normalize,
    normalize_tail,
    normalize_transition,
    update_agent_normalizers,
)

__all__ = [
    "Parts",
    "apply_actor",
    "bind",
    "critic_values",
    "draw_noise",
    "gaussian_sample",
    "init_networks",
    "init_noise",
    "init_state",
    "make_agent",
    "next_noise",
    "prepare_batch",
    "project_target",
    "step_alpha",
    "step_member",
    "support",
    "train_member",
    "update_normalizers",
    "update_target",
]

Array = jax.Array
_LOG_2PI = math.log(2.0 * math.pi)


class Parts(NamedTuple):
    """What a learner's pure functions are built from (its maker's arguments, modules and
    optimisers). `alpha_opt`: the temperature's (the SACs); `augment`: the symmetry
    augmentation of `prepare_batch`; `num_envs`: the run's envs (FlashSAC's reward scaling);
    `privileged_dim`: the critic observation's trailing columns a privileged actor also reads
    (HORA-SAC; `Agent.privileged_dim`)."""

    config: Any
    networks: Any
    obs_dim: int
    critic_dim: int
    action_dim: int
    actor_opt: optax.GradientTransformation
    critic_opt: optax.GradientTransformation
    axis_name: str | None
    alpha_opt: optax.GradientTransformation | None = None
    augment: Callable[[Transition], Transition] | None = None
    num_envs: int = 1
    privileged_dim: int = 0

    @property
    def dims(self) -> tuple[int, int, int]:
        """`(actor input width, critic_dim, action_dim)`: the actor's input is the observation
        and, for a privileged actor, the critic's last `privileged_dim` columns."""
        return self.obs_dim + self.privileged_dim, self.critic_dim, self.action_dim


def bind(name: str, fn: Callable, *args: Any, **kwargs: Any) -> Callable:
    """`functools.partial(fn, *args, **kwargs)` named `name` (an `Agent` field: profiles,
    tracebacks and trace counters see which of the agent's functions it is)."""
    bound = functools.partial(fn, *args, **kwargs)
    bound.__name__ = bound.__qualname__ = name
    bound.__doc__ = fn.__doc__
    return bound


def make_agent(parts: Any, *functions: Callable, **more: Callable) -> Agent:
    """The `Agent` of a learner module: `functions` are its `init`, `init_explore`, `explore`,
    `act`, `update_critic` and `update_actor` in that order (`Agent`'s), `more` any optional
    field (`observe_rewards=`); each takes `parts` first and is bound to it. `update_target`
    runs at `parts.config.tau`, `update_normalizers` is a no-op unless
    `parts.config.obs_normalization`."""
    config = parts.config
    enabled = getattr(config, "obs_normalization", False)
    names = ("init", "init_explore", "explore", "act", "update_critic", "update_actor")
    bound = {**dict(zip(names, functions, strict=True)), **more}
    return Agent(
        privileged_dim=getattr(parts, "privileged_dim", 0),
        update_target=bind("update_target", update_target, tau=config.tau),
        update_normalizers=bind(
            "update_normalizers", update_normalizers, enabled=enabled, axis_name=parts.axis_name
        ),
        **{name: bind(name, fn, parts) for name, fn in bound.items()},
    )


def init_networks(networks: Any, key: jax.Array, batch: int, dims: tuple[int, int, int]):
    """`(actor variables, critic variables)` of `networks` initialised from `key` on zero
    inputs of `batch` rows; `dims`: `(actor input width, critic_dim, action_dim)`."""
    obs_dim, critic_dim, action_dim = dims
    actor_key, critic_key = jax.random.split(key)
    actor = networks.actor.init(actor_key, jnp.zeros((batch, obs_dim)))
    zeros = jnp.zeros((batch, critic_dim)), jnp.zeros((batch, action_dim))
    return actor, networks.critic.init(critic_key, *zeros)


def init_state(cls: type, parts: Parts, actor_params: Any, critic_params: Any, **more: Any):
    """A fresh learner state `cls` around the first actor and critic params: the target critic
    a copy of the critic, fresh optimiser states and, where `cls` has them, `log_alpha` at
    `log(config.alpha_init)` and empty observation normalisers; `more`: its other fields."""
    fields = {field.name for field in dataclasses.fields(cls)}
    state = {
        "actor_params": actor_params,
        "critic_params": critic_params,
        "target_critic_params": critic_params,
        "actor_opt_state": parts.actor_opt.init(actor_params),
        "critic_opt_state": parts.critic_opt.init(critic_params),
    }
    if "log_alpha" in fields:
        log_alpha = jnp.asarray(math.log(parts.config.alpha_init), jnp.float32)
        state.update(log_alpha=log_alpha, alpha_opt_state=parts.alpha_opt.init(log_alpha))
    if "obs_normalizer" in fields:
        state.update(
            obs_normalizer=init_normalizer(parts.obs_dim),
            critic_normalizer=init_normalizer(parts.critic_dim),
        )
    return cls(**state, **more)


def apply_actor(parts: Parts, state: Any, obs: Array) -> Any:
    """The actor's output on its input `obs` (`actor_observation`), normalised first when
    `config.obs_normalization`: the observation's columns with the actor's statistics, a
    privileged actor's trailing columns with the critic's statistics of those columns (as
    `prepare_batch` normalises them for the losses)."""
    if parts.config.obs_normalization:
        own = normalize(state.obs_normalizer, obs[..., : parts.obs_dim])
        if parts.privileged_dim:
            tail = normalize_tail(state.critic_normalizer, obs[..., parts.obs_dim :])
            own = jnp.concatenate([own, tail], axis=-1)
        obs = own
    return parts.networks.actor.apply(state.actor_params, obs)


def draw_noise(parts: Parts, key: jax.Array, rows: int, noise: Array | None = None) -> Array:
    """`noise` if given (the tests' recorded draws), else standard normal `[rows, A]` drawn per
    global row from `key` (`gradients.row_normal`)."""
    if noise is not None:
        return noise
    return row_normal(key, rows, parts.action_dim, parts.axis_name)


def step_member(
    state: Any,
    member: str,
    loss_fn: Callable[[Any], tuple[Array, Any]],
    optimizer: optax.GradientTransformation,
    max_grad_norm: float,
    axis_name: str | None,
    lr_scale: Array | None = None,
) -> tuple[Any, Array, Any, Array]:
    """`gradient_step` on `state.<member>_params` and `state.<member>_opt_state`; returns
    `(state with both replaced, loss, aux, grad_norm)`."""
    params, opt_state, loss, aux, grad_norm = gradient_step(
        loss_fn,
        getattr(state, f"{member}_params"),
        getattr(state, f"{member}_opt_state"),
        optimizer,
        max_grad_norm,
        axis_name,
        lr_scale,
    )
    state = state.replace(**{f"{member}_params": params, f"{member}_opt_state": opt_state})
    return state, loss, aux, grad_norm


def train_member(
    parts: Parts,
    state: Any,
    member: str,
    loss: Callable,
    batch: Transition,
    noise: tuple[str, jax.Array, Array | None] | None = None,
    **inputs: Any,
) -> tuple[Any, Array, Any, Array]:
    """`step_member` of `member` (`"actor"`, `"critic"`) with `parts.<member>_opt` on
    `loss(<member>_params, batch=, networks=, config=, **inputs)` over the prepared batch
    (`prepare_batch`). `noise`: `(argument name, key, draw or None)` of a loss that takes a
    standard normal `[B, A]` draw (`draw_noise`, `B` the prepared rows)."""
    config = parts.config
    batch = prepare_batch(
        state, batch, parts.augment, config.obs_normalization, parts.privileged_dim
    )
    if noise is not None:
        name, key, draw = noise
        inputs[name] = draw_noise(parts, key, batch.rewards.shape[0], draw)
    loss_fn = functools.partial(loss, batch=batch, networks=parts.networks, config=config, **inputs)
    optimizer = getattr(parts, f"{member}_opt")
    return step_member(
        state, member, loss_fn, optimizer, config.max_grad_norm, parts.axis_name,
        lr_decay(config, state),
    )  # fmt: skip


def lr_decay(config: Any, state: Any) -> Array | None:
    """The actor's and critic's learning-rate share under `config.lr_decay_steps` (SAC's cosine
    decay to `lr_final_ratio`), read from the critic optimiser's update count so both members
    follow one clock; None (constant rates) when the config has no decay."""
    steps = getattr(config, "lr_decay_steps", 0)
    if not steps:
        return None
    count = optax.tree_utils.tree_get(state.critic_opt_state, "count")
    return optax.cosine_decay_schedule(1.0, steps, config.lr_final_ratio)(count)


def step_alpha(
    parts: Parts, state: Any, alpha_loss: Callable[[Array], tuple[Array, Any]]
) -> tuple[Any, dict[str, Array]]:
    """The temperature step with `config.use_autotune`: `gradient_step` of `state.log_alpha`
    on `alpha_loss(log_alpha) -> (loss, aux)` (unclipped, `parts.alpha_opt`). Returns the state
    and the metrics `alpha_loss` (0 without autotune) and `alpha`."""
    loss = jnp.zeros((), jnp.float32)
    if parts.config.use_autotune:
        log_alpha, opt_state, loss, _, _ = gradient_step(
            alpha_loss, state.log_alpha, state.alpha_opt_state, parts.alpha_opt, 0.0,
            parts.axis_name,
        )  # fmt: skip
        state = state.replace(log_alpha=log_alpha, alpha_opt_state=opt_state)
    return state, {"alpha_loss": loss, "alpha": jnp.exp(state.log_alpha)}


def prepare_batch(
    state: Any,
    batch: Transition,
    augment: Callable[[Transition], Transition],
    normalise: bool,
    privileged_dim: int = 0,
) -> Transition:
    """Mirror the raw rows (`augment`, the identity without symmetry), then normalise them with
    the state's `obs_normalizer` / `critic_normalizer` when `normalise`. With `privileged_dim`
    the actor's rows (`obs`, `next_obs`) are then its inputs: each followed by the (normalised)
    critic row's last `privileged_dim` columns, so the losses apply the actor to them as to any
    observation."""
    batch = augment(batch)
    if normalise:
        batch = normalize_transition(state.obs_normalizer, state.critic_normalizer, batch)
    if not privileged_dim:
        return batch
    tail = lambda critic: critic[..., critic.shape[-1] - privileged_dim :]  # noqa: E731
    return batch.replace(
        obs=jnp.concatenate([batch.obs, tail(batch.critic)], axis=-1),
        next_obs=jnp.concatenate([batch.next_obs, tail(batch.next_critic)], axis=-1),
    )


def support(config: Any) -> Array:
    """The config's C51 atom values `[K]` (`c51.make_support`)."""
    return make_support(config.v_min, config.v_max, config.num_atoms)


def critic_values(config: Any, logits: Array) -> Array:
    """The expected value of each critic's distribution: logits `[..., K] -> [...]`."""
    return expected_value(jax.nn.softmax(logits, axis=-1), support(config))


def project_target(
    config: Any, next_probs: Array, rewards: Array, bootstrap: Array
) -> tuple[Array, Array, dict[str, Array]]:
    """The C51 target: `next_probs [..., B, K]` projected at `rewards + gamma * bootstrap * z`
    (`c51.categorical_projection`), held constant. Returns `(target_probs, their expected
    values [..., B], {"target_clip_low", "target_clip_high"})`, the mass clipped at each end
    (`c51.clipped_target_mass`)."""
    args = (rewards, bootstrap, config.gamma, config.v_min, config.v_max)
    target_probs = jax.lax.stop_gradient(categorical_projection(next_probs, *args))
    low, high = jax.lax.stop_gradient(clipped_target_mass(next_probs, *args))
    values = expected_value(target_probs, support(config))
    return target_probs, values, {"target_clip_low": low, "target_clip_high": high}


def gaussian_sample(mean: Array, log_std: Array, noise: Array) -> tuple[Array, Array]:
    """`u = mean + exp(log_std) * noise` and `log N(u; mean, std)` per dimension (before the
    tanh squash of a tanh-Gaussian policy)."""
    u = mean + jnp.exp(log_std) * noise
    return u, -0.5 * (jnp.square(noise) + 2.0 * log_std + _LOG_2PI)


def update_normalizers(
    state: Any, obs: Array, critic: Array, *, enabled: bool, axis_name: str | None
) -> Any:
    """The agent state with its normalisers updated by fresh rows (unchanged if not `enabled`)."""
    if not enabled:
        return state
    return update_agent_normalizers(state, obs, critic, axis_name)


def update_target(state: Any, *, tau: float) -> Any:
    """Polyak averaging of the critic into `target_critic_params` at rate `tau`."""
    target = polyak_update(state.target_critic_params, state.critic_params, tau)
    return state.replace(target_critic_params=target)


def init_noise(key: jax.Array, rho: float, num_envs: int, action_dim: int) -> Array | None:
    """Each env's first correlated draw `[num_envs, A]` (from `fold_in(key, 1)`, so whatever
    else is drawn from `key` stays as with white noise), or None when `rho` is 0."""
    if rho == 0:
        return None
    return jax.random.normal(jax.random.fold_in(key, 1), (num_envs, action_dim), jnp.float32)


def next_noise(rho: float, previous: Array | None, fresh: Array, prev_done: Array) -> Array:
    """The next unit-variance draw per env: `fresh` (standard normal `[N, A]`) with white noise
    (`rho` 0) and in envs whose episode just started (`prev_done [N]`), else the AR(1) step."""
    if rho == 0:
        return fresh
    carried = rho * previous + math.sqrt(1.0 - rho * rho) * fresh
    return jnp.where(prev_done[:, None], fresh, carried)
