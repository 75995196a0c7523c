"""Checkpoints of the whole training state on orbax's ``CheckpointManager``, checked.

The whole ``TrainState`` is saved, so a restore resumes training exactly. Checkpoint
``<directory>/<iteration>/`` holds orbax items: ``agent``, ``replay``, ``env`` and ``run`` (the
rest), every array named by its path in the state, so an item can be read alone (a policy
reads ``agent``); ``meta`` (``META_FILE``: format, iteration, versions, the run's settings, the
evaluation return, every array's shape, dtype and CRC-32); orbax's ``metrics``.

Orbax provides **atomic saves** (written under a temporary name, renamed when complete: a
crash, a signal or a full disk never leaves a half-written checkpoint that looks like one),
the **listing**, the **retention** (the newest ``max_to_keep`` and the **best** evaluated,
``best_step``; an old one is renamed out of the listing before it is removed) and
**multi-process** saves and restores (every process calls them with the same state, in a
folder all share, and writes or reads its own shards).

This package adds **checked restores**: other shapes raise ``CheckpointMismatchError`` naming
the arrays; then every array is compared with its CRC-32, and a file orbax cannot read or an
array that is not what was saved raises ``CheckpointDamagedError`` ("checkpoint N ... is
damaged"), on every process alike. A CRC-32 is the whole array's, combined from the processes'
row blocks (``crc32_combine``), so 2 processes' checkpoints restore in 1 and back. And **clear
save errors**: a save that cannot fit is refused before writing; a failed one raises
``CheckpointSaveError`` with the system's reason and the checkpoint still intact.

Modules, each importing only those above it: ``layout`` (items, names, ``meta``, listing,
errors), ``checksums``, ``save`` (``CheckpointWriter``, ``best_step``), ``restore``.
"""

from __future__ import annotations

from unilab_jax.errors import CheckpointError
from unilab_jax.training.checkpoint.checksums import crc32_combine
from unilab_jax.training.checkpoint.layout import (
    FORMAT,
    META_FILE,
    CheckpointDamagedError,
    CheckpointMismatchError,
    CheckpointSaveError,
    latest_step,
    list_steps,
    read_meta,
)
from unilab_jax.training.checkpoint.restore import restore_checkpoint, restore_item
from unilab_jax.training.checkpoint.save import CheckpointWriter, best_step

__all__ = [
    "FORMAT",
    "META_FILE",
    "CheckpointDamagedError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "CheckpointWriter",
    "best_step",
    "crc32_combine",
    "latest_step",
    "list_steps",
    "read_meta",
    "restore_checkpoint",
    "restore_item",
]
