"""The facade's checkpoints, ``model_<iteration>.pt``: what they hold, the atomic write, and the
`TorchCheckpointer` the torch loop's ``CheckpointSink`` (the core's schedule) saves through.

Every ``model_<iteration>.pt`` the facade writes (both backends, `save_model`) is
``learner.get_state_dict()`` plus one entry, ``"unilab_meta"`` (`META_KEY`, built by
`checkpoint_meta`): JSON values only, so ``torch.load(path, weights_only=True)`` reads the
file. It records what rebuilding the policy needs, which the learner's state alone does not:

==================  ==========================================================================
``format``          `META_FORMAT` (1)
``algo``            the registry name of the learner's algorithm (``"sac"``, ``"hora_sac"``)
``learner``         its class name (``"FastSACLearner"``)
``env``             the task the run trained on (a name of ``unilab_jax.envs``)
``sim_backend``     ``"mujoco"`` or ``"mjx"``
``obs_dim``         actor observation size; ``critic_obs_dim``, ``action_dim`` likewise
``config``          ``{"train": TrainConfig, "algo": learner.config}`` as JSON, the layout of
                    the core's ``run_config.json`` (``env_overrides`` included)
``iteration``       the training iteration of this file
``versions``        ``unilab_jax``, ``torch``, ``jax`` and ``python`` versions that wrote it
==================  ==========================================================================

The learners' ``load_state_dict`` read their own keys only, so a file with the entry loads
into a learner as before, and a reference file (no entry) still loads too.
``unilab_jax.load_policy(path)`` reads the entry to rebuild the deterministic policy in JAX
(and so ``unilab-jax evaluate``, ``play`` and the export work on facade runs); a file
without it cannot be read there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unilab_jax.config import TrainConfig

__all__ = ["META_FORMAT", "META_KEY", "TorchCheckpointer", "checkpoint_meta", "save_model"]

#: The entry of a ``model_<iteration>.pt`` that records how to rebuild its policy.
META_KEY = "unilab_meta"
#: The version of that entry's layout (a reader refuses a newer one).
META_FORMAT = 1


def checkpoint_meta(learner: Any, config: TrainConfig, sim_backend: str) -> dict[str, Any]:
    """The ``"unilab_meta"`` entry (all but ``iteration``, which `save_model`'s caller adds) of
    the checkpoints of ``learner`` trained as ``config`` says on ``sim_backend``.

    ``config`` is the run's ``TrainConfig`` (the facade's ``runner.config``); for a learner
    trained elsewhere, ``TrainConfig(env=..., algo=...)`` records the task. Raises
    ``ValueError`` for a learner of no registered algorithm.
    """
    from unilab.algos.torch.registry import TORCH_ALGOS, spec_of_learner

    spec = spec_of_learner(learner)
    algo = None if spec is None else spec.name
    if algo is None:
        raise ValueError(
            f"{type(learner).__name__} is not a learner of a registered algorithm "
            f"({', '.join(spec.learner_cls.__name__ for spec in TORCH_ALGOS.values())})"
        )
    return {
        "format": META_FORMAT,
        "algo": algo,
        "learner": type(learner).__name__,
        "env": config.env,
        "sim_backend": sim_backend,
        "obs_dim": int(learner.obs_dim),
        "critic_obs_dim": int(learner.critic_obs_dim),
        "action_dim": int(learner.action_dim),
        "config": {
            "train": _json_settings(config.replace(algo=algo)),
            "algo": _json_settings(learner.config),
        },
        "versions": _versions(),
    }


def _json_settings(settings: Any) -> dict[str, Any]:
    """A settings dataclass as JSON values, in the layout of
    ``unilab_jax.training.trainer.run_config``
    (not imported here: it pulls in orbax, seconds of start-up on the torch path)."""
    return json.loads(json.dumps(dataclasses.asdict(settings), default=str))


def _versions() -> dict[str, str | None]:
    import importlib.metadata

    import jax
    import torch

    try:
        ours = importlib.metadata.version("unilab-jax")
    except importlib.metadata.PackageNotFoundError:  # a source tree that is not installed
        ours = None
    return {
        "unilab_jax": ours,
        "torch": str(torch.__version__),
        "jax": jax.__version__,
        "python": platform.python_version(),
    }


def save_model(learner: Any, path: Path, meta: Mapping[str, Any] | None = None) -> str:
    """``torch.save(learner.get_state_dict())`` as ``path``, with ``meta`` (`checkpoint_meta`
    plus ``iteration``) as its ``"unilab_meta"`` entry when given; atomically: written beside
    it and renamed into place, so an interrupted save never leaves a truncated
    ``model_<it>.pt``."""
    import torch

    state = learner.get_state_dict()
    if meta is not None:
        state[META_KEY] = dict(meta)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return str(path)


class TorchCheckpointer:
    """The core's ``Checkpointer`` protocol over `save_model`: ``save(iteration, learner)``
    writes ``<log_dir>/model_<iteration>.pt`` with ``meta`` (`checkpoint_meta`) and the
    iteration as its ``"unilab_meta"`` entry, so the torch loop saves on the core's schedule
    (``unilab_jax.training.sinks.CheckpointSink``: every ``save_interval`` iterations and after the
    last, and once more for a run stopped by a signal)."""

    def __init__(self, log_dir: Path, meta: Mapping[str, Any] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.meta = None if meta is None else dict(meta)
        self.last: str | None = None
        """The path of the newest checkpoint written (None before the first)."""

    def save(self, step: int, state: Any) -> str:
        meta = None if self.meta is None else {**self.meta, "iteration": int(step)}
        self.last = save_model(state, self.log_dir / f"model_{step}.pt", meta)
        return self.last

    def close(self) -> None:
        """Nothing to release: every save is complete when it returns."""
