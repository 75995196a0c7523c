"""The learner's half of the B path (`double_buffer_runner`): two shared host slots, two device
slots and the `replay_collector_h2d` thread that copies one into the other.

`DoubleBufferPipeline.start_prepare` sends the collector a pack request (tick id,
`min_snapshot_ptr`, `sample_seed = base_seed + tick`, `sample_count`, `shared_slot`; the
collector's side: `collector_pack`). The daemon thread takes the reply, checks the tick and
copies the shared slot into the matching device slot (CPU: synchronous `copy_`; CUDA: the
shared slots are page-locked in place with `cudaHostRegister` and copied with
`non_blocking=True` on a dedicated stream, with one ready event per slot).
`wait_until_ready` blocks until the batch is on the device, checking the collector at least
every 0.5 s, and `take` hands it to the learner. The thread never dies silently: its exception
is stored and re-raised by the learner's next call. `close()` is idempotent.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["PACK_EXECUTOR", "PACK_LAYOUT", "DoubleBufferPipeline"]

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


class DoubleBufferPipeline:
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
