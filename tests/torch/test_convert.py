"""Torch <-> JAX conversion: complete tables, bit-exact round trips, equal outputs and updates."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import test_torch_sac as sac_tests
import test_torch_td3 as td3_tests
import torch
from test_torch_sac import ACT, OBS, normal, randomize, toy_batch

from unilab.algos.torch.convert import (
    jax_sac_to_torch,
    jax_td3_to_torch,
    sac_mapping,
    td3_mapping,
    torch_sac_to_jax,
    torch_td3_to_jax,
)
from unilab_jax.algos.agent import Transition
from unilab_jax.algos.gradients import row_normal
from unilab_jax.algos.normalizer import normalize
from unilab_jax.algos.sac import make_sac, make_sac_networks
from unilab_jax.algos.td3 import make_td3, make_td3_networks

torch.set_num_threads(1)  # see test_torch_sac

# Relative error bound for float32 forward passes and single updates, torch vs XLA.
RTOL = 1e-5


def to_transition(batch):
    """The reference batch dict as the JAX core's `Transition` (`dones` -> `terminated`)."""
    arr = lambda key: jnp.asarray(batch[key].numpy())  # noqa: E731
    return Transition(
        obs=arr("obs"),
        critic=arr("critic"),
        actions=arr("actions"),
        rewards=arr("rewards"),
        next_obs=arr("next_obs"),
        next_critic=arr("next_critic"),
        terminated=arr("dones"),
        truncated=arr("truncated"),
    )


def max_rel_err(got, want):
    """Max over leaves of `max|got - want| / max|want|` (float64)."""

    def leaf(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))

    return max(jax.tree.leaves(jax.tree.map(leaf, got, want)), default=0.0)


def trees_equal(a, b):
    same = jax.tree.map(lambda x, y: np.array_equal(np.asarray(x), np.asarray(y)), a, b)
    return jax.tree.structure(a) == jax.tree.structure(b) and all(jax.tree.leaves(same))


def torch_state(learner):
    """Every tensor of a learner checkpoint (optimiser state included), flattened by name."""
    out = {}

    def walk(prefix, node):
        if isinstance(node, torch.Tensor):
            out[prefix] = node.detach().clone()
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(node, list | tuple):
            for i, v in enumerate(node):
                walk(f"{prefix}/{i}", v)
        elif isinstance(node, int | float):
            out[prefix] = node

    walk("", learner.get_state_dict())
    return out


def assert_torch_states_equal(a, b):
    assert set(a) == set(b)
    for name, value in a.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, b[name]), name
        elif not name.endswith("update_count"):  # not part of the JAX state
            assert value == b[name], name


def trained_sac(seed=0, steps=2):
    learner = sac_tests.make_learner(seed)
    batch = toy_batch(1, dones=np.arange(16) % 3 == 0, truncated=np.arange(16) % 6 == 0)
    learner.update_normalizers(batch["obs"] + 1.0, batch["critic"] * 2.0)
    for _ in range(steps):
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    return learner, batch


def trained_td3(seed=0, steps=2):
    learner = td3_tests.make_learner(seed)
    batch = toy_batch(1, dones=np.arange(16) % 3 == 0, truncated=np.arange(16) % 6 == 0)
    learner.update_normalizers(batch["obs"] + 1.0, batch["critic"] * 2.0)
    for _ in range(steps):
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    return learner, batch


def poisoned(state):
    """The state with every float leaf NaN and every count -1: shows what a conversion misses."""
    return jax.tree.map(
        lambda x: jnp.full_like(x, jnp.nan if jnp.issubdtype(x.dtype, jnp.floating) else -1), state
    )


@functools.cache
def sac_agent(learner_config):
    return make_sac(learner_config, OBS, sac_tests.CRITIC, ACT)


@functools.cache
def td3_agent(learner_config):
    return make_td3(learner_config, OBS, td3_tests.CRITIC, ACT)


# --- tables and round trips -------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_the_table_covers_every_jax_leaf_and_every_torch_tensor(algo):
    if algo == "sac":
        learner, _ = trained_sac()
        to_jax, to_torch, fresh = torch_sac_to_jax, jax_sac_to_torch, sac_tests.make_learner
    else:
        learner, _ = trained_td3()
        to_jax, to_torch, fresh = torch_td3_to_jax, jax_td3_to_torch, td3_tests.make_learner
    state = to_jax(learner)
    filled = to_jax(learner, poisoned(state))  # every leaf, every ensemble member, written
    assert trees_equal(filled, state)
    assert int(filled.critic_opt_state[0].count) == 2

    target = fresh(seed=5)
    with torch.no_grad():
        for module in (target.actor, target.qnet, target.qnet_target):
            for tensor in module.parameters():
                tensor.fill_(float("nan"))
        for module in (target.obs_normalizer, target.critic_normalizer):
            for tensor in module.buffers():
                tensor.fill_(float("nan"))
        if algo == "sac":
            target.log_alpha.fill_(float("nan"))
    to_torch(state, target)
    for name, value in torch_state(target).items():
        if isinstance(value, torch.Tensor) and "actor_target" not in name:
            assert torch.all(torch.isfinite(value)), name
    mapping = sac_mapping(learner) if algo == "sac" else td3_mapping(learner)
    assert len({row.torch_name for row in mapping}) == len(mapping)


def test_sac_round_trips_are_bit_exact():
    learner, _ = trained_sac()
    state = torch_sac_to_jax(learner)
    other = sac_tests.make_learner(seed=7)
    jax_sac_to_torch(state, other)
    assert_torch_states_equal(torch_state(other), torch_state(learner))  # torch -> jax -> torch
    again = torch_sac_to_jax(other, sac_agent(other.config).init(jax.random.key(9)))
    assert trees_equal(again, state)  # jax -> torch -> jax


def test_td3_round_trips_are_bit_exact():
    learner, _ = trained_td3()
    state = torch_td3_to_jax(learner)
    other = td3_tests.make_learner(seed=7)
    jax_td3_to_torch(state, other)
    want = {k: v for k, v in torch_state(learner).items() if "actor_target" not in k}
    got = {k: v for k, v in torch_state(other).items() if "actor_target" not in k}
    assert_torch_states_equal(got, want)
    again = torch_td3_to_jax(other, td3_agent(other.config).init(jax.random.key(9)))
    assert trees_equal(again, state)


def test_fresh_optimisers_are_count_zero_in_jax_and_empty_in_torch():
    learner = sac_tests.make_learner()
    state = torch_sac_to_jax(learner)
    assert int(state.actor_opt_state[0].count) == 0
    assert not np.any(np.asarray(state.critic_opt_state[0].mu["params"]["dense_0"]["kernel"]))
    trained, _ = trained_sac()
    jax_sac_to_torch(state, trained)
    assert len(trained.q_optimizer.state) == 0 and len(trained.alpha_optimizer.state) == 0


# --- the converted networks compute the same functions ------------------------------------------


def test_converted_sac_networks_give_the_same_outputs():
    learner, _ = trained_sac()
    for module in (learner.actor, learner.qnet):
        randomize(module, 3, 0.3)
    state = torch_sac_to_jax(learner)
    networks = make_sac_networks(learner.config, ACT)
    obs, critic, actions = (
        normal(1, (32, OBS)),
        normal(2, (32, sac_tests.CRITIC)),
        normal(3, (32, ACT)),
    )
    with torch.no_grad():
        mean, log_std = learner.actor.mean_and_log_std(learner.obs_normalizer(obs))
        logits = learner.qnet(learner.critic_normalizer(critic), torch.tanh(actions))
    jax_obs = normalize(state.obs_normalizer, jnp.asarray(obs.numpy()))
    jax_critic = normalize(state.critic_normalizer, jnp.asarray(critic.numpy()))
    jax_mean, jax_log_std = jax.jit(networks.actor.apply)(state.actor_params, jax_obs)
    jax_logits = jax.jit(networks.critic.apply)(
        state.critic_params, jax_critic, jnp.tanh(jnp.asarray(actions.numpy()))
    )
    act = jax.jit(sac_agent(learner.config).act)(state, jnp.asarray(obs.numpy()))
    assert max_rel_err(jax_mean, mean.numpy()) <= RTOL
    assert max_rel_err(jax_log_std, log_std.numpy()) <= RTOL
    assert max_rel_err(act, torch.tanh(mean).numpy()) <= RTOL
    assert max_rel_err(jax_logits, logits.numpy()) <= RTOL  # [E, B, K], both members


def test_converted_td3_networks_give_the_same_outputs():
    learner, _ = trained_td3()
    for module in (learner.actor, learner.qnet):
        randomize(module, 3, 0.3)
    state = torch_td3_to_jax(learner)
    networks = make_td3_networks(learner.config, ACT)
    obs, critic, actions = (
        normal(1, (32, OBS)),
        normal(2, (32, td3_tests.CRITIC)),
        normal(3, (32, ACT)),
    )
    with torch.no_grad():
        mu = learner.actor(learner.obs_normalizer(obs))
        logits = torch.stack(learner.qnet(learner.critic_normalizer(critic), actions))
    act = jax.jit(td3_agent(learner.config).act)(state, jnp.asarray(obs.numpy()))
    jax_critic = normalize(state.critic_normalizer, jnp.asarray(critic.numpy()))
    jax_logits = jax.jit(networks.critic.apply)(
        state.critic_params, jax_critic, jnp.asarray(actions.numpy())
    )
    assert max_rel_err(act, mu.numpy()) <= RTOL
    assert max_rel_err(jax_logits, logits.numpy()) <= RTOL


# --- update parity: one step from identical state, batch and noise ------------------------------


def compare_update(jax_metrics, torch_metrics, before, jax_after, torch_after, fields):
    """Metrics and the new state (params, moments, counts) of the updated fields agree.

    Returns the measured relative errors for the report: metrics, new values, and the *change*
    made by the step (the sharper test: Adam divides tiny gradient differences by tiny norms).
    """
    metric_err = max(
        abs(float(jax_metrics[k]) - torch_metrics[k]) / max(abs(torch_metrics[k]), 1e-12)
        for k in jax_metrics
    )
    pick = lambda s: {f: getattr(s, f) for f in fields}  # noqa: E731
    value_err = max_rel_err(pick(torch_after), pick(jax_after))
    delta = lambda s: jax.tree.map(  # noqa: E731
        lambda a, b: np.asarray(a, np.float64) - np.asarray(b, np.float64), pick(s), pick(before)
    )
    delta_err = max_rel_err(delta(torch_after), delta(jax_after))
    assert set(jax_metrics) == set(torch_metrics)
    assert metric_err <= RTOL, metric_err
    assert value_err <= RTOL, value_err
    assert delta_err <= 1e-3, delta_err
    print(f"metrics {metric_err:.2e}  new state {value_err:.2e}  step {delta_err:.2e}")
    return metric_err, value_err, delta_err


@pytest.mark.parity
def test_sac_critic_and_alpha_update_match_jax():
    learner, batch = trained_sac()
    agent = sac_agent(learner.config)
    state = torch_sac_to_jax(learner)
    fresh = toy_batch(11, 64)  # a normaliser update first: same statistics on both sides
    learner.update_normalizers(fresh["obs"], fresh["critic"])
    state = jax.jit(agent.update_normalizers)(
        state, jnp.asarray(fresh["obs"].numpy()), jnp.asarray(fresh["critic"].numpy())
    )
    normalizers = ("obs_normalizer", "critic_normalizer")
    assert max_rel_err(torch_sac_to_jax(learner, state), state) <= RTOL
    jax_sac_to_torch(state, learner)  # continue from bit-identical states

    key = jax.random.key(3)
    new_state, metrics = jax.jit(agent.update_critic)(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, 16, ACT)))
    torch_metrics = learner.update_critic(batch, noise)
    fields = ("critic_params", "critic_opt_state", "log_alpha", "alpha_opt_state", *normalizers)
    compare_update(
        metrics, torch_metrics, state, new_state, torch_sac_to_jax(learner, state), fields
    )


@pytest.mark.parity
def test_sac_actor_update_matches_jax():
    learner, batch = trained_sac()
    agent = sac_agent(learner.config)
    state = torch_sac_to_jax(learner)
    key = jax.random.key(4)
    new_state, metrics = jax.jit(agent.update_actor)(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, 16, ACT)))
    torch_metrics = learner.update_actor(batch, noise)
    after = torch_sac_to_jax(learner, state)
    compare_update(
        metrics, torch_metrics, state, new_state, after, ("actor_params", "actor_opt_state")
    )


@pytest.mark.parity
def test_td3_critic_update_matches_jax():
    learner, batch = trained_td3()
    agent = td3_agent(learner.config)
    state = torch_td3_to_jax(learner)
    key = jax.random.key(5)
    new_state, metrics = jax.jit(agent.update_critic)(state, to_transition(batch), key)
    noise = torch.from_numpy(np.array(row_normal(key, 16, ACT)))
    torch_metrics = learner.update_critic(batch, noise)
    after = torch_td3_to_jax(learner, state)
    compare_update(
        metrics, torch_metrics, state, new_state, after, ("critic_params", "critic_opt_state")
    )


@pytest.mark.parity
def test_td3_actor_update_matches_jax():
    learner, batch = trained_td3()
    agent = td3_agent(learner.config)
    state = torch_td3_to_jax(learner)
    new_state, metrics = jax.jit(agent.update_actor)(state, to_transition(batch), jax.random.key(6))
    torch_metrics = learner.update_actor(batch)
    after = torch_td3_to_jax(learner, state)
    compare_update(
        metrics, torch_metrics, state, new_state, after, ("actor_params", "actor_opt_state")
    )
