"""Exact conversion between the torch learners and the JAX agent states (`SACState`, `TD3State`,
`FlashSACState`).

The whole mapping is one table per algorithm, built by `sac_mapping(learner)` /
`td3_mapping(learner)` / `flash_sac_mapping(learner)`: rows `(torch name, jax path, transform)`.

The rows, their transforms and the copies both ways are the core's
(`unilab_jax.torch.weights`); each actor lists its own rows (`SACActor.jax_rows`,
`TD3Actor.jax_rows`; HORA-SAC's `PrivilegedSACActor.jax_rows` adds its privileged encoder, so
its learner converts with the FastSAC functions, `init_jax_sac` building the core's
`make_hora_sac` agent from its `HoraSACConfig`), and this module adds the critics, the
temperature, the optimisers' moments and step counts, and the normalisers.

Everything is float32 on both sides, so weights, moments and statistics survive a round trip bit
for bit. FlashSAC's table also holds the BatchNorm running statistics (the actor's and the
online critic's; the target has none, as in JAX) and the reward statistics; optax keeps a
second count for each learning-rate schedule (`ScaleByScheduleState`), always equal to the Adam
count (both advance on an applied step, both stay on a skipped one), so its row reads the same
torch step count (the one torch name with two rows). Not mapped: the C51 support buffers and
the actor's `action_scale` / `action_bias` (constants), BatchNorm's `num_batches_tracked` (never
counted: `FlagBatchNorm` calls `F.batch_norm`, which leaves it at 0), TD3's `actor_target`
(never updated; left as it is) and its per-env exploration scales (collector state,
`TD3ExploreState` in JAX), and hyperparameters (the JAX agent must be built from
`learner.config`, which `init_jax_sac` / `init_jax_td3` / `jax_flash_sac_template` do). An
optimiser whose JAX count is 0 has an empty torch state, as a fresh torch optimiser does.
"""

from __future__ import annotations

import jax

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.flash_sac.learner import FlashSACLearner
from unilab_jax.algos.flash_sac import FlashSACState, make_flash_sac
from unilab_jax.algos.sac import SACState, make_sac
from unilab_jax.algos.td3 import TD3State, make_td3
from unilab_jax.torch.flash_actor import flash_trunk_rows
from unilab_jax.torch.weights import (
    Row,
    jax_to_torch,
    linear_rows,
    normalizer_rows,
    optimizer_rows,
    torch_to_jax,
    trunk_rows,
)

__all__ = [
    "Row",
    "flash_sac_mapping",
    "init_jax_sac",
    "init_jax_td3",
    "jax_flash_sac_template",
    "jax_flash_sac_to_torch",
    "jax_sac_to_torch",
    "jax_td3_to_torch",
    "sac_mapping",
    "td3_mapping",
    "torch_flash_sac_to_jax",
    "torch_sac_to_jax",
    "torch_td3_to_jax",
]


# --- the tables -------------------------------------------------------------------------------


def sac_mapping(learner: FastSACLearner) -> list[Row]:
    """The FastSAC table: actor, critic, target critic, log-alpha, optimisers, normalisers."""
    config = learner.config
    ln = config.use_layer_norm
    actor = learner.actor.jax_rows("actor")  # the actor's own table (unilab_jax.torch.actors)

    def critic(torch_root: str, jax_field: str) -> list[Row]:
        rows = []
        for e in range(config.num_q_networks):
            net = f"{torch_root}.qnets.{e}.net"
            rows += trunk_rows(net, (jax_field, "params"), 3, ln, e)
            rows += linear_rows(f"{net}.9", (jax_field, "params", "logits"), e)
        return rows

    qnet = critic("qnet", "critic_params")
    log_alpha = [Row("log_alpha", ("log_alpha",), "copy")]
    rows = actor + qnet + critic("qnet_target", "target_critic_params") + log_alpha
    rows += optimizer_rows("actor_optimizer", actor, "actor_opt_state")
    rows += optimizer_rows("q_optimizer", qnet, "critic_opt_state")
    rows += optimizer_rows("alpha_optimizer", log_alpha, "alpha_opt_state")
    if config.obs_normalization:
        rows += normalizer_rows("obs_normalizer") + normalizer_rows("critic_normalizer")
    return rows


def td3_mapping(learner: FastTD3Learner) -> list[Row]:
    """The FastTD3 table: actor, twin critic, target critic, optimisers, normalisers."""
    actor = learner.actor.jax_rows("actor")

    def critic(torch_root: str, jax_field: str) -> list[Row]:
        rows = []
        for e, name in enumerate(("qnet1", "qnet2")):
            net = f"{torch_root}.{name}.net"
            rows += trunk_rows(net, (jax_field, "params"), 2, False, e)
            rows += linear_rows(f"{net}.6", (jax_field, "params", "logits"), e)
        return rows

    qnet = critic("qnet", "critic_params")
    rows = actor + qnet + critic("qnet_target", "target_critic_params")
    rows += optimizer_rows("actor_optimizer", actor, "actor_opt_state")
    rows += optimizer_rows("q_optimizer", qnet, "critic_opt_state")
    if learner.config.obs_normalization:
        rows += normalizer_rows("obs_normalizer") + normalizer_rows("critic_normalizer")
    return rows


def _schedule_count_rows(optimizer: str, opt_state: str, index: int) -> list[Row]:
    """The schedule's count at ``opt_state[index]`` <-> the optimiser's step (see above)."""
    return [Row(f"{optimizer}.step", (opt_state, index, "count"), "copy")]


def flash_sac_mapping(learner: FlashSACLearner) -> list[Row]:
    """The FlashSAC table: actor (weights and BatchNorm statistics), critic members, target
    critic (weights only), log-alpha, optimisers (moments, Adam and schedule counts), reward
    statistics."""
    config = learner.config
    actor = learner.actor.jax_rows("actor")  # the actor's own table (weights and statistics)

    def critic(torch_root: str, jax_field: str) -> list[Row]:
        rows = []
        for e in range(config.num_q_networks):
            member = f"{torch_root}.qnets.{e}"
            params, stats = (jax_field, "params"), ("critic_stats", "batch_stats", "trunk")
            rows += flash_trunk_rows(
                f"{member}.trunk", (*params, "trunk"), stats, config.num_blocks, e
            )
            rows += linear_rows(f"{member}.logits", (*params, "logits"), e)
        return rows

    qnet = critic("qnet", "critic_params")
    # The target normalises with the batch: it has no statistics, on either side.
    target = critic("qnet_target", "target_critic_params")
    target = [row for row in target if row.jax_path[0] != "critic_stats"]
    log_alpha = [Row("log_alpha", ("log_alpha",), "copy")]
    rows = actor + qnet + target + log_alpha
    # Adam moments mirror the parameters only (not the BatchNorm statistics).
    schedule = 2 if config.weight_decay > 0 else 1  # adamw: (adam, decay, schedule)
    for name, params, field, index in (
        ("actor_optimizer", actor, "actor_opt_state", schedule),
        ("q_optimizer", qnet, "critic_opt_state", schedule),
        ("alpha_optimizer", log_alpha, "alpha_opt_state", 1),
    ):
        weights = [r for r in params if not r.jax_path[0].endswith("_stats")]
        rows += optimizer_rows(name, weights, field) + _schedule_count_rows(name, field, index)
    return rows + [
        Row(f"reward_stats.{name}", ("rewards", name), "copy")
        for name in ("carried", "mean", "var", "count", "abs_max")
    ]


# --- public API -------------------------------------------------------------------------------


def init_jax_sac(learner: FastSACLearner, key: jax.Array | None = None) -> SACState:
    """A fresh `SACState` of the same shapes and config as `learner` (weights not copied)."""
    agent = make_sac(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim)
    return agent.init(jax.random.key(0) if key is None else key)


def init_jax_td3(learner: FastTD3Learner, key: jax.Array | None = None) -> TD3State:
    """A fresh `TD3State` of the same shapes and config as `learner` (weights not copied)."""
    agent = make_td3(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim)
    return agent.init(jax.random.key(0) if key is None else key)


def torch_sac_to_jax(learner: FastSACLearner, jax_agent_state: SACState | None = None) -> SACState:
    """`jax_agent_state` with every mapped leaf replaced by the learner's values.

    Without a state, one is built from `learner.config` (`init_jax_sac`) as the template.
    """
    state = init_jax_sac(learner) if jax_agent_state is None else jax_agent_state
    return torch_to_jax(learner, sac_mapping(learner), state)


def jax_sac_to_torch(state: SACState, learner: FastSACLearner) -> None:
    """Load a `SACState` into `learner` in place (weights, moments, steps, statistics)."""
    jax_to_torch(state, sac_mapping(learner), learner)


def torch_td3_to_jax(learner: FastTD3Learner, jax_agent_state: TD3State | None = None) -> TD3State:
    """`jax_agent_state` with every mapped leaf replaced by the learner's values."""
    state = init_jax_td3(learner) if jax_agent_state is None else jax_agent_state
    return torch_to_jax(learner, td3_mapping(learner), state)


def jax_td3_to_torch(state: TD3State, learner: FastTD3Learner) -> None:
    """Load a `TD3State` into `learner` in place (`actor_target` and noise scales untouched)."""
    jax_to_torch(state, td3_mapping(learner), learner)


def jax_flash_sac_template(learner: FlashSACLearner) -> FlashSACState:
    """A `FlashSACState` of zeros with the shapes of `learner`'s config and sizes (as many
    envs as its reward statistics carry, 1 while they are not sized): traced, not run (the
    JAX init takes seconds to compile), which suffices as the table writes every leaf."""
    agent = make_flash_sac(
        learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim,
        num_envs=learner.reward_stats.num_envs or 1,
    )  # fmt: skip
    shapes = jax.eval_shape(agent.init, jax.random.key(0))
    return jax.tree.map(lambda leaf: jax.numpy.zeros(leaf.shape, leaf.dtype), shapes)


def torch_flash_sac_to_jax(
    learner: FlashSACLearner, jax_agent_state: FlashSACState | None = None
) -> FlashSACState:
    """`jax_agent_state` with every mapped leaf replaced by the learner's values.

    When the state carries returns for another number of envs than the learner (a run of
    another size), its carried returns are zeros, as at the start of a run; the statistics of
    the returns still come from the learner."""
    state = jax_flash_sac_template(learner) if jax_agent_state is None else jax_agent_state
    rows = flash_sac_mapping(learner)
    if state.rewards.carried.shape[0] != learner.reward_stats.num_envs:
        rows = [r for r in rows if r.torch_name != "reward_stats.carried"]
        carried = jax.numpy.zeros_like(state.rewards.carried)
        state = state.replace(rewards=state.rewards.replace(carried=carried))
    return torch_to_jax(learner, rows, state)


def jax_flash_sac_to_torch(state: FlashSACState, learner: FlashSACLearner) -> None:
    """Load a `FlashSACState` into `learner` in place; the learner takes the state's number
    of envs for its reward statistics."""
    learner.reward_stats.resize(int(state.rewards.carried.shape[0]))
    jax_to_torch(state, flash_sac_mapping(learner), learner)
    learner.sync_learning_rates()  # the schedule's values at the counts just written
