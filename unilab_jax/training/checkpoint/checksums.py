"""The CRC-32s a checkpoint records and is checked against: every array's and every file's.

- ``_describe``: what ``meta.json`` records of every array (shape, dtype, CRC-32);
- ``_crcs``: the CRC-32 of every whole array, also of one sharded over several processes: each
  process hashes its own row shards and one small collective brings the pieces together,
  combined in row order by ``crc32_combine`` (zlib's, which Python's zlib does not expose), so
  a checkpoint's checksums do not depend on the number of processes that wrote it;
- ``_file_checksums``: ``{relative path: [size, CRC-32]}`` of every file under a folder.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

from unilab_jax.errors import CheckpointError

__all__ = ["crc32_combine"]


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
