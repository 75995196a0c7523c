"""Off-policy runner using CPU-pinned double-buffer replay pipeline (B path).

`DoubleBufferOffPolicyRunner` (reference §1.7) trains with the A path's loop
(`torch_loop.TorchLoop`) and one other piece, its batch source `DoubleBufferBatches`: the
learner does not sample the replay ring. The runner itself only checks its two keywords and
installs that source. Instead of sampling:

- The learner owns two shared host slots `[2, batch_size * updates_per_step, width]` and sends
  the collector a pack request (tick id, `min_snapshot_ptr`, `sample_seed = (seed or 0) +
  tick`, `sample_count`, `shared_slot`). The collector (`collector_pack.PackServer.serve`)
  waits until the ring holds `min_snapshot_ptr` rows, draws the batch with a CPU generator
  seeded by `sample_seed` and gathers it into the shared slot, then replies on the ready queue.
- A daemon thread `replay_collector_h2d` in the learner takes the reply, checks the tick and
  copies the shared slot into the matching device slot (CPU: synchronous `copy_`; CUDA: the
  shared slots are page-locked in place with `cudaHostRegister` and copied with
  `non_blocking=True` on a dedicated stream, with one ready event per slot).
- Per iteration the learner waits for this iteration's data (as in the A path), waits for the
  prepared batch (`learner/wait_for_replay_batch`, logged as the incremental H2D time), takes
  it (hot/cold swap), requests the next tick's batch with `min_snapshot_ptr = ptr + num_envs *
  env_steps_per_sync` (so it includes at least one newer chunk) and releases the collector
  *before* training, so collection overlaps the updates. Weights are published after training;
  the collector is not released a second time.

Deviations from the reference, each checked by a test: the pipeline thread never dies
silently (its exception is re-raised by the learner), the learner's wait wakes at least every
0.5 s to check the collector (a dead collector raises instead of hanging) and a stop signal
(`torch_loop`: the run stops before training that iteration), the pipeline is
closed on every exit path (it is a registered resource of the run, `close()` is idempotent),
every iteration is logged (the reference logged every 10th, a later fix logs all), and the
algo name is always the core registry's display name (`"FastSAC"`, `"FastTD3"`).

This module holds the runner and its batch source (the per-iteration hand-over with the
learner loop); the slots, their state machine and the H2D thread are `double_buffer_pipeline`,
the collector's packing is `collector_pack`.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import torch

from unilab.algos.torch.offpolicy.double_buffer_pipeline import (
    PACK_EXECUTOR,
    PACK_LAYOUT,
    DoubleBufferPipeline,
)
from unilab.algos.torch.offpolicy.run_state import RunState
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab.algos.torch.offpolicy.torch_loop import BatchSource, TorchLoop
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = ["DoubleBufferBatches", "DoubleBufferOffPolicyRunner", "DoubleBufferPipeline"]

#: The only prefetch mode: the batch of tick `i + 1` is prepared while tick `i` trains.
PREFETCH_MODES = ("one_tick",)
REPLAY_PIPELINE = "cpu_pinned_double_buffer"


class DoubleBufferBatches(BatchSource):
    """The B path's batch source: the collector packs, the H2D thread prefetches one tick
    ahead, and the collector is released before training (see the module docstring)."""

    def __init__(self, prefetch_mode: str, verbose_metrics: bool) -> None:
        self.prefetch_mode = prefetch_mode
        self.verbose_metrics = verbose_metrics
        self.pipeline: DoubleBufferPipeline | None = None
        self.statuses_shown: list[str] = []
        #: Per trained iteration: tick, the replay `ptr` when its data was ready, the
        #: requested `min_snapshot_ptr` and the `snapshot_ptr` the batch was packed from.
        self.log: deque[dict[str, Any]] = deque(maxlen=10_000)
        self._max_iterations = 0
        self._batch: dict[str, torch.Tensor] | None = None

    def open(self, runner: TorchLoop, max_iterations: int) -> None:
        self._max_iterations = max_iterations
        self.log.clear()
        self._batch = None
        self.pipeline = None
        rows = runner._local_batch_size() * runner.updates_per_step
        host_slots = torch.zeros(2, rows, runner.replay_buffer.width).share_memory_()
        self._queues = (runner._new_queue(1), runner._new_queue(1))
        self.pipeline = runner._register_resource(
            DoubleBufferPipeline(
                host_slots, *self._queues, runner.device, base_seed=runner.seed or 0
            )
        )

    def collector_kwargs(self) -> dict[str, Any]:
        return {
            "collector_pack_request_queue": self._queues[0],
            "collector_pack_ready_queue": self._queues[1],
            "collector_pack_shared_slots": self.pipeline.host_slots,
        }

    def statuses(self, runner: TorchLoop) -> list[str]:
        statuses = [
            f"Replay pipeline: {REPLAY_PIPELINE}",
            f"Replay prefetch: {self.prefetch_mode}",
            f"Replay pack layout: {PACK_LAYOUT}",
            f"Replay pack executor: {PACK_EXECUTOR}",
            f"Replay transfer backend: {self.pipeline.transfer_backend} ({runner.device.type})",
        ]
        if self.verbose_metrics:
            statuses.append("Verbose metrics")
        self.statuses_shown = statuses
        return statuses

    def prepare(self, runner: TorchLoop, iteration: int, run: RunState) -> tuple[float, bool]:
        """Wait for the prefetched batch, take it, request the next tick's (one chunk newer)
        and release the collector so it collects while we train."""
        pipeline = self.pipeline
        data_ptr = int(runner.replay_buffer.ptr.item())
        if pipeline.pending_tick is None:  # first trained iteration
            pipeline.start_prepare(iteration, min_snapshot_ptr=0)
        t0 = time.perf_counter()
        with maybe_span(
            run.recorder, "learner/wait_for_replay_batch", cat="learner", iteration=iteration
        ):
            pipeline.wait_until_ready(iteration, check=runner._check_waiting)
        h2d_time = time.perf_counter() - t0
        slot = pipeline.take(iteration)
        self._record(iteration, data_ptr, pipeline.last_meta)
        self._batch = runner.replay_buffer.split_columns(slot)
        if iteration >= self._max_iterations:
            return h2d_time, False
        chunk = runner.num_envs * runner.env_steps_per_sync
        next_min = int(runner.replay_buffer.ptr.item()) + chunk
        pipeline.start_prepare(iteration + 1, min_snapshot_ptr=next_min)
        runner._release_collector()
        return h2d_time, True

    def _record(self, iteration: int, data_ptr: int, meta: dict[str, Any] | None) -> None:
        meta = meta or {}
        self.log.append(
            {
                "tick_id": iteration,
                "data_ptr": data_ptr,
                "min_snapshot_ptr": meta.get("min_snapshot_ptr"),
                "snapshot_ptr": meta.get("snapshot_ptr"),
                "pack_ms": (meta.get("pack_end_ns", 0) - meta.get("pack_begin_ns", 0)) / 1e6,
            }
        )

    def sample(
        self, runner: TorchLoop, iteration: int, rec: TraceRecorder | None
    ) -> dict[str, torch.Tensor]:
        """The prefetched batch of this iteration (column views of the hot device slot)."""
        batch, self._batch = self._batch, None
        if batch is None:
            raise RuntimeError("no prefetched replay batch for this iteration")
        return batch


class DoubleBufferOffPolicyRunner(OffPolicyRunner):
    """`OffPolicyRunner` whose batches are packed by the collector and prefetched one tick ahead
    into a device double buffer (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        replay_prefetch_mode: str = "one_tick",
        verbose_metrics: bool = False,
        **kwargs: Any,
    ) -> None:
        if replay_prefetch_mode not in PREFETCH_MODES:
            raise ValueError(
                f"unknown replay_prefetch_mode {replay_prefetch_mode!r}; supported: "
                f"{', '.join(map(repr, PREFETCH_MODES))}"
            )
        super().__init__(*args, **kwargs)
        self.replay_prefetch_mode = replay_prefetch_mode
        self.verbose_metrics = bool(verbose_metrics)
        self.replay_pipeline_name = REPLAY_PIPELINE
        self.pack_layout = PACK_LAYOUT
        self.pack_executor = PACK_EXECUTOR
        self._batches = DoubleBufferBatches(replay_prefetch_mode, self.verbose_metrics)

    @property
    def replay_pipeline(self) -> DoubleBufferPipeline | None:
        """The pipeline of the current (or last) run."""
        return self._batches.pipeline

    @property
    def replay_statuses(self) -> list[str]:
        """The logger statuses of the last run."""
        return self._batches.statuses_shown

    @property
    def replay_batch_log(self) -> deque[dict[str, Any]]:
        """Per trained iteration: tick, data `ptr`, `min_snapshot_ptr`, `snapshot_ptr`."""
        return self._batches.log
