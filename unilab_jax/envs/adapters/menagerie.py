"""Menagerie robot models for Playground's locomotion tasks, with no download.

Playground's locomotion tasks (``Go1JoystickFlatTerrain``, ``G1JoystickFlatTerrain``, ...)
compile their own MJCF files, which reference robot meshes from MuJoCo Menagerie. Playground
finds Menagerie at ``mujoco_playground._src.mjx_env.MENAGERIE_PATH`` (its package's
``external_deps/mujoco_menagerie``) and ``git clone``s it there when a locomotion task is
first loaded. This module supplies those files offline instead:

* if Playground's own Menagerie folder already holds a robot's files, they are used as they are;
* otherwise, if an installed package ships them, a folder laid out as Menagerie's
  (``<cache>/<robot folder>-<hash>/unitree_go1/assets/trunk.stl``, ...: symbolic links to the
  package's files) is built on first use, and :func:`menagerie_path` points Playground at it
  while the task is constructed (the files are read once, in the task's ``__init__``).

The mesh files an installed package provides: mjlab ships Menagerie's ``unitree_go1`` and
``unitree_g1`` meshes (``mjlab/asset_zoo/robots/unitree_{go1,g1}/xmls/assets``, same names). In
Playground's Go1 and G1 models every body has an explicit ``<inertial>`` and every mesh geom is
visual only (``contype=conaffinity=0``; collisions are primitives), so the meshes do not enter
the dynamics. No installed package has the other robots (Spot, H1, T1, OP3, Apollo, Berkeley
Humanoid, Barkour vB): :func:`missing_files` names what is absent and
:class:`MissingModelError` says so when such a task is loaded.

The files a task needs are read from Playground's own MJCF files (every ``file=`` attribute
that resolves into ``mujoco_menagerie/``), so the list follows the installed Playground.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import posixpath
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from unilab_jax.envs.base import UnknownEnvError

__all__ = [
    "MENAGERIE_URL",
    "ROBOTS",
    "MissingModelError",
    "Robot",
    "menagerie_path",
    "menagerie_root",
    "missing_files",
    "robot_for",
]

MENAGERIE_URL = "https://github.com/google-deepmind/mujoco_menagerie"
#: Where the links are built (one folder per robot and source): ~/.cache/unilab_jax/menagerie,
#: or the folder the environment variable UNILAB_JAX_MENAGERIE_CACHE names (a per-user
#: temporary folder when that cannot be written).
CACHE_ENV = "UNILAB_JAX_MENAGERIE_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "unilab_jax" / "menagerie"


class MissingModelError(UnknownEnvError):
    """A Playground task whose robot files neither Menagerie nor an installed package holds."""


@dataclass(frozen=True)
class Robot:
    """One Playground robot: which tasks, where Playground keeps its MJCF, which Menagerie
    folder it reads and which installed package (if any) ships that folder's files."""

    #: Playground task names of this robot start with it ("Go1" for "Go1Getup").
    prefix: str
    #: Its folder under ``mujoco_playground/_src/locomotion``.
    playground_dir: str
    #: Its Menagerie folder ("unitree_go1").
    folder: str
    #: ``(package, folder inside it)`` holding the files flat, under Menagerie's names.
    provider: tuple[str, str] | None = None
    #: Menagerie files the task opens directly (not referenced by Playground's MJCF).
    direct: tuple[str, ...] = ()


ROBOTS = (
    Robot("Apollo", "apollo", "apptronik_apollo"),
    Robot("Barkour", "barkour", "google_barkour_vb", direct=("google_barkour_vb/scene_mjx.xml",)),
    Robot("BerkeleyHumanoid", "berkeley_humanoid", "berkeley_humanoid"),
    Robot("G1", "g1", "unitree_g1", ("mjlab", "asset_zoo/robots/unitree_g1/xmls/assets")),
    Robot("Go1", "go1", "unitree_go1", ("mjlab", "asset_zoo/robots/unitree_go1/xmls/assets")),
    Robot("H1", "h1", "unitree_h1"),
    Robot("Op3", "op3", "robotis_op3"),
    Robot("Spot", "spot", "boston_dynamics_spot"),
    Robot("T1", "t1", "booster_t1"),
)


def robot_for(task: str) -> Robot | None:
    """The robot of a Playground locomotion task (the longest matching prefix)."""
    matches = [r for r in ROBOTS if task.startswith(r.prefix)]
    return max(matches, key=lambda r: len(r.prefix), default=None)


def _playground_src() -> Path:
    spec = importlib.util.find_spec("mujoco_playground")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("mujoco_playground is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "_src"


def _package_dir(package: str) -> Path | None:
    """An installed package's folder, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


_MENAGERIE_PART = re.compile(r"(?:^|/)mujoco_menagerie/(.+)$")


@cache
def required_files(robot: Robot) -> tuple[str, ...]:
    """The Menagerie files (paths relative to its root, e.g. ``unitree_go1/assets/trunk.stl``)
    that Playground's MJCF files of ``robot`` reference, plus the ones its task opens directly."""
    needed = set(robot.direct)
    xml_dir = _playground_src() / "locomotion" / robot.playground_dir / "xmls"
    for xml in sorted(xml_dir.glob("*.xml")) if xml_dir.is_dir() else ():
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError:
            continue
        compiler = root.find("compiler")
        dirs = {"mesh": "", "texture": ""}
        if compiler is not None:
            dirs["mesh"] = compiler.get("meshdir", compiler.get("assetdir", ""))
            dirs["texture"] = compiler.get("texturedir", compiler.get("assetdir", ""))
        for element in root.iter():
            name = element.get("file")
            if name is None or element.tag in ("include", "model"):
                continue
            base = dirs["texture"] if element.tag in ("texture", "hfield") else dirs["mesh"]
            path = posixpath.normpath(posixpath.join(base, name))
            match = _MENAGERIE_PART.search(path)
            if match:
                needed.add(match.group(1))
    return tuple(sorted(needed))


def _playground_menagerie() -> Path:
    """Playground's own Menagerie folder (where its ``git clone`` puts it)."""
    return _playground_src().parent / "external_deps" / "mujoco_menagerie"


def _provided(robot: Robot) -> dict[str, Path] | None:
    """``{menagerie-relative path: installed file}`` for every required file, or None when
    the robot has no provider or it lacks one of them."""
    if robot.provider is None:
        return None
    package, inner = robot.provider
    folder = _package_dir(package)
    if folder is None:
        return None
    files = {rel: folder / inner / posixpath.basename(rel) for rel in required_files(robot)}
    return files if files and all(f.is_file() for f in files.values()) else None


def missing_files(task: str) -> list[str]:
    """The Menagerie files task ``task`` needs that neither Playground's Menagerie folder nor
    an installed package holds ([] when it loads offline)."""
    robot = robot_for(task)
    if robot is None:
        return [f"mujoco_menagerie/<the folder of {task}'s robot>"]
    needed = required_files(robot)
    local = _playground_menagerie()
    if all((local / rel).is_file() for rel in needed) or _provided(robot) is not None:
        return []
    return [rel for rel in needed if not (local / rel).is_file()]


def _missing_message(task: str, missing: list[str]) -> str:
    robot = robot_for(task)
    folder = robot.folder if robot else "its robot's folder"
    shown = ", ".join(f"mujoco_menagerie/{rel}" for rel in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return (
        f"playground/{task} cannot load offline: it needs {shown}{more} (MuJoCo Menagerie's "
        f"{folder} model), which no installed package provides; they come from the "
        f"mujoco_menagerie git repository ({MENAGERIE_URL}), not from PyPI. Playground "
        f"clones it into {_playground_menagerie()} when a locomotion task loads; clone it "
        f"there yourself (online; Playground {_playground_version()} pins commit "
        f"{_menagerie_commit()}) to use this task. Tasks that load offline: see --list-envs."
    )


def _playground_version() -> str:
    try:
        return importlib.metadata.version("playground")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _menagerie_commit() -> str:
    try:
        from mujoco_playground._src import mjx_env
    except ImportError:
        return "?"
    return str(getattr(mjx_env, "MENAGERIE_COMMIT_SHA", "?"))


def _cache_dirs() -> list[Path]:
    """Where the links may go: the configured cache, then a per-user temporary folder."""
    configured = os.environ.get(CACHE_ENV)
    fallback = Path(tempfile.gettempdir()) / f"unilab_jax-menagerie-{os.getuid()}"
    return [Path(configured) if configured else DEFAULT_CACHE, fallback]


def _complete(folder: Path, files: dict[str, Path]) -> bool:
    return all((folder / rel).is_file() for rel in files)


def _remove(folder: Path) -> None:
    """Delete a folder of links (never what they point to)."""
    if not folder.exists():
        return
    for entry in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        entry.rmdir() if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    folder.rmdir()


def _build_links(target: Path, files: dict[str, Path]) -> None:
    """Create ``target`` holding a link per file, atomically (built aside, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for rel, source in files.items():
            link = staging / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source.resolve())
        staging.rename(target)
    except OSError:
        if not _complete(target, files):  # not another process building it first
            raise
    finally:
        _remove(staging)


def _linked_folder(robot: Robot, files: dict[str, Path]) -> Path:
    """A folder laid out as Menagerie with a link per file, built on first use (one per
    robot and set of source files, so two installations never share one)."""
    key = hashlib.sha1("\n".join(f"{r}={p}" for r, p in sorted(files.items())).encode())
    errors = []
    for base in _cache_dirs():
        target = base / f"{robot.folder}-{key.hexdigest()[:10]}"
        try:
            if not _complete(target, files):
                _remove(target)  # damaged: a link whose file went
                _build_links(target, files)
            return target
        except OSError as err:
            errors.append(f"{target}: {err}")
    raise OSError(f"cannot build the {robot.folder} model folder: " + "; ".join(errors))


def menagerie_root(task: str) -> Path:
    """A folder laid out as Menagerie that holds task ``task``'s robot files: Playground's own
    Menagerie folder when it has them, else links to an installed package's files (built on
    first use). Raises :class:`MissingModelError` (naming the missing files) otherwise."""
    robot = robot_for(task)
    missing = missing_files(task)
    if robot is None or missing:
        raise MissingModelError(_missing_message(task, missing))
    local = _playground_menagerie()
    if all((local / rel).is_file() for rel in required_files(robot)):
        return local
    files = _provided(robot)
    assert files is not None  # missing_files said it is provided
    return _linked_folder(robot, files)


@contextlib.contextmanager
def menagerie_path(root: Path) -> Iterator[None]:
    """Point Playground's ``MENAGERIE_PATH`` at ``root`` for the duration (while a task is
    constructed: its ``__init__`` reads the robot files; nothing reads them later)."""
    from mujoco_playground._src import mjx_env

    previous: Any = mjx_env.MENAGERIE_PATH
    mjx_env.MENAGERIE_PATH = type(previous)(root)
    try:
        yield
    finally:
        mjx_env.MENAGERIE_PATH = previous
