"""Torch FlashSAC (`unilab.algos.torch.flash_sac`) against the JAX core: a complete, bit-exact
conversion table, equal network outputs, single critic / actor updates that match, the reward
statistics by hand, the registry row and a short facade run."""

import copy
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from test_convert import (
    assert_torch_states_equal,
    max_rel_err,
    poisoned,
    to_transition,
    torch_state,
    trees_equal,
)
from test_torch_sac import normal, toy_batch

from unilab.algos.torch.convert import (
    flash_sac_mapping,
    jax_flash_sac_to_torch,
    torch_flash_sac_to_jax,
)
from unilab.algos.torch.flash_sac import FlashSACLearner
from unilab.algos.torch.offpolicy.settings import actor_layout_mismatch
from unilab.algos.torch.registry import actor_kwargs_from_learner, build_actor
from unilab_jax.algos.flash_sac import (
    make_flash_sac,
    make_flash_sac_networks,
    reward_scale,
    update_reward_stats,
)
from unilab_jax.algos.gradients import row_normal
from unilab_jax.algos.reward_scaling import init_reward_stats

torch.set_num_threads(1)  # tiny networks: see test_torch_sac

OBS, CRITIC, ACT, ENVS = 5, 6, 3, 4  # toy_batch's sizes; 4 envs of reward statistics
# Tiny sizes (the reference's argument names); a 4-step cosine decay from 1e-3 to 5e-4, so the
# parity steps run at a decayed learning rate; the temperature's own rate (ours).
KWARGS = dict(
    actor_hidden_dim=16, critic_hidden_dim=32, actor_num_blocks=1, critic_num_blocks=1,
    num_atoms=11, learning_rate_peak=1e-3, learning_rate_end=5e-4, learning_rate_decay_steps=4,
    alpha_lr=1e-2, num_envs=ENVS,
)  # fmt: skip
# Bounds of one update, torch vs XLA (float32), relative to each leaf's largest value: the
# metrics, the new parameters / moments / temperature, the new BatchNorm statistics (a running
# mean is a small difference of activations, so it keeps fewer digits), the step's change.
METRIC_RTOL, VALUE_RTOL, STATS_RTOL, STEP_RTOL = 1e-5, 1e-5, 1e-4, 1e-3


def make_learner(seed=0, **overrides):
    torch.manual_seed(seed)
    return FlashSACLearner(OBS, ACT, CRITIC, "cpu", **{**KWARGS, **overrides})


@functools.cache
def agent(config):
    return make_flash_sac(config, OBS, CRITIC, ACT, num_envs=ENVS)


@functools.cache
def jitted(config, name):
    """One compiled function per agent function, shared by every test of this file."""
    return jax.jit(getattr(agent(config), name))


def observe(learner, seed):
    """Three env steps of rewards (some episodes ending) into the reward statistics."""
    rng = np.random.default_rng(seed)
    rewards = torch.as_tensor(rng.normal(2.0, 3.0, (3, ENVS)), dtype=torch.float32)
    dones = torch.as_tensor(rng.random((3, ENVS)) < 0.3)
    learner.observe_rewards(rewards, dones)


@functools.cache
def _trained(seed, steps):
    learner = make_learner(seed)
    batch = toy_batch(1, dones=np.arange(16) % 3 == 0, truncated=np.arange(16) % 6 == 0)
    for _ in range(steps):
        observe(learner, seed + 10)
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    return learner.get_state_dict(), batch


def trained(seed=0, steps=2):
    """A learner after `steps` updates (moments, counts, statistics all moved), and its batch."""
    state, batch = _trained(seed, steps)
    learner = make_learner(seed + 100)
    # A copy: torch's optimiser `load_state_dict` keeps the given moment and step tensors,
    # which the next step then changes in place.
    learner.load_state_dict(copy.deepcopy(state))
    return learner, batch


def noise_of(key):
    """The JAX update's per-row standard normal draw of a 16-row batch, as a torch tensor."""
    return torch.from_numpy(np.array(row_normal(key, 16, ACT)))


# --- the table ---------------------------------------------------------------------------------


def test_the_table_covers_every_jax_leaf_and_every_torch_tensor():
    learner, _ = trained()
    state = torch_flash_sac_to_jax(learner)
    filled = torch_flash_sac_to_jax(learner, poisoned(state))  # every leaf written
    assert trees_equal(filled, state)
    for opt_state in (state.actor_opt_state, state.critic_opt_state, state.alpha_opt_state):
        assert [int(s.count) for s in opt_state] == [2, 2]  # Adam's and the schedule's
    assert float(state.rewards.count) == 2 * 3 * ENVS

    rows = flash_sac_mapping(learner)
    named = {row.torch_name for row in rows}
    for module in ("actor", "qnet", "qnet_target", "reward_stats"):
        for name in getattr(learner, module).state_dict():
            # num_batches_tracked: never counted (convert's docstring); the actor's `updates`:
            # the actor optimiser's step, which the learner copies after every load.
            if not name.endswith(("num_batches_tracked", "updates")):
                assert f"{module}.{name}" in named, name
    assert "qnet_target.qnets.0.trunk.bn_in.running_mean" not in named  # none on either side
    assert len({row.jax_path for row in rows}) == len(rows)

    target = make_learner(seed=5)
    with torch.no_grad():
        for module in (target.actor, target.qnet, target.qnet_target, target.reward_stats):
            for tensor in [*module.parameters(), *module.buffers()]:
                if tensor.is_floating_point():
                    tensor.fill_(float("nan"))
        target.log_alpha.fill_(float("nan"))
    jax_flash_sac_to_torch(state, target)
    for name, value in torch_state(target).items():
        if isinstance(value, torch.Tensor):
            assert torch.all(torch.isfinite(value)), name
    assert int(target.actor.updates) == 2  # the JAX actor's Adam count


def test_round_trips_are_bit_exact():
    learner, _ = trained()
    state = torch_flash_sac_to_jax(learner)
    other = make_learner(seed=7)
    jax_flash_sac_to_torch(state, other)
    assert_torch_states_equal(torch_state(other), torch_state(learner))  # torch -> jax -> torch
    again = torch_flash_sac_to_jax(other, poisoned(state))
    assert trees_equal(again, state)  # jax -> torch -> jax


def test_another_env_count_restarts_the_carried_returns_only():
    learner, _ = trained()
    state = torch_flash_sac_to_jax(learner)  # ENVS envs
    narrow = make_learner(num_envs=2)
    jax_flash_sac_to_torch(state, narrow)
    assert torch.equal(narrow.reward_stats.carried, learner.reward_stats.carried)  # takes ENVS
    narrow.reward_stats.resize(2)
    assert narrow.reward_stats.carried.tolist() == [0.0, 0.0]
    state = torch_flash_sac_to_jax(narrow, state)
    assert np.all(np.asarray(state.rewards.carried) == 0.0) and state.rewards.carried.shape == (4,)
    assert float(state.rewards.var) == float(learner.reward_stats.var)


# --- the converted networks compute the same functions ------------------------------------------


@functools.cache
def forward(config):
    """Jitted: the JAX actor's `(mean, log_std)` and the critic's logits on the running
    statistics and on the batch's, and the statistics the batch moves."""
    networks = make_flash_sac_networks(config, ACT)

    def run(state, obs, critic, actions):
        actor_vars = {**state.actor_params, **state.actor_stats}
        critic_vars = {**state.critic_params, **state.critic_stats}
        outputs, stats = [], {}
        for train in (False, True):
            (mean, log_std), stats["actor"] = networks.actor.apply(
                actor_vars, obs, train, mutable=["batch_stats"]
            )
            logits, stats["critic"] = networks.critic.apply(
                critic_vars, critic, actions, train, mutable=["batch_stats"]
            )
            outputs.append((mean, log_std, logits))
        return outputs, stats

    return jax.jit(run)


def test_converted_networks_give_the_same_outputs_in_both_modes():
    learner, _ = trained()
    state = torch_flash_sac_to_jax(learner)
    obs, critic = normal(1, (12, OBS)) * 2.0 + 1.0, normal(2, (12, CRITIC))
    actions = torch.tanh(normal(3, (12, ACT)))
    j = lambda t: jnp.asarray(t.numpy())  # noqa: E731
    act = jitted(learner.config, "act")(state, j(obs))
    assert max_rel_err(learner.actor.deterministic(obs).detach().numpy(), act) <= 1e-5
    outputs, stats = forward(learner.config)(state, j(obs), j(critic), j(actions))
    for train, want in zip((False, True), outputs, strict=True):  # running stats, the batch's
        with torch.no_grad():
            mean, log_std = learner.actor.mean_and_log_std(obs, train)
            logits = learner.qnet(critic, actions, train)  # [E, B, K], both members
        got = (mean.numpy(), log_std.numpy(), logits.numpy())
        assert max_rel_err(got, want) <= 1e-5
    # Training mode moved the running statistics alike (measured: 1.5e-5 of a leaf's largest
    # value; a running mean is a small difference of activations, so it keeps fewer digits).
    moved = torch_flash_sac_to_jax(learner, state)
    assert max_rel_err(moved.actor_stats, stats["actor"]) <= 1e-4
    assert max_rel_err(moved.critic_stats, stats["critic"]) <= 1e-4
    assert not trees_equal(moved.critic_stats, state.critic_stats)


# --- update parity: one step from identical state, batch and noise ------------------------------


#: The reference's metric names the torch learner adds -> ours of the same value (`temperature`,
#: the alpha before the step, and `reward_scale_std`, sqrt(var G), are checked by value apart).
REFERENCE_METRICS = {
    "critic_loss": "qf_loss", "actor_entropy": "policy_entropy",
    "temperature_loss": "alpha_loss", "temperature": "temperature",
    "reward_scale_std": "reward_scale_std",
}  # fmt: skip


def update_errors(jax_metrics, torch_metrics, before, jax_after, torch_after, fields):
    """Relative errors, torch vs JAX, of one update: the largest over the metrics, and per
    field of the new state (`max_rel_err`) and of the step's change (the sharper test: Adam
    divides tiny gradient differences by tiny norms). The torch learner also reports the
    reference's names of three of them (`REFERENCE_METRICS`), with the same values."""
    assert set(jax_metrics) | set(REFERENCE_METRICS) >= set(torch_metrics) >= set(jax_metrics)
    for reference, ours in REFERENCE_METRICS.items():
        if reference in torch_metrics:
            assert torch_metrics[reference] == torch_metrics[ours], reference
    metrics = max(
        abs(float(jax_metrics[k]) - torch_metrics[k]) / max(abs(torch_metrics[k]), 1e-12)
        for k in jax_metrics
    )
    as64 = lambda tree: jax.tree.map(lambda x: np.asarray(x, np.float64), tree)  # noqa: E731
    values, steps = {}, {}
    for field in fields:
        old, got, want = (as64(getattr(s, field)) for s in (before, torch_after, jax_after))
        values[field] = max_rel_err(got, want)
        steps[field] = max_rel_err(
            jax.tree.map(np.subtract, got, old), jax.tree.map(np.subtract, want, old)
        )
    print(f"metrics {metrics:.1e}  new state {values}  step {steps}")
    return metrics, values, steps


@pytest.mark.parity
def test_critic_update_and_target_update_match_jax():
    learner, batch = trained()
    state = torch_flash_sac_to_jax(learner)
    key = jax.random.key(3)
    new_state, metrics = jitted(learner.config, "update_critic")(state, to_transition(batch), key)
    torch_metrics = learner.update_critic(batch, noise_of(key))
    after = torch_flash_sac_to_jax(learner, state)
    fields = ("critic_params", "critic_stats", "critic_opt_state")
    metric_err, values, steps = update_errors(
        metrics, torch_metrics, state, new_state, after, fields
    )
    assert float(metrics["reward_scale"]) != 1.0  # the rewards really were scaled
    assert metric_err <= METRIC_RTOL
    std = float(np.sqrt(np.float32(state.rewards.var)))  # the reference's reward_scale_std
    assert torch_metrics["reward_scale_std"] == pytest.approx(std, rel=1e-6)
    assert values["critic_params"] <= VALUE_RTOL and values["critic_opt_state"] <= VALUE_RTOL
    assert values["critic_stats"] <= STATS_RTOL
    assert steps["critic_params"] <= STEP_RTOL and steps["critic_opt_state"] <= STEP_RTOL
    # The target: Polyak averaging of the parameters, the same on both sides.
    learner.soft_update_target()
    want = agent(learner.config).update_target(after).target_critic_params
    got = torch_flash_sac_to_jax(learner, state).target_critic_params
    assert max_rel_err(got, want) <= 1e-6


@pytest.mark.parity
def test_actor_and_temperature_update_match_jax():
    learner, batch = trained()
    state = torch_flash_sac_to_jax(learner)
    key = jax.random.key(4)
    new_state, metrics = jitted(learner.config, "update_actor")(state, to_transition(batch), key)
    torch_metrics = learner.update_actor(batch, noise_of(key))
    after = torch_flash_sac_to_jax(learner, state)
    fields = ("actor_params", "actor_stats", "actor_opt_state", "log_alpha", "alpha_opt_state")
    metric_err, values, steps = update_errors(
        metrics, torch_metrics, state, new_state, after, fields
    )
    assert metric_err <= METRIC_RTOL
    # The reference's `temperature`: alpha before the temperature step (ours, `alpha`: after).
    assert torch_metrics["temperature"] == pytest.approx(float(np.exp(state.log_alpha)), rel=1e-6)
    assert torch_metrics["temperature"] != torch_metrics["alpha"]
    assert values.pop("actor_stats") <= STATS_RTOL
    assert max(values.values()) <= VALUE_RTOL and max(steps.values()) <= STEP_RTOL


def test_a_non_finite_step_is_skipped_and_restores_the_batch_norm_statistics():
    learner, batch = trained()
    before = {k: v.clone() for k, v in learner.qnet.state_dict().items()}
    bad = {**batch, "rewards": batch["rewards"].clone().fill_(float("nan"))}
    metrics = learner.update_critic(bad)
    assert not np.isfinite(metrics["qf_loss"])
    for name, value in learner.qnet.state_dict().items():
        if "running" in name:  # the forward pass moved them; the skipped step puts them back
            assert torch.equal(value, before[name]), name
        else:  # only re-projected (already on the bounds): unchanged up to rounding
            torch.testing.assert_close(value, before[name], rtol=1e-6, atol=1e-7)
    assert int(learner.q_optimizer.state[learner.qnet.qnets[0].logits.bias]["step"]) == 2


# --- reward statistics -------------------------------------------------------------------------


def test_reward_statistics_follow_each_envs_discounted_return_as_in_jax():
    rewards = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 4.0]], np.float32)
    dones = np.array([[0, 1], [0, 0], [1, 0]], bool)
    learner = make_learner(num_envs=2, gamma=0.5, g_max=5.0)
    learner.observe_rewards(torch.from_numpy(rewards), torch.from_numpy(dones))
    # By hand: G = r + carried, carried = 0.5 * (1 - done) * G, per env and step:
    # env 0: 1, 3.5, 1.75 (ends: carries 0); env 1: 2 (ends), -1, 3.5 (carries 1.75).
    returns = np.array([1.0, 2.0, 3.5, -1.0, 1.75, 3.5])
    stats = learner.reward_stats
    np.testing.assert_allclose(stats.carried.numpy(), [0.0, 1.75])
    np.testing.assert_allclose(float(stats.mean), returns.mean(), rtol=1e-6)
    np.testing.assert_allclose(float(stats.var), returns.var(), rtol=1e-6)
    assert float(stats.count) == 6.0 and float(stats.abs_max) == 3.5
    np.testing.assert_allclose(float(learner.reward_scale()), np.sqrt(returns.var()), rtol=1e-6)
    want = update_reward_stats(init_reward_stats(2), rewards, dones, 0.5)
    for name in ("carried", "mean", "var", "count", "abs_max"):
        np.testing.assert_array_equal(getattr(stats, name).numpy(), getattr(want, name), name)
    assert float(learner.reward_scale()) == float(reward_scale(want, 5.0))


# --- the facade: registry row, checkpoint, a short run ------------------------------------------


def test_the_registry_builds_the_collectors_actor_and_checkpoints_restore():
    learner, _ = trained()
    kwargs = actor_kwargs_from_learner(learner)
    assert kwargs["num_blocks"] == 1 and kwargs["noise_repeat_max"] == 16
    actor = build_actor("flash_sac", OBS, ACT, 16, True, "cpu", 8, **kwargs)
    assert actor_layout_mismatch(learner.actor, actor) is None
    obs = normal(4, (4096, OBS))
    # The collector's copy before the learner's first actor step: uniform random actions over
    # [-1, 1] (the JAX core's warm-up), not the policy's tanh-Gaussian.
    assert int(actor.updates) == 0
    warm = actor.explore(obs, torch.zeros(4096))
    assert torch.all(warm.abs() <= 1.0)
    assert abs(float(warm.mean())) < 0.03 and abs(float(warm.var()) - 1 / 3) < 0.02
    # With the weights it receives the learner's step count, and explores with the policy.
    actor.load_state_dict(learner.actor.state_dict())
    assert int(actor.updates) == 2
    assert torch.equal(actor.deterministic(obs), learner.actor.deterministic(obs))
    with torch.no_grad():
        mean, log_std = actor.mean_and_log_std(obs)
    noise = torch.atanh(actor.explore(obs, torch.zeros(4096)).clamp(-1 + 1e-6, 1 - 1e-6))
    noise = (noise - mean) / torch.exp(log_std)
    assert abs(float(noise.std()) - 1.0) < 0.1  # a standard normal draw behind each action
    restored = make_learner(seed=3, num_envs=1)  # takes the checkpoint's env count
    restored.load_state_dict(learner.get_state_dict())
    assert_torch_states_equal(torch_state(restored), torch_state(learner))
    # A checkpoint written before the actor had `updates` loads, and takes the optimiser's.
    old = learner.get_state_dict()
    old["actor"] = {k: v for k, v in old["actor"].items() if k != "updates"}
    restored = make_learner(seed=4, num_envs=1)
    restored.load_state_dict(old)
    assert int(restored.actor.updates) == 2


def test_a_short_facade_run_trains_feeds_the_reward_statistics_and_loads_as_a_policy(tmp_path):
    """`OffPolicyRunner(..., algo_type="flash_sac")` on C MuJoCo (a real collector process):
    the collected rewards reach the learner, and its `model_<it>.pt` reads as the core's
    policy (the JAX actor computing what the torch actor does)."""
    from unilab.algos.torch.offpolicy import OffPolicyRunner
    from unilab_jax.policy import load_policy

    torch.manual_seed(0)
    learner = FlashSACLearner(3, 1, 3, actor_hidden_dim=16, critic_hidden_dim=16, num_blocks=1,
                              num_atoms=11)  # fmt: skip
    before = learner.actor.fc_mu.weight.detach().clone()
    runner = OffPolicyRunner(
        learner, "PendulumSwingup", "flash_sac", num_envs=8, replay_buffer_n=32, batch_size=16,
        updates_per_step=2, policy_frequency=2, actor_hidden_dim=16, seed=0,
    )  # fmt: skip
    runner.learn(max_iterations=2, save_interval=0, log_dir=str(tmp_path), logger_type="no_print")
    summary = runner.last_run_summary
    assert summary["status"] == "completed" and summary["completed_iterations"] == 2
    assert learner.update_count == 2 * 2
    assert not torch.equal(learner.actor.fc_mu.weight, before)
    # Every step the learner read (one chunk of 8 envs per iteration at least) was observed.
    stats = learner.reward_stats
    assert stats.num_envs == 8 and 2 * 8 <= float(stats.count) <= summary["total_env_steps"]
    assert float(stats.count) % 8 == 0 and float(stats.abs_max) > 0.0
    policy = load_policy(tmp_path)
    obs = normal(5, (4, 3))
    want = learner.actor.deterministic(obs).detach().numpy()
    np.testing.assert_allclose(policy(obs.numpy()), want, rtol=0, atol=1e-5)
