"""Off-policy RL unified infrastructure.

The documented `unilab.algos.torch.offpolicy` API: `OffPolicyRunner` (one learner process plus
a spawned collector, or the JAX core with `sim_backend="mjx"`), `MultiGPUOffPolicyRunner`
(one learner process per device), the collector entry point `off_policy_collector_fn`, and the
`OffPolicyLogger` both paths log through.

Modules: `runner` (the facade and its documented behaviour), `settings` (the keywords as one
core `TrainConfig`, learner checks), `torch_loop` (the torch path's one loop and its batch
sources), `ranks` (several learner ranks), `run_state` (bookkeeping and summary),
`double_buffer_runner` and `multi_gpu_runner` (constructors of the loop's variants), `worker`
(the collector), `jax_backend` (the `"mjx"` dispatch) and `runtime` (custom runtimes).
"""

from unilab.algos.torch.offpolicy.multi_gpu_runner import MultiGPUOffPolicyRunner
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab.algos.torch.offpolicy.worker import off_policy_collector_fn
from unilab_jax.logging import OffPolicyLogger

__all__ = [
    "MultiGPUOffPolicyRunner",
    "OffPolicyLogger",
    "OffPolicyRunner",
    "off_policy_collector_fn",
]
