"""``unilab-jax sharpa-grasps``: SharpaInhandRotation's grasp caches, collected here with the
reference's stable-grasp rule (``envs.manipulation.sharpa_grasps``, whose module docstring gives
the rule), one file per object scale in the reference's format; a stopped run resumes."""

from __future__ import annotations

from dataclasses import dataclass

from unilab_jax.cli.options import documented, error, parse
from unilab_jax.envs.manipulation.grasp_cache import grasp_cache_file
from unilab_jax.envs.manipulation.sharpa_config import DEFAULT_GRASP_CACHE, SCALES
from unilab_jax.envs.manipulation.sharpa_grasps import collect_grasps

__all__ = ["SharpaGrasps", "main"]

_DESCRIPTION = """Collect stable grasps of the Sharpa Wave hand around the object at each scale,
as the reference UniLab's grasp-collection env does (zero actions from the default pose with
noise; a grasp is the state after 3 s held: fingertips near, at least 3 tactile contacts,
object upright and in its height band), into <cache-path>_<scale>.npy, the files
SharpaInhandRotation starts its episodes from. Rows already in a file count, so a stopped run
continues where it was; progress and the time left are printed."""


@dataclass(frozen=True)
class SharpaGrasps:
    cache_path: str = DEFAULT_GRASP_CACHE
    """Cache prefix: each scale's file is <cache-path>_<scale>.npy (SharpaInhandRotation's
    grasp_cache_path)."""
    scales: tuple[float, ...] = SCALES
    """Object scales to collect, one file each."""
    target: int = 50_000
    """Grasps per scale (the reference's caches hold 50,000)."""
    num_envs: int = 256
    """Parallel C MuJoCo envs."""
    threads: int | None = None
    """C MuJoCo threads (default: the CPU cores this process may use)."""
    seed: int = 0
    """Seeds the episodes (a resumed run adds the rows already written)."""
    save_every: int = 256
    """Grasps between saves of the file."""


def main(argv: list[str] | None = None) -> int:
    about = " ".join(_DESCRIPTION.split())
    args = parse(documented(SharpaGrasps), argv, prog="unilab-jax sharpa-grasps",
                 description=about)  # fmt: skip
    if args.target < 1 or args.num_envs < 1 or not args.scales:
        return error("target and num-envs must be positive and at least one scale given")
    for scale in args.scales:
        try:
            grasp_cache_file(args.cache_path, scale)
        except ValueError as err:
            return error(str(err))
    for scale in args.scales:
        path = collect_grasps(
            scale,
            args.target,
            args.cache_path,
            num_envs=args.num_envs,
            nthread=args.threads,
            seed=args.seed,
            save_every=args.save_every,
        )
        print(f"scale {scale:g}: {path}")
    return 0
