"""Pieces shared by the torch FastSAC, FastTD3 and FlashSAC learners, the main ones re-exported.

- `batch`: the batch contract (the keys an update reads; `MissingBatchKeyError`, a `KeyError`).
- `learner_base`: `LearnerBase`, the learners' shared step, `soft_update_target` and checkpoint.
- `networks`: the C51 critic networks and maths (`categorical_projection`, ...).
- `normalization`: the observation normaliser `EmpiricalNormalization`.
- `updates`: the optimisation mechanics (`guarded_step`, `temperature_step`, `polyak_update`,
  `metrics_to_floats`, the optimisers, AMP settings) and the update schedule of one learner
  iteration (`run_updates`).
"""

from unilab.algos.torch.common.networks import (
    Critic,
    DistributionalQNetwork,
    bootstrap_mask,
    categorical_cross_entropy,
    categorical_projection,
    expected_value,
)
from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.common.updates import (
    guarded_step,
    metrics_to_floats,
    polyak_update,
    run_updates,
)

__all__ = [
    "Critic",
    "DistributionalQNetwork",
    "EmpiricalNormalization",
    "bootstrap_mask",
    "categorical_cross_entropy",
    "categorical_projection",
    "expected_value",
    "guarded_step",
    "metrics_to_floats",
    "polyak_update",
    "run_updates",
]
