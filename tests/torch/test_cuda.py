"""The torch path's GPU-only code: the double-buffer runner's pinned host slots and copy stream,
and learner ranks on NCCL. Skipped without CUDA (CI has none); ``bench/gpu.sh`` runs them on
a GPU machine."""

from __future__ import annotations

import pytest
import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.offpolicy import MultiGPUOffPolicyRunner
from unilab.algos.torch.offpolicy.double_buffer_runner import DoubleBufferOffPolicyRunner

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu.sh)"),
]

ENV = "PendulumSwingup"  # obs 3, action 1
TINY = dict(actor_hidden_dim=32, critic_hidden_dim=32, v_min=-5.0, v_max=40.0)
RUN = dict(num_envs=16, replay_buffer_n=64, batch_size=32, updates_per_step=2,
           policy_frequency=2, actor_hidden_dim=32, seed=0)  # fmt: skip


def actor(learner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.actor.parameters()]


def test_double_buffer_runner_on_cuda_copies_pinned_slots_on_its_own_stream(tmp_path):
    learner = FastSACLearner(3, 1, 3, device="cuda", **TINY)
    before = actor(learner)
    runner = DoubleBufferOffPolicyRunner(learner, ENV, "sac", trace_enabled=True, **RUN)
    runner.learn(max_iterations=20, save_interval=10, log_dir=str(tmp_path),
                 logger_type="no_print")  # fmt: skip
    assert runner.last_run_summary["status"] == "completed"
    assert "Replay transfer backend: cuda_stream (cuda)" in runner.replay_statuses
    pipeline = runner.replay_pipeline
    assert pipeline.is_cuda and pipeline.transfer_backend == "cuda_stream"
    after = actor(learner)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(p.is_cuda for p in learner.actor.parameters())
    runner.close()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs 2 GPUs for 2 ranks")
def test_two_nccl_learners_train_like_the_gloo_ones(tmp_path):
    kwargs = dict(obs_dim=3, action_dim=1, critic_obs_dim=3, device="cuda", **TINY)
    learner = FastSACLearner(**kwargs)
    before = actor(learner)
    runner = MultiGPUOffPolicyRunner(learner, ENV, "sac", kwargs, num_gpus=2,
                                     **{**RUN, "policy_frequency": 1})  # fmt: skip
    runner.learn(max_iterations=6, save_interval=3, log_dir=str(tmp_path), logger_type="no_print")
    summary = runner.last_run_summary
    assert summary["status"] == "completed" and summary["world_size"] == 2
    assert learner.update_count == 12  # 6 iterations x 2 critic updates, rank 0's learner
    assert any(not torch.equal(a, b) for a, b in zip(before, actor(learner), strict=True))
