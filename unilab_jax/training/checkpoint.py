"""Checkpoints of the whole training state on orbax's ``CheckpointManager``, checked.

Checkpoint ``<directory>/<iteration>/`` holds the whole ``TrainState`` (a restore resumes
exactly) as orbax items ``agent``, ``replay``, ``env`` and ``run`` (the rest), each array named
by its path, so an item reads alone (a policy reads ``agent``); ``meta`` (``META_FILE``:
format, iteration, versions, the run's settings, the evaluation return, every array's shape,
dtype and checksum); orbax's ``metrics``. Orbax gives atomic saves (a crash, signal or full
disk never leaves a half-written checkpoint that is listed), the listing, the retention (the
newest ``max_to_keep`` and the best evaluated, ``best_step``) and multi-process saves and
restores (every process calls them alike and writes or reads its own shards).

Ours: **checked restores** (other shapes raise ``CheckpointMismatchError`` naming the arrays; a
file orbax cannot read, or an array unlike its checksum, ``CheckpointDamagedError``, on every
process alike) and **clear save errors** (a save that cannot fit is refused before writing; a
failed one raises ``CheckpointSaveError`` with the system's reason, the last one intact). An
array's checksum sums, mod 2**32, its 32-bit words (narrower elements widened) each mixed with
its position by murmur3's finaliser: a sum, so one jitted reduction checks an array spread over
processes and the figure does not depend on how many wrote or read it.
"""

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
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies

from unilab_jax import __version__
from unilab_jax.distributed import processes
from unilab_jax.errors import (
    CheckpointDamagedError,
    CheckpointError,
    CheckpointMismatchError,
    CheckpointSaveError,
)

__all__ = [
    "FORMAT",
    "META_FILE",
    "CheckpointDamagedError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "CheckpointWriter",
    "best_step",
    "checksum",
    "latest_step",
    "list_steps",
    "read_meta",
    "restore_checkpoint",
    "restore_item",
]

FORMAT = "unilab_jax checkpoint 3"
META_ITEM = "meta"
META_FILE = f"{META_ITEM}/metadata"  # orbax's JSON item, in the checkpoint's folder
ITEMS = ("agent", "replay", "env", "run")  # the TrainState fields not named go into "run"
EVAL_RETURN = "eval_return"  # the metric orbax ranks checkpoints by
LOGGERS = ("absl", "asyncio")  # what orbax's failing threads log through
TRASH = ".deleting"  # orbax renames an old checkpoint into it (out of the listing) to delete it


def _names(tree: Any) -> list[tuple[str, str]]:
    """``(item, array name)`` of every leaf: ``agent.actor_params.params.Dense_0.kernel`` is
    ``actor_params.params.Dense_0.kernel`` of ``agent``, ``key`` is ``key`` of ``run``."""
    out = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keys = (getattr(k, "name", getattr(k, "key", getattr(k, "idx", k))) for k in path)
        head, _, rest = (name := ".".join(map(str, keys))).partition(".")
        out.append((head, rest or head) if head in ITEMS else ("run", name))
    return out


def _split_items(state: Any) -> dict[str, dict[str, Any]]:
    """The state's arrays by item and name, less the zero-size ones (orbax refuses them, and
    MJX data has some): ``_merge_items`` keeps its template's."""
    items: dict[str, dict[str, Any]] = {}
    for (item, name), value in zip(_names(state), jax.tree.leaves(state), strict=True):
        if value.size:
            items.setdefault(item, {})[name] = value
    return items


def _merge_items(like: Any, items: dict[str, dict[str, Any]]) -> Any:
    values, treedef = jax.tree.flatten(like)
    merged = [items.get(i, {}).get(n, v) for (i, n), v in zip(_names(like), values, strict=True)]
    return jax.tree.unflatten(treedef, merged)


def list_steps(directory: str | Path) -> list[int]:
    """The iterations saved under ``directory``, ascending: orbax's finalised checkpoints, so
    one being written or interrupted is never listed."""
    return sorted(ocp.step.checkpoint_steps(Path(directory).absolute()))


def latest_step(directory: str | Path) -> int | None:
    return max(list_steps(directory), default=None)


def read_meta(directory: str | Path, step: int) -> dict:
    """Checkpoint ``step``'s meta; ``CheckpointDamagedError``, or ``CheckpointError`` if older."""
    directory = Path(directory).absolute()
    folder, meta = directory / str(step), {"format": "1"}  # format 1 wrote meta.json
    if not (folder / "meta.json").exists():
        try:
            meta = json.loads((folder / META_FILE).read_text())
        except (OSError, ValueError) as err:
            reason = f"{META_FILE} unreadable ({err})"
            raise CheckpointDamagedError(directory, step, reason) from None
    if not isinstance(meta, dict) or meta.get("format") not in (FORMAT, "1", FORMAT[:-1] + "2"):
        raise CheckpointDamagedError(directory, step, f"{META_FILE} is not a {FORMAT!r} record")
    if meta["format"] != FORMAT:
        raise CheckpointError(f"checkpoint {step} under {directory} is of an older unilab-jax "
                              "format: load it with that version, or train again")  # fmt: skip
    return meta


def _mix(words: Any, start: int, xp: Any) -> Any:
    """The sum mod 2**32 of ``words`` (uint32, flat, from position ``start``) mixed with their
    positions; ``xp`` is numpy or jax.numpy (the same arithmetic)."""
    h = words ^ (xp.arange(start, start + words.size, dtype=xp.uint32) * xp.uint32(0x9E3779B9))
    h = (h ^ (h >> 16)) * xp.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * xp.uint32(0xC2B2AE35)
    return (h ^ (h >> 16)).sum(dtype=xp.uint32)


def _words(x: Any, xp: Any) -> Any:
    """The array as flat uint32 words: 8-byte elements as two, smaller ones widened to one."""
    if x.dtype == bool:
        x = x.astype(xp.uint8)
    unsigned = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint32}[x.dtype.itemsize]
    bits = x.view(unsigned) if xp is np else jax.lax.bitcast_convert_type(x, unsigned)
    return bits.astype(xp.uint32).reshape(-1)


@jax.jit
def _global_checksums(arrays: list) -> list:
    return [_mix(_words(x, jnp), 0, jnp) for x in arrays]


def checksum(x: Any) -> int:
    """The checksum of one array held by this process (the module docstring says which)."""
    words, total, chunk = _words(np.ascontiguousarray(np.asarray(x)), np), 0, 1 << 22
    for start in range(0, words.size, chunk):  # in chunks: no copies of a whole replay
        total += int(_mix(words[start : start + chunk], start, np))
    return total & 0xFFFFFFFF


def _describe(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict]]:
    """Every array's shape, dtype and checksum by item and name (a collective when several
    processes run: every process calls it)."""
    out: dict[str, dict[str, dict]] = {}
    spread = []  # arrays spread over several processes: summed on their devices
    for item, arrays in items.items():
        for name, x in arrays.items():
            out.setdefault(item, {})[name] = {"shape": list(x.shape), "dtype": str(x.dtype)}
            if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
                spread.append(((item, name), x))
            else:
                out[item][name]["checksum"] = checksum(x)
    sums = _global_checksums([x for _, x in spread]) if spread else []
    for ((item, name), _), total in zip(spread, sums, strict=True):
        out[item][name]["checksum"] = int(total)
    return out


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
        items, before = _split_items(state), set(threading.enumerate())
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
        libraries = ("jax", "jaxlib", "flax", "orbax-checkpoint", "mujoco")
        versions = {"unilab-jax": __version__, **{name: version(name) for name in libraries}}
        meta = {"format": FORMAT, "iteration": int(iteration), EVAL_RETURN: eval_return,
                "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions,
                "config": self.metadata, "items": _describe(items)}  # fmt: skip
        args = {item: ocp.args.StandardSave(arrays) for item, arrays in items.items()}
        args[META_ITEM] = ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))
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
    loggers = {logging.getLogger(name): logging.getLogger(name).disabled for name in LOGGERS}
    unraisable, sys.unraisablehook = sys.unraisablehook, lambda _: None
    try:
        for logger in loggers:
            logger.disabled = True
        yield
    finally:
        sys.unraisablehook = unraisable
        for logger, disabled in loggers.items():
            logger.disabled = disabled


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
    earlier = list_steps(directory)
    kept = f"checkpoint {earlier[-1]} is intact" if earlier else "no earlier checkpoint exists"
    return f"could not write checkpoint {iteration} under {directory}: {reason}; {kept}"


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
    step = latest_step(directory) if step is None else step
    if step is None or not (directory / str(step)).is_dir():
        raise FileNotFoundError(f"no checkpoint {'' if step is None else step} under {directory}")
    meta = read_meta(directory, step)
    saved, wanted = meta.get("items", {}), _split_items(like)
    _check_layout(step, meta, saved if only is None else {only: saved.get(only, {})}, wanted)
    restored, failure = {}, None
    with _stderr_held() as held, ocp.StandardCheckpointer() as checkpointer:
        for item, arrays in wanted.items():  # all, also after a failure: the same calls on
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, arrays)  # every process
            try:
                restored[item] = checkpointer.restore(directory / str(step) / item, abstract)
            except Exception as err:  # orbax and tensorstore raise many types for a bad file
                failure = failure or f"{item}/ could not be read ({_first_cause(err)})"
        held["keep"] = failure is None
    if processes.is_multiprocess():  # every process raises alike
        from jax.experimental import multihost_utils

        flags = multihost_utils.process_allgather(np.int32(failure is not None))
        if failure is None and np.any(flags):
            failure = "another process could not read its part (its output names the file)"
    if failure is not None:
        raise CheckpointDamagedError(directory, step, failure)
    for item, arrays in _describe(restored).items():  # a collective when several processes run
        for name, now in arrays.items():
            if now["checksum"] != saved[item][name]["checksum"]:
                reason = f"{item}/{name} does not match its recorded checksum"
                raise CheckpointDamagedError(directory, step, reason)
    return _merge_items(like, restored)


@contextlib.contextmanager
def _stderr_held() -> Iterator[dict]:
    """File descriptor 2 into a temporary file while orbax reads. It reads every array at once,
    and when one read fails the others, finishing on tensorstore's threads after orbax's event
    loop has closed, print their tracebacks there: thousands of lines before the one error
    that says what is wrong. What was held is written out unless ``keep`` was set False."""
    held, saved = {"keep": True}, os.dup(2)
    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        os.dup2(sink.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if held["keep"]:
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
        raise CheckpointMismatchError(step, meta, differences)
