"""FastTD3: clipped double-Q targets, smoothing noise, per-env std, clipping, updates."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P
from test_c51 import np_projection
from test_sac import (
    ACT,
    CRITIC,
    OBS,
    check_correlated_noise,
    normal,
    randomize,
    toy_batch,
    trees_close,
)

from unilab_jax.algos.gradients import gradient_step
from unilab_jax.algos.td3 import TD3Config, make_td3, make_td3_networks, td3_critic_loss

CONFIG = TD3Config(actor_hidden_dim=32, critic_hidden_dim=32, num_atoms=11, v_min=-5.0, v_max=5.0)
AGENT = make_td3(CONFIG, OBS, CRITIC, ACT)
NETWORKS = make_td3_networks(CONFIG, ACT)
init = jax.jit(AGENT.init)
update_critic = jax.jit(AGENT.update_critic)
Z = np.linspace(-5.0, 5.0, 11)


def critic_loss_fn(config):
    return jax.jit(functools.partial(td3_critic_loss, networks=NETWORKS, config=config))


def feature_critic(state):
    """Twin critics whose next-state values are ordered differently in different rows.

    Both trunks pass critic feature 0 through unit 0 (h = relu(x0)); net 1's logits are
    `h * z / 5`, net 2's are the constant `z / 5`. So with x0 = 0 net 1 is uniform (the lower
    mean), with x0 = 3 net 1 is skewed up harder than net 2 (net 2 is lower).
    """
    params = jax.tree.map(jnp.zeros_like, state.critic_params)
    layers = params["params"]
    for i in range(3):
        dense = layers[f"dense_{i}"]
        dense["kernel"] = dense["kernel"].at[:, 0, 0].set(1.0)
    logits = layers["logits"]
    logits["kernel"] = logits["kernel"].at[0, 0, :].set(Z / 5.0)
    logits["bias"] = logits["bias"].at[1, :].set(Z / 5.0)
    return params


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_cdq_targets_both_nets_with_the_lower_distribution_per_row():
    state = init(jax.random.key(0))
    target = feature_critic(state)
    next_critic = np.zeros((2, CRITIC), np.float32)
    next_critic[1, 0] = 3.0
    batch = toy_batch(1, 2, next_critic=next_critic, rewards=[0.5, -0.5])
    noise = jnp.zeros((2, ACT))
    bootstrap = np.ones(2)
    net1 = np.stack([softmax(np.zeros(11)), softmax(3.0 * Z / 5.0)])  # per row
    net2 = np.stack([softmax(Z / 5.0), softmax(Z / 5.0)])
    proj1 = np_projection(net1, np.array([0.5, -0.5]), bootstrap, 0.97, -5.0, 5.0)
    proj2 = np_projection(net2, np.array([0.5, -0.5]), bootstrap, 0.97, -5.0, 5.0)
    assert proj1[0] @ Z < proj2[0] @ Z and proj2[1] @ Z < proj1[1] @ Z

    args = (state.critic_params, target, state.actor_params, batch, noise)
    _, aux = critic_loss_fn(CONFIG)(*args)
    lower = np.stack([proj1[0], proj2[1]])
    np.testing.assert_allclose(aux["target_probs"][0], lower, atol=1e-6)
    np.testing.assert_allclose(aux["target_probs"][1], lower, atol=1e-6)
    np.testing.assert_allclose(aux["qf_max"], max(proj1 @ Z), atol=1e-5)  # net 1's values

    _, aux = critic_loss_fn(dataclasses.replace(CONFIG, use_cdq=False))(*args)
    np.testing.assert_allclose(aux["target_probs"][0], proj1, atol=1e-6)
    np.testing.assert_allclose(aux["target_probs"][1], proj2, atol=1e-6)


def test_target_smoothing_noise_is_clipped():
    state = init(jax.random.key(0))
    actor = randomize(state.actor_params, 1, 0.3)
    critic = randomize(state.critic_params, 2, 0.3)
    target = randomize(state.critic_params, 3, 0.3)
    batch = toy_batch(4, 8)
    loss = critic_loss_fn(CONFIG)
    sign = jnp.where(jnp.arange(8 * ACT).reshape(8, ACT) % 2 == 0, 1.0, -1.0)
    # noise_clip / policy_noise = 2.5: anything beyond that is clipped to +-0.5.
    at_clip, aux_clip = loss(critic, target, actor, batch, 2.5 * sign)
    huge, aux_huge = loss(critic, target, actor, batch, 100.0 * sign)
    small, _ = loss(critic, target, actor, batch, 1.0 * sign)
    np.testing.assert_allclose(huge, at_clip, rtol=1e-6)
    np.testing.assert_allclose(aux_huge["target_probs"], aux_clip["target_probs"], atol=1e-7)
    assert abs(float(small) - float(at_clip)) > 1e-4


def test_per_env_noise_std_is_resampled_only_for_done_envs():
    explore = jax.jit(AGENT.explore)
    state = init(jax.random.key(0))
    obs = normal(1, (64, OBS))
    explore_state = AGENT.init_explore(jax.random.key(2), 64)
    lo, hi = CONFIG.std_min, CONFIG.std_max
    assert explore_state.noise_scales.shape == (64,)
    for step in range(5):
        done = jnp.asarray(np.random.default_rng(100 + step).uniform(size=64) < 0.3)
        actions, new = explore(state, explore_state, obs, done, jax.random.key(step))
        old_scales, new_scales = (
            np.asarray(explore_state.noise_scales),
            np.asarray(new.noise_scales),
        )
        done = np.asarray(done)
        np.testing.assert_array_equal(new_scales[~done], old_scales[~done])
        assert np.all(new_scales[done] != old_scales[done])
        assert np.all((new_scales >= lo) & (new_scales <= hi))
        assert actions.shape == (64, ACT) and bool(jnp.all(jnp.abs(actions) <= 1.0))
        explore_state = new


def test_correlated_noise_is_an_ar1_of_unit_variance_redrawn_on_done():
    agent = make_td3(dataclasses.replace(CONFIG, noise_correlation=0.9), OBS, CRITIC, ACT)
    state = init(jax.random.key(0))
    obs = normal(1, (256, OBS))
    mu = np.asarray(jax.jit(agent.act)(state, obs))

    def check_action(actions, explore_state):
        noise = np.asarray(explore_state.noise) * np.asarray(explore_state.noise_scales)[:, None]
        np.testing.assert_allclose(actions, np.clip(mu + noise, -1, 1), atol=1e-6)

    check_correlated_noise(agent, state, obs, 0.9, lambda e: e.noise, check_action)
    # The reference's white noise keeps no noise state (old checkpoints restore unchanged).
    assert AGENT.init_explore(jax.random.key(2), 4).noise is None


def test_act_is_the_deterministic_policy_mean():
    state = init(jax.random.key(0))
    obs = normal(1, (4, OBS))
    mu = jax.jit(NETWORKS.actor.apply)(state.actor_params, obs / 1.01)  # default statistics
    np.testing.assert_allclose(jax.jit(AGENT.act)(state, obs), mu, atol=1e-6)


def test_gradient_step_clips_the_global_norm_like_torch():
    params = {"a": jnp.array([3.0]), "b": jnp.array([4.0])}  # grad of |p|^2 / 2 is p: norm 5

    def loss(p):
        return 0.5 * sum(jnp.sum(x**2) for x in jax.tree.leaves(p)), {}

    sgd = optax.sgd(1.0)
    clipped, _, _, _, norm = gradient_step(loss, params, sgd.init(params), sgd, 1.0, None)
    np.testing.assert_allclose(norm, 5.0)
    scale = 1.0 - 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose([clipped["a"][0], clipped["b"][0]], [3 * scale, 4 * scale])
    free, _, _, _, _ = gradient_step(loss, params, sgd.init(params), sgd, 0.0, None)
    np.testing.assert_allclose([free["a"][0], free["b"][0]], [0.0, 0.0])


def test_gradient_clipping_is_active_in_the_critic_update():
    # Adam hides a uniform gradient scale, except against its epsilon: clipped to a tiny norm,
    # the first step moves the weights far less.
    state = init(jax.random.key(0))
    batch, key = toy_batch(1), jax.random.key(2)

    def update(max_grad_norm):
        config = dataclasses.replace(CONFIG, max_grad_norm=max_grad_norm)
        return jax.jit(make_td3(config, OBS, CRITIC, ACT).update_critic)(state, batch, key)

    clipped, metrics = update(1e-7)
    free, _ = update(0.0)

    def moved(new):
        diffs = jax.tree.map(
            lambda a, b: jnp.abs(a - b).sum(), new.critic_params, state.critic_params
        )
        return float(sum(jax.tree.leaves(diffs)))

    assert float(metrics["critic_grad_norm"]) > 1e-3  # the metric is the pre-clipping norm
    assert moved(clipped) < 0.1 * moved(free)


def test_updates_on_a_fixed_batch_drive_qf_loss_down():
    config = dataclasses.replace(CONFIG, critic_lr=1e-3, actor_lr=1e-3)
    agent = make_td3(config, OBS, CRITIC, ACT)
    rewards = jnp.round(jax.random.uniform(jax.random.key(7), (32,), minval=-3, maxval=3))
    terminated = (jnp.arange(32) % 2).astype(jnp.float32)
    batch = toy_batch(1, 32, rewards=rewards, terminated=terminated)

    @jax.jit
    def train(state, key):
        def body(state, inputs):
            step, key = inputs
            state, metrics = agent.update_critic(state, batch, key)
            state = jax.lax.cond(
                step % 2 == 0, lambda s: agent.update_actor(s, batch, key)[0], lambda s: s, state
            )
            return agent.update_target(state), metrics["qf_loss"]

        return jax.lax.scan(body, state, (jnp.arange(300), jax.random.split(key, 300)))

    _, losses = train(init(jax.random.key(0)), jax.random.key(3))
    assert float(losses[-10:].mean()) < 0.6 * float(losses[0])
    assert float(losses[-10:].mean()) < float(losses[140:150].mean())


SHARDED = make_td3(CONFIG, OBS, CRITIC, ACT, axis_name="data")


def step(agent, state, batch, key):
    state = agent.update_normalizers(state, batch.obs, batch.critic)
    state, critic_metrics = agent.update_critic(state, batch, key)
    state, actor_metrics = agent.update_actor(state, batch, key)
    return agent.update_target(state), {**critic_metrics, **actor_metrics}


def test_update_traces_once_and_preserves_state_types():
    traces = []

    def counted(state, batch, key):
        traces.append(None)
        return step(AGENT, state, batch, key)

    jitted = jax.jit(counted)
    state = init(jax.random.key(0))
    for i in range(3):
        state, metrics = jitted(state, toy_batch(i), jax.random.key(10 + i))
    assert len(traces) == 1
    assert set(metrics) == {
        "qf_loss",
        "qf_max",
        "qf_min",
        "target_clip_low",
        "target_clip_high",
        "critic_grad_norm",
        "actor_loss",
        "actor_grad_norm",
    }
    out = jax.eval_shape(jitted, state, toy_batch(0), jax.random.key(0))[0]
    assert out == jax.eval_shape(lambda s: s, state)


def test_update_under_one_device_shard_map_matches_unsharded():
    mesh = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharded = jax.shard_map(
        functools.partial(step, SHARDED),
        mesh=mesh,
        in_specs=(P(), P("data"), P()),
        out_specs=(P(), P()),
        check_vma=False,
    )
    state = init(jax.random.key(0))
    batch, key = toy_batch(1), jax.random.key(2)
    got = jax.jit(sharded)(state, batch, key)
    want = jax.jit(functools.partial(step, AGENT))(state, batch, key)
    assert trees_close(got, want, atol=1e-6)


def test_two_way_split_of_the_batch_matches_one_device():
    state = init(jax.random.key(0))
    batch, key = toy_batch(1), jax.random.key(2)
    halves = jax.tree.map(lambda x: x.reshape(2, 8, *x.shape[1:]), batch)
    split = jax.jit(
        jax.vmap(functools.partial(step, SHARDED), in_axes=(None, 0, None), axis_name="data")
    )(state, halves, key)
    want = jax.jit(functools.partial(step, AGENT))(state, batch, key)
    for device in range(2):
        assert trees_close(jax.tree.map(lambda x, d=device: x[d], split), want, atol=1e-5)
