"""Writing checkpoints: ``CheckpointWriter`` over orbax's ``CheckpointManager``, and
``best_step``, the checkpoint the manager ranks best."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import math
import os
import re
import shutil
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies

from unilab_jax import __version__
from unilab_jax.distributed import processes
from unilab_jax.training.checkpoint import layout
from unilab_jax.training.checkpoint.checksums import describe
from unilab_jax.training.checkpoint.layout import CheckpointSaveError

__all__ = ["CheckpointWriter", "best_step"]

EVAL_RETURN = "eval_return"  # the metric orbax ranks checkpoints by
TRASH = ".deleting"  # orbax renames an old checkpoint into it (out of the listing) to delete it


def _score(metrics: dict | None) -> float:
    value = (metrics or {}).get(EVAL_RETURN)
    return -math.inf if value is None or math.isnan(value) else float(value)


def _manager(directory: Path, keep: int | None = None) -> ocp.CheckpointManager:
    """Orbax's manager of ``directory``: synchronous saves, keeping the newest ``keep`` and the
    best evaluated; without ``keep``, to read (it creates and removes nothing)."""
    best = policies.BestN(get_metric_fn=_score, n=1, keep_checkpoints_without_metrics=False)
    options = ocp.CheckpointManagerOptions(
        preservation_policy=policies.AnyPreservationPolicy([policies.LatestN(keep), best]),
        best_fn=_score,
        enable_async_checkpointing=False,
        create=keep is not None,
        cleanup_tmp_directories=keep is not None,
        todelete_subdir=TRASH,
        save_root_metadata=False,
    )
    return ocp.CheckpointManager(directory, options=options)


def best_step(directory: str | Path) -> int | None:
    """The saved iteration of the best evaluation return; None when none was evaluated."""
    with contextlib.closing(_manager(Path(directory).absolute())) as manager:
        step = manager.best_step()
        return step if step is not None and _score(manager.metrics(step)) > -math.inf else None


class CheckpointWriter:
    """Checkpoints under ``directory/<iteration>/``, keeping the newest ``max_to_keep`` and the
    one of the best ``eval_return``; ``metadata`` (JSON, e.g. the run's settings) goes into
    every ``meta`` as ``"config"``. Every process of a run makes one and saves the same state."""

    keeps_best = True  # ``CheckpointSink`` hands ``save`` the block's evaluation return

    def __init__(self, directory: str | Path, max_to_keep: int = 3, metadata: Any = None):
        self.directory = Path(directory).absolute()
        self.max_to_keep, self.metadata = max_to_keep, metadata
        try:  # orbax removes what an interrupted save left, ``_empty_trash`` a deletion
            self._manager = _manager(self.directory, max_to_keep)
            self._empty_trash()
        except Exception as err:
            reason = getattr(err, "strerror", None) or err
            message = f"cannot open checkpoints in {self.directory}: {reason}"
            raise CheckpointSaveError(message) from None

    def save(self, iteration: int, state: Any, eval_return: float | None = None) -> Path:
        """Write ``state`` as checkpoint ``iteration`` (ranked by ``eval_return`` when it was
        evaluated), drop those no longer kept and return its folder; ``CheckpointSaveError``
        names why not and the checkpoint still intact."""
        items, before = layout.split_items(state), set(threading.enumerate())
        with _quiet():
            try:
                _check_space(self.directory, items)
                self._write(iteration, items, eval_return)
            except Exception as err:  # OSError, or tensorstore's errors via orbax
                failure = _save_failure(iteration, self.directory, err)  # no reference kept
            else:
                self._empty_trash()
                return self.directory / str(iteration)
            for thread in set(threading.enumerate()) - before:  # orbax's, failing in turn
                with contextlib.suppress(RuntimeError):  # not started yet
                    threading.Thread.join(thread, 30)  # not orbax's join, which re-raises
            gc.collect()  # the tasks they left, failed: collected here, not logged later
        if processes.is_primary():  # the partial save (orbax would remove it at next start)
            for partial in ocp.step.all_temporary_paths(self.directory):
                shutil.rmtree(partial.get(), ignore_errors=True)
        raise CheckpointSaveError(failure)

    def _write(self, iteration: int, items: dict, eval_return: float | None) -> None:
        meta = {"format": layout.FORMAT, "iteration": int(iteration), EVAL_RETURN: eval_return,
                "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _versions(),
                "config": self.metadata, "items": describe(items)}  # fmt: skip
        args = {item: ocp.args.StandardSave(arrays) for item, arrays in items.items()}
        args[layout.META_ITEM] = ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))
        if iteration in self._manager.all_steps():  # a resumed run writes it again
            self._manager.delete(iteration)
        metrics = {} if eval_return is None else {EVAL_RETURN: float(eval_return)}
        self._manager.save(iteration, args=ocp.args.Composite(**args), metrics=metrics, force=True)

    def _empty_trash(self) -> None:
        if processes.is_primary():
            shutil.rmtree(self.directory / TRASH, ignore_errors=True)

    def close(self) -> None:
        self._manager.close()


@contextlib.contextmanager
def _quiet():
    """Loggers and hook off while orbax saves: after a failure its threads log tracebacks of
    what ``CheckpointSaveError`` says in one line (absl), the tasks they leave log theirs when
    collected (asyncio), callbacks into its closed event loops raise (the unraisable hook)."""
    loggers = [logging.getLogger(name) for name in ("absl", "asyncio")]
    was = [logger.disabled for logger in loggers]
    unraisable, sys.unraisablehook = sys.unraisablehook, lambda _: None
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        for logger, disabled in zip(loggers, was, strict=True):
            logger.disabled = disabled


def _versions() -> dict[str, str]:
    libraries = ("jax", "jaxlib", "flax", "orbax-checkpoint", "mujoco")
    return {"unilab-jax": __version__, **{name: version(name) for name in libraries}}


def _check_space(directory: Path, items: dict[str, dict[str, Any]]) -> None:
    """Refuse a save that cannot fit before anything is written, on every process alike
    (process 0's figure), rather than have orbax fail midway."""
    need = sum(x.nbytes for arrays in items.values() for x in arrays.values())
    need = int(need * 1.1) + (64 << 10)  # orbax's metadata and file system blocks
    free = processes.broadcast_int(shutil.disk_usage(directory).free)
    if free < need:
        message = f"{free / 2**20:.2f} MiB free, a checkpoint needs about {need / 2**20:.2f} MiB"
        raise OSError(errno.ENOSPC, f"No space left on device ({message})")


def _save_failure(iteration: int, directory: Path, err: Exception) -> str:
    """The system's word for the failure (an ``OSError``'s, or the code a tensorstore error
    records, ``[os_error_code='28']``; else its first line) and what is left."""
    code = re.search(r"os_error_code='(\d+)'", str(err))
    reason = getattr(err, "strerror", None)
    reason = reason or (os.strerror(int(code.group(1))) if code else str(err).split("\n")[0])
    earlier = layout.list_steps(directory)
    kept = f"checkpoint {earlier[-1]} is intact" if earlier else "no earlier checkpoint exists"
    return f"could not write checkpoint {iteration} under {directory}: {reason}; {kept}"
