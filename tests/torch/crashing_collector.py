"""Collector targets for the failure tests: the real collector with an injected fault.

Importable in the spawned collector because pytest puts `tests/torch` on `sys.path` and spawned
children inherit it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from unilab.algos.torch.offpolicy.worker import off_policy_collector_fn


def crash_after(
    stop_event: Any, *, crash_at_step: int, marker_path: str | None = None, **kwargs: Any
) -> None:
    """Run the real collector, but make the `crash_at_step`-th `VecEnv.step` call raise.

    With `marker_path`, the wall-clock time of the failure (`time.time()`) is written there
    first, so a test can measure how long the learner takes to notice.
    """
    from unilab_jax.envs.vec_env import VecEnv

    original_step = VecEnv.step
    calls = 0

    def failing_step(self: VecEnv, actions: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == crash_at_step:
            if marker_path is not None:
                Path(marker_path).write_text(repr(time.time()))
            raise RuntimeError(f"injected collector failure at step {calls}")
        return original_step(self, actions)

    VecEnv.step = failing_step  # this process only: the collector is a fresh spawned child
    off_policy_collector_fn(stop_event, **kwargs)


def return_at_once(stop_event: Any, **kwargs: Any) -> None:
    """A collector that ends cleanly without collecting anything (exit code 0, no report)."""
    del stop_event, kwargs
