"""Orbax checkpoints of the full training state.

What is saved is the whole ``TrainState`` pytree: learner parameters, target critics,
optimiser moments, temperature, observation normalisers, the replay ring and its counters, the
env states, exploration state and PRNG key. Restoring therefore resumes training exactly
where it stopped (peers save weights only, or weights plus optimisers; see ``spec/peers.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

__all__ = ["CheckpointWriter", "restore_checkpoint", "latest_step"]


def _flat(state: Any) -> dict[str, Any]:
    """The state's non-empty leaves by flat index. Orbax refuses zero-size arrays, and MJX
    data has some (e.g. ``act`` of a model without activations); those are rebuilt from the
    restore template instead."""
    leaves = jax.tree.leaves(state)
    return {f"leaf_{i:05d}": x for i, x in enumerate(leaves) if x.size}


def _unflat(flat: dict[str, Any], like: Any) -> Any:
    leaves, treedef = jax.tree.flatten(like)
    restored = [flat.get(f"leaf_{i:05d}", x) for i, x in enumerate(leaves)]
    return jax.tree.unflatten(treedef, restored)


class CheckpointWriter:
    """Periodic checkpoints under ``directory/<iteration>/``; keeps the newest ``max_to_keep``."""

    def __init__(self, directory: str | Path, max_to_keep: int = 3):
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def save(self, iteration: int, state: Any) -> Path:
        self._manager.save(iteration, args=ocp.args.StandardSave(_flat(state)), force=True)
        self._manager.wait_until_finished()
        return self.directory / str(iteration)

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()


def latest_step(directory: str | Path) -> int | None:
    """The newest saved iteration under ``directory``, or None."""
    with ocp.CheckpointManager(Path(directory).absolute()) as manager:
        return manager.latest_step()


def restore_checkpoint(directory: str | Path, like: Any, step: int | None = None) -> Any:
    """Restore the state saved at ``step`` (default: newest) with the shapes, dtypes and
    shardings of ``like`` (a state built the same way, e.g. a fresh ``init``)."""
    directory = Path(directory).absolute()
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _flat(like))
    with ocp.CheckpointManager(directory) as manager:
        step = manager.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint found under {directory}")
        flat = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    return _unflat(flat, like)
