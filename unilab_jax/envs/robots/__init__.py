"""Robot tasks built from third-party robot models (see :mod:`unilab_jax.envs.robots.assets`).

Task modules (``quadruped``, ``g1``, ``go2``) are imported explicitly by the registry; this
package only re-exports the asset helpers so importing it never needs the optional robot
packages.
"""

from unilab_jax.envs.robots.assets import (
    ROBOTS,
    RobotAssetError,
    robot_mjcf_path,
    robot_model_dir,
)

__all__ = ["ROBOTS", "ROBOT_TASKS", "RobotAssetError", "robot_mjcf_path", "robot_model_dir"]

#: Registered robot tasks. Their reset / step / size / NaN / backend smoke tests live in
#: ``tests/test_robots_*.py``, which compile each model once per module (a robot's MJX step
#: costs 30-60 s to compile on a CPU); the generic registry smoke tests cover the others.
ROBOT_TASKS = (
    "G1FlipTrackingSAC",
    "G1MotionTrackingSAC",
    "G1WBTObs",
    "G1WalkFlat",
    "G1WalkRough",
    "G1WallFlipTrackingSAC",
    "Go1JoystickFlat",
    "Go2JoystickFlat",
    "SharpaInhandRotation",  # C MuJoCo only, needs grasp caches: tests/test_sharpa.py
)
