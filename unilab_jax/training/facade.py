"""The facade's entrance to the core's run machinery.

The facade (``unilab/``: the reference UniLab's documented torch API) runs on the core: its
torch loop stops on the core's signals and reports to the core's sinks and live panel, and its
``sim_backend="mjx"`` path trains with the core's ``Trainer``. It reaches ``unilab_jax.training``
through this module only (``tests/test_layering.py`` holds it to that), so what the facade
relies on is this list, and the modules of ``training`` behind it may move:

- stopping a run on SIGINT/SIGTERM (``training.interrupts``): ``StopSignals`` (the signal
  guard), ``StopRequested`` and ``ImmediateStop`` (a first and a second signal),
  ``RunStopped`` (the stopped run, raised to the caller), ``stop_requested``, ``run_stopped``
  and ``signal_name``;
- what a host loop reports to (``training.sinks``): ``SinkChain``, ``CheckpointSink``,
  ``HealthSink``, ``LoggerSink`` and ``RunInfo`` (the run's description);
- the live panel with TensorBoard/wandb (``training.logger``): ``OffPolicyLogger``;
- the core's checkpoint folder (``training.checkpoint``): ``META_FILE``, the file that marks
  one;
- training on JAX (``training.trainer``): ``Trainer`` and ``train``.

The first three load without JAX. ``META_FILE`` (orbax) and ``Trainer``/``train`` (JAX, MJX)
are imported on first use, as the facade imported them before there was an entrance: importing
the facade stays as light as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unilab_jax.training.interrupts import (
    ImmediateStop,
    RunStopped,
    StopRequested,
    StopSignals,
    run_stopped,
    signal_name,
    stop_requested,
)
from unilab_jax.training.logger import OffPolicyLogger
from unilab_jax.training.sinks import CheckpointSink, HealthSink, LoggerSink, RunInfo, SinkChain

if TYPE_CHECKING:
    from unilab_jax.training.checkpoint import META_FILE
    from unilab_jax.training.trainer import Trainer, train

__all__ = [
    "META_FILE",
    "CheckpointSink",
    "HealthSink",
    "ImmediateStop",
    "LoggerSink",
    "OffPolicyLogger",
    "RunInfo",
    "RunStopped",
    "SinkChain",
    "StopRequested",
    "StopSignals",
    "Trainer",
    "run_stopped",
    "signal_name",
    "stop_requested",
    "train",
]


def __getattr__(name: str) -> Any:
    """``META_FILE``, ``Trainer`` and ``train``, imported on first use."""
    if name == "META_FILE":
        from unilab_jax.training import checkpoint as module
    elif name in ("Trainer", "train"):
        from unilab_jax.training import trainer as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)  # later look-ups skip this function
    return value
