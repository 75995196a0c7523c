"""PyTorch FastSAC / FastTD3 learners with UniLab's contract, numerically matched to `unilab_jax`.

- `common`: C51 networks and maths, `EmpiricalNormalization`, the update mechanics and the
  update schedule (`common.updates`).
- `fast_sac`, `fast_td3`: the learners (`update_critic`, `update_actor`, `soft_update_target`,
  `get_state_dict` / `load_state_dict`); `hora`: HORA-SAC, FastSAC with a privileged actor
  (the reference's `runtime_impl: hora_sac`).
- `registry`: the torch side of each algorithm (learner, collector actor, converters,
  exploration), one table.
- `convert`: exact weight and optimiser-state conversion to and from the JAX agent states.
- `offpolicy`: the documented runners.

torch is an optional dependency (`pip install -e ".[torch]"`); importing this package without it
fails with that instruction instead of a bare `ModuleNotFoundError` deep in a submodule.
"""

try:
    import torch  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "unilab.algos.torch needs PyTorch: install the extra with `pip install -e '.[torch]'`"
    ) from error

__all__: list[str] = []
