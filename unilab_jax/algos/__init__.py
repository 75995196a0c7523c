"""FastSAC and FastTD3 as pure JAX functions: networks, losses and update steps.

`make_sac` / `make_td3` return an `Agent` (a NamedTuple of pure, jit-able functions over a
pytree state); the training loop calls nothing else. `registry.ALGOS` is the table of
algorithms; `hyperparams` holds their hyperparameter dataclasses (importable without flax).

Names are imported on first access, so `unilab_jax.algos.hyperparams` and `.registry` stay light.
"""

import importlib

_EXPORTS = {
    "Agent": "unilab_jax.algos.agent",
    "Transition": "unilab_jax.algos.agent",
    "row_keys": "unilab_jax.algos.gradients",
    "row_normal": "unilab_jax.algos.gradients",
    "HoraSACConfig": "unilab_jax.algos.hyperparams",
    "SACConfig": "unilab_jax.algos.hyperparams",
    "TD3Config": "unilab_jax.algos.hyperparams",
    "SACState": "unilab_jax.algos.sac",
    "make_hora_sac": "unilab_jax.algos.sac",
    "make_sac": "unilab_jax.algos.sac",
    "TD3ExploreState": "unilab_jax.algos.td3",
    "TD3State": "unilab_jax.algos.td3",
    "make_td3": "unilab_jax.algos.td3",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
