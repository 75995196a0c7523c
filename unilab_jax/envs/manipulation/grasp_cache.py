"""SharpaInhandRotation's grasp caches: where they are, their format, loading them.

Every episode of the task starts from a stable grasp drawn from the cache of its object scale.
The format is the reference UniLab's (9aa57115; its ``caches/sharpa_grasp_linspace_<scale>.npy``,
downloaded at run time from the ``unilabsim/unilab-caches`` dataset), accepted as it is: one
``.npy`` file per scale, a float array ``[rows, 29]`` (the reference's have 50,000 float32 rows)
of the 22 hand joint positions (qpos order), the object's position (3) and its quaternion (4,
wxyz); columns after the 29th are ignored. The file of scale ``s`` is the configured path with
``_<s>.npy`` appended (``s`` written as ``f"{s:g}"``: ``0.8``, ``1``, ``1.5``); a path ending in
``.npy`` gets ``_<s>`` before the suffix, and one containing ``{scale}`` is formatted with it
(:func:`grasp_cache_file`, the reference's ``resolve_grasp_cache_file`` rule).

A missing cache raises :class:`GraspCacheError` naming every missing file and the command that
generates them (:data:`GENERATE_COMMAND`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "GENERATE_COMMAND",
    "GRASP_COLUMNS",
    "GraspCacheError",
    "GraspCaches",
    "grasp_cache_file",
    "load_grasp_caches",
    "scale_tag",
]

#: Columns of a cache row: hand qpos 22, object position 3, object quaternion (wxyz) 4.
GRASP_COLUMNS = 29
#: The command that writes the caches (``{path}``: the configured cache path, ``{scales}``: the
#: scales, space-separated): 1000 grasps per scale, what the CPU runs here start from (the
#: command's default is the reference's 50,000, a job for a many-core machine).
GENERATE_COMMAND = (
    "unilab-jax sharpa-grasps --cache-path {path} --scales {scales} --target 1000 --num-envs 64"
)
#: What that command took here (docs/robots.md, "Grasp caches").
GENERATE_TIME = (
    "about 25 minutes for all 8 scales on a 2-core CPU; it prints progress and the time left, "
    "and a stopped run resumes"
)


class GraspCacheError(FileNotFoundError):
    """A grasp cache is missing or malformed; the message names the files and the fix."""


def scale_tag(scale: float) -> str:
    """A scale as cache file names write it (``f"{scale:g}"``: ``0.8``, ``1``, ``1.5``)."""
    scale = float(scale)
    if scale <= 0.0:
        raise ValueError(f"scale values must be positive, got {scale}")
    return f"{scale:g}"


def grasp_cache_file(path: str | os.PathLike[str], scale: float) -> Path:
    """The cache file of ``scale`` under the configured ``path`` (module docstring)."""
    path = os.path.expanduser(os.fspath(path))
    tag = scale_tag(scale)
    if "{scale}" in path:
        return Path(path.format(scale=tag))
    base = Path(path)
    if base.suffix == ".npy":
        return base.with_name(f"{base.stem}_{tag}{base.suffix}")
    return Path(f"{path}_{tag}.npy")


class GraspCaches:
    """The grasps of every scale stacked for drawing in JAX: ``rows`` ``[n_scales, max_rows,
    29]`` float32 (each scale's rows first, padded by repeating its last row) and ``counts``
    ``[n_scales]`` (rows per scale); ``files``: where each came from."""

    def __init__(self, arrays: Sequence[np.ndarray], files: Sequence[Path]) -> None:
        longest = max(len(a) for a in arrays)
        self.rows = np.stack(
            [np.concatenate([a, np.repeat(a[-1:], longest - len(a), axis=0)]) for a in arrays]
        ).astype(np.float32)
        self.counts = np.array([len(a) for a in arrays], np.int32)
        self.files = tuple(files)

    def __repr__(self) -> str:
        return f"GraspCaches(counts={self.counts.tolist()}, files={[str(f) for f in self.files]})"


def load_grasp_caches(path: str | os.PathLike[str], scales: Sequence[float]) -> GraspCaches:
    """Load the cache of each of ``scales`` (in that order) from the configured ``path``.

    Raises :class:`GraspCacheError` naming all missing files and the command that generates
    them, or a file that is not a non-empty ``[rows, >=29]`` numeric array.
    """
    files = [grasp_cache_file(path, s) for s in scales]
    missing = [f for f in files if not f.is_file()]
    if missing:
        command = GENERATE_COMMAND.format(
            path=os.fspath(path), scales=" ".join(scale_tag(s) for s in scales)
        )
        raise GraspCacheError(
            f"SharpaInhandRotation: missing grasp cache file(s): "
            f"{', '.join(str(f) for f in missing)}. Every episode starts from a stable grasp of "
            f"its object scale; generate the caches with: {command} ({GENERATE_TIME}; "
            "--target 50000 for caches of the reference's size), or point the task's "
            "grasp_cache_path at caches in the reference UniLab's format, "
            "sharpa_grasp_linspace_<scale>.npy"
        )
    arrays = []
    for f in files:
        try:
            array = np.load(f, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise GraspCacheError(f"{f}: not a readable .npy array ({err})") from err
        if (
            array.ndim != 2
            or array.shape[1] < GRASP_COLUMNS
            or len(array) == 0
            or not np.issubdtype(array.dtype, np.number)
        ):
            raise GraspCacheError(
                f"{f}: expected a non-empty numeric array [rows, {GRASP_COLUMNS}] (hand qpos 22, "
                f"object position 3, quaternion wxyz 4), got {array.dtype} {array.shape}"
            )
        if not np.all(np.isfinite(array[:, :GRASP_COLUMNS])):
            raise GraspCacheError(f"{f}: holds non-finite values")
        arrays.append(np.asarray(array[:, :GRASP_COLUMNS], np.float64))
    return GraspCaches(arrays, files)
