"""Inter-process objects of the torch off-policy runner (learner process <-> collector process).

All are created in the learner and handed to the spawned collector through its `Process`
arguments (spawn pickling): the replay ring (`ReplayBuffer`), the actor weights
(`SharedWeightSync`), the observation statistics (`SharedObsNormStats`) and the stop request
(`StopFlag`). `AsyncRunner` owns the collector process and releases them. Each also takes the
reference's constructor arguments (see its module).
"""

from unilab.ipc.async_runner import AsyncRunner
from unilab.ipc.replay_buffer import ReplayBuffer
from unilab.ipc.shared_obs_stats import SharedObsNormStats
from unilab.ipc.stop_flag import StopFlag
from unilab.ipc.weight_sync import SharedWeightSync

__all__ = ["AsyncRunner", "ReplayBuffer", "SharedObsNormStats", "SharedWeightSync", "StopFlag"]
