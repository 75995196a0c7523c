"""The tunable parameters of the G1 motion trackers: :class:`TrackingConfig`.

The defaults are the reference UniLab's ``G1MotionTrackingSAC`` as its SAC owner builds it
(``conf/offpolicy/task/sac/g1_motion_tracking/mujoco.yaml`` over ``G1MotionTrackingCfg``);
:class:`~unilab_jax.envs.motion.tracking.G1MotionTracking` documents what each part does.
``load("G1MotionTrackingSAC", {field: value})`` (``env_overrides``, the facade's
``env_cfg_override``) replaces fields; ``motion_file`` takes one clip or several.
"""

from __future__ import annotations

from dataclasses import dataclass

from unilab_jax.envs.motion.clips import DEFAULT_MOTION_FILE

__all__ = ["BODY_NAMES", "EE_BODY_NAMES", "REWARD_TERMS", "TrackingConfig"]

#: The tracked bodies, in the reference's order (the anchor is ``torso_link``).
BODY_NAMES = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)
#: The end effectors: their height error ends an episode; the other tracked bodies must not
#: come near the ground (``undesired_contacts``).
EE_BODY_NAMES = (
    "left_ankle_roll_link",
    "right_ankle_roll_link",
    "left_wrist_yaw_link",
    "right_wrist_yaw_link",
)
#: Reward terms in the order the reference sums them (a term of weight 0 is not computed).
REWARD_TERMS = (
    "motion_global_root_pos",
    "motion_global_root_ori",
    "motion_body_pos",
    "motion_body_ori",
    "motion_body_lin_vel",
    "motion_body_ang_vel",
    "motion_ee_body_pos_z",
    "motion_joint_pos",
    "motion_joint_vel",
    "action_rate_l2",
    "joint_limit",
    "undesired_contacts",
)


@dataclass(frozen=True)
class TrackingConfig:
    """Tunable parameters of the G1 motion trackers."""

    motion_file: str | tuple[str, ...] = DEFAULT_MOTION_FILE
    """The clip(s) to track, in the reference's format (``unilab-jax convert-motion``); several
    clips are laid end to end. Default: holosoma's box-lifting clip, converted on load."""
    episode_length: int = 500
    """Control steps before truncation (10 s)."""
    n_frames: int = 3
    """Physics steps of 1/150 s per control step (control at 50 Hz, one clip frame a step)."""
    action_scale: float | tuple[float, ...] = 2.0
    """``ctrl = default_pose + action_scale * action`` (one value, or one per joint)."""
    action_latency: bool = False
    """Apply the previous step's action (one control step of latency)."""
    gyro_sensor: str = "torso_gyro"
    """The gyro the observation reads (``pelvis_gyro``: the pelvis IMU's)."""
    truncate_on_clip_end: bool = True
    """An episode ends (truncated) when its clip does. (The reference's other choice, jumping
    the robot to a new frame mid-episode, is not reproduced.)"""

    # --- the tracked bodies
    anchor_body: str = "torso_link"
    """The body the clip is aligned to and the observation is taken from."""
    body_names: tuple[str, ...] = BODY_NAMES
    """The bodies the rewards and the critic compare with the clip's."""
    ee_body_names: tuple[str, ...] = EE_BODY_NAMES
    """End effectors (a subset of ``body_names``)."""

    # --- where episodes start (``sampler.py``)
    sampling_mode: str = "adaptive"
    """``start``, ``clip_start``, ``uniform``, ``adaptive`` or ``mixed``."""
    sampling_start_ratio: float = 0.0
    """``mixed``: the share of episodes that start at frame 0."""
    adaptive_uniform_ratio: float = 0.1
    """``adaptive``: the uniform floor added to the failure rates (spread over the bins)."""
    adaptive_alpha: float = 0.001
    """``adaptive``: the failure rates' smoothing factor per step with a termination."""

    # --- reset noise around the clip's frame
    pose_range: tuple[tuple[float, float], ...] = (
        (-0.05, 0.05),
        (-0.05, 0.05),
        (-0.01, 0.01),
        (-0.1, 0.1),
        (-0.1, 0.1),
        (-0.2, 0.2),
    )
    """``U(low, high)`` added to the pelvis x, y, z (m) and turned by roll, pitch, yaw (rad)."""
    velocity_range: tuple[tuple[float, float], ...] = (
        (-0.5, 0.5),
        (-0.5, 0.5),
        (-0.2, 0.2),
        (-0.52, 0.52),
        (-0.52, 0.52),
        (-0.78, 0.78),
    )
    """``U(low, high)`` added to the pelvis linear and angular velocity (world frame)."""
    joint_position_range: tuple[float, float] = (-0.1, 0.1)
    """``U(low, high)`` added to every joint angle (then clipped to the joint's range)."""

    # --- observation noise (the actor's; the critic's observation is clean)
    noise_level: float = 1.0
    """Multiplies every noise scale; 0 turns the noise off."""
    noise_linvel: float = 0.1
    """Noise scale of the pelvis linear velocity (m/s)."""
    noise_gyro: float = 0.2
    """Noise scale of the torso gyro (rad/s)."""
    noise_joint_angle: float = 0.01
    """Noise scale of the joint angles (rad)."""
    noise_joint_vel: float = 1.5
    """Noise scale of the joint velocities (rad/s)."""

    # --- terminations
    anchor_pos_z_threshold: float = 0.5
    """The episode ends when the anchor's height differs from the clip's by more (m)."""
    anchor_ori_threshold: float = 0.8
    """... or the z component of gravity in the anchor frame by more (2 or more: never)."""
    ee_body_pos_z_threshold: float = 0.5
    """... or an end effector's height from the aligned clip's by more (m)."""
    undesired_contact_z: float = 0.05
    """A non-end-effector tracked body lower than this (m) counts as an undesired contact."""
    terminate_on_undesired_contacts: bool = False
    """An undesired contact also ends the episode."""

    # --- reward: weights (x the control step) and kernel widths
    w_motion_global_root_pos: float = 1.0
    """``exp(-|anchor - clip anchor|^2 / std_root_pos^2)`` (world positions)."""
    w_motion_global_root_ori: float = 0.5
    """``exp(-angle(anchor, clip anchor)^2 / std_root_ori^2)``."""
    w_motion_body_pos: float = 2.0
    """``exp(-mean_b |p_b - aligned clip p_b|^2 / std_body_pos^2)``."""
    w_motion_body_ori: float = 1.0
    """``exp(-mean_b angle(q_b, aligned clip q_b)^2 / std_body_ori^2)``."""
    w_motion_body_lin_vel: float = 1.0
    """``exp(-mean_b |v_b - clip v_b|^2 / std_body_lin_vel^2)`` (world frame, not aligned)."""
    w_motion_body_ang_vel: float = 1.0
    """``exp(-mean_b |w_b - clip w_b|^2 / std_body_ang_vel^2)``."""
    w_motion_ee_body_pos_z: float = 0.0
    """``exp(-mean_ee (z - aligned clip z)^2 / std_body_pos^2)``."""
    w_motion_joint_pos: float = 0.0
    """``exp(-mean_j (q_j - clip q_j)^2 / std_joint_pos^2)``."""
    w_motion_joint_vel: float = 0.0
    """``exp(-mean_j (qd_j - clip qd_j)^2 / std_joint_vel^2)``."""
    w_action_rate_l2: float = -0.1
    """``|a - a_prev|^2``."""
    w_joint_limit: float = -2.0
    """``sum_j (max(lo_j - q_j, 0) + max(q_j - hi_j, 0))^2`` over the joint ranges."""
    w_undesired_contacts: float = -0.1
    """The number of non-end-effector tracked bodies below ``undesired_contact_z``."""
    std_root_pos: float = 0.3
    std_root_ori: float = 0.4
    std_body_pos: float = 0.3
    std_body_ori: float = 0.4
    std_body_lin_vel: float = 1.0
    std_body_ang_vel: float = 3.14
    std_joint_pos: float = 0.2
    std_joint_vel: float = 1.0

    def weights(self) -> dict[str, float]:
        """The non-zero reward weights, in :data:`REWARD_TERMS` order."""
        return {t: getattr(self, f"w_{t}") for t in REWARD_TERMS if getattr(self, f"w_{t}") != 0}
