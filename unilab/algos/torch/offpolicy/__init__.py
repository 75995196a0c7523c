"""Off-policy RL unified infrastructure.

The documented `unilab.algos.torch.offpolicy` API: `OffPolicyRunner` (one learner process plus
a spawned collector, or the JAX core with `sim_backend="mjx"`), `MultiGPUOffPolicyRunner`
(one learner process per device), the collector entry point `off_policy_collector_fn`, and the
`OffPolicyLogger` both paths log through. Modules: `runner`, `worker`, `double_buffer_runner`,
`multi_gpu_runner`, `runtime`, and `jax_backend` (the `"mjx"` dispatch).
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
