"""What a checkpoint holds and how it is named (items, array names, ``meta``), the listing of
a folder's checkpoints, and the errors that say what is wrong with one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from unilab_jax.errors import CheckpointError

__all__ = [
    "FORMAT",
    "META_FILE",
    "CheckpointDamagedError",
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "latest_step",
    "list_steps",
    "merge_items",
    "read_meta",
    "split_items",
]

FORMAT = "unilab_jax checkpoint 2"
META_ITEM = "meta"
META_FILE = f"{META_ITEM}/metadata"  # orbax's JSON item, in the checkpoint's folder
ITEMS = ("agent", "replay", "env", "run")  # the TrainState fields not named go into "run"


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
        count = f"{len(differences)} array(s) differ"
        super().__init__(f"checkpoint {step} holds a state of other shapes ({count}: {shown})")


def _names(tree: Any) -> list[tuple[str, str]]:
    """``(item, array name)`` of every leaf: ``agent.actor_params.params.Dense_0.kernel`` is
    ``actor_params.params.Dense_0.kernel`` of ``agent``, ``key`` is ``key`` of ``run``."""
    out = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keys = (getattr(k, "name", getattr(k, "key", getattr(k, "idx", k))) for k in path)
        head, _, rest = (name := ".".join(map(str, keys))).partition(".")
        out.append((head, rest or head) if head in ITEMS else ("run", name))
    return out


def split_items(state: Any) -> dict[str, dict[str, Any]]:
    """The state's arrays by item and name, less the zero-size ones (orbax refuses them, and
    MJX data has some): ``merge_items`` keeps its template's."""
    items: dict[str, dict[str, Any]] = {}
    for (item, name), value in zip(_names(state), jax.tree.leaves(state), strict=True):
        if value.size:
            items.setdefault(item, {})[name] = value
    return items


def merge_items(like: Any, items: dict[str, dict[str, Any]]) -> Any:
    """``like`` with every array found in ``items`` put in (``split_items`` reversed)."""
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
    """The ``meta`` of checkpoint ``step``; ``CheckpointDamagedError`` when unreadable."""
    directory = Path(directory).absolute()
    folder = directory / str(step)
    if (folder / "meta.json").exists():  # format 1
        raise CheckpointError(f"checkpoint {step} under {directory} is of an older unilab-jax "
                              "format: load it with that version, or train again")  # fmt: skip
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError) as err:
        raise CheckpointDamagedError(directory, step, f"{META_FILE} unreadable ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointDamagedError(directory, step, f"{META_FILE} is not a {FORMAT!r} record")
    return meta
