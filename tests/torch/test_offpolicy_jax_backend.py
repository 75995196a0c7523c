"""The facade's "mjx" backend: torch learner in, JAX training, trained learner and .pt files out."""

import pytest
import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.offpolicy.jax_backend import _log_interval
from unilab.algos.torch.offpolicy.jax_backend import learn_with_jax as _learn_with_jax
from unilab.algos.torch.offpolicy.settings import train_config

pytestmark = pytest.mark.timeout(600)

torch.set_num_threads(1)  # see test_torch_sac

# PendulumSwingup: obs 3, critic 3, action 1. Learning starts once 32 rows (4 iterations of
# 8 envs) are stored, so 20 iterations make 17 learning iterations of 2 critic updates.
TINY = dict(
    env_name="PendulumSwingup",
    num_envs=8,
    replay_buffer_n=64,
    batch_size=32,
    learning_starts=0,
    updates_per_step=2,
    policy_frequency=2,
    env_steps_per_sync=1,
    seed=0,
    env_cfg_override=None,
    max_iterations=20,
    save_interval=10,
    logger_type="no_print",
)


def learn_with_jax(learner, algo_type, *, log_dir, logger_type, **keywords):
    """The facade's path: its keywords become one TrainConfig, which the JAX core trains."""
    config = train_config(algo_type, keywords.pop("env_name"), **keywords)
    return _learn_with_jax(learner, config, log_dir=log_dir, logger_type=logger_type)


SUMMARY_KEYS = {
    "status",
    "completed_iterations",
    "total_env_steps",
    "final_mean_reward",
    "best_mean_reward",
    "mean_episode_length",
    "last_checkpoint",
    "trace_path",
    "training_wall_time_sec",
    "backend",
    "compile_time_sec",
    "warnings",
}


def sac_learner(obs_dim=3, seed=0):
    torch.manual_seed(seed)
    return FastSACLearner(
        obs_dim=obs_dim,
        action_dim=1,
        critic_obs_dim=obs_dim,
        actor_hidden_dim=32,
        critic_hidden_dim=32,
        v_min=-5,
        v_max=40,
    )


def td3_learner(seed=0):
    torch.manual_seed(seed)
    return FastTD3Learner(
        obs_dim=3,
        action_dim=1,
        critic_obs_dim=3,
        num_envs=8,
        actor_hidden_dim=32,
        critic_hidden_dim=32,
    )


def actor_weights(learner):
    return {k: v.detach().clone() for k, v in learner.actor.state_dict().items()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """One 20-iteration SAC run, shared: (learner, initial actor, summary, log dir)."""
    log_dir = tmp_path_factory.mktemp("sac")
    learner = sac_learner()
    initial = actor_weights(learner)
    summary = learn_with_jax(learner, "sac", **TINY, log_dir=str(log_dir))
    return learner, initial, summary, log_dir


def test_sac_training_changes_the_learner_weights(sac_run):
    learner, initial, summary, log_dir = sac_run
    trained = actor_weights(learner)
    assert any(not torch.equal(initial[k], trained[k]) for k in initial)
    assert all(torch.isfinite(v).all() for v in trained.values())
    assert set(summary) == SUMMARY_KEYS
    assert summary["status"] == "completed"
    assert summary["backend"] == "mjx"
    assert summary["completed_iterations"] == 20
    assert summary["total_env_steps"] == 20 * 8
    assert summary["trace_path"] is None
    assert summary["last_checkpoint"] == str(log_dir / "model_20.pt")


def test_update_count_counts_critic_updates(sac_run):
    learner = sac_run[0]
    assert learner.update_count == (20 - 4 + 1) * 2
    # The same number as the critic optimiser's steps (no step was skipped as non-finite).
    steps = {float(s["step"]) for s in learner.q_optimizer.state.values()}
    assert steps == {float(learner.update_count)}


def test_checkpoints_on_save_interval_load_into_a_fresh_learner(sac_run):
    learner, _, _, log_dir = sac_run
    assert sorted(p.name for p in log_dir.glob("model_*.pt")) == ["model_10.pt", "model_20.pt"]
    mid = torch.load(log_dir / "model_10.pt", weights_only=False)
    assert mid["update_count"] == (10 - 4 + 1) * 2
    fresh = sac_learner(seed=1)
    fresh.load_state_dict(torch.load(log_dir / "model_20.pt", weights_only=False))
    assert_same(actor_weights(fresh), actor_weights(learner))
    assert fresh.update_count == learner.update_count
    assert torch.equal(fresh.log_alpha, learner.log_alpha)


def test_initial_weights_come_from_the_learner(tmp_path):
    learner = sac_learner(seed=3)
    initial = actor_weights(learner)
    config = dict(TINY, learning_starts=10, max_iterations=5)  # learning would start at 10
    summary = learn_with_jax(learner, "sac", **config, log_dir=str(tmp_path))
    assert summary["completed_iterations"] == 5
    assert_same(actor_weights(learner), initial)
    assert learner.update_count == 0
    saved = torch.load(tmp_path / "model_5.pt", weights_only=False)
    assert_same(saved["actor"], initial)


def test_td3_trains(tmp_path):
    learner = td3_learner()
    initial = actor_weights(learner)
    summary = learn_with_jax(learner, "td3", **TINY, log_dir=str(tmp_path))
    trained = actor_weights(learner)
    assert summary["completed_iterations"] == 20
    assert any(not torch.equal(initial[k], trained[k]) for k in initial)
    assert all(torch.isfinite(v).all() for v in trained.values())
    assert learner.update_count == (20 - 4 + 1) * 2
    fresh = td3_learner(seed=1)
    fresh.load_state_dict(torch.load(tmp_path / "model_20.pt", weights_only=False))
    assert_same(actor_weights(fresh), trained)


def test_zero_iterations_write_nothing(tmp_path):
    learner = sac_learner()
    initial = actor_weights(learner)
    summary = learn_with_jax(learner, "sac", **dict(TINY, max_iterations=0), log_dir=str(tmp_path))
    assert summary["completed_iterations"] == 0
    assert summary["last_checkpoint"] is None
    assert not list(tmp_path.iterdir())
    assert_same(actor_weights(learner), initial)


def test_learner_dims_must_match_the_task(tmp_path):
    with pytest.raises(ValueError, match=r"obs_dim 4 .* 3"):
        learn_with_jax(sac_learner(obs_dim=4), "sac", **TINY, log_dir=str(tmp_path))


def test_unknown_algo_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="sac, td3"):
        learn_with_jax(sac_learner(), "ppo", **TINY, log_dir=str(tmp_path))


def test_learner_must_match_the_algo(tmp_path):
    with pytest.raises(ValueError, match="TD3Config"):
        learn_with_jax(sac_learner(), "td3", **TINY, log_dir=str(tmp_path))


@pytest.mark.parametrize(
    "save_interval, max_iterations, expected",
    [(10, 20, 10), (50, 1500, 10), (4, 100, 2), (25, 100, 5), (0, 100, 10), (10, 3, 3)],
)
def test_log_interval_divides_save_interval(save_interval, max_iterations, expected):
    interval = _log_interval(save_interval, max_iterations)
    assert interval == expected
    if save_interval and interval < max_iterations:
        assert save_interval % interval == 0
