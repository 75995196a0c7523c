"""After training on the facade: every ``model_<it>.pt`` records its hyperparameters, so
``unilab_jax.load_policy``, ``evaluate`` and ``unilab-jax evaluate`` read facade runs
of both backends, and act exactly as the torch learner's deterministic actor.

The runs use the nets, envs and schedule of the tiny pendulum run (``tests/tiny.py``), so the
"mjx" training step and the evaluations are programs other tests compile too (persistent
compile cache).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import math
import re
import sys
from contextlib import redirect_stdout

import numpy as np
import pytest
import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.offpolicy import OffPolicyRunner
from unilab.algos.torch.offpolicy.checkpoints import META_KEY, checkpoint_meta, save_model
from unilab.torch_policy import TorchMissingError
from unilab_jax.config import TrainConfig
from unilab_jax.policy import evaluate, load_policy
from unilab_jax.training.checkpoint import CheckpointError
from unilab_jax.training.sinks import PlainLineSink, RunInfo

pytestmark = pytest.mark.timeout(600)
torch.set_num_threads(1)  # 2 cores shared with the collector process

ENV = "PendulumSwingup"  # obs 3, action 1
SHORT = {"episode_length": 5}
# tests/tiny.py TINY_SAC, with the core's normaliser (the facade's default is the reference's: none)
NETS = dict(actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11, obs_normalization=True)
RUN = dict(
    num_envs=8, replay_buffer_n=16, batch_size=32, learning_starts=3, updates_per_step=2,
    policy_frequency=2, actor_hidden_dim=16, seed=0, env_cfg_override=SHORT,
)  # fmt: skip
OBS = np.linspace(-2.0, 2.0, 5 * 3, dtype=np.float32).reshape(5, 3)


def torch_actions(learner, obs: np.ndarray) -> np.ndarray:
    """The learner's deterministic actor on raw observations (its normaliser first)."""
    with torch.no_grad():
        x = learner.obs_normalizer(torch.from_numpy(obs))
        return learner.actor.explore(x, deterministic=True).numpy()


def evaluate_cli(argv: list[str]) -> int:
    """``unilab-jax evaluate`` in this process."""
    return importlib.import_module("unilab_jax.cli.evaluate").main(argv)


def panel_env_steps(text: str) -> int:
    (steps,) = re.findall(r"Total env steps: ([\d,]+)", text)
    return int(steps.replace(",", ""))


@pytest.fixture(scope="module")
def mjx_run(tmp_path_factory):
    """One facade "mjx" SAC run of 6 iterations (the last one saved, learning from iteration
    4) whose runner config asks the core for its deterministic evaluation (4 envs): (learner,
    log dir, summary, what it printed)."""
    log_dir = tmp_path_factory.mktemp("mjx")
    learner = FastSACLearner(3, 1, 3, **NETS)
    runner = OffPolicyRunner(learner, ENV, "sac", sim_backend="mjx", **RUN)
    assert runner.config.eval_envs == 0  # the facade's default
    runner.config = runner.config.replace(eval_envs=4)
    printed = io.StringIO()  # stdout is no terminal here: the plain lines, summary included
    with redirect_stdout(printed):
        runner.learn(max_iterations=6, save_interval=6, log_dir=str(log_dir), logger_type="x")
    return learner, log_dir, runner.last_run_summary, printed.getvalue()


def test_mjx_run_dir_is_the_learners_policy(mjx_run, capsys):
    learner, log_dir, summary, printed = mjx_run
    assert summary["status"] == "completed"
    saved = torch.load(log_dir / "model_6.pt", weights_only=True)
    meta = saved[META_KEY]
    assert (meta["algo"], meta["env"], meta["sim_backend"], meta["iteration"]) == (
        "sac", ENV, "mjx", 6,
    )  # fmt: skip
    assert (meta["obs_dim"], meta["critic_obs_dim"], meta["action_dim"]) == (3, 3, 1)
    assert meta["config"]["algo"]["actor_hidden_dim"] == 16
    assert meta["config"]["train"]["env_overrides"] == SHORT

    policy = load_policy(log_dir)
    assert (policy.env, policy.algo, policy.iteration) == (ENV, "sac", 6)
    assert policy.checkpoint == str(log_dir / "model_6.pt")
    assert learner.obs_normalizer.count.item() > 0  # trained statistics, not the prior
    np.testing.assert_allclose(policy(OBS), torch_actions(learner, OBS), rtol=0, atol=1e-5)

    # The summary relays the core's evaluation and the panel shows it; it is the return
    # `evaluate` finds for the saved policy (the core evaluates with seed + 1 = 1, 4 envs).
    final = summary["eval_mean_return"]
    assert math.isfinite(final) and summary["best_eval_iteration"] == 6
    assert f"Eval return (deterministic policy, final): {final:.3f}" in printed
    result = evaluate(policy, episodes=4, seed=1)
    assert result.mean_return == pytest.approx(final, rel=1e-5, abs=1e-5)

    # The command line reads the facade run dir like a core run's.
    assert evaluate_cli([str(log_dir), "--episodes", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["env"], report["algo"], report["iteration"]) == (ENV, "sac", 6)
    assert report["checkpoint"] == str(log_dir / "model_6.pt")
    assert math.isfinite(report["mean_return"]) and report["mean_length"] == 5.0


def test_a_run_that_evaluated_nothing_says_so_instead_of_na():
    """The core's summary lines (the "mjx" panel): no evaluation asked for is "not run"."""
    config = {"train": {"eval_envs": 0}}
    run = RunInfo(
        algo_name="FastSAC", env_name=ENV, num_envs=8, obs_dim=3, action_dim=1,
        max_iterations=6, env_steps_per_sync=1, train_start_rows=32, num_devices=1,
        log_dir="", start_iteration=0, config=config,
    )  # fmt: skip
    summary = {
        "status": "completed", "completed_iterations": 6, "total_env_steps": 48,
        "final_mean_reward": 1.0, "best_mean_reward": 2.0, "eval_mean_return": None,
        "compile_time_sec": 1.0, "warnings": [],
    }  # fmt: skip
    out = io.StringIO()
    sink = PlainLineSink(out)
    sink.start(run)
    sink.finish(summary)
    assert "Eval return (deterministic policy, final): not run (eval_envs=0)" in out.getvalue()
    out = io.StringIO()  # eval_envs > 0 and no figure (e.g. stopped before it): still n/a
    sink = PlainLineSink(out)
    sink.start(dataclasses.replace(run, config={"train": {"eval_envs": 4}}))
    sink.finish(summary)
    assert "Eval return (deterministic policy, final): n/a" in out.getvalue()


def test_mujoco_run_dir_is_the_learners_policy(tmp_path, capsys):
    learner = FastSACLearner(3, 1, 3, **NETS)
    runner = OffPolicyRunner(learner, ENV, "sac", sim_backend="mujoco", **RUN)
    runner.learn(max_iterations=4, save_interval=2, log_dir=str(tmp_path), logger_type="console")
    summary = runner.last_run_summary
    panel = capsys.readouterr().out
    assert panel_env_steps(panel) == summary["total_env_steps"]  # both: all it collected
    assert "not run (eval_envs=0)" in panel

    policy = load_policy(tmp_path)  # the newest of model_2.pt and model_4.pt
    assert (policy.env, policy.algo, policy.iteration) == (ENV, "sac", 4)
    assert policy.config["train"]["env_overrides"] == SHORT
    assert learner.obs_normalizer.count.item() > 0
    np.testing.assert_allclose(policy(OBS), torch_actions(learner, OBS), rtol=0, atol=1e-5)
    assert load_policy(tmp_path, step=2).iteration == 2
    with pytest.raises(FileNotFoundError, match="no model_3.pt .* holds iterations 2, 4"):
        load_policy(tmp_path, step=3)

    result = evaluate(policy, episodes=4)  # the run's 5-step episodes
    assert np.isfinite(result.returns).all() and result.lengths.tolist() == [5, 5, 5, 5]

    # The file still loads into a learner, and a reference file (no metadata) still loads
    # there but not into load_policy, which says why and what to do.
    saved = torch.load(tmp_path / "model_4.pt", weights_only=True)
    fresh = FastSACLearner(3, 1, 3, **NETS)
    fresh.load_state_dict(saved)
    np.testing.assert_array_equal(torch_actions(fresh, OBS), torch_actions(learner, OBS))
    del saved[META_KEY]
    reference = tmp_path / "reference" / "model_4.pt"
    reference.parent.mkdir()
    torch.save(saved, reference)
    FastSACLearner(3, 1, 3, **NETS).load_state_dict(torch.load(reference, weights_only=True))
    with pytest.raises(CheckpointError, match="records no hyperparameters .*load_state_dict"):
        load_policy(reference.parent)


def test_td3_file_and_missing_torch(tmp_path, monkeypatch):
    """A TD3 learner saved with its metadata (no training needed): one .pt file in, the same
    deterministic actions out; without torch the error names the extra to install."""
    torch.manual_seed(0)
    learner = FastTD3Learner(3, 1, 3, actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11)
    learner.update_normalizers(torch.randn(64, 3) * 3 + 1, torch.randn(64, 3))
    meta = checkpoint_meta(learner, TrainConfig(env=ENV, algo="td3"), "mujoco")
    path = save_model(learner, tmp_path / "model_7.pt", {**meta, "iteration": 7})
    assert not list(tmp_path.glob(".*.tmp"))
    policy = load_policy(path)
    assert (policy.algo, policy.iteration, policy.checkpoint) == ("td3", 7, path)
    np.testing.assert_allclose(policy(OBS), torch_actions(learner, OBS), rtol=0, atol=1e-5)

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    with pytest.raises(TorchMissingError, match=r"needs torch.*unilab-jax\[torch\]"):
        load_policy(path)
