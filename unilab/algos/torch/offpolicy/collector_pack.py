"""The collector's half of the B path (`double_buffer_runner`): pack requested batches into the
learner's shared host slots.

The learner (`double_buffer_pipeline`) sends a pack request (tick id, `min_snapshot_ptr`,
`sample_seed`, `sample_count`, `shared_slot`, the slot it is reading). `PackServer.serve` takes
it and defers it until the replay ring holds `min_snapshot_ptr` rows, then draws `sample_count`
rows with a CPU generator seeded by `sample_seed`, gathers them into the shared slot and
replies on the ready queue (tick id, slot, the `snapshot_ptr` it packed from, pack begin and
end in ns). The collector calls `serve` after each replay write and while it waits in the sync
hand-over, so a request is served even while the collector is paused.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any

import torch

from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = ["POLL_S", "PackServer"]

POLL_S = 0.05  # blocking queue operations wake up this often to check the stop event


class PackServer:
    """Serves the learner's pack requests; `requests` None: no B path, `serve` does nothing."""

    def __init__(self, requests: Any, ready: Any, slots: Any) -> None:
        self.requests = requests
        self.ready = ready
        self.slots = slots
        self.pending: dict[str, Any] | None = None

    def serve(
        self, replay: Any, recorder: TraceRecorder | None, stopping: Callable[[], bool]
    ) -> None:
        """Pack one requested batch into its shared slot once the replay is new enough."""
        if self.requests is None:
            return
        if self.pending is None:
            try:
                self.pending = self.requests.get_nowait()
            except queue.Empty:
                return
        request = self.pending
        if int(replay.ptr.item()) < request["min_snapshot_ptr"]:
            return  # deferred until a newer chunk is in the buffer
        self.pending = None
        if request.get("learner_hot_gpu_slot") == request["shared_slot"]:
            raise ValueError(
                f"pack request {request['tick_id']} targets slot {request['shared_slot']}, "
                "which the learner is reading"
            )
        begin = time.perf_counter_ns()
        with maybe_span(recorder, "collector/cpu_pack_sample_batch", cat="collector"):
            generator = torch.Generator().manual_seed(int(request["sample_seed"]))
            rows = replay.sample_rows(int(request["sample_count"]), generator)
            self.slots[int(request["shared_slot"])].copy_(rows)
        reply = {
            "tick_id": request["tick_id"],
            "shared_slot": request["shared_slot"],
            "snapshot_ptr": int(replay.ptr.item()),
            "pack_begin_ns": begin,
            "pack_end_ns": time.perf_counter_ns(),
        }
        while not stopping():
            try:
                self.ready.put(reply, timeout=POLL_S)
                return
            except queue.Full:
                continue
