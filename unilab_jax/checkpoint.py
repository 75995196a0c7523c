"""Checkpoints of the full training state: orbax arrays, a self-describing, checked layout.

What is saved is the whole ``TrainState`` pytree: learner parameters, target critics,
optimiser moments, temperature, observation normalisers, the replay ring and its counters, the
env states, exploration state and PRNG key. Restoring therefore resumes training exactly where
it stopped. One checkpoint is a folder ``<directory>/<iteration>/``:

- ``agent/``, ``replay/``, ``env/``, ``run/``: one orbax item each (``run`` holds exploration
  state, episode statistics, PRNG key and iteration), every array named by its path in the
  state (``actor_params.params.Dense_0.kernel``), so an item can be read alone (a policy needs
  only ``agent``);
- ``meta.json``: the format, the iteration, library versions, the run's configuration (when the
  writer was given one), for every array its shape, dtype and CRC-32, and for every file its
  size and CRC-32.

Guarantees:

- **Atomic saves.** A checkpoint is written into ``.tmp-<iteration>/`` and renamed into place
  once complete, so a crash, a signal or a full disk never leaves a half-written checkpoint that
  looks like one; a failed save raises ``CheckpointSaveError`` and leaves the earlier
  checkpoints as they were.
- **Atomic deletion.** An old checkpoint is first renamed to ``.deleting-<iteration>/`` and only
  then removed, so an interrupted deletion never leaves a half-deleted checkpoint behind;
  leftovers of either kind are swept when the next writer opens the directory.
- **Checked restores.** The item's files are checked against their recorded sizes and CRC-32s
  before orbax reads them, and every restored array against its own CRC-32: a flipped,
  truncated or missing file raises ``CheckpointDamagedError`` ("checkpoint N is damaged"),
  distinct from ``CheckpointMismatchError`` (a checkpoint written for other shapes, i.e.
  other settings).

**Several processes** (``unilab_jax.distributed``): every process calls ``save`` and
``restore_checkpoint`` with the same state; each writes and reads the shards of its own
devices through orbax's multi-process support, and process 0 alone creates, renames and
deletes folders and writes ``meta.json`` (the folder must be shared by all processes, e.g. a
network file system). The format is the same as one process's: a CRC-32 is always that of the
whole array, combined from the processes' row shards (``crc32_combine``), so a checkpoint of
2 processes restores in 1 and the other way round.
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
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from unilab_jax.errors import CheckpointError

__all__ = [
    "CheckpointDamagedError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "CheckpointWriter",
    "latest_step",
    "list_steps",
    "read_meta",
    "restore_checkpoint",
    "restore_item",
]

FORMAT = "unilab_jax checkpoint 1"
META_FILE = "meta.json"
_TMP_PREFIX = ".tmp-"
_DELETING_PREFIX = ".deleting-"
# TrainState fields stored as their own item; the rest go into "run".
_OWN_ITEMS = ("agent", "replay", "env")


class CheckpointSaveError(CheckpointError):
    """Writing a checkpoint failed (disk full, read-only file system, ...)."""


class CheckpointDamagedError(CheckpointError):
    """A checkpoint whose files are corrupt, truncated or missing."""

    def __init__(self, directory: Path, step: int, reason: str) -> None:
        self.directory, self.step, self.reason = directory, step, reason
        super().__init__(f"checkpoint {step} under {directory} is damaged: {reason}")


class CheckpointMismatchError(CheckpointError):
    """A checkpoint written for a state of other shapes (other settings)."""

    def __init__(self, step: int, meta: dict, differences: list[str]) -> None:
        self.step, self.meta, self.differences = step, meta, differences
        shown = "; ".join(differences[:4]) + ("; ..." if len(differences) > 4 else "")
        super().__init__(
            f"checkpoint {step} holds a state of other shapes ({len(differences)} "
            f"array(s) differ: {shown})"
        )


@dataclass(frozen=True)
class _Leaf:
    item: str
    name: str  # path inside the item, dot-separated
    index: int  # position in the flattened state


def _path_name(path) -> str:
    parts = []
    for entry in path:
        for attr in ("name", "key", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return ".".join(parts)


def _layout(state: Any) -> list[_Leaf]:
    """Item and name of every leaf, in flattening order."""
    leaves = []
    for index, (path, _) in enumerate(jax.tree_util.tree_flatten_with_path(state)[0]):
        name = _path_name(path)
        head, _, rest = name.partition(".")
        if head in _OWN_ITEMS:
            leaves.append(_Leaf(head, rest or head, index))
        else:
            leaves.append(_Leaf("run", name, index))
    return leaves


def _split(state: Any) -> dict[str, dict[str, Any]]:
    """The state's non-empty leaves grouped into items. Orbax refuses zero-size arrays, and
    MJX data has some (e.g. ``act`` of a model without activations); those are rebuilt from
    the restore template instead."""
    values = jax.tree.leaves(state)
    items: dict[str, dict[str, Any]] = {}
    for leaf in _layout(state):
        if values[leaf.index].size:
            items.setdefault(leaf.item, {})[leaf.name] = values[leaf.index]
    return items


def _crc32(array: Any) -> int:
    return zlib.crc32(np.ascontiguousarray(np.asarray(jax.device_get(array))).tobytes())


def _describe(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict]]:
    crcs = _crcs(items)
    return {
        item: {
            name: {"shape": list(x.shape), "dtype": str(x.dtype), "crc32": crcs[item, name]}
            for name, x in arrays.items()
        }
        for item, arrays in items.items()
    }


def _multiprocess() -> bool:
    return jax.distributed.is_initialized() and jax.process_count() > 1


def _primary() -> bool:
    return not jax.distributed.is_initialized() or jax.process_index() == 0


def _here(x: Any) -> bool:
    """Whether this process holds all of ``x`` (one process's array, or a replicated one)."""
    return not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated


def _crcs(items: dict[str, dict[str, Any]]) -> dict[tuple[str, str], int]:
    """The CRC-32 of every whole array. An array sharded over several processes is never
    gathered: each process hashes its own row shards and one small collective brings the
    pieces together (combined in row order, ``crc32_combine``)."""
    out, spread = {}, []
    for item, arrays in items.items():
        for name, x in arrays.items():
            if _here(x):
                out[item, name] = _crc32(x)
            else:
                spread.append(((item, name), x))
    if spread:
        out.update(_spread_crcs(spread))
    return out


def _rows(index: tuple, shape: tuple) -> tuple[int, int] | None:
    """The ``[start, stop)`` rows of a shard's index, or None unless it holds whole rows."""
    if not shape:
        return None
    for dim, part in zip(shape[1:], index[1:], strict=False):
        if part.indices(dim) != (0, dim, 1):
            return None
    start, stop, step = index[0].indices(shape[0])
    return (start, stop) if step == 1 else None


_PAD = 0xFFFFFFFF


def _spread_crcs(spread: list) -> dict[tuple[str, str], int]:
    from jax.experimental import multihost_utils

    me = jax.process_index()
    entries: list[tuple[int, int, int, int]] = []  # (leaf, start row, stop row, crc)
    per_process = [0] * jax.process_count()
    whole: list[int] = []  # leaves not sharded by rows: gathered whole (rare)
    for leaf, (_, x) in enumerate(spread):
        indices = x.sharding.devices_indices_map(x.shape)
        rows = {d: _rows(i, x.shape) for d, i in indices.items()}
        if any(r is None for r in rows.values()):
            whole.append(leaf)
            continue
        for p in range(len(per_process)):
            per_process[p] += len({r for d, r in rows.items() if d.process_index == p})
        seen = set()
        for shard in x.addressable_shards:
            r = rows[shard.device]
            if r in seen:
                continue
            seen.add(r)
            data = np.ascontiguousarray(np.asarray(shard.data)).tobytes()
            entries.append((leaf, *r, zlib.crc32(data)))
    assert len(entries) == per_process[me]
    table = np.full((max(per_process, default=0), 4), _PAD, np.uint32)
    if entries:
        table[: len(entries)] = np.asarray(entries, np.uint64).astype(np.uint32)
    everyone = np.asarray(multihost_utils.process_allgather(table)).reshape(-1, 4)
    out = {}
    for leaf, (key, x) in enumerate(spread):
        if leaf in whole:
            out[key] = _crc32(multihost_utils.process_allgather(x, tiled=True))
            continue
        pieces = sorted({(int(a), int(b), int(c)) for f, a, b, c in everyone if f == leaf})
        row_bytes = x.dtype.itemsize * int(np.prod(x.shape[1:], dtype=np.int64))
        crc, at = 0, 0
        for start, stop, piece in pieces:
            if start != at:
                raise CheckpointError(f"{key[0]}/{key[1]}: rows {at}..{start} are on no process")
            crc = crc32_combine(crc, piece, (stop - start) * row_bytes)
            at = stop
        if at != x.shape[0]:
            raise CheckpointError(f"{key[0]}/{key[1]}: rows {at}.. are on no process")
        out[key] = crc
    return out


def _crc_shift_operators() -> list[list[int]]:
    """``ops[k]``: the GF(2) operator (32 columns) that appends ``2**k`` zero bytes to a
    CRC-32 state, as zlib's ``crc32_combine`` builds them."""

    def times(mat: list[int], vec: int) -> int:
        total, i = 0, 0
        while vec:
            if vec & 1:
                total ^= mat[i]
            vec >>= 1
            i += 1
        return total

    def square(mat: list[int]) -> list[int]:
        return [times(mat, mat[n]) for n in range(32)]

    op = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit
    for _ in range(3):  # 2, 4, 8 bits: one byte
        op = square(op)
    ops = [op]
    for _ in range(63):
        ops.append(square(ops[-1]))
    return ops


_SHIFT_OPS: list[list[int]] = []


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc1 = crc32(a)``, ``crc2 = crc32(b)`` and
    ``len2 = len(b)`` (zlib's ``crc32_combine``, which Python's zlib does not expose)."""
    if len2 <= 0:
        return crc1
    if not _SHIFT_OPS:
        _SHIFT_OPS.extend(_crc_shift_operators())
    k = 0
    while len2:
        if len2 & 1:
            mat, vec, total, i = _SHIFT_OPS[k], crc1, 0, 0
            while vec:
                if vec & 1:
                    total ^= mat[i]
                vec >>= 1
                i += 1
            crc1 = total
        len2 >>= 1
        k += 1
    return crc1 ^ crc2


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
            with _stderr_kept_on_success(), ocp.StandardCheckpointer() as checkpointer:
                for item, arrays in items.items():
                    checkpointer.save(tmp / item, arrays)
                checkpointer.wait_until_finished()
            _write_json(tmp / META_FILE, self._meta(iteration, _describe(items), tmp))
            if final.exists():  # a rewrite of the same iteration (e.g. a resumed run's end)
                _delete(final)
            os.replace(tmp, final)
        except Exception as err:  # OSError, or tensorstore's own errors for a full disk
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointSaveError(_save_failure(iteration, self.directory, err)) from None
        self._drop_old()
        return final

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
            with _stderr_kept_on_success(), ocp.StandardCheckpointer() as checkpointer:
                for item, arrays in items.items():
                    checkpointer.save(tmp / item, arrays)
                checkpointer.wait_until_finished()
            described = _describe(items)  # a collective (the processes' shard checksums)
        except Exception as err:
            if primary:
                shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointSaveError(_save_failure(iteration, self.directory, err)) from None
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


def list_steps(directory: str | Path) -> list[int]:
    """The iterations saved under ``directory`` (folders named by an integer), ascending."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and p.is_dir())


def latest_step(directory: str | Path) -> int | None:
    """The newest saved iteration under ``directory``, or None."""
    steps = list_steps(directory)
    return steps[-1] if steps else None


def read_meta(directory: str | Path, step: int) -> dict:
    """The ``meta.json`` of checkpoint ``step``; ``CheckpointDamagedError`` when unreadable."""
    directory = Path(directory).absolute()
    folder = directory / str(step)
    if not (folder / META_FILE).exists() and (folder / "_CHECKPOINT_METADATA").exists():
        raise CheckpointError(
            f"checkpoint {step} under {directory} was written by an older unilab-jax (before "
            f"{FORMAT!r}) and cannot be restored by this version"
        )
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError) as err:
        raise CheckpointDamagedError(directory, step, f"{META_FILE} unreadable ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointDamagedError(directory, step, f"{META_FILE} is not a {FORMAT!r} record")
    return meta


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


def _file_checksums(folder: Path) -> dict[str, list[int]]:
    """``{relative path: [size, CRC-32]}`` of every file under ``folder``."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        crc = 0
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                crc = zlib.crc32(chunk, crc)
        out[str(path.relative_to(folder))] = [path.stat().st_size, crc]
    return out


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
