"""Motion clips, the data of the tracking tasks: the reference's clip format against a model
(``layout.py``), where clips come from (``sources.py``: a path, or ``holosoma:NAME``), the
conversion of named clips into that format (``convert.py``; ``unilab-jax convert-motion SRC DST``)
and the loader the tasks call (``clips.py``: ``load_motion_clips(motion_file, model)``)."""

from unilab_jax.envs.motion.clips import DEFAULT_MOTION_FILE, MotionClips, load_motion_clips
from unilab_jax.envs.motion.convert import convert_motion, convert_motion_file
from unilab_jax.envs.motion.layout import MotionClipError

__all__ = [
    "DEFAULT_MOTION_FILE",
    "MotionClipError",
    "MotionClips",
    "convert_motion",
    "convert_motion_file",
    "load_motion_clips",
]
