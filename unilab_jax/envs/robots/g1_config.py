"""The tunable parameters of G1WalkFlat: :class:`G1WalkFlatConfig`.

The defaults are the reference UniLab's G1WalkFlat with its TD3 owner config
(``conf/offpolicy`` with ``task=td3/g1_walk_flat/mujoco``; the SAC owner's env is the same).
:class:`~unilab_jax.envs.robots.g1.G1WalkFlat` documents what each part does;
``load("G1WalkFlat", {field: value})`` replaces fields. The physics (model, timestep, solver)
is the reference's and not configurable here (``g1_model.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["G1WalkFlatConfig"]

#: The reference's pose weights: legs (hip pitch, hip roll, hip yaw, knee, ankle pitch, ankle
#: roll) x 2, then the 17 waist and arm joints.
_POSE_WEIGHTS = (0.01, 1.0, 5.0, 0.01, 5.0, 5.0) * 2 + (50.0,) * 17


@dataclass(frozen=True)
class G1WalkFlatConfig:
    """Tunable parameters of :class:`~unilab_jax.envs.robots.g1.G1WalkFlat`."""

    episode_length: int = 1000
    """Control steps before truncation (20 s)."""
    n_frames: int = 3
    """Physics steps of 1/150 s per control step (control at 50 Hz)."""
    action_scale: float = 1.0
    """``ctrl = default_pose + action_scale * action`` (rad); ctrl is not clipped."""

    # --- reset
    reset_xy_range: float = 0.5
    """Base x and y drawn from ``U(-r, r)`` m around the ``stand`` keyframe."""
    reset_base_qvel_limit: float = 0.5
    """The 6 free-joint velocities drawn from ``U(-l, l)`` (joint velocities start at 0)."""
    command_low: tuple[float, float, float] = (-0.6, -0.4, -0.8)
    """Lower bounds of the command (vx, vy in m/s, yaw rate in rad/s), drawn per episode."""
    command_high: tuple[float, float, float] = (1.0, 0.4, 0.8)
    """Upper bounds of the command."""
    min_command_speed: float = 0.2
    """vx and vy are set to 0 when ``|(vx, vy)| <= min_command_speed`` (the yaw rate stays)."""
    kp_multiplier_range: tuple[float, float] = (0.9, 1.1)
    """One multiplier of every actuator's ``kp`` per episode, ``U(low, high)``."""
    kd_multiplier_range: tuple[float, float] = (0.9, 1.1)
    """One multiplier of every actuator's ``kv`` per episode, ``U(low, high)``."""

    # --- gait clock
    gait_frequency: float = 1.5
    """Gait cycles per second; the left and right phases are half a cycle apart."""
    swing_height: float = 0.09
    """Peak of the feet's target height curve (m)."""

    # --- observation noise (the actor's observation only; the critic's is clean)
    noise_level: float = 1.0
    """Multiplies every noise scale; 0 turns the noise off."""
    noise_gyro: float = 0.0
    """Noise scale of the torso gyro (rad/s, before the observation's 0.25 scaling)."""
    noise_gravity: float = 0.0
    """Noise scale of the torso up vector."""
    noise_joint_angle: float = 0.01
    """Noise scale of the joint angles (rad)."""
    noise_joint_vel: float = 0.1
    """Noise scale of the joint velocities (rad/s, before the observation's 0.05 scaling)."""

    # --- termination
    min_base_height: float = 0.3
    """The episode ends when the pelvis is lower than this (m)."""
    max_tilt_deg: float = 65.0
    """The episode ends when the torso's z axis tilts more than this from vertical."""

    # --- reward: weights (a negative weight makes the term a penalty, which the curriculum
    # scales) and kernel widths
    tracking_sigma: float = 0.25
    """Width of the velocity tracking kernels (m^2/s^2, rad^2/s^2)."""
    feet_phase_sigma: float = 0.04
    """Width of the feet height kernel (m^2)."""
    w_tracking_lin_vel: float = 2.0
    """Weight of ``exp(-|cmd_xy - v_xy|^2 / sigma)``."""
    w_tracking_ang_vel: float = 1.5
    """Weight of ``exp(-(cmd_yaw - w_z)^2 / sigma)``."""
    w_penalty_ang_vel_xy: float = -1.0
    """Weight of ``|w_xy|^2`` (torso gyro)."""
    w_penalty_orientation: float = -10.0
    """Weight of ``|up_xy|^2`` (torso z axis, world frame)."""
    w_penalty_action_rate: float = -4.0
    """Weight of ``|a - a_prev|^2``."""
    w_pose: float = -0.5
    """Weight of ``sum_j pose_weights_j (q_j - default_j)^2``."""
    w_penalty_feet_ori: float = -20.0
    """Weight of the feet's tilt, ``qx^2 + qy^2`` of each foot's orientation quaternion."""
    w_feet_phase: float = 5.0
    """Weight of ``exp(-sum_feet (z_foot - h(phase))^2 / feet_phase_sigma)``."""
    w_alive: float = 10.0
    """Weight of the constant 1."""
    pose_weights: tuple[float, ...] = _POSE_WEIGHTS
    """Per joint (joint order) weight of the pose term."""

    # --- penalty curriculum
    curriculum_initial_scale: float = 0.5
    """Scale of the penalty weights at the start of training."""
    curriculum_min_scale: float = 0.5
    """Lowest penalty scale."""
    curriculum_max_scale: float = 1.0
    """Highest penalty scale."""
    curriculum_level_down: float = 150.0
    """Mean episode length (control steps) below which the scale shrinks."""
    curriculum_level_up: float = 750.0
    """Mean episode length above which the scale grows."""
    curriculum_degree: float = 0.001
    """Relative change of the scale per update."""
    curriculum_window: int = 1000
    """Averaging window (episodes) of the mean episode length at ``curriculum_batch`` envs;
    scaled with the batch size (``max(1, int(window * num_envs / curriculum_batch))``)."""
    curriculum_batch: int = 4096
    """Batch size at which ``curriculum_window`` applies (the reference TD3's ``num_envs``)."""
