"""Reading checkpoints back, checked: ``restore_checkpoint`` (the whole state) and
``restore_item`` (one item, e.g. a policy's ``agent``).

Before orbax reads an item, its files are compared with the sizes and CRC-32s ``meta.json``
records, and after, every array with its own CRC-32: damage raises ``CheckpointDamagedError``.
The saved shapes and dtypes are compared with the template's first: a checkpoint of other
settings raises ``CheckpointMismatchError``, naming the arrays that differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from unilab_jax.training.checkpoint.checksums import _crcs, _file_checksums
from unilab_jax.training.checkpoint.layout import (
    CheckpointDamagedError,
    CheckpointMismatchError,
    _layout,
    _multiprocess,
    _path_name,
    _primary,
    _split,
    latest_step,
    read_meta,
)
from unilab_jax.training.checkpoint.save import _stderr_kept_on_success

__all__ = ["restore_checkpoint", "restore_item"]


def restore_checkpoint(directory: str | Path, like: Any, step: int | None = None) -> Any:
    """Restore the state saved at ``step`` (default: newest) with the shapes, dtypes and
    shardings of ``like`` (a state built the same way, e.g. a fresh ``init``).

    Raises ``FileNotFoundError`` when there is no checkpoint, ``CheckpointMismatchError`` when
    the saved arrays do not fit ``like``, ``CheckpointDamagedError`` when a file is corrupt.
    """
    directory = Path(directory).absolute()
    step, meta = _open(directory, step)
    wanted = _split(like)
    _check_layout(step, meta, wanted)
    restored = _read_items(directory, step, meta, wanted)
    leaves, treedef = jax.tree.flatten(like)
    for leaf in _layout(like):
        if leaf.name in restored.get(leaf.item, {}):
            leaves[leaf.index] = restored[leaf.item][leaf.name]
    return jax.tree.unflatten(treedef, leaves)


def restore_item(directory: str | Path, item: str, like: Any, step: int | None = None) -> Any:
    """Restore one item (e.g. ``"agent"``) of checkpoint ``step`` (default: newest) into the
    layout of ``like``, reading and checking that item's files only: a policy loads in a
    second without touching the replay."""
    directory = Path(directory).absolute()
    step, meta = _open(directory, step)
    values, treedef = jax.tree.flatten(like)
    names = [_path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(like)[0]]
    wanted = {item: {n: v for n, v in zip(names, values, strict=True) if v.size}}
    saved = {item: meta.get("items", {}).get(item, {})}
    _check_layout(step, {"items": saved}, wanted)
    restored = _read_items(directory, step, meta, wanted)[item]
    leaves = [restored.get(n, v) for n, v in zip(names, values, strict=True)]
    return jax.tree.unflatten(treedef, leaves)


def _open(directory: Path, step: int | None) -> tuple[int, dict]:
    step = latest_step(directory) if step is None else step
    if step is None or not (directory / str(step)).is_dir():
        raise FileNotFoundError(f"no checkpoint {'' if step is None else step} under {directory}")
    return step, read_meta(directory, step)


def _check_files(directory: Path, step: int, meta: dict, items: list[str]) -> None:
    """Compare the items' files with the sizes and CRC-32s recorded at save time, before
    orbax opens them: a flipped, truncated or missing file is named here (orbax's own
    failure on a damaged file is a burst of tracebacks from its reader threads)."""
    recorded = meta.get("files", {})
    folder = directory / str(step)
    for item in items:
        names = [n for n in recorded if n.split("/", 1)[0] == item]
        present = {str(p.relative_to(folder)) for p in (folder / item).rglob("*") if p.is_file()}
        for name in names:
            if name not in present:
                raise CheckpointDamagedError(directory, step, f"{name} is missing")
        current = _file_checksums(folder / item) if names else {}
        for name in names:
            size, crc = recorded[name]
            now = current.get(str(Path(name).relative_to(item)))
            if now is None or now[0] != size:
                raise CheckpointDamagedError(
                    directory, step, f"{name} has {now and now[0]} bytes, {size} when saved"
                )
            if now[1] != crc:
                raise CheckpointDamagedError(
                    directory, step, f"{name} does not match its recorded checksum"
                )


def _read_items(directory: Path, step: int, meta: dict, wanted: dict) -> dict:
    """Read ``wanted``'s items from disk and check every array against its CRC-32."""
    if _multiprocess():
        _check_files_once(directory, step, meta, list(wanted))
    else:
        _check_files(directory, step, meta, list(wanted))
    restored: dict[str, dict[str, Any]] = {}
    with _stderr_kept_on_success(), ocp.StandardCheckpointer() as checkpointer:
        for item, arrays in wanted.items():
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, arrays)
            try:
                restored[item] = checkpointer.restore(directory / str(step) / item, abstract)
            except Exception as err:  # orbax/tensorstore raise many types for a bad file
                reason = f"{item}/ could not be read ({type(err).__name__}: {err})"
                raise CheckpointDamagedError(directory, step, reason.split("\n")[0]) from None
    crcs = _crcs(restored)  # every process the same (a collective for spread arrays)
    for item, arrays in restored.items():
        for name in arrays:
            if crcs[item, name] != meta["items"][item][name]["crc32"]:
                raise CheckpointDamagedError(
                    directory, step, f"{item}/{name} does not match its recorded checksum"
                )
    return restored


def _check_files_once(directory: Path, step: int, meta: dict, items: list[str]) -> None:
    """``_check_files`` in a multi-process run: process 0 reads the (shared) files, every
    process raises its verdict."""
    from jax.experimental import multihost_utils

    error = None
    if _primary():
        try:
            _check_files(directory, step, meta, items)
        except CheckpointDamagedError as err:
            error = err
    if not int(multihost_utils.broadcast_one_to_all(np.int32(error is not None))):
        return
    if error is not None:
        raise error
    raise CheckpointDamagedError(directory, step, "process 0 found a damaged file (its output "
                                 "names it)")  # fmt: skip


def _check_layout(step: int, meta: dict, wanted: dict[str, dict[str, Any]]) -> None:
    saved = meta.get("items", {})
    differences = []
    for item in sorted(set(saved) | set(wanted)):
        have, want = saved.get(item, {}), wanted.get(item, {})
        for name in sorted(set(have) | set(want)):
            if name not in have:
                differences.append(f"{item}/{name} not in the checkpoint")
            elif name not in want:
                differences.append(f"{item}/{name} not in this run's state")
            else:
                shape, dtype = tuple(have[name]["shape"]), have[name]["dtype"]
                if shape != tuple(want[name].shape) or dtype != str(want[name].dtype):
                    differences.append(
                        f"{item}/{name} saved {dtype}{list(shape)}, "
                        f"this run {want[name].dtype}{list(want[name].shape)}"
                    )
    if differences:
        raise CheckpointMismatchError(step, meta, differences)
