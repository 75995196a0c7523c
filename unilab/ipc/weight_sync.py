"""Actor weights from the learner to the collector through one shared-memory block (§1.5).

The learner flattens the actor's `state_dict` (parameters and buffers, in `state_dict` order)
into a `multiprocessing.shared_memory.SharedMemory` block and bumps a version number; the
collector polls `version` without the lock every step and copies the weights under the lock
only when the version moved.

Deviations from the reference:

- The int64 version sits in the first 8 bytes (always aligned) instead of after the floats.
- Each entry keeps its own dtype (8-byte aligned offsets) rather than being cast to float32,
  so integer buffers (e.g. BatchNorm's `num_batches_tracked`) survive exactly.
- No long-lived numpy/torch views of the block are kept: each call makes and drops its own,
  so `close()` never fails with "exported pointers exist".

The reference's constructor is accepted too: `SharedWeightSync(param_shapes, *, create=True,
shm_name=None, lock=None)`, where `param_shapes` maps names to shapes (float32 entries, zeros
until the first `write_weights`, version 0); `create=False` attaches to the block `shm_name`
(with `lock`, the creator's `_lock`; `lock=None` reads and writes without one, as there), and
`SharedWeightSync.from_state_dict(state_dict, **kwargs)` creates and writes (version 1). A block
attached by shapes must have been laid out from float32 entries (shapes, or a state dict of
float32 tensors), as every block of the reference is.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import struct
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from unilab.ipc.locks import held
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = ["SharedWeightSync"]

_HEADER = 8  # int64 version
_ALIGN = 8

# (name, shape, torch dtype, byte offset) per state_dict entry.
Layout = list[tuple[str, tuple[int, ...], torch.dtype, int]]


def make_layout(spec: Mapping[str, torch.Tensor | Sequence[int]]) -> tuple[Layout, int]:
    """Each entry's place in the block: a tensor's shape and dtype, or a shape (float32, as
    every entry of the reference's blocks)."""
    layout: Layout = []
    offset = _HEADER
    for name, value in spec.items():
        if isinstance(value, torch.Tensor):
            shape, dtype = tuple(value.shape), value.dtype
        else:
            shape, dtype = tuple(int(d) for d in value), torch.float32
        layout.append((name, shape, dtype, offset))
        nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return layout, max(offset, _HEADER)


class SharedWeightSync:
    """Shared actor weights: created by the learner, attached by the collector.

    Create with `SharedWeightSync(actor.state_dict())` (writes the initial weights, version 0).
    Passing the object to a spawned process attaches there by block name (the lock travels
    with it); `SharedWeightSync.attach(name, layout, lock)` does the same explicitly.

    Args:
        param_shapes: the actor's state_dict (fixes names, shapes, dtypes and order; its
            values are written), or the reference's names -> shapes (float32, zeros).
        recorder: optional trace recorder for `weight_sync/*` spans; dropped when pickled.
        create, shm_name, lock: the reference's: `create=False` attaches to the block
            `shm_name` with `lock` (None: no lock) instead of creating one.
    """

    def __init__(
        self,
        param_shapes: Mapping[str, torch.Tensor | Sequence[int]],
        recorder: TraceRecorder | None = None,
        *,
        create: bool = True,
        shm_name: str | None = None,
        lock: Any = None,
    ) -> None:
        if not create:
            if shm_name is None:
                raise ValueError("SharedWeightSync(create=False) needs the block's shm_name")
            layout, _ = make_layout(param_shapes)
            other = SharedWeightSync.attach(shm_name, layout, lock, recorder)
            self.__dict__.update(other.__dict__)
            return
        self.layout, nbytes = make_layout(param_shapes)
        self._shm: SharedMemory | None = SharedMemory(create=True, size=nbytes)
        self.name = self._shm.name
        self._lock: Any = mp.get_context("spawn").Lock()
        self._creator = True
        self._unlink_later: SharedMemory | None = None  # the creator's block after `close()`
        self.recorder = recorder
        struct.pack_into("<q", self._shm.buf, 0, 0)
        if all(isinstance(v, torch.Tensor) for v in param_shapes.values()):
            self._copy(param_shapes, to_shared=True)  # type: ignore[arg-type]

    @classmethod
    def from_state_dict(
        cls, state_dict: Mapping[str, torch.Tensor], **kwargs: Any
    ) -> SharedWeightSync:
        """The reference's: a block laid out from ``state_dict`` and written once (version
        1); ``kwargs`` as the constructor's (``create``, ``recorder``, ...)."""
        self = cls(state_dict, **kwargs)
        self.write_weights(state_dict)
        return self

    @classmethod
    def attach(
        cls, name: str, layout: Layout, lock: Any, recorder: TraceRecorder | None = None
    ) -> SharedWeightSync:
        """Open an existing block by name (collector side; call `close()` when done)."""
        self = cls.__new__(cls)
        self.name, self.layout, self._lock, self.recorder = name, layout, lock, recorder
        self._shm = SharedMemory(name=name)
        self._creator = False
        self._unlink_later = None
        return self

    # -- data movement -------------------------------------------------------------------------

    def _held(
        self, while_waiting: Callable[[], None] | None
    ) -> contextlib.AbstractContextManager[None]:
        """The lock, or nothing for a block attached with `lock=None` (the reference's)."""
        if self._lock is None:
            return contextlib.nullcontext()
        return held(self._lock, while_waiting)

    def _buf(self) -> memoryview:
        if self._shm is None:
            raise RuntimeError(f"SharedWeightSync {self.name!r} is closed")
        return self._shm.buf

    def _copy(self, state_dict: Mapping[str, torch.Tensor], to_shared: bool) -> None:
        """Copy every layout entry between `state_dict` and the block (caller holds the lock)."""
        buf = self._buf()
        if set(state_dict) != {entry[0] for entry in self.layout}:
            raise KeyError("state_dict keys differ from the shared layout")
        with torch.no_grad():
            for name, shape, dtype, offset in self.layout:
                tensor = state_dict[name]
                if tuple(tensor.shape) != shape:
                    raise ValueError(f"{name}: shape {tuple(tensor.shape)} != shared {shape}")
                np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
                count = int(np.prod(shape, dtype=np.int64))
                view = np.frombuffer(buf, dtype=np_dtype, count=count, offset=offset)
                shared = torch.from_numpy(view).view(shape)
                if to_shared:
                    shared.copy_(tensor.detach())  # D2H when the learner's actor is on a GPU
                else:
                    tensor.copy_(shared)
                del shared, view

    @property
    def version(self) -> int:
        """Number of `write_weights` calls so far; read without the lock (one aligned int64)."""
        return struct.unpack_from("<q", self._buf(), 0)[0]

    def write_weights(
        self,
        state_dict: Mapping[str, torch.Tensor],
        while_waiting: Callable[[], None] | None = None,
    ) -> int:
        """Learner: publish new weights and bump the version; returns the new version.

        ``while_waiting`` is called every second the lock stays taken: a reader killed while
        holding it (SIGKILL) never releases it, so the caller checks that the reader is alive
        (and raises) instead of blocking forever.
        """
        span = maybe_span(
            self.recorder, "weight_sync/write_weights_d2h", cat="weight_sync",
            thread_time_counter="weight_sync/write_thread_cpu_us",
        )  # fmt: skip
        self._buf()  # fail with "closed" rather than on the dropped lock
        with span, self._held(while_waiting):
            self._copy(state_dict, to_shared=True)
            version = self.version + 1
            struct.pack_into("<q", self._buf(), 0, version)
            return version

    def read_weights_into(
        self,
        state_dict: Mapping[str, torch.Tensor],
        while_waiting: Callable[[], None] | None = None,
    ) -> int:
        """Collector: copy the shared weights into `state_dict`'s tensors; returns their version.

        `module.state_dict()` tensors share storage with the module, so this updates the module
        in place; calling `load_state_dict` afterwards (as the reference does) is harmless.
        ``while_waiting`` as in `write_weights`: a learner killed mid-write leaves the lock
        taken, so the collector checks every second that its learner is alive.
        """
        span = maybe_span(
            self.recorder, "weight_sync/read_weights_into_cpu_actor", cat="weight_sync",
            thread_time_counter="weight_sync/read_thread_cpu_us",
        )  # fmt: skip
        self._buf()
        with span, self._held(while_waiting):
            self._copy(state_dict, to_shared=False)
            return self.version

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Detach this process from the block (attachers; also part of `cleanup`). Idempotent.
        The creator's block stays linked until its `cleanup()`, as the reference's."""
        if self._shm is not None:
            self._shm.close()
            if self._creator:
                self._unlink_later = self._shm
            self._shm = None
        self._lock = None  # lets the named semaphore's finaliser unlink it

    def cleanup(self) -> None:
        """Creator only: close and unlink, so no `/dev/shm` entry outlives the run (after a
        `close()` too). Idempotent."""
        if not self._creator:
            self.close()
            return
        shm = self._shm if self._shm is not None else self._unlink_later
        self._shm = self._unlink_later = None
        if shm is not None:
            shm.close()
            shm.unlink()
        self._lock = None

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "layout": self.layout, "lock": self._lock}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = SharedWeightSync.attach(state["name"], state["layout"], state["lock"])
        self.__dict__.update(other.__dict__)
