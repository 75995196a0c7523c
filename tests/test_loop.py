"""The fused training step: compiles once, stores true final observations, honours the
learning-start threshold, checkpoints and resumes exactly, names NaN-producing envs."""

import dataclasses

import jax
import numpy as np
import pytest

from unilab_jax.checkpoint import restore_checkpoint
from unilab_jax.config import TrainConfig
from unilab_jax.trainer import Trainer, train

TINY = TrainConfig(
    env="PendulumSwingup",
    algo="sac",
    num_envs=8,
    replay_buffer_n=16,
    batch_size=32,
    updates_per_step=2,
    policy_frequency=2,
    learning_starts=3,
    max_iterations=6,
    log_interval=2,
    save_interval=0,
    eval_envs=0,
    env_overrides={"episode_length": 5},
)
TINY_SAC = {"actor_hidden_dim": 16, "critic_hidden_dim": 32, "num_atoms": 11}


@pytest.fixture(scope="module")
def trainer():
    return Trainer(TINY, TINY_SAC)


@pytest.fixture(scope="module")
def run(trainer):
    return train(TINY, trainer=trainer, quiet=True)


def test_train_step_compiles_once(trainer, run):
    assert trainer.trace_counter[0] == 1
    again = train(TINY, trainer=trainer, quiet=True)  # same shapes: no new trace
    assert trainer.trace_counter[0] == 1
    assert [r["iteration"] for r in again.history] == [2, 4, 6]
    assert again.summary["completed_iterations"] == 6
    assert again.summary["total_env_steps"] == 6 * 8


def test_learning_starts_after_threshold_rows(run):
    # threshold = max(batch 32, learning_starts 3 * 8 envs) = 32 rows = 4 env steps
    learning = [r["learning"] for r in run.history]
    assert learning == [False, True, True]
    assert run.history[0]["learner"] == {}
    assert np.isfinite(run.history[1]["learner"]["qf_loss"])
    assert run.history[-1]["buffer_rows"] == 6 * 8


def test_replay_bootstraps_through_time_limit_from_true_final_obs(run):
    data = jax.device_get(run.state.replay.data)
    filled = int(run.state.replay.filled)  # 6 slots written in order 0..5
    truncated = data.truncated[:, :filled]
    assert truncated[:, 4].all() and truncated[:, :4].sum() == 0  # episode_length 5
    # Inside an episode the next row starts where this one ended.
    np.testing.assert_allclose(data.next_obs[:, :4], data.obs[:, 1:5], atol=1e-6)
    # At the time limit, next_obs is the true last observation, not the reset one...
    assert not np.allclose(data.next_obs[:, 4], data.obs[:, 5], atol=1e-3)
    # ...and it continues the trajectory: the angle moved by about dt * angular velocity.
    theta = np.arctan2(data.obs[:, 4, 1], data.obs[:, 4, 0])
    theta_next = np.arctan2(data.next_obs[:, 4, 1], data.next_obs[:, 4, 0])
    step = np.angle(np.exp(1j * (theta_next - theta)))
    assert np.all(np.abs(step) < 0.05 * 20)


def test_checkpoint_restore_continues_identically(tmp_path, trainer):
    config = dataclasses.replace(TINY, save_interval=4)
    first = train(config, trainer=trainer, log_dir=tmp_path, logger="none", quiet=True)
    assert first.summary["last_checkpoint"].endswith("/6")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["4", "6"]
    restored = restore_checkpoint(tmp_path / "checkpoints", trainer.init_state(), step=6)
    obs = np.linspace(-1, 1, 3 * 4).reshape(4, 3).astype(np.float32)
    np.testing.assert_array_equal(
        trainer.agent.act(first.state.agent, obs), trainer.agent.act(restored.agent, obs)
    )
    # Resuming from the restored state and from the live state gives the same run.
    more = dataclasses.replace(config, max_iterations=8, save_interval=0)
    a = train(more, trainer=trainer, initial_state=restored, quiet=True)
    b = train(more, trainer=trainer, initial_state=first.state, quiet=True)
    np.testing.assert_array_equal(
        jax.tree.leaves(a.state.agent)[0], jax.tree.leaves(b.state.agent)[0]
    )
    assert a.summary["completed_iterations"] == 8
    assert a.history[0]["iteration"] == 8
