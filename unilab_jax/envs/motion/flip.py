"""G1FlipTrackingSAC and G1WallFlipTrackingSAC: the reference UniLab's flip trackers.

Both are profiles of the G1 motion tracker (``tracking.py``): the reference's
``G1FlipTrackingSAC`` / ``G1WallFlipTrackingSAC`` (``flip_tracking_sac.py``: its SAC tracker
with the flip configs of ``flip_tracking.py``) as their SAC owners build them
(``conf/offpolicy/task/sac/g1_flip_tracking/mujoco.yaml`` and ``g1_wall_flip_tracking``), held
to them by golden files (``tests/test_reference_tracking.py``). What differs from
G1MotionTrackingSAC, all in :class:`FlipTrackingConfig`:

* **Time step** 0.005 s x 4 (the control step stays 0.02 s, one clip frame a step): the model
  is G1WalkFlat's with ``opt.timestep`` set after compiling, as the reference's backend sets its
  ``sim_dt``.
* **Per-joint action scale** :data:`FLIP_ACTION_SCALE`: a quarter of each motor's effort limit
  over its stiffness (0.0745 rad for the wrists' pitch and yaw up to 0.548 rad for the hips).
* **Rewards** (in the tracker's order): anchor position 0.5, anchor orientation 0.5, body
  positions 2.0, body orientations 1.5, body velocities 1.0 / 1.0, end-effector height 2.0, (the
  wall flip: joint positions 0.5, joint velocities 0.25), action rate -0.005, joint limits -10,
  undesired contacts -0.1.
* **No noise**: no reset noise on the pose, velocity or joints; no observation noise.
* **Terminations**: the flip ends an episode when the anchor's height is off by 0.5 m, an end
  effector's by 0.5 m, or a non-end-effector tracked body is below 5 cm; the gravity-direction
  test is off (flips turn the anchor over). The wall flip ends episodes only at the clip's end
  or 10 s (every threshold 1e9).
* **Starts**: the flip ``mixed`` (frame 0 for 10 % of the episodes, else a uniform frame), the
  wall flip ``uniform``.
* **Scene** of the wall flip: the reference's ``scene_flat_with_wall.xml``: a static box wall
  (half sizes 0.05 x 1 x 1 m, centre (0, 1.45, 1.0), turned 1.5708 rad about z: :data:`WALL`,
  friction 1.0 / 0.1 / 0.1) added after the robot, so the robot's body, joint and geom ids are
  G1WalkFlat's; that scene has no foot-contact sensors (the tracker reads none).

The reference's default clips (``flip_360_001__A304.npz``, ``flip_from_wall_104__A304.npz``,
BONES-SEED) are not available here; ``motion_file`` takes any clip in the reference's format,
and the default is the tracker's (holosoma's box-lifting clip), which is not a flip.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco

from unilab_jax.envs.motion.tracking import G1MotionTracking
from unilab_jax.envs.motion.tracking_config import TrackingConfig
from unilab_jax.envs.robots.g1_model import g1_spec

__all__ = [
    "FLIP",
    "FLIP_ACTION_SCALE",
    "WALL",
    "WALL_FLIP",
    "FlipTrackingConfig",
    "G1FlipTracking",
    "build_flip_model",
]

#: Per motor (as ``g1_model.MOTORS``): 0.25 x effort limit / kp, the recipe's values (its kp are
#: the unrounded armature x (2 pi 10 Hz)^2, so these differ from ``MOTORS``' by up to 3e-5).
_MOTOR_ACTION_SCALE = {
    "hip_pitch": 0.5475464629911068,
    "hip_roll": 0.35066146637882434,
    "hip_yaw": 0.5475464629911068,
    "knee": 0.35066146637882434,
    "ankle_pitch": 0.43857731392336724,
    "ankle_roll": 0.43857731392336724,
    "waist_yaw": 0.5475464629911068,
    "waist_roll": 0.43857731392336724,
    "waist_pitch": 0.43857731392336724,
    "shoulder_pitch": 0.43857731392336724,
    "shoulder_roll": 0.43857731392336724,
    "shoulder_yaw": 0.43857731392336724,
    "elbow": 0.43857731392336724,
    "wrist_roll": 0.43857731392336724,
    "wrist_pitch": 0.07450087032950714,
    "wrist_yaw": 0.07450087032950714,
}
_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch",
        "wrist_yaw")  # fmt: skip
_JOINT_MOTORS = (*_LEG, *_LEG, "waist_yaw", "waist_roll", "waist_pitch", *_ARM, *_ARM)
#: The flips' action scale per joint, in joint (= actuator) order.
FLIP_ACTION_SCALE: tuple[float, ...] = tuple(_MOTOR_ACTION_SCALE[m] for m in _JOINT_MOTORS)

_ZERO_RANGE = ((0.0, 0.0),) * 6
_NEVER = 1e9

#: The wall of ``scene_flat_with_wall.xml``: body position and orientation, the box's half
#: sizes (thickness, length, height) and friction. The file turns the wall by ``euler="0 0
#: 1.5708"``; the reference's backend rewrites the scene through ``MjSpec.to_xml`` (to add its
#: body sensors), which writes that turn as this 6-digit quaternion, the one it compiles.
WALL = {
    "pos": (0.0, 1.45, 1.0),
    "quat": (0.707105, 0.0, 0.0, 0.707108),
    "size": (0.05, 1.0, 1.0),
    "friction": (1.0, 0.1, 0.1),
}


@dataclass(frozen=True)
class FlipTrackingConfig(TrackingConfig):
    """The flip trackers' parameters: :class:`TrackingConfig` with the flip defaults (module
    docstring) and two fields of their own."""

    sim_dt: float = 0.005
    """Physics time step (s); ``sim_dt * n_frames`` is the control step (one clip frame)."""
    wall: bool = False
    """Add the wall-flip scene's wall (:data:`WALL`) after the robot."""

    n_frames: int = 4
    action_scale: float | tuple[float, ...] = FLIP_ACTION_SCALE
    sampling_mode: str = "mixed"
    sampling_start_ratio: float = 0.1
    pose_range: tuple[tuple[float, float], ...] = _ZERO_RANGE
    velocity_range: tuple[tuple[float, float], ...] = _ZERO_RANGE
    joint_position_range: tuple[float, float] = (0.0, 0.0)
    noise_level: float = 0.0
    anchor_ori_threshold: float = _NEVER
    terminate_on_undesired_contacts: bool = True
    w_motion_global_root_pos: float = 0.5
    w_motion_body_ori: float = 1.5
    w_motion_ee_body_pos_z: float = 2.0
    w_action_rate_l2: float = -0.005
    w_joint_limit: float = -10.0


#: G1FlipTrackingSAC's defaults.
FLIP = FlipTrackingConfig()
#: G1WallFlipTrackingSAC's defaults: the wall, joint rewards, uniform starts, no terminations.
WALL_FLIP = FlipTrackingConfig(
    wall=True,
    sampling_mode="uniform",
    sampling_start_ratio=0.0,
    anchor_pos_z_threshold=_NEVER,
    ee_body_pos_z_threshold=_NEVER,
    terminate_on_undesired_contacts=False,
    w_motion_joint_pos=0.5,
    w_motion_joint_vel=0.25,
)


def build_flip_model(sim_dt: float, wall: bool) -> mujoco.MjModel:
    """G1WalkFlat's model at time step ``sim_dt``; with ``wall``, the wall scene's model (the
    wall body and its box after the robot, no foot-contact sensors)."""
    spec = g1_spec()
    if wall:
        for sensor in list(spec.sensors):
            if sensor.type == mujoco.mjtSensor.mjSENS_CONTACT:
                spec.delete(sensor)
        body = spec.worldbody.add_body(name="wall", pos=list(WALL["pos"]), quat=list(WALL["quat"]))
        body.add_geom(
            name="wall_collision",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(WALL["size"]),
            friction=list(WALL["friction"]),
            contype=1,
            conaffinity=1,
        )
    model = spec.compile()
    model.opt.timestep = sim_dt
    return model


class G1FlipTracking(G1MotionTracking):
    """The reference's flip trackers (module docstring): the G1 tracker on the flip scene and
    time step."""

    reward_bounds = (-0.5, 0.2)

    @classmethod
    def build_model(cls, config: FlipTrackingConfig) -> mujoco.MjModel:
        return build_flip_model(config.sim_dt, config.wall)
