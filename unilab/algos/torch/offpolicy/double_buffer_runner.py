"""Off-policy runner using CPU-pinned double-buffer replay pipeline (B path).

`DoubleBufferOffPolicyRunner` (reference §1.7) trains with the A path's loop
(`torch_loop.TorchLoop`) and one other piece, its batch source `DoubleBufferBatches`: the
learner does not sample the replay ring. The runner itself only checks its two keywords and
installs that source. Instead of sampling:

- The learner owns two shared host slots `[2, batch_size * updates_per_step, width]` and sends
  the collector a pack request (tick id, `min_snapshot_ptr`, `sample_seed = (seed or 0) +
  tick`, `sample_count`, `shared_slot`). The collector (`worker._serve_pack_request`) waits
  until the ring holds `min_snapshot_ptr` rows, draws the batch with a CPU generator seeded by
  `sample_seed` and gathers it into the shared slot, then replies on the ready queue.
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
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from unilab.algos.torch.offpolicy.run_state import RunState
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab.algos.torch.offpolicy.torch_loop import BatchSource, TorchLoop
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = ["DoubleBufferBatches", "DoubleBufferOffPolicyRunner"]

#: The only prefetch mode: the batch of tick `i + 1` is prepared while tick `i` trains.
PREFETCH_MODES = ("one_tick",)
REPLAY_PIPELINE = "cpu_pinned_double_buffer"
PACK_LAYOUT = "packed"
PACK_EXECUTOR = "collector_thread"
_WAIT_CHECK_S = 0.5  # the learner's wait checks the collector at least this often
_THREAD_POLL_S = 0.05
_REQUEST_PUT_TIMEOUT_S = 5.0
_THREAD_JOIN_TIMEOUT_S = 5.0

IDLE = "idle"
REQUESTED = "collector_pack_requested"
SUBMITTED = "h2d_submitted"
READY = "ready"


class _DoubleBufferPipeline:
    """Two shared host slots, two device slots and the H2D thread of one run.

    State machine of the prepared batch: `idle` → `collector_pack_requested` (`start_prepare`)
    → `h2d_submitted` (H2D thread) → `ready` (`wait_until_ready`) → `idle` (`take`). The batch
    is always prepared in the cold slot (index `1 - hot`); `take` makes it the hot one.
    """

    def __init__(
        self,
        host_slots: torch.Tensor,
        request_queue: Any,
        ready_queue: Any,
        device: torch.device | str,
        base_seed: int = 0,
    ) -> None:
        if host_slots.dim() != 3 or host_slots.shape[0] != 2:
            raise ValueError(f"host_slots must be [2, rows, width], got {tuple(host_slots.shape)}")
        self.device = torch.device(device)
        self.host_slots = host_slots
        self.request_queue = request_queue
        self.ready_queue = ready_queue
        self.base_seed = int(base_seed)
        self.sample_count = int(host_slots.shape[1])
        self.state = IDLE
        self.hot = 1  # so that the first batch is prepared in slot 0
        self.pending_tick: int | None = None
        self.last_meta: dict[str, Any] | None = None
        self._pending_meta: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._registered_ptr: int | None = None
        self._copy_stream: Any = None
        self._ready_events: list[Any] = [None, None]
        self._free_events: list[Any] = [None, None]
        self.is_cuda = self.device.type == "cuda"
        self.transfer_backend = "cuda_stream" if self.is_cuda else "torch_copy"
        if self.is_cuda:
            self._register_host_slots()
            self._copy_stream = torch.cuda.Stream(device=self.device)
            self._ready_events = [torch.cuda.Event(), torch.cuda.Event()]
        self.device_slots = [
            torch.zeros(host_slots.shape[1:], dtype=host_slots.dtype, device=self.device)
            for _ in range(2)
        ]
        self._thread = threading.Thread(
            target=self._thread_main, name="replay_collector_h2d", daemon=True
        )
        self._thread.start()

    # -- page-locking (CUDA) -----------------------------------------------------------------

    def _register_host_slots(self) -> None:
        ptr = self.host_slots.data_ptr()
        nbytes = self.host_slots.numel() * self.host_slots.element_size()
        code = torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0)
        if int(code) != 0:
            raise RuntimeError(f"cudaHostRegister of the shared replay slots failed ({code})")
        self._registered_ptr = ptr
        if not self.host_slots.is_pinned():
            self._unregister_host_slots()
            raise RuntimeError("cudaHostRegister succeeded but the replay slots are not pinned")

    def _unregister_host_slots(self) -> None:
        ptr, self._registered_ptr = self._registered_ptr, None
        if ptr is not None:
            torch.cuda.cudart().cudaHostUnregister(ptr)

    # -- learner side ------------------------------------------------------------------------

    @property
    def cold(self) -> int:
        return 1 - self.hot

    def start_prepare(self, tick: int, min_snapshot_ptr: int) -> None:
        """Ask the collector to pack tick `tick`'s batch into the cold slot."""
        self._raise_if_failed()
        with self._cond:
            if self._closed:
                raise RuntimeError("the replay pipeline is closed")
            if self.state != IDLE:
                raise RuntimeError(
                    f"start_prepare({tick}): the batch of tick {self.pending_tick} was not "
                    f"consumed yet (state {self.state!r}); call take() first"
                )
            slot = self.cold
            if self.is_cuda:
                # the cold device slot was the hot one: the copy must wait for its readers
                event = torch.cuda.Event()
                event.record(torch.cuda.current_stream(self.device))
                self._free_events[slot] = event
            self.pending_tick = int(tick)
            self._pending_meta = {
                "tick_id": int(tick),
                "min_snapshot_ptr": int(min_snapshot_ptr),
                "shared_slot": slot,
                "request_ns": time.perf_counter_ns(),
            }
            self.state = REQUESTED
        request = {
            "tick_id": int(tick),
            "min_snapshot_ptr": int(min_snapshot_ptr),
            "sample_seed": self.base_seed + int(tick),
            "sample_count": self.sample_count,
            "shared_slot": slot,
            "learner_hot_gpu_slot": self.hot,
            "target_gpu_slot": slot,
            "layout": PACK_LAYOUT,
            "executor": PACK_EXECUTOR,
        }
        self.request_queue.put(request, timeout=_REQUEST_PUT_TIMEOUT_S)

    def batch_ready(self, tick: int) -> bool:
        with self._cond:
            return self.pending_tick == tick and self.state == READY

    def wait_until_ready(
        self, tick: int, check: Callable[[], None] | None = None, timeout: float | None = None
    ) -> None:
        """Block until tick `tick`'s batch is on the device; call `check` at least every 0.5 s
        (it should raise when the collector died). Re-raises an exception of the H2D thread."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                self._raise_if_failed()
                if self.pending_tick != tick or self.state == IDLE:
                    raise RuntimeError(
                        f"wait_until_ready({tick}): no batch requested for that tick "
                        f"(pending tick {self.pending_tick}, state {self.state!r})"
                    )
                if self.state in (SUBMITTED, READY):
                    break
                self._cond.wait(_WAIT_CHECK_S)
                self._raise_if_failed()
                if self.state in (SUBMITTED, READY):
                    break
            if check is not None:
                check()
            if not self._thread.is_alive():
                self._raise_if_failed()
                raise RuntimeError("the replay_collector_h2d thread is not running")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the replay batch of tick {tick} was not ready in {timeout} s")
        if self.state == SUBMITTED:
            event = self._ready_events[self.cold]
            if event is not None:
                event.synchronize()
            with self._cond:
                self.state = READY
                if self._pending_meta is not None:
                    self._pending_meta["ready_ns"] = time.perf_counter_ns()

    def take(self, tick: int) -> torch.Tensor:
        """The prepared batch of tick `tick` (`[sample_count, width]` on the device); swaps
        hot and cold."""
        self._raise_if_failed()
        with self._cond:
            if self.pending_tick != tick or self.state != READY:
                raise RuntimeError(
                    f"take({tick}): batch not ready (pending tick {self.pending_tick}, "
                    f"state {self.state!r}); call wait_until_ready first"
                )
            self.hot = self.cold
            event = self._ready_events[self.hot]
            if event is not None:
                torch.cuda.current_stream(self.device).wait_event(event)
            self.last_meta = self._pending_meta
            self._pending_meta = None
            self.pending_tick = None
            self.state = IDLE
            return self.device_slots[self.hot]

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(
                f"the replay_collector_h2d thread failed: {self._error!r}"
            ) from self._error

    # -- H2D thread --------------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    message = self.ready_queue.get(timeout=_THREAD_POLL_S)
                except queue.Empty:
                    continue
                except (OSError, ValueError, EOFError):
                    if self._stop.is_set():
                        return
                    raise
                self._submit(message)
        except BaseException as error:  # noqa: BLE001 - stored, re-raised by the learner
            with self._cond:
                self._error = error
                self._cond.notify_all()

    def _submit(self, message: dict[str, Any]) -> None:
        with self._cond:
            tick, state, meta = self.pending_tick, self.state, self._pending_meta
        if state != REQUESTED or tick != message.get("tick_id"):
            raise RuntimeError(
                f"pack reply for tick {message.get('tick_id')} but tick {tick} is pending "
                f"(state {state!r})"
            )
        slot = int(message["shared_slot"])
        if meta is None or slot != meta["shared_slot"]:
            raise RuntimeError(f"pack reply in shared slot {slot}, requested {meta}")
        h2d_begin = time.perf_counter_ns()
        source, target = self.host_slots[slot], self.device_slots[slot]
        if self.is_cuda:
            with torch.cuda.device(self.device), torch.cuda.stream(self._copy_stream):
                free = self._free_events[slot]
                if free is not None:
                    self._copy_stream.wait_event(free)
                target.copy_(source, non_blocking=True)
                self._ready_events[slot].record(self._copy_stream)
        else:
            target.copy_(source)
        with self._cond:
            meta.update(
                snapshot_ptr=int(message["snapshot_ptr"]),
                pack_begin_ns=int(message["pack_begin_ns"]),
                pack_end_ns=int(message["pack_end_ns"]),
                h2d_submit_begin_ns=h2d_begin,
                h2d_submit_end_ns=time.perf_counter_ns(),
            )
            self.state = SUBMITTED
            self._cond.notify_all()

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the thread, wait for copies in flight, unpin the host slots. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        thread = self._thread
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(_THREAD_JOIN_TIMEOUT_S)
        if self.is_cuda:
            if self._copy_stream is not None:
                self._copy_stream.synchronize()
            self._unregister_host_slots()
        with self._cond:
            self.state = IDLE
            self.pending_tick = None
            self._cond.notify_all()
        self.device_slots = []
        self.host_slots = torch.empty(0)


class DoubleBufferBatches(BatchSource):
    """The B path's batch source: the collector packs, the H2D thread prefetches one tick
    ahead, and the collector is released before training (see the module docstring)."""

    def __init__(self, prefetch_mode: str, verbose_metrics: bool) -> None:
        self.prefetch_mode = prefetch_mode
        self.verbose_metrics = verbose_metrics
        self.pipeline: _DoubleBufferPipeline | None = None
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
            _DoubleBufferPipeline(
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
    def replay_pipeline(self) -> _DoubleBufferPipeline | None:
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
