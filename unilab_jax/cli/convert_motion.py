"""``unilab-jax convert-motion SRC DST``: a G1 motion clip with named joints and bodies
(holosoma's format) as a clip in the reference's format, by name (``envs.motion.convert``, whose
module docstring says what is mapped how)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tyro.conf import Positional

from unilab_jax.cli.options import documented, error, parse
from unilab_jax.envs.motion.clips import load_motion_clips
from unilab_jax.envs.motion.convert import convert_motion_file
from unilab_jax.envs.motion.layout import MotionClipError
from unilab_jax.envs.robots.assets import RobotAssetError
from unilab_jax.envs.robots.g1_model import build_g1_model

__all__ = ["ConvertMotion", "main"]

_DESCRIPTION = """Convert a G1 motion clip whose arrays name their joints and bodies (joint_names,
body_names: holosoma's format, joint_pos [T, 7 + 29] with the root first) into the reference's
format for our G1 model (the reference's scene_flat bodies and joints): the 29 joints by name
(the root's columns dropped), the 31 bodies (world included) by name in MuJoCo body-id order,
float32, fps kept; the joint and body names are written too. The result loads as a tracking
task's motion file (unilab_jax.envs.motion.load_motion_clips), which checks the written file
(its bodies against the model's kinematics too) before the command succeeds; a file it refuses is
removed. A clip that lacks one of the model's joints or bodies is refused, naming them."""


@dataclass(frozen=True)
class ConvertMotion:
    src: Positional[str]
    """The clip to convert: an .npz path, or holosoma:NAME (a clip of the holosoma package,
    e.g. holosoma:motion_crawl_slope)."""
    dst: Positional[str]
    """The .npz file to write (exactly this name; parent folders are created)."""


def main(argv: list[str] | None = None) -> int:
    about = " ".join(_DESCRIPTION.split())
    args = parse(documented(ConvertMotion), argv, prog="unilab-jax convert-motion",
                 description=about)  # fmt: skip
    try:
        model = build_g1_model()
        out = convert_motion_file(args.src, args.dst, model)
    except (MotionClipError, RobotAssetError) as err:
        return error(str(err))
    try:
        load_motion_clips(args.dst, model)
    except MotionClipError as err:
        Path(args.dst).expanduser().unlink()
        return error(f"{err} (converted from {args.src}; not kept)")
    frames, joints = out["joint_pos"].shape
    print(f"{args.src}: {frames} frames at {int(out['fps'][0])} fps, {joints} joints and "
          f"{out['body_pos_w'].shape[1]} bodies by name; wrote {args.dst}")  # fmt: skip
    return 0
