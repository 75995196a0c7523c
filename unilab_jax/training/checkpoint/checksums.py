"""The CRC-32 of every array, which a checkpoint's ``meta`` records and a restore checks.
Always that of the whole array, also one sharded over several processes: each process hashes
its own row blocks and one small collective brings them together, joined in row order by
``crc32_combine`` (zlib's, which Python's zlib lacks), so the checksums do not depend on the
number of processes that wrote the checkpoint."""

from __future__ import annotations

import zlib
from typing import Any

import jax
import numpy as np

from unilab_jax.errors import CheckpointError

__all__ = ["crc32_combine", "describe"]


def describe(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict]]:
    """Every array's shape, dtype and CRC-32 by item and name (a collective when several
    processes run: every process calls it)."""
    out: dict[str, dict[str, dict]] = {}
    spread = []  # arrays spread over several processes
    for item, arrays in items.items():
        for name, x in arrays.items():
            out.setdefault(item, {})[name] = {"shape": list(x.shape), "dtype": str(x.dtype)}
            if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
                spread.append(((item, name), x))
            else:
                out[item][name]["crc32"] = _crc32(x)
    for (item, name), crc in (_spread_crcs(spread) if spread else {}).items():
        out[item][name]["crc32"] = crc
    return out


def _crc32(x: Any) -> int:
    return zlib.crc32(np.ascontiguousarray(np.asarray(jax.device_get(x))).tobytes())


def _rows(index: tuple, shape: tuple) -> tuple[int, int] | None:
    """The ``[start, stop)`` rows a shard's index covers, or None unless it is whole rows."""
    whole = all(p.indices(d) == (0, d, 1) for d, p in zip(shape[1:], index[1:], strict=False))
    start, stop, step = index[0].indices(shape[0]) if shape else (0, 0, 0)
    return (start, stop) if shape and whole and step == 1 else None


def _spread_crcs(spread: list) -> dict[tuple[str, str], int]:
    """Every process lists the same row blocks (from the shardings, in one order), hashes those
    it owns (the lowest process holding each), and one allgather shares the hashes."""
    from jax.experimental import multihost_utils

    me, blocks, crcs = jax.process_index(), [], []
    for leaf, (_, x) in enumerate(spread):
        owners: dict = {}
        for device, index in x.sharding.devices_indices_map(x.shape).items():
            rows = _rows(index, x.shape)
            owners[rows] = min(owners.get(rows, device.process_index), device.process_index)
        if None in owners:
            raise CheckpointError(f"{spread[leaf][0]}: only arrays sharded by rows are supported")
        mine = {_rows(shard.index, x.shape): shard.data for shard in x.addressable_shards}
        for (start, stop), owner in sorted(owners.items()):
            blocks.append((leaf, start, stop, owner))
            crcs.append(_crc32(mine[start, stop]) if owner == me else 0)
    table = np.asarray(multihost_utils.process_allgather(np.asarray(crcs, np.uint32)))
    out: dict[tuple[str, str], int] = {}
    for i, (leaf, start, stop, owner) in enumerate(blocks):  # in row order: the blocks cover
        key, x = spread[leaf]  # every row, as the sharding does
        row_bytes = x.nbytes // x.shape[0]
        out[key] = crc32_combine(out.get(key, 0), int(table[owner, i]), (stop - start) * row_bytes)
    return out


def _times(matrix: list[int], vector: int) -> int:
    """A 32x32 GF(2) ``matrix`` (its columns) times ``vector``."""
    total, i = 0, 0
    while vector:
        total, vector, i = total ^ (matrix[i] if vector & 1 else 0), vector >> 1, i + 1
    return total


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc1 = crc32(a)``, ``crc2 = crc32(b)`` and
    ``len2 = len(b)``: ``crc1`` run over ``len2`` zero bytes, then joined with ``crc2``."""
    op = [0xEDB88320] + [1 << n for n in range(31)]  # the CRC-32 state after one zero bit
    for _ in range(3):  # squared 3 times: one zero byte
        op = [_times(op, column) for column in op]
    while len2 > 0:  # len2's bits: 1, 2, 4, ... zero bytes
        if len2 & 1:
            crc1 = _times(op, crc1)
        op, len2 = [_times(op, column) for column in op], len2 >> 1
    return crc1 ^ crc2
