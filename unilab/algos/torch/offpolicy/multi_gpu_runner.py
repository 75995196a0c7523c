"""Multi-GPU off-policy runner using NCCL all-reduce for FastSAC.

One collector process (as in the A path) feeds the shared-memory replay; `num_gpus` learner
processes are started with `torch.multiprocessing.spawn`. Every rank samples its own
`batch_size // num_gpus` rows per update from the shared replay, computes its gradients, and
the learners average them with an all-reduce (`torch.distributed`: NCCL on CUDA devices, gloo
on CPU, so two CPU processes exercise the same code here) before every optimiser step. Rank 0
also does what the single learner does in the A path: waits for data, feeds the observation
normaliser (then broadcast to the other ranks), publishes the actor, logs and checkpoints.

Global-batch semantics: `batch_size` is the global batch of one update, split evenly over the
ranks (it must be divisible by `num_gpus`), which is what the JAX core does over its devices;
so one update of N ranks equals one update of a single learner on the same rows. (The
reference sampled `batch_size` rows on every rank, an N-times larger global batch.)

This class is a constructor only: it checks what several learners need and sets
`world_size`; the loop is `torch_loop.TorchLoop`'s (the one every runner uses), run in
`world_size` spawned ranks by `ranks.learn_on_ranks`. `sim_backend="mjx"` trains in the JAX core
over `num_gpus` JAX devices instead (`TrainConfig.num_devices`, whose `validate()` checks the
divisibility of envs and batch there). `num_gpus <= 1` is a plain `OffPolicyRunner`.

Deliberate deviations from the reference (quirks), each checked by a test:

- The actor updates on `u % policy_frequency == 0`, as on a single learner (the reference used
  `== 1` here, so `policy_frequency=1` never updated the actor).
- Every rank starts from the full state of the learner given to the constructor (critic
  targets, temperature, optimiser moments and normaliser included), not from broadcast online
  weights only (the reference's targets started different on every rank).
- Rank 0 watches the collector while it waits for data, so a collector failure stops every
  rank with `CollectorError` (the reference never checked), and `last_run_summary` is set.
- Both `FastSACLearner` and `FastTD3Learner` work (`world_size` all-reduce in both), FastTD3
  with symmetry augmentation too (every rank gets the parent learner's mirror map).
- A SIGTERM/SIGINT to the parent stops every rank after the running iteration, rank 0 saving
  `model_<iteration>.pt`, and raises `RunStopped` in the parent (`ranks`); the ranks ignore
  both signals themselves (the parent decides), so one sent to the whole job stops it cleanly
  too.
"""

from __future__ import annotations

from typing import Any

import torch

from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab.algos.torch.registry import get_torch_algo

__all__ = ["MultiGPUOffPolicyRunner"]


class MultiGPUOffPolicyRunner(OffPolicyRunner):
    """Multi-GPU off-policy runner.

    Keeps a single Collector on CPU and spawns num_gpus Learner workers via
    torch.multiprocessing.spawn. Each worker processes independent mini-batches from the same
    shared ReplayBuffer; gradients are averaged with NCCL all_reduce (gloo on CPU).

    Falls back transparently to single-GPU when num_gpus <= 1.
    """

    @staticmethod
    def validate_capabilities(*, algo_type: str, learner_kwargs: dict, num_gpus: int) -> None:
        """Raise `ValueError` for a combination the multi-learner path cannot run.

        As the reference: FastSAC with symmetry augmentation is refused on several learners
        (its message); FastTD3 with it is allowed (each rank trains on its share of the batch
        plus its mirrors, with the parent learner's mirror map). Ours besides: an unknown
        `algo_type`, and `learner_kwargs` that set `device` / `world_size` (each rank sets
        its own)."""
        if num_gpus <= 1:
            return
        name = get_torch_algo(algo_type).name
        if name == "sac" and bool(learner_kwargs.get("use_symmetry", False)):
            raise ValueError(
                "Off-policy symmetry augmentation does not support training.num_gpus > 1; "
                "set training.num_gpus=1 or algo.use_symmetry=false (here: num_gpus=1, or "
                "use_symmetry=False in the learner and learner_kwargs)"
            )
        if "device" in learner_kwargs or "world_size" in learner_kwargs:
            raise ValueError(
                "learner_kwargs must not set device or world_size: each rank sets its own"
            )

    def __init__(
        self,
        learner: Any,
        env_name: str,
        algo_type: str,
        learner_kwargs: dict,
        num_gpus: int = 1,
        **kwargs: Any,
    ) -> None:
        # The learner's own use_symmetry counts too (learner_kwargs may leave it out).
        symmetric = bool(learner_kwargs.get("use_symmetry") or getattr(learner, "use_symmetry", 0))
        self.validate_capabilities(
            algo_type=algo_type,
            learner_kwargs={**learner_kwargs, "use_symmetry": symmetric},
            num_gpus=num_gpus,
        )
        self.num_gpus = num_gpus
        self.world_size = max(int(num_gpus), 1)
        self._learner_kwargs = dict(learner_kwargs)
        self._rank_context = None
        super().__init__(learner, env_name, algo_type, **kwargs)
        if self.sim_backend == "mujoco" and self.batch_size % self.world_size:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by num_gpus {num_gpus}; the "
                f"global batch is split evenly over the learners: use a multiple of {num_gpus}"
            )
        rank_rows = self.batch_size // self.world_size
        if symmetric and self.sim_backend == "mujoco" and self.world_size > 1 and rank_rows % 2:
            raise ValueError(
                f"use_symmetry trains each rank on half of its {rank_rows} rows plus their "
                f"mirrors: batch_size must be a multiple of {2 * self.world_size}"
            )
        if self.world_size > 1 and self.sim_backend == "mujoco":
            use_cuda = self.device.type == "cuda"
            if use_cuda and torch.cuda.device_count() < self.world_size:
                raise ValueError(
                    f"num_gpus={num_gpus} but only {torch.cuda.device_count()} CUDA device(s) "
                    "are visible"
                )

    def __getstate__(self) -> dict[str, Any]:
        """What a learner rank receives: settings and IPC handles; no learner, no processes."""
        state = self.__dict__.copy()
        for key in ("learner", "_ctx", "_rank_context", "_interrupts"):
            state.pop(key, None)
        state["_sinks"] = state["_saver"] = None
        state["_collector_process"] = None  # not our child there: watched through its pipe
        return state
