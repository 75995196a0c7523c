"""Where the torch loop's batches come from (`BatchSource`), and the A path's source,
`RingBatches`: the learner samples the shared replay ring once per iteration. The B path's
source is `double_buffer_runner.DoubleBufferBatches`."""

from __future__ import annotations

import abc
from typing import Any

import torch

from unilab.logging.trace_event import TraceRecorder, maybe_span

# The hooks take the loop (`torch_loop.TorchLoop`) and its `run_state.RunState`, typed `Any`:
# the loop imports this module.
TorchLoop = RunState = Any

__all__ = ["BatchSource", "RingBatches"]


class BatchSource(abc.ABC):
    """Where the torch loop's batches come from. Hooks take the runner, so one source serves
    any runner; only `sample` must be written."""

    def open(self, runner: TorchLoop, max_iterations: int) -> None:
        """Create this source's resources of one run (after the ring and the weight block)."""
        del runner, max_iterations  # the ring needs nothing beyond the run's replay buffer

    def collector_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments of `off_policy_collector_fn`."""
        return {}

    def statuses(self, runner: TorchLoop) -> list[str]:
        """Lines the logger shows at the start of a run."""
        return []

    def prepare(self, runner: TorchLoop, iteration: int, run: RunState) -> tuple[float, bool]:
        """Before training: returns (seconds waited for the batch, collector released)."""
        return 0.0, False

    @abc.abstractmethod
    def sample(
        self, runner: TorchLoop, iteration: int, rec: TraceRecorder | None
    ) -> dict[str, torch.Tensor]:
        """All `updates_per_step` batches of this iteration, as one batch of columns."""


class RingBatches(BatchSource):
    """The A path: the learner samples the shared replay ring, once per iteration."""

    def sample(
        self, runner: TorchLoop, iteration: int, rec: TraceRecorder | None
    ) -> dict[str, torch.Tensor]:
        total = runner._local_batch_size() * runner.updates_per_step
        with maybe_span(rec, "learner/replay_sample", cat="learner", total_batch=total):
            return runner.replay_buffer.sample(total)
