"""Reading checkpoints back, checked: ``restore_checkpoint`` (the whole state) and
``restore_item`` (one item, e.g. a policy's ``agent``)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
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
    with _stderr_held() as held, ocp.StandardCheckpointer() as checkpointer:
        for item, arrays in wanted.items():  # all, also after a failure: the same calls on
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, arrays)  # every process
            try:
                restored[item] = checkpointer.restore(directory / str(step) / item, abstract)
            except Exception as err:  # orbax and tensorstore raise many types for a bad file
                failure = failure or f"{item}/ could not be read ({_first_cause(err)})"
        held.keep = failure is None
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


class _Held:
    keep = True


@contextlib.contextmanager
def _stderr_held() -> Iterator[_Held]:
    """File descriptor 2 into a temporary file while orbax reads. It reads every array at once,
    and when one read fails the others, finishing on tensorstore's threads after orbax's event
    loop has closed, print their tracebacks there: thousands of lines before the one error
    that says what is wrong. What was held is written out unless ``keep`` was set False."""
    held, saved = _Held(), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        os.dup2(sink.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if held.keep:
                sink.seek(0)
                sys.stderr.write(sink.read().decode(errors="replace"))


def _first_cause(err: BaseException) -> str:
    """The innermost exception's first line, without tensorstore's spec (kilobytes of JSON):
    it names the file and what is wrong with it."""
    while (inner := err.__cause__ or err.__context__) is not None:
        err = inner
    text = str(err).split("\n")[0].split(" [tensorstore_spec")[0]
    return f"{type(err).__name__}: {text}"


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
