"""FlashSAC (unilab_jax.algos.flash_sac): its parts against hand-worked numbers and numpy, its
torch actor against the JAX actor, and a short run through the trainer and the exporter."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.algos.agent import Transition
from unilab_jax.algos.flash_networks import FlashActor, MemberBatchNorm, project_weights
from unilab_jax.algos.flash_sac import (
    FlashSACConfig,
    flash_critic_loss,
    make_flash_sac,
    make_flash_sac_networks,
    reward_scale,
    update_reward_stats,
)

OBS, CRITIC, ACT, B = 5, 7, 2, 12
CONFIG = FlashSACConfig(actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11)


@pytest.fixture(scope="module")
def agent():
    return make_flash_sac(CONFIG, OBS, CRITIC, ACT, num_envs=4)


@pytest.fixture(scope="module")
def state(agent):
    return agent.init(jax.random.PRNGKey(0))


def _batch(seed: int = 1) -> Transition:
    k = jax.random.split(jax.random.PRNGKey(seed), 6)
    return Transition(
        obs=jax.random.normal(k[0], (B, OBS)) * 3.0 + 1.0,
        critic=jax.random.normal(k[1], (B, CRITIC)),
        actions=jax.random.uniform(k[2], (B, ACT), minval=-1, maxval=1),
        rewards=jax.random.normal(k[3], (B,)),
        next_obs=jax.random.normal(k[4], (B, OBS)) * 3.0 + 1.0,
        next_critic=jax.random.normal(k[5], (B, CRITIC)),
        terminated=(jnp.arange(B) % 4 == 0).astype(jnp.float32),
        truncated=(jnp.arange(B) % 6 == 0).astype(jnp.float32),
    )


def test_batch_norm_uses_the_batch_in_training_and_updates_running_stats_unbiased():
    x = np.random.default_rng(0).normal(2.0, 3.0, (1, 10, 4)).astype(np.float32)
    bn = MemberBatchNorm(momentum=0.1)
    variables = bn.init(jax.random.PRNGKey(0), x, True)
    y, new = bn.apply(variables, x, True, mutable=["batch_stats"])
    mean, var = x[0].mean(0), x[0].var(0)
    np.testing.assert_allclose(np.asarray(y)[0], (x[0] - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    stats = new["batch_stats"]
    np.testing.assert_allclose(np.asarray(stats["mean"])[0], 0.1 * mean, rtol=1e-5)
    # running var starts at 1; the batch's enters unbiased (n / (n - 1)), as torch's does
    np.testing.assert_allclose(np.asarray(stats["var"])[0], 0.9 + 0.1 * var * 10 / 9, rtol=1e-5)
    # Evaluation normalises with the running statistics and changes nothing.
    y_eval = bn.apply({**variables, "batch_stats": stats}, x, False)
    expected = (x[0] - 0.1 * mean) / np.sqrt(np.asarray(stats["var"])[0] + 1e-5)
    np.testing.assert_allclose(np.asarray(y_eval)[0], expected, atol=1e-5)


def test_projection_bounds_every_weight_and_leaves_biases_free(state):
    params = jax.tree.map(lambda x: x * 3.0 + 0.5, state.critic_params)  # off the bounds
    projected = project_weights(params)["params"]
    trunk = projected["trunk"]
    kernel = np.asarray(trunk["block_0_up"]["kernel"])  # [E, in, out]
    np.testing.assert_allclose(np.linalg.norm(kernel, axis=1), 1.0, rtol=1e-5)
    bn = trunk["block_0_bn_up"]
    joint = np.sqrt(np.sum(np.asarray(bn["scale"]) ** 2 + np.asarray(bn["bias"]) ** 2, axis=-1))
    np.testing.assert_allclose(joint, np.sqrt(bn["scale"].shape[-1]), rtol=1e-5)
    rms = np.linalg.norm(np.asarray(trunk["rms"]["scale"]), axis=-1)
    np.testing.assert_allclose(rms, np.sqrt(32), rtol=1e-5)
    head = projected["logits"]
    np.testing.assert_allclose(np.linalg.norm(np.asarray(head["kernel"]), axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(head["bias"], params["params"]["logits"]["bias"])
    # Projecting twice changes nothing more.
    again = project_weights({"params": projected})["params"]
    np.testing.assert_allclose(again["trunk"]["embed"]["kernel"], trunk["embed"]["kernel"], 1e-6)


def test_reward_statistics_follow_each_envs_discounted_return(state):
    rewards = jnp.ones((3, 4))
    dones = jnp.array([[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], bool)
    stats = update_reward_stats(state.rewards, rewards, dones, 0.99)
    # G per step: 1; 1.99; env 0 restarted after its done: 1, the others 1 + 0.99 * 1.99.
    values = np.array([1, 1, 1, 1, 1.99, 1.99, 1.99, 1.99, 1, 2.9701, 2.9701, 2.9701])
    np.testing.assert_allclose(stats.mean, values.mean(), rtol=1e-6)
    np.testing.assert_allclose(stats.var, values.var(), rtol=1e-5)
    assert float(stats.count) == 12 and float(stats.abs_max) == pytest.approx(2.9701)
    np.testing.assert_allclose(stats.carried, 0.99 * np.array([1, 2.9701, 2.9701, 2.9701]), 1e-6)
    # The divisor: max(sqrt(var + 1e-8), max|G| / g_max); 1 before any return was seen.
    assert float(reward_scale(state.rewards, 5.0)) == pytest.approx(1.0)
    expected = max(np.sqrt(values.var() + 1e-8), 2.9701 / 0.5)
    assert float(reward_scale(stats, 0.5)) == pytest.approx(expected, rel=1e-5)


def _project_c51(probs, rewards, bootstrap, gamma, v_min, v_max):
    """The C51 projection written as loops (numpy, float64)."""
    k = probs.shape[-1]
    z = np.linspace(v_min, v_max, k)
    dz = (v_max - v_min) / (k - 1)
    out = np.zeros_like(probs, dtype=np.float64)
    for i in range(probs.shape[0]):
        for j in range(k):
            tz = np.clip(rewards[i] + bootstrap[i] * gamma * z[j], v_min, v_max)
            b = (tz - v_min) / dz
            lo, hi = int(np.floor(b)), int(np.ceil(b))
            if lo == hi:
                out[i, lo] += probs[i, j]
            else:
                out[i, lo] += probs[i, j] * (hi - b)
                out[i, hi] += probs[i, j] * (b - lo)
    return out


def test_critic_loss_is_cross_entropy_to_the_lowest_members_soft_target(state):
    networks = make_flash_sac_networks(CONFIG, ACT)
    batch = _batch()
    next_action = jnp.tanh(jax.random.normal(jax.random.PRNGKey(5), (B, ACT)))
    next_log_prob = jax.random.normal(jax.random.PRNGKey(6), (B,))
    state = state.replace(log_alpha=jnp.log(0.3))
    loss, aux = flash_critic_loss(
        state.critic_params, state, batch, next_action, next_log_prob, networks=networks,
        config=CONFIG,
    )  # fmt: skip
    # The same by hand: both halves through each critic as one batch of 2B rows.
    obs2 = np.concatenate([batch.critic, batch.next_critic])
    act2 = np.concatenate([batch.actions, next_action])
    target_vars = {**state.target_critic_params, **state.critic_stats}
    next_logits = np.asarray(networks.critic.apply(target_vars, obs2, act2, True))[:, B:]
    probs = np.exp(next_logits) / np.exp(next_logits).sum(-1, keepdims=True)
    z = np.linspace(CONFIG.v_min, CONFIG.v_max, CONFIG.num_atoms)
    lowest = np.argmin(probs @ z, axis=0)
    chosen = probs[lowest, np.arange(B)]
    bootstrap = 1.0 - np.asarray(batch.terminated) * (1.0 - np.asarray(batch.truncated))
    soft = np.asarray(batch.rewards) - CONFIG.gamma * bootstrap * 0.3 * np.asarray(next_log_prob)
    target = _project_c51(chosen, soft, bootstrap, CONFIG.gamma, CONFIG.v_min, CONFIG.v_max)
    online = {**state.critic_params, **state.critic_stats}
    logits = np.asarray(networks.critic.apply(online, obs2, act2, True))[:, :B]
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.mean(-(target[None] * log_p).sum(-1))
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # the online critic's running statistics moved (train mode on the joint batch)
    moved = aux["critic_stats"]["batch_stats"]["trunk"]["bn_in"]["mean"]
    joint = np.concatenate([obs2, act2], axis=-1).mean(0)
    np.testing.assert_allclose(np.asarray(moved), 0.01 * np.broadcast_to(joint, (2, joint.size)),
                               rtol=1e-5, atol=1e-7)  # fmt: skip


def test_updates_train_project_and_tune_the_temperature(agent, state):
    batch = _batch()
    s, critic_metrics = jax.jit(agent.update_critic)(state, batch, jax.random.PRNGKey(3))
    s, actor_metrics = jax.jit(agent.update_actor)(s, batch, jax.random.PRNGKey(4))
    s = agent.update_target(s)
    for name in ("qf_loss", "critic_grad_norm", "target_clip_low", "reward_scale"):
        assert np.isfinite(float(critic_metrics[name])), name
    assert float(critic_metrics["reward_scale"]) == pytest.approx(1.0)
    # Entropy far below the target (-0.48 per dimension): alpha grows from 0.01.
    assert float(actor_metrics["policy_entropy"]) < -0.48 * ACT
    assert float(actor_metrics["alpha"]) > CONFIG.alpha_init
    # Weights stay on their bounds after the steps; the target moved by tau.
    kernel = np.asarray(s.actor_params["params"]["trunk"]["embed"]["kernel"])
    np.testing.assert_allclose(np.linalg.norm(kernel, axis=1), 1.0, rtol=1e-5)
    before = np.asarray(state.critic_params["params"]["logits"]["bias"])
    online = np.asarray(s.critic_params["params"]["logits"]["bias"])
    target = np.asarray(s.target_critic_params["params"]["logits"]["bias"])
    np.testing.assert_allclose(target, 0.99 * before + 0.01 * online, rtol=1e-5, atol=1e-8)
    assert not np.allclose(online, before)


def test_exploration_holds_each_draw_for_zeta_distributed_steps(agent, state):
    explore = jax.jit(agent.explore)
    ex = agent.init_explore(jax.random.PRNGKey(0), 4096)
    obs, done = jnp.zeros((4096, OBS)), jnp.zeros((4096,), bool)
    # Before the actor's first update: uniform random actions (the warm-up).
    warm, _ = explore(state, ex, obs, done, jax.random.PRNGKey(9))
    assert float(jnp.mean(jnp.abs(warm))) == pytest.approx(0.5, abs=0.02)
    adam, *rest = state.actor_opt_state
    state = state.replace(actor_opt_state=(adam._replace(count=jnp.ones_like(adam.count)), *rest))
    deterministic = jax.jit(agent.act)(state, obs)
    kept = []
    for i in range(6):
        prev_noise = ex[0]
        actions, ex = explore(state, ex, obs, done, jax.random.PRNGKey(10 + i))
        if i:  # an env whose hold had not run out kept its draw
            kept.append(float(np.mean(np.all(np.asarray(ex[0] == prev_noise), axis=-1))))
        assert np.all(np.abs(np.asarray(actions)) < 1)
        # the policy's draws: around its (state-independent here) deterministic action
        assert float(jnp.abs(jnp.mean(actions - deterministic))) < 0.05
    # P(hold > t | hold >= t) for a Zeta(2) on [1, 16]: about 0.37 after the first step.
    p = np.arange(1, 17, dtype=np.float64) ** -2.0
    p /= p.sum()
    assert kept[0] == pytest.approx(1 - p[0], abs=0.03)


def test_torch_actor_matches_the_jax_actor_in_both_modes():
    torch = pytest.importorskip("torch")
    from unilab_jax.torch.flash_actor import FlashSACActor
    from unilab_jax.torch.weights import jax_to_torch

    actor = FlashActor(ACT, 16, 2)
    obs = np.random.default_rng(1).normal(1.0, 2.0, (9, OBS)).astype(np.float32)
    variables = actor.init(jax.random.PRNGKey(2), obs)
    params = project_weights({"params": variables["params"]})
    (_, _), stats = actor.apply({**params, **variables}, obs, True, mutable=["batch_stats"])
    state = {"actor_params": params, "actor_stats": stats}
    module = FlashSACActor.from_config(FlashSACConfig(actor_hidden_dim=16), OBS, ACT)
    holder = torch.nn.Module()
    holder.actor = module
    jax_to_torch(state, module.jax_rows("actor"), holder)
    x = torch.from_numpy(obs)
    mean, log_std = actor.apply({**params, **stats}, obs, False)
    t_mean, t_log_std = module.mean_and_log_std(x)
    np.testing.assert_allclose(t_mean.detach().numpy(), mean, atol=1e-5)
    np.testing.assert_allclose(t_log_std.detach().numpy(), log_std, atol=1e-5)
    np.testing.assert_allclose(module.deterministic(x).detach().numpy(), np.tanh(mean), atol=1e-5)
    # Training mode: batch statistics, and the running ones move alike on both sides.
    (jm, _), new = actor.apply({**params, **stats}, obs, True, mutable=["batch_stats"])
    tm, _ = module.mean_and_log_std(x, train=True)
    np.testing.assert_allclose(tm.detach().numpy(), jm, atol=1e-5)
    jax_var = new["batch_stats"]["trunk"]["block_1_bn_down"]["var"][0]
    np.testing.assert_allclose(module.trunk.blocks[1].bn_down.running_var.numpy(), jax_var, 1e-5)


def test_a_short_run_checkpoints_loads_and_exports_a_checked_torchscript(tmp_path):
    pytest.importorskip("torch")
    from unilab_jax import export_policy, load_policy
    from unilab_jax.config import TrainConfig
    from unilab_jax.training.trainer import train

    config = TrainConfig(
        env="PendulumSwingup", algo="flash_sac", num_envs=8, replay_buffer_n=16, batch_size=32,
        updates_per_step=2, learning_starts=1, max_iterations=4, log_interval=2,
        save_interval=2, eval_envs=0,
    )  # fmt: skip
    settings = {"actor_hidden_dim": 16, "critic_hidden_dim": 32, "num_atoms": 11}
    result = train(config, settings, quiet=True, log_dir=tmp_path / "run")
    learner = result.history[-1]["learner"]
    assert np.isfinite(learner["qf_loss"]) and learner["reward_scale"] > 0
    policy = load_policy(tmp_path / "run")
    # the reward statistics saw every env step: 4 iterations x 8 envs
    assert float(policy.state.rewards.count) == 32.0
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    assert policy(obs).shape == (5, 1)
    # TorchScript: the exported actor scripts (BatchNorm's mode is an argument) and is checked
    path = export_policy(policy, "torchscript", tmp_path / "policy.ts")
    assert path.exists() and path.stat().st_size > 0


def test_log_prob_keeps_its_digits_for_saturated_actions():
    from unilab_jax.algos.flash_sac import sample_tanh_gaussian

    mean = jnp.array([[0.3, 12.0, -20.0]])
    log_std, noise = jnp.full((1, 3), -1.0), jnp.array([[0.5, -1.0, 2.0]])
    action, log_prob = sample_tanh_gaussian(mean, log_std, noise)
    u = np.asarray(mean + np.exp(-1.0) * noise, np.float64)
    gaussian = -0.5 * (np.asarray(noise) ** 2 - 2.0 + np.log(2 * np.pi))
    exact = gaussian - np.log(1.0 / np.cosh(u) ** 2)  # log(1 - tanh^2) = -2 log cosh, float64
    assert float(log_prob[0]) == pytest.approx(float(exact.sum()), rel=1e-6)
    np.testing.assert_allclose(action, np.tanh(u), rtol=1e-6)
