"""Where the loggers' scalars go besides the console: TensorBoard event files written without
torch or TensorFlow (`TensorBoardScalarWriter`), and the optional wandb module."""

from __future__ import annotations

import importlib
import os
import socket
import time
from typing import Any

__all__ = ["WANDB_INSTALL_HINT", "TensorBoardScalarWriter"]

WANDB_INSTALL_HINT = "pip install 'unilab-jax[wandb]'"


class TensorBoardScalarWriter:
    """Scalar-only TensorBoard writer that needs neither torch nor TensorFlow.

    Writes ``Event`` records whose summary value is a ``simple_value``, which TensorBoard's
    scalar dashboard and ``EventAccumulator.Scalars`` read directly.
    """

    def __init__(self, log_dir: str, flush_secs: float = 30.0) -> None:
        # Imported here so a missing tensorboard only disables this backend.
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event_pb2 = event_pb2
        self._summary_pb2 = summary_pb2
        self.log_dir = log_dir
        self._writer = EventFileWriter(log_dir, flush_secs=flush_secs)
        self._closed = False

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Append one scalar point; silently ignored after `close`."""
        if self._closed:
            return
        summary = self._summary_pb2.Summary(
            value=[self._summary_pb2.Summary.Value(tag=tag, simple_value=float(value))]
        )
        event = self._event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)
        self._writer.add_event(event)

    def flush(self) -> None:
        """Write buffered events to disk."""
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file (idempotent)."""
        if not self._closed:
            self._closed = True
            self._writer.close()


def default_tensorboard_dir() -> str:
    # Same convention as torch's SummaryWriter when no directory is given.
    return os.path.join("runs", f"{time.strftime('%b%d_%H-%M-%S')}_{socket.gethostname()}")


def load_wandb() -> Any | None:
    """The wandb module, or None when it is not installed (it is an optional extra)."""
    try:
        return importlib.import_module("wandb")
    except ImportError:
        return None
