"""Torch FastSAC learner: reference contract, hand-worked maths, bootstrap rule, learning."""

import math

import numpy as np
import pytest
import torch

from unilab.algos.torch.common.networks import categorical_projection
from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.fast_sac import FastSACLearner
from unilab.algos.torch.fast_sac.learner import SACActor, sample_tanh_gaussian
from unilab.algos.torch.registry import actor_kwargs_from_learner, learner_kwargs_from_config
from unilab_jax.algos.hyperparams import SACConfig

# Tiny networks: one intra-op thread is fastest, and immune to spin-wait stalls on shared cores.
torch.set_num_threads(1)

OBS, CRITIC, ACT = 5, 6, 3
# Tiny widths; learning rates raised so that a few hundred steps show learning.
KWARGS = dict(
    actor_hidden_dim=32,
    critic_hidden_dim=32,
    num_atoms=11,
    v_min=-5.0,
    v_max=5.0,
    actor_lr=1e-3,
    critic_lr=1e-3,
)


# The core's defaults (`SACConfig`), which these tests hold the learner to; the facade's class
# defaults are the reference's (no observation normaliser).
CORE = learner_kwargs_from_config("sac", SACConfig())


def make_learner(seed=0, **overrides):
    torch.manual_seed(seed)
    return FastSACLearner(OBS, ACT, CRITIC, "cpu", **{**CORE, **KWARGS, **overrides})


def toy_batch(seed, batch_size=16, **overrides):
    """A reference-format batch from numpy; `overrides` replace fields (lists are fine)."""
    rng = np.random.default_rng(seed)
    fields = dict(
        obs=rng.normal(size=(batch_size, OBS)),
        next_obs=rng.normal(size=(batch_size, OBS)),
        critic=rng.normal(size=(batch_size, CRITIC)),
        next_critic=rng.normal(size=(batch_size, CRITIC)),
        actions=rng.uniform(-1.0, 1.0, size=(batch_size, ACT)),
        rewards=rng.normal(size=batch_size),
        dones=np.zeros(batch_size),
        truncated=np.zeros(batch_size),
    )
    fields.update(overrides)
    return {k: torch.as_tensor(np.asarray(v), dtype=torch.float32) for k, v in fields.items()}


def normal(seed, shape):
    return torch.as_tensor(np.random.default_rng(seed).normal(size=shape), dtype=torch.float32)


def check_correlated_noise(actor, obs, rho, check_action, steps=200):
    """200 exploration steps of a torch actor (``noise_correlation=rho``) with no episode
    ending: its ``actor.noise`` has unit variance and lag-one correlation rho and each action is
    the one that noise makes (``check_action(actions)``); then 200 steps with every episode
    ending: fresh, uncorrelated draws."""
    for dones, want in ((torch.zeros(obs.shape[0]), rho), (torch.ones(obs.shape[0]), 0.0)):
        noises = []
        for _ in range(steps):
            check_action(actor.explore(obs, dones))
            noises.append(actor.noise.numpy().copy())
        x = np.asarray(noises, np.float64)
        var, corr = np.var(x), np.mean(x[1:] * x[:-1]) / np.var(x)
        assert abs(var - 1.0) < 0.05 and abs(corr - want) < 0.02, (want, var, corr)


def test_a_core_config_with_a_learning_rate_schedule_is_refused_by_the_torch_learner():
    """The reference's learner has constant rates, and so has ours: a core config that decays
    them cannot be reproduced, and says where it runs instead."""
    assert "lr_decay_steps" not in CORE  # constant rates: the fields are simply not arguments
    with pytest.raises(ValueError, match=r"lr_decay_steps=8 runs on the JAX core only"):
        learner_kwargs_from_config("sac", SACConfig(lr_decay_steps=8, lr_final_ratio=0.5))


def test_correlated_noise_is_an_ar1_of_unit_variance_redrawn_on_done():
    torch.manual_seed(0)
    actor = SACActor(OBS, ACT, hidden_dim=32, noise_correlation=0.9)
    obs = normal(1, (256, OBS))
    randomize(actor, 1, 0.3)  # a mean and log-std that vary with the observation
    with torch.no_grad():
        mean, log_std = actor.mean_and_log_std(obs)

    def check_action(actions):
        want = torch.tanh(mean + torch.exp(log_std) * actor.noise)
        torch.testing.assert_close(actions, want, atol=1e-5, rtol=1e-5)

    check_correlated_noise(actor, obs, 0.9, check_action)
    learner = FastSACLearner(OBS, ACT, CRITIC, "cpu", actor_hidden_dim=32, noise_correlation=0.9)
    assert actor_kwargs_from_learner(learner)["noise_correlation"] == 0.9  # the collector's copy


@torch.no_grad()
def randomize(module, seed, scale=0.5):
    """Every parameter ~ N(0, scale) (undoes the zero-initialised heads)."""
    generator = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.copy_(scale * torch.randn(p.shape, generator=generator))


def test_checkpoint_has_the_reference_keys_plus_both_normalizers():
    state = make_learner().get_state_dict()
    reference = {
        "actor",
        "qnet",
        "qnet_target",
        "log_alpha",
        "actor_optimizer",
        "q_optimizer",
        "alpha_optimizer",
        "update_count",
    }
    assert set(state) == reference | {"obs_normalizer", "critic_normalizer"}
    assert set(state["obs_normalizer"]) == {"_mean", "_var", "_std", "count"}
    assert {"net.0.weight", "net.1.weight", "fc_mu.weight", "fc_logstd.bias"} <= set(state["actor"])
    assert {"action_scale", "action_bias"} <= set(state["actor"])
    assert "qnets.1.net.9.weight" in state["qnet"]


def test_zero_init_heads_give_mean_zero_and_midpoint_log_std():
    learner = make_learner()
    obs = normal(1, (4, OBS))
    action, mean, log_std = learner.actor(obs)
    assert torch.all(action == 0.0) and torch.all(mean == 0.0)
    torch.testing.assert_close(log_std, torch.full((4, ACT), -2.5))  # midpoint of [-5, 0]
    assert torch.all(learner.actor.explore(obs, deterministic=True) == 0.0)
    assert torch.all(learner.actor.explore(obs, True) == 0.0)  # positional bool: deterministic


def test_log_prob_matches_hand_computed_values():
    mean = np.array([[0.3, -1.2]])
    log_std = np.array([[-0.5, -2.0]])
    noise = np.array([[0.7, -1.5]])
    u = mean + np.exp(log_std) * noise
    gaussian = -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)
    expected = np.sum(gaussian - np.log(1 - np.tanh(u) ** 2 + 1e-6) - math.log(1 + 1e-6))
    f32 = lambda x: torch.as_tensor(x, dtype=torch.float32)  # noqa: E731
    action, log_prob = sample_tanh_gaussian(
        f32(mean), f32(log_std), f32(noise), torch.ones(2), torch.zeros(2)
    )
    np.testing.assert_allclose(action.numpy(), np.tanh(u), rtol=1e-6)
    np.testing.assert_allclose(log_prob.numpy(), [expected], rtol=1e-5)


def test_projection_matches_a_hand_worked_example():
    # Support [-2, -1, 0, 1, 2]. Row 0: tz = 0.5 z, positions [1, 1.5, 2, 2.5, 3]: on-point
    # atoms keep their mass, half-way atoms split it. Row 1 (terminal, r = 1): the point mass
    # lands on atom 3 through the l == u rule (l moves down, all mass to u). Row 2 (terminal,
    # r = -2): l == u == 0, so u moves up and all mass stays on atom 0. Row 3: r = 7 clips to 2.
    support = torch.linspace(-2.0, 2.0, 5)
    probs = torch.full((4, 5), 0.2)
    out = categorical_projection(
        probs,
        rewards=torch.tensor([0.0, 1.0, -2.0, 7.0]),
        bootstrap=torch.tensor([1.0, 0.0, 0.0, 0.0]),
        gamma=0.5,
        v_min=-2.0,
        v_max=2.0,
        support=support,
    )
    expected = [[0, 0.3, 0.4, 0.3, 0], [0, 0, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]]
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float32))


def test_normalizer_matches_numpy_and_first_update_replaces_the_prior():
    norm = EmpiricalNormalization(3)
    x = torch.tensor([[1.0, 2.0, 3.0], [3.0, 6.0, 3.0]])
    torch.testing.assert_close(norm(x), x / 1.01)  # prior: mean 0, std 1, eps 1e-2
    norm.update(x)
    torch.testing.assert_close(norm.mean, torch.tensor([2.0, 4.0, 3.0]))
    torch.testing.assert_close(norm._var[0], torch.tensor([1.0, 4.0, 0.0]))
    rng = np.random.default_rng(0)
    seen = [x.numpy()]
    for size in (7, 64, 1, 33):
        batch = rng.normal([5.0, -2.0, 0.0], [3.0, 0.5, 10.0], size=(size, 3)).astype(np.float32)
        seen.append(batch)
        norm.update(torch.from_numpy(batch))
    data = np.concatenate(seen).astype(np.float64)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.std.numpy(), data.std(0), rtol=1e-5)
    assert float(norm.count) == len(data)
    expected = (data[:2] - data.mean(0)) / (data.std(0) + 1e-2)
    np.testing.assert_allclose(norm(torch.from_numpy(seen[0])).numpy(), expected, rtol=1e-5)


def test_statistics_change_only_through_update_normalizers():
    learner = make_learner()
    batch = toy_batch(1)
    learner.update_critic(batch)
    learner.update_actor(batch)
    assert float(learner.obs_normalizer.count) == 0.0
    learner.update_normalizers(batch["obs"] + 3.0, batch["critic"])
    assert float(learner.obs_normalizer.count) == float(learner.critic_normalizer.count) == 16
    torch.testing.assert_close(learner.obs_normalizer.mean, batch["obs"].mean(0) + 3.0)
    # Without obs_normalization the normalisers are identities and the call is a no-op.
    plain = make_learner(obs_normalization=False)
    plain.update_normalizers(batch["obs"], batch["critic"])
    assert plain.get_state_dict()["obs_normalizer"] == {}


def critic_targets(learner, batch):
    noise = normal(5, batch["actions"].shape)
    return learner.compute_critic_loss(batch, noise)[1]["target_probs"]


def test_terminated_row_target_is_a_point_mass_at_the_reward():
    learner = make_learner(alpha_init=0.5)
    randomize(learner.actor, 1)
    batch = toy_batch(3, 2, dones=[1.0, 1.0], rewards=[2.0, -0.5])
    targets = critic_targets(learner, batch)  # [E, B, K] on -5..5, step 1
    for member in range(2):
        torch.testing.assert_close(targets[member, 0], torch.eye(11)[7])
        torch.testing.assert_close(targets[member, 1], 0.5 * (torch.eye(11)[4] + torch.eye(11)[5]))


def test_truncated_row_bootstraps_from_next_obs_and_terminated_row_does_not():
    learner = make_learner()
    randomize(learner.actor, 1)
    batch = toy_batch(3, 2, dones=[1.0, 1.0], truncated=[0.0, 1.0])
    moved = {**batch, "next_obs": batch["next_obs"] + 3.0, "next_critic": batch["next_critic"] - 2}
    before, after = critic_targets(learner, batch), critic_targets(learner, moved)
    torch.testing.assert_close(before[:, 0], after[:, 0])
    assert float((before[:, 1] - after[:, 1]).abs().max()) > 1e-3


def test_entropy_is_folded_into_the_reward():
    # gamma 0.5 keeps r' + gamma z inside [-5, 5], where the projection preserves the mean:
    # E[target] shifts by -gamma * alpha * logpi' between alpha ~ 0 and alpha = 0.1.
    cold, warm = make_learner(gamma=0.5, alpha_init=1e-6), make_learner(gamma=0.5, alpha_init=0.1)
    for learner in (cold, warm):
        randomize(learner.actor, 1)
    batch = toy_batch(3, 4, rewards=[0.1, -0.2, 0.0, 0.3])
    noise = normal(5, (4, ACT))
    _, aux = warm.compute_critic_loss(batch, noise)
    z = torch.linspace(-5.0, 5.0, 11)
    shift = (aux["target_probs"] - critic_targets(cold, batch)) @ z  # [E, B]
    expected = -0.5 * (0.1 - 1e-6) * aux["next_log_prob"]
    torch.testing.assert_close(shift, expected.expand_as(shift), atol=1e-4, rtol=0)


def optimizer_snapshot(optimizer):
    return {id(p): {k: v.clone() for k, v in s.items()} for p, s in optimizer.state.items()}


def test_non_finite_loss_leaves_params_and_optimizer_unchanged():
    learner = make_learner()
    batch = toy_batch(1)
    learner.update_critic(batch)  # gives the optimiser a state to protect
    params = [p.clone() for p in learner.qnet.parameters()]
    moments = optimizer_snapshot(learner.q_optimizer)
    metrics = learner.update_critic({**batch, "rewards": torch.full((16,), float("nan"))})
    assert math.isnan(metrics["qf_loss"])
    for old, new in zip(params, learner.qnet.parameters(), strict=True):
        assert torch.equal(old, new)
    for key, state in optimizer_snapshot(learner.q_optimizer).items():
        assert all(torch.equal(state[k], moments[key][k]) for k in state)


@pytest.mark.parametrize(("log_std_bias", "grows"), [(0.0, True), (20.0, False)])
def test_alpha_grows_when_entropy_is_below_target(log_std_bias, grows):
    # Target entropy 0. The initial policy (std e^-2.5, 3 dims) has entropy ~ -3.3, below it;
    # with the log-std head saturated (log_std 0) the entropy is ~ +1.7, above it.
    learner = make_learner()
    with torch.no_grad():
        learner.actor.fc_logstd.bias.fill_(log_std_bias)
    before = float(learner.log_alpha.detach())
    metrics = learner.update_critic(toy_batch(1))
    assert (float(learner.log_alpha.detach()) > before) == grows
    assert metrics["alpha"] == pytest.approx(math.exp(float(learner.log_alpha.detach())), rel=1e-6)


def test_alpha_is_fixed_without_autotune():
    learner = make_learner(use_autotune=False)
    before = learner.log_alpha.clone()
    metrics = learner.update_critic(toy_batch(1))
    assert torch.equal(learner.log_alpha, before) and metrics["alpha_loss"] == 0.0


def test_updates_on_a_fixed_batch_drive_qf_loss_down():
    rewards = np.round(np.random.default_rng(7).uniform(-3, 3, size=16))
    batch = toy_batch(1, rewards=rewards, dones=np.arange(16) % 2)
    learner = make_learner()
    losses = []
    for _ in range(300):
        losses.append(learner.update_critic(batch)["qf_loss"])
        learner.update_actor(batch)
        learner.soft_update_target()
    assert learner.update_count == 300
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
    assert restored.update_count == 3
    obs = learner.obs_normalizer(normal(2, (8, OBS)))
    assert torch.equal(learner.actor.explore(obs, True), restored.actor.explore(obs, True))
    torch.manual_seed(4)
    want = learner.actor.explore(obs)
    torch.manual_seed(4)
    assert torch.equal(want, restored.actor.explore(obs))
    # Optimiser moments, temperature and normalisers came back too: the next update agrees.
    noise = normal(3, (16, ACT))
    assert learner.update_critic(batch, noise) == restored.update_critic(batch, noise)
    assert learner.update_actor(batch, noise) == restored.update_actor(batch, noise)


@pytest.mark.parametrize(
    "learner, kwargs, message",
    [
        ("sac", {"v_min": 10.0, "v_max": 10.0}, "v_min is 10.0; it must be below v_max"),
        ("sac", {"gamma": 1.5}, r"gamma is 1.5; it must be in \(0, 1\]"),
        ("td3", {"num_atoms": 1}, "num_atoms is 1; it must be an integer >= 2"),
        ("td3", {"tau": 0.0}, r"tau is 0.0; it must be in \(0, 1\]"),
    ],
)
def test_learner_constructors_reject_settings_that_cannot_work(learner, kwargs, message):
    from unilab.algos.torch.fast_td3.learner import FastTD3Learner

    cls = {"sac": FastSACLearner, "td3": FastTD3Learner}[learner]
    with pytest.raises(ValueError, match=message):
        cls(3, 1, 3, **kwargs)
