"""Several learner ranks for the torch loop (`world_size > 1`): spawn, join, stop, and the two
collectives the loop adds to the learners' gradient all-reduce.

The parent process opens the run (replay ring, weight block, queues), starts the one
collector and spawns `world_size` ranks with `torch.multiprocessing`; each joins a process group
(NCCL on CUDA devices, gloo on CPU), builds its learner from the constructor's learner state and
runs `TorchLoop._run_rank`, the same loop as a single learner. Rank 0's final learner state and
summary come back through a file. A failure in any rank (a `CollectorError` seen by rank 0
included) stops the others and is raised in the parent.

Signals: the parent is the process a cluster sends SIGTERM to (a terminal's Ctrl+C, and a job's
SIGTERM on some clusters, reach every process of the group: the ranks ignore both, as the
collector does). The parent's first
SIGINT/SIGTERM is written into a shared int (`runner._rank_stop`); rank 0 sees it where it waits
for the next iteration's data, tells the other ranks to stop (`wait_on_lead`), saves
`model_<iteration>.pt` of its last finished iteration and returns the learner state, the
summary and the stop through the result file; the parent loads them, releases the collector
and the shared memory and raises `RunStopped`. A second signal stops at once: the parent
terminates the ranks and still releases everything (`TorchLoop._learn_torch`).
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as torch_mp

from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.offpolicy.worker import collector_kwargs, off_policy_collector_fn
from unilab.ipc.async_runner import CollectorError
from unilab_jax.training.facade import RunStopped, run_stopped

__all__ = ["StoppedByLead", "broadcast_normalizers", "learn_on_ranks", "wait_on_lead"]

_PROCESS_GROUP_TIMEOUT = datetime.timedelta(seconds=120)
_GO, _STOP = 0.0, 1.0


class StoppedByLead(Exception):
    """Rank 0 stopped the run (it raises the reason itself); other ranks exit cleanly, so the
    parent sees rank 0's error rather than a follower's exit code."""


def wait_on_lead(wait: Callable[[], float] | None) -> float:
    """Rank 0 runs `wait` (the others pass None); every rank learns whether to go on."""
    flag = torch.tensor([_GO])
    wait_time = 0.0
    failure: BaseException | None = None
    if wait is not None:
        try:
            wait_time = wait()
        except BaseException as error:  # noqa: BLE001 - re-raised after telling the ranks
            failure = error
            flag[0] = _STOP
    dist.broadcast(flag, src=0)
    if failure is not None:
        raise failure
    if flag.item() == _STOP:
        raise StoppedByLead
    return wait_time


def broadcast_normalizers(learner: Any) -> None:
    """Rank 0 fed the normaliser (and a learner's reward statistics, FlashSAC's); every rank
    takes its statistics."""
    for name in ("obs_normalizer", "critic_normalizer"):
        normalizer = getattr(learner, name, None)
        if isinstance(normalizer, EmpiricalNormalization):
            for buffer in normalizer.buffers():
                dist.broadcast(buffer, src=0)
    reward_stats = getattr(learner, "reward_stats", None)
    if reward_stats is not None:  # sized alike on every rank (`TorchLoop._run_loop`)
        for buffer in reward_stats.buffers():
            dist.broadcast(buffer, src=0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def learn_on_ranks(
    runner: Any, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
) -> None:
    """The parent's side of a multi-rank run of `runner` (a `MultiGPUOffPolicyRunner`); the
    caller (`TorchLoop._learn_torch`) stops the ranks and closes the run in its `finally`."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="unilab-ranks-") as tmp:
        result_path = Path(tmp) / "rank0.pt"
        # The parent's stop request, for rank 0 (a signal may have come already).
        runner._rank_stop = runner._ctx.Value("i", 0, lock=False)
        guard = runner._interrupts
        if guard is not None and guard.requested is not None:
            runner._rank_stop.value = guard.requested
        try:
            runner._open_run(None, max_iterations)
            runner._start_collector(off_policy_collector_fn, collector_kwargs(runner))
            world_size = runner.world_size
            print(f"[MultiGPURunner] Spawning {world_size} learner workers (port {port})")
            runner._rank_context = torch_mp.start_processes(
                _learner_worker,
                args=(
                    world_size, runner, type(runner.learner), rank_learner_kwargs(runner),
                    runner.learner.get_state_dict(), max_iterations, save_interval, log_dir,
                    logger_type, port, str(result_path),
                ),
                nprocs=world_size,
                join=False,
                start_method="spawn",
            )  # fmt: skip
            try:
                while not runner._rank_context.join(timeout=0.5):
                    pass
            except torch_mp.ProcessRaisedException as error:
                if "CollectorError" in str(error):
                    raise CollectorError(str(error)) from None
                raise
            result = torch.load(result_path, weights_only=False)
            runner.learner.load_state_dict(result["learner"])
            runner.last_run_summary = result["summary"]
            if result.get("stopped") is not None:
                signum, iteration, checkpoint, saved = result["stopped"]
                raise run_stopped(signum, iteration, checkpoint, result["summary"], saved)
        finally:
            runner._rank_stop = None


def rank_learner_kwargs(runner: Any) -> dict:
    """The constructor arguments of each rank's learner: the runner's `learner_kwargs`, plus the
    parent learner's mirror map when it trains with symmetry (a learner needs it to be built;
    the parent got it from the user and the runner checked it against the task)."""
    kwargs = dict(runner._learner_kwargs)
    if getattr(runner.learner, "use_symmetry", False):
        kwargs["use_symmetry"] = True
        kwargs["mirror"] = runner.learner.mirror
    return kwargs


def stop_ranks(runner: Any) -> None:
    """Kill rank processes still alive (they ignore SIGTERM); idempotent. Ranks own no shared
    resource: the parent releases the run's."""
    context = getattr(runner, "_rank_context", None)
    runner._rank_context = None
    if context is None:
        return
    for process in context.processes:
        if process.is_alive():
            process.kill()
    for process in context.processes:
        process.join()


def _learner_worker(
    rank: int,
    world_size: int,
    runner: Any,
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
    # The parent decides how to stop (a Ctrl+C or a job's SIGTERM may reach every process).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
            summary = runner._run_rank(rank, max_iterations, save_interval, log_dir, logger_type)
        except StoppedByLead:
            return
        except RunStopped as stop:  # rank 0, after its final checkpoint: tell the parent
            stopped = (stop.signum, stop.iteration, stop.checkpoint, stop.saved)
            result = {"learner": learner.get_state_dict(), "summary": stop.summary}
            torch.save({**result, "stopped": stopped}, result_path)
            return
        if rank == 0:
            torch.save({"learner": learner.get_state_dict(), "summary": summary}, result_path)
        dist.barrier()
    finally:
        dist.destroy_process_group()
