"""Logging for the torch path: the Chrome trace / Perfetto recorder (`trace_event`)."""

from unilab.logging.trace_event import GPU_STREAM_TID, TraceRecorder, maybe_span

__all__ = ["GPU_STREAM_TID", "TraceRecorder", "maybe_span"]
