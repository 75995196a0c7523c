"""Off-policy RL unified infrastructure.

The documented `unilab.algos.torch.offpolicy` API: `OffPolicyRunner` (one learner process plus
a spawned collector, or the JAX core with `sim_backend="mjx"`), `MultiGPUOffPolicyRunner`
(one learner process per device), the collector entry point `off_policy_collector_fn`, and the
`OffPolicyLogger` both paths log through (on both, the core's sinks drive it:
`unilab_jax.training.sinks`).

Modules: `runner` (the facade and its documented behaviour), `settings` (the keywords as one
core `TrainConfig`, learner checks), `torch_loop` (the torch path's one loop and its batch
sources), `ranks` (several learner ranks), `run_state` (bookkeeping, each iteration's record
for the sinks, the summary), `checkpoints` (`model_<it>.pt`: metadata, atomic write),
`double_buffer_runner` and `multi_gpu_runner` (constructors of the loop's variants),
`double_buffer_pipeline` (the B path's learner side), `worker` (the collector; its actor
`collector_actor`, statistics `collector_stats`, B-path packing `collector_pack`),
`jax_backend` (the `"mjx"` dispatch) and `runtime` (custom runtimes).
"""

from unilab.algos.torch.offpolicy.multi_gpu_runner import MultiGPUOffPolicyRunner
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab.algos.torch.offpolicy.worker import off_policy_collector_fn
from unilab_jax.training.facade import OffPolicyLogger

__all__ = [
    "MultiGPUOffPolicyRunner",
    "OffPolicyLogger",
    "OffPolicyRunner",
    "off_policy_collector_fn",
]
