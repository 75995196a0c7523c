"""A checkpoint's layout on disk and the errors that name what is wrong with one.

- the format name and the file and folder names (``meta.json``, ``.tmp-<iteration>/``,
  ``.deleting-<iteration>/``);
- the ``CheckpointError`` family: ``CheckpointSaveError``, ``CheckpointDamagedError``,
  ``CheckpointMismatchError``;
- how a state maps onto items (``agent``, ``replay``, ``env``, ``run``) and the names of its
  arrays inside them (``_layout``, ``_split``);
- which process does what in a multi-process run (``_multiprocess``, ``_primary``);
- the saved checkpoints of a folder and their ``meta.json`` (``list_steps``, ``latest_step``,
  ``read_meta``).

``unilab_jax.training.checkpoint`` describes the format as a whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from unilab_jax.errors import CheckpointError

__all__ = [
    "FORMAT",
    "META_FILE",
    "CheckpointDamagedError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "latest_step",
    "list_steps",
    "read_meta",
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


def _multiprocess() -> bool:
    return jax.distributed.is_initialized() and jax.process_count() > 1


def _primary() -> bool:
    return not jax.distributed.is_initialized() or jax.process_index() == 0


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
