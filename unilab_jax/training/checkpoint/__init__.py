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

**Several processes** (``unilab_jax.distributed.processes``): every process calls ``save`` and
``restore_checkpoint`` with the same state; each writes and reads the shards of its own
devices through orbax's multi-process support, and process 0 alone creates, renames and
deletes folders and writes ``meta.json`` (the folder must be shared by all processes, e.g. a
network file system). The format is the same as one process's: a CRC-32 is always that of the
whole array, combined from the processes' row shards (``crc32_combine``), so a checkpoint of
2 processes restores in 1 and the other way round.

This module is the public face; the code lives in four modules, each importing only those
above it:

- ``unilab_jax.training.checkpoint.layout``: the format and file names, the errors, how a state maps
  onto items and array names, which process does what, and listing the saved checkpoints and
  reading their ``meta.json`` (``list_steps``, ``latest_step``, ``read_meta``);
- ``unilab_jax.training.checkpoint.checksums``: every array's and file's CRC-32, the multi-process
  combination included (``crc32_combine``);
- ``unilab_jax.training.checkpoint.save``: ``CheckpointWriter``, atomic saves and deletions,
retention;
- ``unilab_jax.training.checkpoint.restore``: ``restore_checkpoint`` and ``restore_item``, checked.
"""

from __future__ import annotations

from unilab_jax.errors import CheckpointError

# FORMAT, META_FILE and crc32_combine: importable from here too, as before the split.
from unilab_jax.training.checkpoint.checksums import crc32_combine as crc32_combine
from unilab_jax.training.checkpoint.layout import FORMAT as FORMAT
from unilab_jax.training.checkpoint.layout import META_FILE as META_FILE
from unilab_jax.training.checkpoint.layout import (
    CheckpointDamagedError,
    CheckpointMismatchError,
    CheckpointSaveError,
    latest_step,
    list_steps,
    read_meta,
)
from unilab_jax.training.checkpoint.restore import restore_checkpoint, restore_item
from unilab_jax.training.checkpoint.save import CheckpointWriter

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
