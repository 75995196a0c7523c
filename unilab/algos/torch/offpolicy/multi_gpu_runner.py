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

`sim_backend="mjx"` trains in the JAX core over `num_gpus` JAX devices instead.
`num_gpus <= 1` falls back to `OffPolicyRunner.learn`.

Deliberate deviations from the reference (quirks), each checked by a test:

- The actor updates on `u % policy_frequency == 0`, as on a single learner (the reference used
  `== 1` here, so `policy_frequency=1` never updated the actor).
- Every rank starts from the full state of the learner given to the constructor (critic
  targets, temperature, optimiser moments and normaliser included), not from broadcast online
  weights only (the reference's targets started different on every rank).
- Rank 0 watches the collector while it waits for data, so a collector failure stops every
  rank with `CollectorError` (the reference never checked), and `last_run_summary` is set.
- Both `FastSACLearner` and `FastTD3Learner` work (`world_size` all-reduce in both).
"""

from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as torch_mp

from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner, _RunState
from unilab.algos.torch.offpolicy.worker import off_policy_collector_fn
from unilab.ipc.async_runner import CollectorError
from unilab.logging.trace_event import maybe_span

__all__ = ["MultiGPUOffPolicyRunner"]

_LEARNERS = {"sac": FastSACLearner, "td3": FastTD3Learner}
_PROCESS_GROUP_TIMEOUT = datetime.timedelta(seconds=120)
_GO, _STOP = 0.0, 1.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MultiGPUOffPolicyRunner(OffPolicyRunner):
    """Multi-GPU off-policy runner.

    Keeps a single Collector on CPU and spawns num_gpus Learner workers via
    torch.multiprocessing.spawn. Each worker processes independent mini-batches from the same
    shared ReplayBuffer; gradients are averaged with NCCL all_reduce (gloo on CPU).

    Falls back transparently to single-GPU when num_gpus <= 1.
    """

    @staticmethod
    def validate_capabilities(*, algo_type: str, learner_kwargs: dict, num_gpus: int) -> None:
        """Raise `ValueError` for a combination the multi-learner path cannot run."""
        if num_gpus <= 1:
            return
        if algo_type not in _LEARNERS:
            raise ValueError(
                f"unknown algo_type {algo_type!r} for {num_gpus} learners; supported: "
                f"{', '.join(map(repr, _LEARNERS))}"
            )
        if learner_kwargs.get("use_symmetry"):
            raise ValueError(
                "symmetry augmentation is not supported with several learners; set "
                "num_gpus=1 or use_symmetry=False"
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
        self.validate_capabilities(
            algo_type=algo_type, learner_kwargs=learner_kwargs, num_gpus=num_gpus
        )
        super().__init__(learner, env_name, algo_type, **kwargs)
        self.num_gpus = num_gpus
        self.world_size = max(int(num_gpus), 1)
        self._learner_kwargs = dict(learner_kwargs)
        if self.batch_size % self.world_size:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by num_gpus {num_gpus}; the "
                f"global batch is split evenly over the learners: use a multiple of {num_gpus}"
            )
        if self.world_size > 1 and self.sim_backend == "mujoco":
            use_cuda = self.device.type == "cuda"
            if use_cuda and torch.cuda.device_count() < self.world_size:
                raise ValueError(
                    f"num_gpus={num_gpus} but only {torch.cuda.device_count()} CUDA device(s) "
                    "are visible"
                )

    def learn(
        self,
        max_iterations: int = 1500,
        save_interval: int = 50,
        log_dir: str = "logs",
        logger_type: str = "tensorboard",
    ) -> None:
        """Unified training loop for off-policy algorithms."""
        if self.world_size <= 1:
            super().learn(max_iterations, save_interval, log_dir, logger_type)
            return
        if max_iterations < 0:
            raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        if self.sim_backend == "mjx":
            self._learn_jax(
                max_iterations, save_interval, log_dir, logger_type, num_devices=self.world_size
            )
            return
        self._learn_multi(max_iterations, save_interval, log_dir, logger_type)

    def _local_batch_size(self) -> int:
        return self.batch_size // self.world_size

    def __getstate__(self) -> dict[str, Any]:
        """What a learner rank receives: settings and IPC handles; no learner, no processes."""
        state = self.__dict__.copy()
        for key in ("learner", "_ctx", "_rank_context"):
            state.pop(key, None)
        state["_active_logger"] = None
        state["_collector_process"] = None  # not our child there: watched through its pipe
        return state

    # -- the parent process --------------------------------------------------------------------

    def _learn_multi(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> None:
        self.last_run_summary = None
        port = _free_port()
        with tempfile.TemporaryDirectory(prefix="unilab-ranks-") as tmp:
            result_path = Path(tmp) / "rank0.pt"
            try:
                self._setup_ipc(recorder=None)
                self._start_collector(off_policy_collector_fn, self._collector_kwargs())
                print(f"[MultiGPURunner] Spawning {self.world_size} learner workers (port {port})")
                context = torch_mp.start_processes(
                    _learner_worker,
                    args=(
                        self.world_size, self, type(self.learner), self._learner_kwargs,
                        self.learner.get_state_dict(), max_iterations, save_interval,
                        log_dir, logger_type, port, str(result_path),
                    ),
                    nprocs=self.world_size,
                    join=False,
                    start_method="spawn",
                )  # fmt: skip
                self._rank_context = context
                try:
                    while not context.join(timeout=0.5):
                        pass
                except torch_mp.ProcessRaisedException as error:
                    if "CollectorError" in str(error):
                        raise CollectorError(str(error)) from None
                    raise
                result = torch.load(result_path, weights_only=False)
                self.learner.load_state_dict(result["learner"])
                self.last_run_summary = result["summary"]
            finally:
                self._stop_ranks()
                self.close()

    def _stop_ranks(self) -> None:
        context = getattr(self, "_rank_context", None)
        self._rank_context = None
        if context is None:
            return
        for process in context.processes:
            if process.is_alive():
                process.terminate()
        for process in context.processes:
            process.join(5.0)
            if process.is_alive():
                process.kill()
                process.join()

    # -- a learner rank ------------------------------------------------------------------------

    def _rank_loop(
        self, rank: int, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> dict[str, Any] | None:
        """Run every iteration on this rank; rank 0 returns the run summary."""
        lead = rank == 0
        recorder = self._make_recorder(log_dir) if lead else None
        if recorder is not None:
            self.weight_sync.recorder = recorder
        run = _RunState(recorder=recorder, log_dir=Path(log_dir))
        logger = self._make_logger(max_iterations, log_dir, logger_type) if lead else None
        if logger is not None:
            logger.set_collection_sync(self.sync_collection, self.env_steps_per_sync)
            logger.start(status=f"{self.world_size} learners")
        start = time.perf_counter()
        try:
            with maybe_span(recorder, "learner/training_e2e", cat="learner"):
                for iteration in range(1, max_iterations + 1):
                    wait_time = self._rank_wait(iteration, run, logger)
                    self._broadcast_normalizers()
                    t1 = time.perf_counter()
                    metrics = self._train(iteration, recorder)
                    train_time = time.perf_counter() - t1
                    if lead:
                        weight_sync_time = self._publish(run)
                        run.completed = iteration
                        run.total_env_steps = int(self.replay_buffer.ptr.item())
                        self._log_iteration(
                            iteration, run, logger, metrics, train_time, wait_time,
                            weight_sync_time,
                        )  # fmt: skip
                        self._maybe_save(iteration, save_interval, max_iterations, run, logger)
            run.status = "completed"
            if logger is not None:
                logger.finish(extra_summary=self._summary_line(run))
        except BaseException:
            run.status = "failed"
            raise
        finally:
            if recorder is not None:
                run.trace_path = str(recorder.write())
            if logger is not None:
                logger.close()
        if not lead:
            return None
        summary = self._summary(run, time.perf_counter() - start)
        summary["world_size"] = self.world_size
        return summary

    def _rank_wait(self, iteration: int, run: _RunState, logger: Any) -> float:
        """Rank 0 waits for data (and watches the collector); every rank learns whether to go."""
        flag = torch.tensor([_GO])
        wait_time = 0.0
        failure: BaseException | None = None
        if logger is not None:
            try:
                wait_time = self._wait_phase(iteration, run, logger)
            except BaseException as error:  # noqa: BLE001 - re-raised after telling the ranks
                failure = error
                flag[0] = _STOP
        dist.broadcast(flag, src=0)
        if failure is not None:
            raise failure
        if flag.item() == _STOP:
            raise _StoppedByLead
        return wait_time

    def _broadcast_normalizers(self) -> None:
        """Rank 0 fed the normaliser; every rank takes its statistics."""
        for name in ("obs_normalizer", "critic_normalizer"):
            normalizer = getattr(self.learner, name, None)
            if isinstance(normalizer, EmpiricalNormalization):
                for buffer in normalizer.buffers():
                    dist.broadcast(buffer, src=0)


class _StoppedByLead(Exception):
    """Rank 0 stopped the run (it raises the reason itself); other ranks exit cleanly, so the
    parent sees rank 0's error rather than a follower's exit code."""


def _learner_worker(
    rank: int,
    world_size: int,
    runner: MultiGPUOffPolicyRunner,
    learner_cls: type,
    learner_kwargs: dict,
    initial_state: dict,
    max_iterations: int,
    save_interval: int,
    log_dir: str,
    logger_type: str,
    port: int,
    result_path: str,
) -> None:
    """One learner rank: join the process group, build the learner, run the loop."""
    use_cuda = runner.device.type == "cuda"
    device = torch.device(f"cuda:{rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // (world_size + 1)))
    dist.init_process_group(
        "nccl" if use_cuda else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=_PROCESS_GROUP_TIMEOUT,
    )
    try:
        # Independent replay samples per rank; identical initial state everywhere.
        torch.manual_seed((runner.seed or 0) + rank + 1001)
        learner = learner_cls(device=device, world_size=world_size, **learner_kwargs)
        learner.load_state_dict(initial_state)
        runner.learner = learner
        runner.device = device
        runner.replay_buffer.device = device
        runner._close_complete = True  # the parent owns the collector and the shared memory
        try:
            summary = runner._rank_loop(rank, max_iterations, save_interval, log_dir, logger_type)
        except _StoppedByLead:
            return
        if rank == 0:
            torch.save({"learner": learner.get_state_dict(), "summary": summary}, result_path)
        dist.barrier()
    finally:
        dist.destroy_process_group()
