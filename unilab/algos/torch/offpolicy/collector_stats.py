"""What the off-policy collector reports to the learner: phase timings, episode statistics and
the metrics message built from them.

Every `METRICS_EVERY` collector iterations (`worker._Collector.run`) one message goes on the
metrics queue: `total_steps` (env steps so far), `buffer_size`, `collector_timing_ms` (average ms
per iteration of each phase of `COLLECTOR_TIMING_KEYS`), `reward_components` (the mean of each
`reward/...` entry of the env's `info["log"]` since the last message) and, once episodes have
ended, `mean_ep_reward` / `mean_ep_length` (over the last 100 episodes, a `deque(maxlen=100)`)
and `timeout_rate` / `terminated_rate` (of the episodes ended since the last message). The
collector adds `trace_events` when tracing.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

__all__ = ["COLLECTOR_TIMING_KEYS", "METRICS_EVERY", "CollectorStats"]

#: Exclusive phases of one collector iteration, reported as average ms per iteration.
COLLECTOR_TIMING_KEYS = (
    "weight_sync_ms",
    "action_select_ms",
    "env_step_ms",
    "replay_ms",
    "sync_coordination_ms",
)
METRICS_EVERY = 10  # collector iterations between two metrics messages


class CollectorStats:
    """Timings and episode statistics of one collector process.

    The timings, reward components and done counts cover the iterations since the last
    message (`take_message` resets them); `total_steps` and the last 100 episode returns and
    lengths cover the whole run.
    """

    def __init__(self) -> None:
        self.timing = dict.fromkeys(COLLECTOR_TIMING_KEYS, 0.0)
        self.timing_steps = 0
        self.returns: collections.deque[float] = collections.deque(maxlen=100)
        self.lengths: collections.deque[float] = collections.deque(maxlen=100)
        self.components: dict[str, list[float]] = {}
        self.timeouts = 0
        self.terminations = 0
        self.total_steps = 0
        self.num_envs = 0
        self.ep_return = np.zeros(0, dtype=np.float64)
        self.ep_length = np.zeros(0, dtype=np.int64)

    def start(self, num_envs: int) -> None:
        """Track the running episodes of `num_envs` envs."""
        self.num_envs = num_envs
        self.ep_return = np.zeros(num_envs, dtype=np.float64)
        self.ep_length = np.zeros(num_envs, dtype=np.int64)

    def add_time(self, key: str, seconds: float) -> None:
        """Add `seconds` to phase `key` of this iteration."""
        self.timing[key] += seconds * 1e3

    def record_step(self, nxt: Any, dones: np.ndarray) -> None:
        """Account one vectorised step: its rewards, ended episodes and reward components."""
        self.total_steps += self.num_envs
        self.ep_return += nxt.reward
        self.ep_length += 1
        ended = np.flatnonzero(dones)
        if ended.size:
            self.returns.extend(self.ep_return[ended].tolist())
            self.lengths.extend(self.ep_length[ended].tolist())
            self.ep_return[ended] = 0.0
            self.ep_length[ended] = 0
            self.timeouts += int(np.count_nonzero(nxt.truncated))
            self.terminations += int(np.count_nonzero(nxt.terminated & ~nxt.truncated))
        for key, value in nxt.info.get("log", {}).items():
            if key.startswith("reward/"):
                self.components.setdefault(key, []).append(float(value))

    def end_iteration(self) -> bool:
        """Count one collector iteration; True when a metrics message is due."""
        self.timing_steps += 1
        return self.timing_steps >= METRICS_EVERY

    def take_message(self, buffer_size: int) -> dict[str, Any]:
        """The metrics message of the iterations since the last one; starts a new window."""
        steps = max(self.timing_steps, 1)
        message: dict[str, Any] = {
            "total_steps": self.total_steps,
            "buffer_size": buffer_size,
            "collector_timing_ms": {k: v / steps for k, v in self.timing.items()},
            "reward_components": {k: float(np.mean(v)) for k, v in self.components.items()},
        }
        if self.returns:
            message["mean_ep_reward"] = float(np.mean(self.returns))
            message["mean_ep_length"] = float(np.mean(self.lengths))
        done_events = self.timeouts + self.terminations
        if done_events:
            message["timeout_rate"] = self.timeouts / done_events
            message["terminated_rate"] = self.terminations / done_events
        self.timing = dict.fromkeys(COLLECTOR_TIMING_KEYS, 0.0)
        self.timing_steps = 0
        self.components = {}
        self.timeouts = self.terminations = 0
        return message
