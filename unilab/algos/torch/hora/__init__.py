"""HORA (the reference's in-hand rotation teacher) on the torch facade: HORA-SAC only.

- ``sac_learner``: ``HoraSACLearner``, FastSAC with the privileged actor (the JAX core's
  ``make_hora_sac``, numerically matched).
- ``sac_models``: ``HoraSACActor``, the torch ``PrivilegedSACActor`` under the reference's
  constructor.
- ``sac``: ``HoraSACRuntime`` and ``resolve_hora_sac_runtime``, what an algo config with
  ``runtime_impl: hora_sac`` selects; ``runtime``: the markers.
- ``observations``: ``split_hora_obs_with_priv_info``, the collector's privileged values.

The reference's HORA PPO, APPO and distillation are not part of this project. Imports are lazy
(as the reference's), so ``import unilab.algos.torch.hora.runtime`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "HoraSACActor",
    "HoraSACLearner",
    "HoraSACRuntime",
    "resolve_hora_sac_runtime",
]

_HOMES = {
    "HoraSACActor": "sac_models",
    "HoraSACLearner": "sac_learner",
    "HoraSACRuntime": "sac",
    "resolve_hora_sac_runtime": "sac",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
