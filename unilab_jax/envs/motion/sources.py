"""Where motion clips come from: a path to an ``.npz``, or ``holosoma:NAME``, a clip of the
``holosoma`` package.

``holosoma`` (PyPI, 0.0.3, Amazon FAR's humanoid RL framework) ships G1 clips for whole-body
tracking under ``holosoma/data/motions/g1_29dof/whole_body_tracking/``: ``sub3_largebox_003_mj``
(325 frames, box lifting on flat ground, holosoma's default tracking clip),
``sub3_largebox_003_mj_w_obj`` (the same with the box as a 52nd body) and ``motion_crawl_slope``
(959 frames, climbs a ramp: off the flat scene after about frame 240). Like the robot models
(``envs/robots/assets.py``), the package is installed ``--no-deps`` and never imported: only its
files are read. Its clips are in holosoma's format (named joints and bodies, the root's columns
in ``joint_pos``), so they are converted by name (``convert.py``) before use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unilab_jax.envs.motion.layout import MotionClipError
from unilab_jax.envs.robots.assets import package_dir

__all__ = [
    "HOLOSOMA_PIP",
    "HOLOSOMA_PREFIX",
    "holosoma_clip_names",
    "is_holosoma_name",
    "read_motion_arrays",
    "resolve_motion_source",
]

#: ``holosoma:NAME`` names the clip ``NAME.npz`` of the holosoma package.
HOLOSOMA_PREFIX = "holosoma:"
#: How to install the package that holds the ``holosoma:`` clips.
HOLOSOMA_PIP = "pip install --no-deps holosoma==0.0.3"
_HOLOSOMA_CLIPS = ("data", "motions", "g1_29dof", "whole_body_tracking")


def is_holosoma_name(source: str) -> bool:
    """Whether ``source`` names a clip of the holosoma package (``holosoma:NAME``)."""
    return source.startswith(HOLOSOMA_PREFIX)


def _holosoma_dir() -> Path:
    pkg = package_dir("holosoma")
    folder = pkg.joinpath(*_HOLOSOMA_CLIPS) if pkg is not None else None
    if folder is None or not folder.is_dir():
        where = "not installed" if pkg is None else f"installed at {pkg} without {folder}"
        raise MotionClipError(
            f"the holosoma: motion clips come from the 'holosoma' package ({where}); "
            f"install it without its dependencies: {HOLOSOMA_PIP}"
        )
    return folder


def holosoma_clip_names() -> tuple[str, ...]:
    """The clips ``holosoma:NAME`` can name (needs the package)."""
    return tuple(sorted(path.stem for path in _holosoma_dir().glob("*.npz")))


def resolve_motion_source(source: str) -> Path:
    """The file behind ``source`` (a path, or ``holosoma:NAME``); it must exist."""
    if is_holosoma_name(source):
        name = source.removeprefix(HOLOSOMA_PREFIX).removesuffix(".npz")
        path = _holosoma_dir() / f"{name}.npz"
        if not name or "/" in name or not path.is_file():
            known = ", ".join(holosoma_clip_names())
            raise MotionClipError(f"no holosoma clip named {name!r}; holosoma:NAME knows {known}")
        return path
    path = Path(source).expanduser()
    if not path.is_file():
        raise MotionClipError(f"motion file {source!r} does not exist")
    return path


def read_motion_arrays(source: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` behind ``source`` (no pickled objects)."""
    path = resolve_motion_source(source)
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("one array, not an archive of named arrays")
        with data:
            return {key: np.asarray(data[key]) for key in data.files}
    except Exception as err:  # not a zip, a truncated file, an object array, an .npy
        raise MotionClipError(f"motion file {source!r} is not a readable .npz ({err})") from None
