"""FastSAC: hand-checked policy maths, the critic loss against numpy, update-step behaviour."""

import collections
import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from test_c51 import np_projection

from unilab_jax.algos.agent import Transition
from unilab_jax.algos.sac import (
    SACConfig,
    make_sac,
    make_sac_networks,
    sac_critic_loss,
    sample_tanh_gaussian,
)

OBS, CRITIC, ACT = 5, 6, 3
# Tiny widths; learning rates raised so that a few hundred steps show learning.
CONFIG = SACConfig(
    actor_hidden_dim=32,
    critic_hidden_dim=32,
    num_atoms=11,
    v_min=-5.0,
    v_max=5.0,
    actor_lr=1e-3,
    critic_lr=1e-3,
)
AGENT = make_sac(CONFIG, OBS, CRITIC, ACT)
NETWORKS = make_sac_networks(CONFIG, ACT)
# Everything runs jitted (op-by-op execution compiles hundreds of tiny kernels), and the tests
# share these functions so that the whole file compiles each program once.
TRACES = collections.Counter()


def counted(fn):
    """`jax.jit(fn)` that counts how often JAX traces it (once per new input signature)."""

    def traced(*args):
        TRACES[fn.__name__] += 1
        return fn(*args)

    return jax.jit(traced)


init = jax.jit(AGENT.init)
update_critic = counted(AGENT.update_critic)
update_actor = counted(AGENT.update_actor)
update_target = counted(AGENT.update_target)
update_normalizers = counted(AGENT.update_normalizers)


@functools.cache
def loss_for(config):
    return jax.jit(functools.partial(sac_critic_loss, networks=NETWORKS, config=config))


critic_loss = loss_for(CONFIG)


def toy_batch(seed, batch_size=16, obs_dim=OBS, critic_dim=CRITIC, action_dim=ACT, **overrides):
    """A random batch from numpy (no jax.random: nothing to compile); `overrides` set fields."""
    rng = np.random.default_rng(seed)
    fields = dict(
        obs=rng.normal(size=(batch_size, obs_dim)),
        critic=rng.normal(size=(batch_size, critic_dim)),
        actions=rng.uniform(-1.0, 1.0, size=(batch_size, action_dim)),
        rewards=rng.normal(size=batch_size),
        next_obs=rng.normal(size=(batch_size, obs_dim)),
        next_critic=rng.normal(size=(batch_size, critic_dim)),
        terminated=np.zeros(batch_size),
        truncated=np.zeros(batch_size),
    )
    fields.update(overrides)
    return Transition(**{k: jnp.asarray(v, jnp.float32) for k, v in fields.items()})


def normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def randomize(params, seed, scale=0.5):
    """Replace every leaf with N(0, scale) (undoes the zero-initialised heads)."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda x: jnp.asarray(scale * rng.normal(size=x.shape), jnp.float32), params
    )


def trees_close(a, b, atol=1e-6):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: np.allclose(x, y, atol=atol), a, b)))


# --- float64 numpy forward passes over the flax parameter trees -------------------------------


def np_dense(p, x):
    return x @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


def np_trunk(p, x, activation, layer_norm):
    for i in range(3):
        x = np_dense(p[f"dense_{i}"], x)
        if layer_norm:
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            x = (x - mu) / np.sqrt(var + 1e-5) * np.asarray(p[f"norm_{i}"]["scale"])
            x = x + np.asarray(p[f"norm_{i}"]["bias"])
        x = activation(x)
    return x


def np_silu(x):
    return x / (1.0 + np.exp(-x))


def np_relu(x):
    return np.maximum(x, 0.0)


def np_critic_logits(params, member, critic_obs, action, activation, layer_norm):
    p = jax.tree.map(lambda leaf: np.asarray(leaf[member]), params["params"])
    x = np.concatenate([np.asarray(critic_obs, np.float64), np.asarray(action, np.float64)], -1)
    return np_dense(p["logits"], np_trunk(p, x, activation, layer_norm))


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


# --- policy -----------------------------------------------------------------------------------


def test_zero_init_heads_give_mean_zero_and_midpoint_log_std():
    state = init(jax.random.key(0))
    obs = normal(1, (4, OBS))
    mean, log_std = jax.jit(NETWORKS.actor.apply)(state.actor_params, obs)
    np.testing.assert_allclose(mean, 0.0)
    np.testing.assert_allclose(log_std, -2.5)  # midpoint of [-5, 0]
    np.testing.assert_allclose(jax.jit(AGENT.act)(state, obs), 0.0)


def test_log_prob_matches_numpy_for_hand_picked_values():
    mean = np.array([0.3, -1.2])
    log_std = np.array([-0.5, -2.0])
    noise = np.array([0.7, -1.5])
    u = mean + np.exp(log_std) * noise
    gaussian = -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)
    expected = np.sum(gaussian - np.log(1 - np.tanh(u) ** 2 + 1e-6) - math.log(1 + 1e-6))
    action, log_prob = sample_tanh_gaussian(
        jnp.asarray(mean, jnp.float32), jnp.asarray(log_std, jnp.float32), jnp.asarray(noise)
    )
    np.testing.assert_allclose(action, np.tanh(u), rtol=1e-6)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5)


def test_explore_ignores_prev_done_and_stays_in_bounds():
    state = init(jax.random.key(0))
    obs = normal(1, (8, OBS))
    explore_state = AGENT.init_explore(jax.random.key(2), 8)
    key = jax.random.key(3)
    explore = jax.jit(AGENT.explore)
    a1, _ = explore(state, explore_state, obs, jnp.zeros(8, bool), key)
    a2, _ = explore(state, explore_state, obs, jnp.ones(8, bool), key)
    np.testing.assert_array_equal(a1, a2)
    assert a1.shape == (8, ACT) and bool(jnp.all(jnp.abs(a1) < 1.0))
    assert float(jnp.std(a1)) > 0.0


def lag_one_correlation(noise) -> tuple[float, float]:
    """`noise [T, N, A]` -> (variance, correlation of successive steps), over all envs."""
    x = np.asarray(noise, np.float64)
    return float(np.var(x)), float(np.mean(x[1:] * x[:-1]) / np.var(x))


def check_correlated_noise(agent, state, obs, rho, noise_of, check_action, steps=200):
    """200 exploration steps of `agent` (`noise_correlation=rho`) with no episode ending: its
    noise (`noise_of(explore_state)`) has unit variance and lag-one correlation rho, and each
    action is the one that noise makes (`check_action(actions, explore_state)`); then 200 steps
    with every episode ending: fresh, uncorrelated draws."""
    explore = jax.jit(agent.explore)
    explore_state = agent.init_explore(jax.random.key(2), obs.shape[0])
    for done, want in ((False, rho), (True, 0.0)):
        dones = jnp.full((obs.shape[0],), done)
        noises = []
        for step in range(steps):
            key = jax.random.key(step + 1000 * done)
            actions, explore_state = explore(state, explore_state, obs, dones, key)
            check_action(actions, explore_state)
            noises.append(noise_of(explore_state))
        var, corr = lag_one_correlation(noises)
        assert abs(var - 1.0) < 0.05 and abs(corr - want) < 0.02, (done, var, corr)


def test_correlated_noise_is_an_ar1_of_unit_variance_redrawn_on_done():
    agent = make_sac(dataclasses.replace(CONFIG, noise_correlation=0.9), OBS, CRITIC, ACT)
    state = init(jax.random.key(0))
    state = state.replace(actor_params=randomize(state.actor_params, 1, 0.3))
    obs = normal(1, (256, OBS))
    mean, log_std = jax.jit(NETWORKS.actor.apply)(state.actor_params, obs / 1.01)

    def check_action(actions, noise):
        want = np.tanh(np.asarray(mean) + np.exp(np.asarray(log_std)) * np.asarray(noise))
        np.testing.assert_allclose(actions, want, atol=1e-5)

    check_correlated_noise(agent, state, obs, 0.9, lambda e: e, check_action)


def test_act_normalises_observations():
    state = init(jax.random.key(0))
    state = state.replace(actor_params=randomize(state.actor_params, 1))
    obs = normal(2, (1, OBS))
    shifted = state.replace(obs_normalizer=state.obs_normalizer.replace(mean=obs[0]))
    act = jax.jit(AGENT.act)
    # Normalised by its own mean, obs becomes 0; the default statistics leave 0 at 0.
    np.testing.assert_allclose(act(shifted, obs), act(state, jnp.zeros((1, OBS))), atol=1e-6)


# --- critic loss ------------------------------------------------------------------------------


def test_critic_loss_matches_numpy_on_a_two_row_batch():
    state = init(jax.random.key(0))
    actor_params = randomize(state.actor_params, 1)
    online = randomize(state.critic_params, 2, 0.3)
    target = randomize(state.critic_params, 3, 0.3)
    log_alpha = jnp.float32(math.log(0.5))
    batch = toy_batch(4, 2, terminated=[0.0, 1.0], rewards=[0.7, -1.3])
    noise = normal(5, (2, ACT))
    loss, _ = critic_loss(online, target, actor_params, log_alpha, batch, noise)

    b = jax.tree.map(lambda x: np.asarray(x, np.float64), batch)
    noise = np.asarray(noise, np.float64)
    ap = actor_params["params"]
    h = np_trunk(ap["trunk"], b.next_obs, np_silu, True)
    mean = np.clip(np_dense(ap["mu"], h), -10, 10)
    log_std = -5.0 + 2.5 * (np.tanh(np_dense(ap["log_std"], h)) + 1.0)
    u = mean + np.exp(log_std) * noise
    a = np.tanh(u)
    log_prob = (
        -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - np.log(1 - a**2 + 1e-6)
    ).sum(-1) - ACT * math.log(1 + 1e-6)
    bootstrap = 1.0 - b.terminated * (1.0 - b.truncated)
    soft_rewards = b.rewards - 0.97 * bootstrap * 0.5 * log_prob
    expected = 0.0
    for member in range(2):
        t = np_critic_logits(target, member, b.next_critic, a, np_silu, True)
        t = np.exp(np_log_softmax(t))
        proj = np_projection(t, soft_rewards, bootstrap, 0.97, -5.0, 5.0)
        logits = np_critic_logits(online, member, b.critic, b.actions, np_silu, True)
        ce = -(proj * np.maximum(np_log_softmax(logits), -30.0)).sum(-1)
        expected += ce.mean()
    np.testing.assert_allclose(loss, expected, rtol=2e-5)


def critic_targets(batch, log_alpha=0.0, config=CONFIG):
    state = init(jax.random.key(0))
    actor_params = randomize(state.actor_params, 1)
    noise = normal(5, batch.actions.shape)
    args = (state.critic_params, state.target_critic_params, actor_params, jnp.float32(log_alpha))
    return loss_for(config)(*args, batch, noise)[1]


def test_terminated_row_target_is_a_point_mass_at_the_reward():
    batch = toy_batch(3, 2, terminated=[1.0, 1.0], rewards=[2.0, -0.5])
    targets = critic_targets(batch, log_alpha=1.0)["target_probs"]  # [E, B, K] on -5..5 step 1
    for member in range(2):
        np.testing.assert_allclose(targets[member, 0], np.eye(11)[7], atol=1e-6)
        half = 0.5 * (np.eye(11)[4] + np.eye(11)[5])
        np.testing.assert_allclose(targets[member, 1], half, atol=1e-6)


def test_truncated_row_bootstraps_from_next_obs():
    # Row 0 terminated, row 1 terminated by time limit (truncated): only row 1 looks at s'.
    kw = dict(terminated=[1.0, 1.0], truncated=[0.0, 1.0])
    batch = toy_batch(3, 2, **kw)
    moved = batch.replace(next_obs=batch.next_obs + 3.0, next_critic=batch.next_critic - 2.0)
    before = critic_targets(batch)["target_probs"]
    after = critic_targets(moved)["target_probs"]
    np.testing.assert_allclose(before[:, 0], after[:, 0], atol=1e-6)
    assert float(jnp.abs(before[:, 1] - after[:, 1]).max()) > 1e-3


def test_entropy_is_folded_into_the_reward():
    # With gamma 0.5, r' + gamma z stays inside the support [-5, 5], where the projection
    # preserves the mean: E[target] = r - gamma alpha logpi' + gamma E[Z'] for each row.
    config = dataclasses.replace(CONFIG, gamma=0.5)
    batch = toy_batch(3, 4, rewards=[0.1, -0.2, 0.0, 0.3])
    z = jnp.linspace(-5.0, 5.0, 11)
    cold = critic_targets(batch, log_alpha=math.log(1e-6), config=config)
    warm = critic_targets(batch, log_alpha=math.log(0.1), config=config)
    shift = (warm["target_probs"] - cold["target_probs"]) @ z  # [E, B]
    expected = -0.5 * (0.1 - 1e-6) * warm["next_log_prob"]
    np.testing.assert_allclose(shift, jnp.broadcast_to(expected, shift.shape), atol=1e-4)
    assert bool(jnp.all(warm["next_log_prob"] != 0.0))


# --- update steps -----------------------------------------------------------------------------


def test_non_finite_critic_loss_leaves_params_and_optimiser_unchanged():
    state = init(jax.random.key(0))
    batch = toy_batch(1, rewards=jnp.full((16,), jnp.nan))
    new, metrics = update_critic(state, batch, jax.random.key(2))
    assert not np.isfinite(float(metrics["qf_loss"]))
    assert trees_close(new.critic_params, state.critic_params, atol=0.0)
    assert trees_close(new.critic_opt_state, state.critic_opt_state, atol=0.0)


def test_non_finite_actor_loss_leaves_params_and_optimiser_unchanged():
    state = init(jax.random.key(0))
    batch = toy_batch(1, critic=jnp.full((16, CRITIC), jnp.nan))
    new, metrics = update_actor(state, batch, jax.random.key(2))
    assert not np.isfinite(float(metrics["actor_loss"]))
    assert trees_close(new.actor_params, state.actor_params, atol=0.0)
    assert trees_close(new.actor_opt_state, state.actor_opt_state, atol=0.0)


# Cosine over 2 critic updates to a quarter: the step's share is 1, 0.625, 0.25, 0.25 at counts 0-3.
DECAYED = make_sac(
    dataclasses.replace(CONFIG, lr_decay_steps=2, lr_final_ratio=0.25), OBS, CRITIC, ACT
)


def test_lr_decay_scales_actor_and_critic_steps_by_the_critics_update_count():
    """From the same state, a decayed step moves the critic's and the actor's parameters by the
    schedule's share of the constant-rate step, at the critic's count (the actor's own count
    stays at 0 here); the temperature's step does not decay."""
    decayed_critic, decayed_actor = jax.jit(DECAYED.update_critic), jax.jit(DECAYED.update_actor)
    state = init(jax.random.key(0))
    state = state.replace(actor_params=randomize(state.actor_params, 3))
    batch, key = toy_batch(1), jax.random.key(2)

    def share(before, constant, decayed):
        moved = jax.tree.leaves(jax.tree.map(lambda b, c: np.asarray(c - b), before, constant))
        scaled = jax.tree.leaves(jax.tree.map(lambda b, d: np.asarray(d - b), before, decayed))
        ratio = sum(float(np.vdot(m, s)) for m, s in zip(moved, scaled, strict=True))
        return ratio / sum(float(np.vdot(m, m)) for m in moved)

    for count, expected in enumerate([1.0, 0.625, 0.25, 0.25]):
        constant, _ = update_critic(state, batch, key)
        decayed, _ = decayed_critic(state, batch, key)
        assert share(state.critic_params, constant.critic_params, decayed.critic_params) == (
            pytest.approx(expected, abs=1e-4)
        ), count
        assert float(decayed.log_alpha) == float(constant.log_alpha)
        # The actor steps after the critic's update, so it reads the next count's share.
        after = [1.0, 0.625, 0.25, 0.25, 0.25][count + 1]
        actor_constant, _ = update_actor(constant, batch, key)
        actor_decayed, _ = decayed_actor(constant, batch, key)
        moved = share(
            constant.actor_params, actor_constant.actor_params, actor_decayed.actor_params
        )
        assert moved == pytest.approx(after, abs=1e-4), count
        state = constant


@pytest.mark.parametrize(("log_std_bias", "grows"), [(0.0, True), (20.0, False)])
def test_alpha_grows_when_entropy_is_below_target(log_std_bias, grows):
    # Target entropy 0 (ratio 0). The initial policy (std e^-2.5 in 3 dims) has entropy ~ -3.3,
    # below it; with the log-std head saturated at log_std 0 the entropy is ~ +1.7, above it.
    state = init(jax.random.key(0))
    head = state.actor_params["params"]["log_std"]
    head["bias"] = jnp.full_like(head["bias"], log_std_bias)
    new, metrics = update_critic(state, toy_batch(1), jax.random.key(2))
    assert (float(new.log_alpha) > float(state.log_alpha)) == grows
    assert float(metrics["alpha"]) == pytest.approx(math.exp(float(new.log_alpha)), rel=1e-6)


FIXED = make_sac(
    dataclasses.replace(CONFIG, use_autotune=False, obs_normalization=False), OBS, CRITIC, ACT
)


def test_alpha_is_fixed_without_autotune():
    state = init(jax.random.key(0))
    new, metrics = jax.jit(FIXED.update_critic)(state, toy_batch(1), jax.random.key(2))
    assert float(new.log_alpha) == float(state.log_alpha)
    assert float(metrics["alpha_loss"]) == 0.0


def test_normalizer_update_is_identity_when_disabled():
    state = init(jax.random.key(0))
    batch = toy_batch(1)
    new = jax.jit(FIXED.update_normalizers)(state, batch.obs + 5.0, batch.critic)
    assert trees_close(new.obs_normalizer, state.obs_normalizer, atol=0.0)


def test_updates_on_a_fixed_batch_drive_qf_loss_down():
    rewards = np.round(np.random.default_rng(7).uniform(-3, 3, size=16))
    terminated = (jnp.arange(16) % 2).astype(jnp.float32)
    batch = toy_batch(1, rewards=rewards, terminated=terminated)
    state = init(jax.random.key(0))
    losses = []
    for i in range(300):
        state, metrics = update_critic(state, batch, jax.random.key(i))
        state, _ = update_actor(state, batch, jax.random.key(1000 + i))
        state = update_target(state)
        losses.append(float(metrics["qf_loss"]))
    assert np.mean(losses[-10:]) < 0.6 * losses[0]
    assert np.mean(losses[-10:]) < np.mean(losses[140:150])


def test_update_functions_trace_once_and_preserve_state_types():
    # Every call in this file uses batch 16, so each update function is traced exactly once.
    state = init(jax.random.key(0))
    for i in range(3):
        batch, key = toy_batch(i), jax.random.key(10 + i)
        state = update_normalizers(state, batch.obs, batch.critic)
        state, critic_metrics = update_critic(state, batch, key)
        state, actor_metrics = update_actor(state, batch, key)
        state = update_target(state)
    assert dict(TRACES) == {
        "update_critic": 1,
        "update_actor": 1,
        "update_target": 1,
        "update_normalizers": 1,
    }
    assert set(critic_metrics) == {
        "qf_loss",
        "critic_grad_norm",
        "target_q_max",
        "target_q_min",
        "target_clip_low",
        "target_clip_high",
        "alpha_loss",
        "alpha",
    }
    assert set(actor_metrics) == {"actor_loss", "actor_grad_norm", "policy_entropy", "action_std"}
    # Same avals (shape, dtype, weak type) in and out: the state can be a scan carry.
    avals = jax.eval_shape(lambda s: s, state)
    assert jax.eval_shape(AGENT.update_critic, state, batch, key)[0] == avals
    assert jax.eval_shape(AGENT.update_actor, state, batch, key)[0] == avals
    assert jax.eval_shape(AGENT.update_target, state) == avals
    assert jax.eval_shape(AGENT.update_normalizers, state, batch.obs, batch.critic) == avals


def train_step(agent, state, batch, key):
    """One update as the loop runs it (critic, actor, target) plus a normaliser update."""
    state = agent.update_normalizers(state, batch.obs, batch.critic)
    state, critic_metrics = agent.update_critic(state, batch, key)
    state, actor_metrics = agent.update_actor(state, batch, jax.random.fold_in(key, 1))
    return agent.update_target(state), {**critic_metrics, **actor_metrics}


def unsharded_step(state, batch, key):
    """`train_step` of the plain agent, from the shared jitted functions."""
    state = update_normalizers(state, batch.obs, batch.critic)
    state, critic_metrics = update_critic(state, batch, key)
    state, actor_metrics = update_actor(state, batch, jax.random.fold_in(key, 1))
    return update_target(state), {**critic_metrics, **actor_metrics}


# --- data parallelism -------------------------------------------------------------------------

SHARDED = make_sac(CONFIG, OBS, CRITIC, ACT, axis_name="data")


def test_update_under_one_device_shard_map_matches_unsharded():
    mesh = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharded = jax.shard_map(
        functools.partial(train_step, SHARDED),
        mesh=mesh,
        in_specs=(P(), P("data"), P()),
        out_specs=(P(), P()),
        check_vma=False,
    )
    state = init(jax.random.key(0))
    batch, key = toy_batch(1), jax.random.key(2)
    want = unsharded_step(state, batch, key)
    assert trees_close(jax.jit(sharded)(state, batch, key), want, atol=1e-6)


def test_two_way_split_of_the_batch_matches_one_device():
    # vmap with an axis name runs the same collectives as a 2-device shard_map.
    state = init(jax.random.key(0))
    batch, key = toy_batch(1), jax.random.key(2)
    halves = jax.tree.map(lambda x: x.reshape(2, 8, *x.shape[1:]), batch)
    split_step = jax.vmap(
        functools.partial(train_step, SHARDED), in_axes=(None, 0, None), axis_name="data"
    )
    split = jax.jit(split_step)(state, halves, key)
    want = unsharded_step(state, batch, key)
    for device in range(2):
        assert trees_close(jax.tree.map(lambda x, d=device: x[d], split), want, atol=1e-5)
