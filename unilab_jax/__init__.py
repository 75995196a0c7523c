"""unilab-jax: massively parallel off-policy RL (FastSAC, FastTD3) on JAX and MJX.

``unilab_jax.train(config, algo)`` trains (the module ``unilab_jax.train``, callable as
``unilab_jax.training.trainer.train``; ``python -m unilab_jax.train`` is ``unilab-jax train``).
``unilab_jax.load_policy(run)`` and ``unilab_jax.evaluate(policy)`` (from
``unilab_jax.policy``) and ``unilab_jax.export_policy(policy, fmt, out)`` (from
``unilab_jax.policy.export``: torch, TorchScript or ONNX) are imported on first use, so
``import unilab_jax`` stays light.

The packages, by role: ``training`` (the run: trainer, host loop, checkpoints, resume, sinks,
presets), ``collection`` (the device program and C MuJoCo collection), ``algos``, ``envs``,
``policy`` (after training), ``distributed``, ``analysis``, ``torch`` (the only one that
imports torch) and ``cli`` (the command-line programs, ``unilab-jax <command>``).
"""

__version__ = "0.1.0"
__all__ = ["evaluate", "export_policy", "load_policy", "train"]

# Where each lazily imported name lives.
_LAZY = {"evaluate": "policy", "load_policy": "policy", "export_policy": "policy.export"}


def __getattr__(name: str):
    if name == "train":  # the callable module (importing it sets the attribute for good)
        import importlib

        return importlib.import_module("unilab_jax.train")
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"unilab_jax.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
