"""Reading checkpoints back, checked: ``restore_checkpoint`` (the whole state) and
``restore_item`` (one item, e.g. a policy's ``agent``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from unilab_jax.distributed import processes
from unilab_jax.training.checkpoint import layout
from unilab_jax.training.checkpoint.checksums import describe
from unilab_jax.training.checkpoint.layout import CheckpointDamagedError

__all__ = ["restore_checkpoint", "restore_item"]


def restore_checkpoint(directory: str | Path, like: Any, step: int | None = None) -> Any:
    """The state saved at ``step`` (default: the newest) with the shapes, dtypes and shardings
    of ``like`` (a state built the same way, e.g. a fresh ``init``). ``FileNotFoundError``:
    no such checkpoint; ``CheckpointMismatchError``: its arrays do not fit ``like``;
    ``CheckpointDamagedError``: a file is corrupt."""
    return _restore(Path(directory).absolute(), like, step, None)


def restore_item(directory: str | Path, item: str, like: Any, step: int | None = None) -> Any:
    """One item (e.g. ``"agent"``) of checkpoint ``step`` in the layout of ``like``, reading
    and checking that item only: a policy loads in a second without touching the replay."""
    return _restore(Path(directory).absolute(), {item: like}, step, item)[item]


def _restore(directory: Path, like: Any, step: int | None, only: str | None) -> Any:
    step = layout.latest_step(directory) if step is None else step
    if step is None or not (directory / str(step)).is_dir():
        raise FileNotFoundError(f"no checkpoint {'' if step is None else step} under {directory}")
    meta = layout.read_meta(directory, step)
    saved, wanted = meta.get("items", {}), layout.split_items(like)
    _check_layout(step, meta, saved if only is None else {only: saved.get(only, {})}, wanted)
    restored, failure = {}, None
    with ocp.StandardCheckpointer() as checkpointer:
        for item, arrays in wanted.items():  # all, also after a failure: the same calls on
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, arrays)  # every process
            try:
                restored[item] = checkpointer.restore(directory / str(step) / item, abstract)
            except Exception as err:  # orbax and tensorstore raise many types for a bad file
                reason = f"{item}/ could not be read ({type(err).__name__}: {err}"
                failure = failure or reason.split("\n")[0] + ")"
    if processes.is_multiprocess():  # every process raises alike
        from jax.experimental import multihost_utils

        flags = multihost_utils.process_allgather(np.int32(failure is not None))
        if failure is None and np.any(flags):
            failure = "another process could not read its part (its output names the file)"
    if failure is not None:
        raise CheckpointDamagedError(directory, step, failure)
    for item, arrays in describe(restored).items():  # a collective when several processes run
        for name, now in arrays.items():
            if now["crc32"] != saved[item][name]["crc32"]:
                reason = f"{item}/{name} does not match its recorded checksum"
                raise CheckpointDamagedError(directory, step, reason)
    return layout.merge_items(like, restored)


def _check_layout(step: int, meta: dict, saved: dict, wanted: dict[str, dict[str, Any]]) -> None:
    have = {(i, n): f"{e['dtype']}{e['shape']}" for i, a in saved.items() for n, e in a.items()}
    want = {(i, n): f"{x.dtype}{list(x.shape)}" for i, a in wanted.items() for n, x in a.items()}
    differences = [
        f"{i}/{n} saved {have.get((i, n), 'nothing')}, this run {want.get((i, n), 'nothing')}"
        for i, n in sorted(have.keys() | want.keys())
        if have.get((i, n)) != want.get((i, n))
    ]
    if differences:
        raise layout.CheckpointMismatchError(step, meta, differences)
