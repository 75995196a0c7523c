"""Logging for the torch path: the Chrome trace / Perfetto recorder (`trace_event`) and the
reference's `OffPolicyLogger` (the core's live panel with TensorBoard / wandb scalars, through
`unilab_jax.training.facade`; the reference's constructor: `algo_name`, `max_iterations`,
`num_envs`, `env_name`, `obs_dim`, `action_dim`, `refresh_per_second`, `log_dir`,
`log_backend`, `wandb_*`). The logger is imported on first use, so that importing the trace
recorder stays light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unilab.logging.trace_event import GPU_STREAM_TID, TraceRecorder, maybe_span

if TYPE_CHECKING:
    from unilab_jax.training.facade import OffPolicyLogger

__all__ = ["GPU_STREAM_TID", "OffPolicyLogger", "TraceRecorder", "maybe_span"]


def __getattr__(name: str) -> Any:
    """``OffPolicyLogger``, imported on first use."""
    if name != "OffPolicyLogger":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from unilab_jax.training.facade import OffPolicyLogger

    globals()[name] = OffPolicyLogger  # later look-ups skip this function
    return OffPolicyLogger
