"""The fused training step: compiles once, stores true final observations, honours the
learning-start threshold, checkpoints and resumes exactly, names NaN-producing envs."""

import dataclasses
import io
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY, TINY_SAC  # tests/tiny.py

from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.training.sinks import PlainLineSink
from unilab_jax.training.trainer import EnvNaNError, Trainer, train


@pytest.fixture(scope="module")
def trainer():
    return Trainer(TINY, TINY_SAC)


@pytest.fixture(scope="module")
def run(trainer):
    return train(TINY, trainer=trainer, quiet=True)


def test_train_step_compiles_once(trainer, run):
    assert trainer.trace_counter[0] == 1  # in the background, from state_shapes(), beside init
    # The shapes it compiled for are the state's, shardings included: the step took the state.
    shapes, state = trainer.collection.state_shapes(), trainer.init_state()
    for shape, leaf in zip(jax.tree.leaves(shapes), jax.tree.leaves(state), strict=True):
        assert (shape.shape, shape.dtype) == (leaf.shape, leaf.dtype)
        assert shape.sharding.is_equivalent_to(leaf.sharding, leaf.ndim)
    # Its own compile time is reported, not the wait for what was left of it after init.
    compiled = trainer.step_compile_seconds[TINY.log_interval]
    assert run.summary["compile_time_sec"] == pytest.approx(compiled, abs=0.05) and compiled > 0
    seen = []
    again = train(TINY, trainer=trainer, quiet=True, on_block=seen.append)  # same shapes
    assert trainer.trace_counter[0] == 1  # no new trace
    assert [r["iteration"] for r in again.history] == [2, 4, 6]
    assert seen == again.history  # the callback sees every block record, in order
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
    truncated = data.truncated[:, : filled - 1].astype(bool)  # [envs, slots with a successor]
    # episode_length 5 (time limits staggered at start): every env hit a limit in 6 steps.
    assert truncated.any(axis=1).all()
    assert not data.terminated.any()  # the pendulum only truncates
    nxt, following = data.next_obs[:, : filled - 1], data.obs[:, 1:filled]
    same = np.all(np.abs(nxt - following) < 1e-6, axis=-1)
    # Inside an episode the next row starts exactly where this one ended...
    assert same[~truncated].all()
    # ...at the time limit, next_obs is the true last observation, not the reset one...
    assert not same[truncated].any()
    # ...and it continues the trajectory: the angle moved by about dt * angular velocity.
    obs, last = data.obs[:, : filled - 1][truncated], nxt[truncated]
    theta, theta_next = np.arctan2(obs[:, 1], obs[:, 0]), np.arctan2(last[:, 1], last[:, 0])
    moved = np.angle(np.exp(1j * (theta_next - theta)))
    expected = 0.05 * (obs[:, 2] + last[:, 2]) / 2  # control dt 0.05 s, trapezoid
    np.testing.assert_allclose(moved, expected, atol=0.02)


def _assert_same_state(a, b):
    """Every leaf of two TrainStates (agent, replay, env states, exploration, key, iteration)
    bit for bit."""
    paths = jax.tree_util.tree_flatten_with_path(a)[0]
    assert len(paths) > 40
    for (path, x), y in zip(paths, jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(
            np.asarray(x), np.asarray(y), err_msg=jax.tree_util.keystr(path)
        )


def test_resume_continues_bit_exactly_over_every_leaf(tmp_path, trainer):
    config = dataclasses.replace(TINY, save_interval=4)
    first = train(config, trainer=trainer, log_dir=tmp_path, logger="none", quiet=True)
    assert first.summary["last_checkpoint"].endswith("/6")
    saved = [h.get("checkpoint") for h in first.history]  # the checkpoint sink's field
    assert [p and p.rsplit("/", 1)[-1] for p in saved] == [None, "4", "6"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["4", "6"]
    # The library resumes: checkpoint 4 trained on to 6 is the uninterrupted run's state.
    again = train(config, trainer=trainer, log_dir=tmp_path / "b", logger="none", quiet=True,
                  resume=tmp_path, resume_step=4)  # fmt: skip
    assert again.history[0]["iteration"] == 6 and again.summary["completed_iterations"] == 6
    _assert_same_state(again.state, first.state)
    # resume=True: the run goes on in its own log dir from its newest checkpoint, as the live
    # state would.
    more = dataclasses.replace(config, max_iterations=8, save_interval=0)
    b = train(more, trainer=trainer, log_dir=tmp_path, logger="none", quiet=True, resume=True)
    c = train(more, trainer=trainer, initial_state=first.state, quiet=True)
    _assert_same_state(b.state, c.state)
    assert b.summary["completed_iterations"] == 8 and b.history[0]["iteration"] == 8
    with pytest.raises(ConfigError, match=r"resume .*nowhere: no such directory"):
        train(more, trainer=trainer, resume=tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="resume=True continues the run in log_dir"):
        train(more, trainer=trainer, resume=True)


def test_nan_from_an_env_stops_training_naming_the_env(trainer, tmp_path):
    """Env 3's physics carries NaN (a diverged simulation): the run stops at its first
    iteration naming that env, not another (the step compiled for the run above serves), and
    its run_summary.json says ``diverged``."""
    import json

    state = trainer.init_state()
    physics = state.env.physics
    poisoned = physics.replace(qvel=physics.qvel.at[3].set(jnp.nan))
    state = state.replace(env=state.env.replace(physics=poisoned))
    with pytest.raises(EnvNaNError, match="environment 3 produced .* at iteration 1;"):
        train(TINY, trainer=trainer, initial_state=state, quiet=True, log_dir=tmp_path,
              logger="none")  # fmt: skip
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    assert summary["status"] == "diverged" and "environment 3" in summary["error"]


def test_a_value_support_too_small_for_the_returns_warns_and_names_the_fix(run):
    assert run.summary["warnings"] == []  # the task's support holds its returns: no clipping
    assert run.history[-1]["learner"]["target_clip_high"] == 0.0
    small = dict(TINY_SAC, v_min=-1.0, v_max=2.0)  # pendulum returns reach ~30 at gamma 0.97
    # C MuJoCo collection: the warning is the host loop's, and the chunk step compiles without
    # MJX's physics (the support is a compile-time constant, so this run compiles its own step).
    config = dataclasses.replace(TINY, max_iterations=10, physics="mujoco")
    log_file = io.StringIO()  # what a cluster job's log file shows: plain lines
    result = train(config, small, sinks=[PlainLineSink(log_file)])
    clipped = [h["learner"]["target_clip_high"] for h in result.history if h["learner"]]
    assert min(clipped) > 0.05
    (warning,) = result.summary["warnings"]
    assert warning.startswith("value support too small: ")
    assert "beyond v_max = 2 (train/target_clip_high)" in warning
    assert "raise v_max (--v-max)" in warning and "--gamma" in warning
    assert [h.get("warnings") for h in result.history].count([warning]) == 1  # said once
    lines = log_file.getvalue().splitlines()
    assert lines.count(f"WARNING {warning}") == 1 and lines[-1] == f"Warning: {warning}"


def test_periodic_evaluation_every_interval_and_at_the_end_compiled_once(trainer):
    config = dataclasses.replace(TINY, eval_envs=4, eval_interval=3)  # rounded up to 4
    result = train(config, trainer=trainer, quiet=True)
    evaluated = [h["iteration"] for h in result.history if "eval_return" in h]
    assert evaluated == [4, 6]  # every 4 iterations, and after the last block
    last = result.history[-1]
    assert 1 <= last["eval_length"] <= 5 and last["eval_sec"] > 0  # episode_length 5
    summary = result.summary
    assert summary["eval_mean_return"] == last["eval_return"]
    best = max((h for h in result.history if "eval_return" in h), key=lambda h: h["eval_return"])
    assert summary["best_eval_return"] == best["eval_return"]
    assert summary["best_eval_env_steps"] == best["iteration"] * 8
    assert summary["best_eval_elapsed_sec"] == best["elapsed_sec"]
    assert summary["eval_time_sec"] == pytest.approx(
        sum(h.get("eval_sec", 0) for h in result.history)
    )
    # Compiled once, in the background while the step compiled, for every evaluation (a
    # Compiled never retraces: a call with another layout would raise).
    assert isinstance(trainer.collection.evaluators[4], jax.stages.Compiled)
    # Full float32 matrix multiplies everywhere the trainer compiles (the default precision).
    for program in (trainer.collection.evaluators[4], *trainer._steps.values()):
        precisions = set(re.findall(r"operand_precision=\{([a-z]+),", program.as_text()))
        assert precisions == {"highest"}, precisions
    assert dataclasses.replace(TINY, eval_interval=0, eval_envs=4).resolved_eval_interval == 0
    assert TrainConfig(max_iterations=1500, log_interval=10).resolved_eval_interval == 150


def test_load_policy_restores_the_agent_alone_and_acts_like_the_trainer(tmp_path, trainer):
    import unilab_jax

    config = dataclasses.replace(TINY, save_interval=6)
    first = train(config, trainer=trainer, log_dir=tmp_path, logger="none", quiet=True)
    policy = unilab_jax.load_policy(tmp_path)  # the run dir: its newest checkpoint
    assert (policy.env, policy.algo, policy.iteration) == ("PendulumSwingup", "sac", 6)
    assert policy.config["algo"]["critic_hidden_dim"] == 32
    obs = np.linspace(-1, 1, 3 * 4).reshape(4, 3).astype(np.float32)
    saved, restored = jax.tree.leaves(first.state.agent), jax.tree.leaves(policy.state)
    for a, b in zip(saved, restored, strict=True):
        np.testing.assert_array_equal(a, b)  # bit for bit, normalisers included
    # Compiled apart from the trainer's step, so equal up to float32 rounding.
    expected = trainer.agent.act(first.state.agent, obs)
    np.testing.assert_allclose(policy(obs), expected, rtol=1e-5, atol=1e-7)
    assert policy(obs[0]).shape == (1,)  # one observation in, one action out
    # The run's env overrides (5-step episodes) apply; the same seed gives the same episodes.
    result = unilab_jax.evaluate(policy, episodes=4, seed=3)
    assert result.lengths.tolist() == [5, 5, 5, 5]
    mean, _ = trainer.evaluate_episodes(first.state, 4, seed=3)
    assert result.mean_return == pytest.approx(mean, rel=1e-6)
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        unilab_jax.load_policy(tmp_path / "nothing")
