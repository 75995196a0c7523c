"""What the loggers print with: the console they draw on (`use_console`) and the dashboard's
number and duration formats."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator

from rich.console import Console

__all__ = ["format_duration", "format_number", "use_console"]

console_override: contextvars.ContextVar[Console | None] = contextvars.ContextVar(
    "unilab_jax_logging_console", default=None
)


@contextlib.contextmanager
def use_console(console: Console) -> Iterator[Console]:
    """Make loggers constructed inside the block print to ``console``.

    The logger constructors have a fixed, documented signature, so the console cannot be a
    constructor argument; this is the supported way to redirect output (tests, notebooks).
    """
    token = console_override.set(console)
    try:
        yield console
    finally:
        console_override.reset(token)


def format_number(value: float) -> str:
    """Compact number format of the dashboard.

    ``|x| >= 1e6`` -> ``1.23e+06``; ``>= 100`` -> one decimal; ``>= 1`` -> three decimals;
    ``>= 1e-3`` -> four decimals; smaller -> scientific. Exact zero is ``0.0000`` rather than
    ``0.00e+00`` because zero losses/metrics are common and the scientific form reads as noise.
    """
    x = float(value)
    if not math.isfinite(x):
        return str(x)
    magnitude = abs(x)
    if magnitude >= 1e6:
        return f"{x:.2e}"
    if magnitude >= 100:
        return f"{x:.1f}"
    if magnitude >= 1:
        return f"{x:.3f}"
    if magnitude >= 1e-3 or x == 0.0:
        return f"{x:.4f}"
    return f"{x:.2e}"


def format_duration(seconds: float) -> str:
    """``45s``, ``2m05s`` or ``1h02m05s`` (whole seconds, truncated)."""
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
