"""Writing checkpoints: ``CheckpointWriter``, atomic saves and deletions, retention.

- ``CheckpointWriter.save`` writes the state's items through orbax into ``.tmp-<iteration>/``,
  then ``meta.json``, then renames the folder into place; a failure raises
  ``CheckpointSaveError`` (the operating system's reason and which earlier checkpoint is
  intact) and leaves the earlier checkpoints as they were;
- in a multi-process run every process writes its shards and process 0 alone prepares,
  renames and deletes folders and writes ``meta.json``, each step ending with its verdict;
- the newest ``max_to_keep`` checkpoints are kept, an old one renamed to
  ``.deleting-<iteration>/`` before it is removed; leftovers of either kind are swept when a
  writer opens the folder;
- ``_stderr_kept_on_success``: what orbax's threads print held back, replayed unless the save
  (or a restore, ``unilab_jax.training.checkpoint.restore``) fails; after a failed save orbax's
  threads
  are waited for and what they leave collected quietly (``_orbax_writing``,
  ``_collect_quietly``), so nothing prints after ``CheckpointSaveError``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint as ocp

from unilab_jax.training.checkpoint.checksums import _describe, _file_checksums
from unilab_jax.training.checkpoint.layout import (
    _DELETING_PREFIX,
    _TMP_PREFIX,
    FORMAT,
    META_FILE,
    CheckpointSaveError,
    _multiprocess,
    _primary,
    _split,
    list_steps,
)

__all__ = ["CheckpointWriter"]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("unilab-jax", "jax", "jaxlib", "flax", "orbax-checkpoint", "mujoco"):
        with contextlib.suppress(PackageNotFoundError):
            out[package] = version(package)
    return out


class CheckpointWriter:
    """Checkpoints under ``directory/<iteration>/``; keeps the newest ``max_to_keep``.

    ``metadata`` (JSON-serialisable, e.g. the run's configuration) is stored in every
    checkpoint's ``meta.json`` under ``"config"``.
    """

    def __init__(self, directory: str | Path, max_to_keep: int = 3, metadata: Any = None):
        self.directory = Path(directory).absolute()
        self.max_to_keep = max_to_keep
        self.metadata = metadata
        if not _primary():  # process 0 alone creates and sweeps (before its first save)
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CheckpointSaveError(
                f"cannot create the checkpoint folder {self.directory}: {err.strerror or err}"
            ) from None
        _sweep_leftovers(self.directory)

    def save(self, iteration: int, state: Any) -> Path:
        """Write ``state`` as checkpoint ``iteration`` (atomically) and drop the oldest beyond
        ``max_to_keep``; returns the checkpoint's folder."""
        final = self.directory / str(iteration)
        tmp = self.directory / f"{_TMP_PREFIX}{iteration}"
        items = _split(state)
        if _multiprocess():
            return self._save_together(iteration, items, final, tmp)
        try:
            _check_space(self.directory, items)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            _write_items(tmp, items)
            _write_json(tmp / META_FILE, self._meta(iteration, _describe(items), tmp))
            if final.exists():  # a rewrite of the same iteration (e.g. a resumed run's end)
                _delete(final)
            os.replace(tmp, final)
        except Exception as err:  # OSError, or tensorstore's own errors for a full disk
            failure = _save_failure(iteration, self.directory, err)  # no reference to err kept
        else:
            self._drop_old()
            return final
        _collect_quietly()
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointSaveError(failure)

    def _meta(self, iteration: int, described: dict, tmp: Path) -> dict:
        """``meta.json``: ``described`` (every array's shape, dtype and CRC-32) and every file
        written under ``tmp``."""
        return {
            "format": FORMAT,
            "iteration": int(iteration),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": _versions(),
            "config": self.metadata,
            "items": described,
            "files": _file_checksums(tmp),
        }

    def _save_together(self, iteration: int, items: dict, final: Path, tmp: Path) -> Path:
        """``save`` in a multi-process run: every process writes its shards through orbax;
        process 0 prepares the folder, writes ``meta.json`` and renames it into place. Each
        step ends with process 0's verdict, so a failure raises on every process."""
        primary = _primary()
        error = None
        if primary:
            try:
                _check_space(self.directory, items)
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
            except Exception as err:
                error = err
        self._verdict(error, iteration, tmp)
        try:
            _write_items(tmp, items)
            described = _describe(items)  # a collective (the processes' shard checksums)
        except Exception as err:
            failure = _save_failure(iteration, self.directory, err)  # no reference to err kept
        else:
            failure = None
        if failure is not None:
            _collect_quietly()
            if primary:
                shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointSaveError(failure)
        error = None
        if primary:
            try:
                _write_json(tmp / META_FILE, self._meta(iteration, described, tmp))
                if final.exists():
                    _delete(final)
                os.replace(tmp, final)
            except Exception as err:
                error = err
        self._verdict(error, iteration, tmp)
        if primary:
            self._drop_old()
        return final

    def _verdict(self, error: Exception | None, iteration: int, tmp: Path) -> None:
        """Process 0's ``error`` (or None) raised as ``CheckpointSaveError`` on every process."""
        from jax.experimental import multihost_utils

        failed = multihost_utils.broadcast_one_to_all(np.int32(error is not None))
        if not int(failed):
            return
        if error is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointSaveError(_save_failure(iteration, self.directory, error))
        raise CheckpointSaveError(
            f"could not write checkpoint {iteration} under {self.directory}: process 0 failed "
            "(its output says why)"
        )

    def _drop_old(self) -> None:
        steps = list_steps(self.directory)
        for step in steps[: max(0, len(steps) - self.max_to_keep)]:
            _delete(self.directory / str(step))

    def close(self) -> None:
        pass  # saves are synchronous; nothing is pending


def _check_space(directory: Path, items: dict[str, dict[str, Any]]) -> None:
    """Refuse a save that cannot fit, before writing anything (orbax's own failure on a full
    disk is hundreds of lines of tracebacks from its writer threads)."""
    need = sum(x.nbytes for arrays in items.values() for x in arrays.values())
    need = int(need * 1.1) + (64 << 10)  # orbax metadata and file system blocks
    free = shutil.disk_usage(directory).free
    if free < need:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device ({free / 2**20:.2f} MiB free, a checkpoint needs about "
            f"{need / 2**20:.2f} MiB)",
        )


@contextlib.contextmanager
def _stderr_kept_on_success():
    """Hold back what the writer threads print to stderr (file descriptor 2) during a save:
    replayed when the save works, dropped when it fails (the raised error says it all)."""
    try:
        held = tempfile.TemporaryFile()  # noqa: SIM115 (closed below; creating it may fail)
        saved = os.dup(2)
    except OSError:  # no room for the buffer: let the threads print
        yield
        return
    sys.stderr.flush()
    os.dup2(held.fileno(), 2)
    ok = False
    try:
        yield
        ok = True
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if ok:
            held.seek(0)
            os.write(2, held.read())
        held.close()


def _write_items(tmp: Path, items: dict[str, dict[str, Any]]) -> None:
    """Every item's arrays through orbax, under ``tmp`` (no checkpointer outlives it)."""
    with _orbax_writing(), ocp.StandardCheckpointer() as checkpointer:
        for item, arrays in items.items():
            checkpointer.save(tmp / item, arrays)
        checkpointer.wait_until_finished()


@contextlib.contextmanager
def _orbax_writing(timeout: float = 30.0):
    """Around orbax's save: stderr held back (``_stderr_kept_on_success``); on a failure, the
    threads orbax started are waited for (up to ``timeout`` s) while stderr is still held.
    Otherwise a writer thread may print its traceback after the save has failed, or write
    into the folder being removed."""
    before = set(threading.enumerate())
    with _stderr_kept_on_success():
        try:
            yield
        except BaseException:
            deadline = time.monotonic() + timeout
            for thread in set(threading.enumerate()) - before:
                _join(thread, deadline)
            raise


def _join(thread: threading.Thread, deadline: float) -> None:
    while True:
        try:  # Thread.join itself: orbax's threads re-raise their error from join()
            threading.Thread.join(thread, max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:  # "cannot join thread before it is started": it is starting
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def _collect_quietly() -> None:
    """After a failed save (outside its ``except`` block, so that nothing holds the
    failure's tracebacks): collect the asyncio futures orbax leaves, whose exceptions nobody
    retrieved, with asyncio's logger and the unraisable hook silenced. Left to a later
    collection (at any allocation, or at exit) each would print "Future exception was never
    retrieved" or "Exception ignored in" with a traceback, after ``CheckpointSaveError``
    has said it all."""
    import asyncio
    import gc
    import logging

    logger = logging.getLogger("asyncio")
    was_disabled, hook = logger.disabled, sys.unraisablehook
    logger.disabled, sys.unraisablehook = True, lambda unraisable: None
    try:
        gc.collect()
        for obj in gc.get_objects():  # any still held: their loops are closed, none can await
            if (
                isinstance(obj, asyncio.Future)
                and obj.done()
                and not obj.cancelled()
                and obj.get_loop().is_closed()
            ):
                obj.exception()  # marks it retrieved
    finally:
        logger.disabled, sys.unraisablehook = was_disabled, hook


def _save_failure(iteration: int, directory: Path, err: Exception) -> str:
    earlier = list_steps(directory)
    kept = f"checkpoint {earlier[-1]} is intact" if earlier else "no earlier checkpoint exists"
    return f"could not write checkpoint {iteration} under {directory}: {_reason(err)}; {kept}"


def _reason(err: Exception) -> str:
    """The operating system's word for a failed save: an ``OSError``'s own, or the one a
    tensorstore error from orbax's writer threads records (``[os_error_code='28']``, inside a
    message of thousands of characters of paths and specs); else the message's first line."""
    if getattr(err, "strerror", None):
        return err.strerror
    code = re.search(r"os_error_code='(\d+)'", str(err))
    return os.strerror(int(code.group(1))) if code else str(err).split("\n")[0]


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())


def _delete(path: Path) -> None:
    """Rename out of the checkpoint namespace first, then remove: never half-deleted."""
    doomed = path.with_name(f"{_DELETING_PREFIX}{path.name}")
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _sweep_leftovers(directory: Path) -> None:
    for path in directory.iterdir():
        if path.name.startswith((_TMP_PREFIX, _DELETING_PREFIX)):
            shutil.rmtree(path, ignore_errors=True)
