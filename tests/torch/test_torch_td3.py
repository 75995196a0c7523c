"""Torch FastTD3 learner: contract, per-env exploration noise, CDQ targets, learning."""

import math

import numpy as np
import torch
from test_torch_sac import (
    ACT,
    CRITIC,
    OBS,
    check_correlated_noise,
    normal,
    optimizer_snapshot,
    randomize,
    toy_batch,
)

from unilab.algos.torch.fast_td3 import FastTD3Learner, TD3Actor
from unilab.algos.torch.fast_td3.learner import cdq_target
from unilab.algos.torch.registry import actor_kwargs_from_learner, learner_kwargs_from_config
from unilab_jax.algos.hyperparams import TD3Config

torch.set_num_threads(1)  # see test_torch_sac

KWARGS = dict(actor_hidden_dim=32, critic_hidden_dim=32, num_atoms=11, v_min=-5.0, v_max=5.0)
STD_MIN, STD_MAX = math.exp(-1.6), math.exp(-0.22)


# The core's defaults (`TD3Config`), which these tests hold the learner to; the facade's class
# defaults are the reference's.
CORE = learner_kwargs_from_config("td3", TD3Config())


def make_learner(seed=0, **overrides):
    torch.manual_seed(seed)
    return FastTD3Learner(OBS, ACT, CRITIC, device="cpu", **{**CORE, **KWARGS, **overrides})


def test_checkpoint_has_the_reference_keys_plus_the_critic_normalizer():
    state = make_learner(num_envs=8).get_state_dict()
    reference = {
        "actor",
        "actor_target",
        "qnet",
        "qnet_target",
        "obs_normalizer",
        "actor_optimizer",
        "q_optimizer",
        "update_count",
    }
    assert set(state) == reference | {"critic_normalizer"}
    assert set(state["actor"]) == {
        "net.0.weight",
        "net.0.bias",
        "net.2.weight",
        "net.2.bias",
        "net.4.weight",
        "net.4.bias",
        "fc_mu.0.weight",
        "fc_mu.0.bias",
    }  # no noise_scales: exploration state is not a weight
    assert {"qnet1.net.6.weight", "qnet2.net.0.bias", "q_support"} <= set(state["qnet"])


def test_noise_scales_are_resampled_only_for_done_envs():
    actor = TD3Actor(OBS, ACT, num_envs=64, hidden_dim=32)
    obs = normal(1, (64, OBS))
    assert actor.noise_scales.shape == (64, 1)
    for step in range(5):
        done = torch.as_tensor(np.random.default_rng(100 + step).uniform(size=64) < 0.3)
        old = actor.noise_scales.clone()
        actions = actor.explore(obs, done.float())
        new = actor.noise_scales
        assert torch.equal(new[~done], old[~done])
        assert torch.all(new[done] != old[done])
        assert torch.all((new >= STD_MIN) & (new <= STD_MAX))
        assert actions.shape == (64, ACT) and torch.all(actions.abs() <= 1.0)
    assert torch.equal(actor.explore(obs, deterministic=True), actor(obs))
    assert torch.equal(actor.explore(obs, True), actor(obs))  # positional bool: deterministic


def test_weight_sync_does_not_overwrite_the_collector_noise_scales():
    learner = make_learner(num_envs=16)
    collector = TD3Actor(OBS, ACT, num_envs=16, hidden_dim=32)
    collector.explore(normal(1, (16, OBS)), torch.ones(16))  # per-env scales of its own
    scales = collector.noise_scales.clone()
    collector.load_state_dict(learner.actor.state_dict())
    assert torch.equal(collector.noise_scales, scales)
    assert not torch.equal(learner.actor.noise_scales, scales)
    for name, p in learner.actor.state_dict().items():
        assert torch.equal(collector.state_dict()[name], p)
    # A reference checkpoint still carries the old buffers: they are ignored, not loaded.
    legacy = {**learner.actor.state_dict(), "noise_scales": torch.zeros(16, 1)}
    legacy |= {"log_std_min": torch.tensor(-1.6), "log_std_max": torch.tensor(-0.22)}
    collector.load_state_dict(legacy)
    assert torch.equal(collector.noise_scales, scales)


def test_correlated_noise_is_an_ar1_of_unit_variance_redrawn_on_done():
    torch.manual_seed(0)
    actor = TD3Actor(OBS, ACT, num_envs=256, hidden_dim=32, noise_correlation=0.9)
    obs = normal(1, (256, OBS))
    mu = actor(obs)

    def check_action(actions):
        want = torch.clamp(mu + actor.noise * actor.noise_scales, -1.0, 1.0)
        torch.testing.assert_close(actions, want)

    check_correlated_noise(actor, obs, 0.9, check_action)
    learner = make_learner(noise_correlation=0.9)  # the collector's copy gets the same rho
    assert actor_kwargs_from_learner(learner)["noise_correlation"] == 0.9
    assert TD3Actor(OBS, ACT, hidden_dim=32).noise is None  # white noise: no state


def test_noise_scales_follow_the_number_of_envs_explore_sees():
    actor = TD3Actor(OBS, ACT, num_envs=4, hidden_dim=32)
    actor.explore(normal(1, (10, OBS)))
    assert actor.noise_scales.shape == (10, 1)


def test_cdq_targets_both_nets_with_the_lower_distribution_and_ties_pick_net_2():
    projected = torch.stack([torch.eye(3)[[0, 1, 2]], torch.eye(3)[[2, 0, 1]]])  # [2, B=3, K=3]
    values = torch.tensor([[1.0, 5.0, 2.0], [3.0, 4.0, 2.0]])  # row 0: net 1 lower, row 2: tie
    target = cdq_target(projected, values)
    expected = torch.stack([projected[0, 0], projected[1, 1], projected[1, 2]])
    assert torch.equal(target[0], expected) and torch.equal(target[1], expected)


def test_target_smoothing_noise_is_clipped():
    learner = make_learner()
    for module in (learner.actor, learner.qnet, learner.qnet_target):
        randomize(module, 1, 0.3)
    batch = toy_batch(4, 8)
    sign = torch.where(torch.arange(8 * ACT).reshape(8, ACT) % 2 == 0, 1.0, -1.0)
    # noise_clip / policy_noise = 2.5: anything beyond that is clipped to +-0.5.
    at_clip, aux_clip = learner.compute_critic_loss(batch, 2.5 * sign)
    huge, aux_huge = learner.compute_critic_loss(batch, 100.0 * sign)
    small, _ = learner.compute_critic_loss(batch, sign)
    assert torch.equal(huge, at_clip)
    assert torch.equal(aux_huge["target_probs"], aux_clip["target_probs"])
    assert abs(float(small.detach()) - float(at_clip.detach())) > 1e-4


def test_terminated_rows_ignore_next_obs_and_truncated_rows_bootstrap():
    learner = make_learner()
    randomize(learner.actor, 1, 0.3)
    batch = toy_batch(3, 2, dones=[1.0, 1.0], truncated=[0.0, 1.0], rewards=[2.0, 0.0])
    moved = {**batch, "next_obs": batch["next_obs"] + 3.0, "next_critic": batch["next_critic"] - 2}
    noise = normal(5, (2, ACT))
    before = learner.compute_critic_loss(batch, noise)[1]["target_probs"]
    after = learner.compute_critic_loss(moved, noise)[1]["target_probs"]
    torch.testing.assert_close(before[:, 0], torch.eye(11)[7].expand(2, 11))  # point mass at 2
    torch.testing.assert_close(after[:, 0], before[:, 0])
    assert float((before[:, 1] - after[:, 1]).abs().max()) > 1e-3


def test_soft_update_moves_only_the_critic_target():
    learner = make_learner()
    batch = toy_batch(1)
    actor_target = {k: v.clone() for k, v in learner.actor_target.state_dict().items()}
    old_target = [p.clone() for p in learner.qnet_target.parameters()]
    learner.update_critic(batch)
    learner.update_actor(batch)
    learner.soft_update_target()
    for name, value in learner.actor_target.state_dict().items():
        assert torch.equal(value, actor_target[name])
    tau = learner.config.tau
    online = learner.qnet.parameters()
    for old, new, p in zip(old_target, learner.qnet_target.parameters(), online, strict=True):
        torch.testing.assert_close(new, old * (1 - tau) + p * tau, rtol=0, atol=0)


def test_non_finite_loss_leaves_params_and_optimizer_unchanged():
    learner = make_learner()
    batch = toy_batch(1)
    learner.update_actor(batch)
    params = [p.clone() for p in learner.actor.parameters()]
    moments = optimizer_snapshot(learner.actor_optimizer)
    metrics = learner.update_actor({**batch, "critic": torch.full((16, CRITIC), float("nan"))})
    assert math.isnan(metrics["actor_loss"])
    for old, new in zip(params, learner.actor.parameters(), strict=True):
        assert torch.equal(old, new)
    for key, state in optimizer_snapshot(learner.actor_optimizer).items():
        assert all(torch.equal(state[k], moments[key][k]) for k in state)


def test_updates_on_a_fixed_batch_drive_qf_loss_down():
    rewards = np.round(np.random.default_rng(7).uniform(-3, 3, size=32))
    batch = toy_batch(1, 32, rewards=rewards, dones=np.arange(32) % 2)
    learner = make_learner(critic_lr=1e-3, actor_lr=1e-3)
    losses = []
    for step in range(300):
        losses.append(learner.update_critic(batch)["qf_loss"])
        if step % 2 == 0:
            learner.update_actor(batch)
        learner.soft_update_target()
    assert np.mean(losses[-10:]) < 0.6 * losses[0]
    assert np.mean(losses[-10:]) < np.mean(losses[140:150])


def test_save_and_load_give_the_same_actions_and_the_same_next_update(tmp_path):
    learner = make_learner()
    batch = toy_batch(1)
    learner.update_normalizers(batch["obs"], batch["critic"])
    for _ in range(3):
        learner.update_critic(batch)
        learner.update_actor(batch)
        learner.soft_update_target()
    torch.save(learner.get_state_dict(), tmp_path / "model_3.pt")
    restored = make_learner(seed=1)
    restored.load_state_dict(torch.load(tmp_path / "model_3.pt", weights_only=True))
    obs = learner.obs_normalizer(normal(2, (8, OBS)))
    assert torch.equal(learner.actor(obs), restored.actor(obs))
    noise = normal(3, (16, ACT))
    assert learner.update_critic(batch, noise) == restored.update_critic(batch, noise)
    assert learner.update_actor(batch) == restored.update_actor(batch)
