"""The tunable parameters of Go2JoystickFlat: :class:`Go2JoystickFlatConfig`.

Defaults are the reference UniLab's Go2JoystickFlat with its off-policy MuJoCo owner config
(``flashsac/go2_joystick_flat/mujoco.yaml`` at 9aa57115). The physics fields (``timestep``,
``kp``, ``kd``, ``joint_damping``) are read by
:func:`~unilab_jax.envs.robots.go2_model.build_go2_model`; everything else by
:class:`~unilab_jax.envs.robots.go2.Go2JoystickFlat`, whose docstring gives what each term
does. ``load("Go2JoystickFlat", {field: value})`` replaces fields.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Go2JoystickFlatConfig"]

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class Go2JoystickFlatConfig:
    """Tunable parameters of :class:`~unilab_jax.envs.robots.go2.Go2JoystickFlat`."""

    # ----------------------------------------------------------------- physics and control
    episode_length: int = 1000
    """Control steps before truncation (20 s at ``timestep * n_frames`` = 0.02 s)."""
    n_frames: int = 2
    """Physics steps per control step (the reference's ``ctrl_dt / sim_dt``)."""
    timestep: float = 0.01
    """Physics timestep in seconds (the reference's ``sim_dt``)."""
    kp: float = 35.0
    """Nominal position gain of the 12 actuators (N m / rad), before randomisation."""
    kd: float = 0.5
    """Nominal velocity gain of the 12 actuators (N m s / rad), before randomisation; an
    explicit actuator term on top of ``joint_damping``."""
    joint_damping: float = 0.5
    """Passive damping of each leg joint (N m s / rad; Menagerie's go2.xml has 2)."""
    action_scale: float = 0.4
    """``ctrl = default_pose + action_scale * action`` (rad); ctrl is not clamped."""

    # ----------------------------------------------------------------- commands and gait
    command_low: Vec3 = (-0.6, -0.4, -0.8)
    """Lower bounds of the velocity command (vx, vy in m/s, yaw rate in rad/s), drawn
    uniformly once per episode (never resampled)."""
    command_high: Vec3 = (1.0, 0.4, 0.8)
    """Upper bounds of the velocity command."""
    gait_frequency: float = 2.0
    """Gait clock frequency (Hz); the clock advances ``gait_frequency * control_dt`` of a
    cycle per control step."""
    stance_fraction: float = 0.6
    """A foot is in stance while its phase is below this, in swing from it on."""

    # ----------------------------------------------------------------- observation noise
    noise_level: float = 1.0
    """Multiplies every noise scale below; 0 switches observation noise off."""
    noise_gyro: float = 0.0
    """Half-width of the uniform noise on the gyro (rad/s)."""
    noise_upvector: float = 0.0
    """Half-width of the uniform noise on the up vector."""
    noise_joint_pos: float = 0.01
    """Half-width of the uniform noise on joint position minus default (rad)."""
    noise_joint_vel: float = 0.1
    """Half-width of the uniform noise on joint velocities (rad/s)."""
    noise_linvel: float = 0.0
    """Half-width of the uniform noise on the critic's local linear velocity (m/s)."""

    # ----------------------------------------------------------------- initial state
    init_xy_range: float = 0.5
    """Base x and y are offset by ``U(-init_xy_range, init_xy_range)`` m at reset."""
    init_base_vel: float = 0.5
    """Each of the 6 free-joint velocities starts ``U(-init_base_vel, init_base_vel)``
    (world linear m/s, body angular rad/s)."""

    # ----------------------------------------------------------------- domain randomisation
    kp_multiplier_range: tuple[float, float] = (0.9, 1.1)
    """Per episode, all 12 position gains are ``kp * U(range)`` (one draw per env)."""
    kd_multiplier_range: tuple[float, float] = (0.9, 1.1)
    """Per episode, all 12 velocity gains are ``kd * U(range)`` (one draw per env)."""
    added_mass_range: tuple[float, float] = (-1.5, 1.5)
    """Per episode, the base's mass is the nominal 6.921 kg plus ``U(range)`` kg."""
    com_offset_x_range: tuple[float, float] = (-0.05, 0.05)
    """Per episode, the base's centre of mass moves ``U(range)`` m along its x axis."""
    gravity_low: Vec3 = (0.0, 0.0, -9.81)
    """Per episode, gravity is ``U(gravity_low, gravity_high)`` (m/s^2; equal bounds by
    default: no change)."""
    gravity_high: Vec3 = (0.0, 0.0, -9.81)
    """Upper bounds of the gravity draw."""
    push_interval: int = 750
    """A push every ``push_interval`` control steps of the batch-global step counter,
    starting with its step 0; 0 disables pushes."""
    push_max_force: Vec3 = (1.0, 1.0, 0.5)
    """A push is a world-frame force ``U(-1, 1) * push_max_force`` (N) on the base's centre
    of mass, held over one control step."""

    # ----------------------------------------------------------------- reward
    tracking_sigma: float = 0.4
    """Width of the exponential velocity-tracking kernels."""
    base_height_target: float = 0.3
    """Base height (m) the ``base_height`` penalty holds it to."""
    swing_height_target: float = 0.1
    """Foot height (m) the ``swing_feet_z`` term rewards during swing."""
    swing_height_sigma: float = 0.01
    """Width of the ``swing_feet_z`` kernel (m^2)."""
    contact_threshold: float = 0.1
    """A foot counts as in contact where its contact sensor reads above this."""
    w_tracking_lin_vel: float = 1.0
    """Weight of ``exp(-|cmd_xy - v_xy|^2 / tracking_sigma)``."""
    w_tracking_ang_vel: float = 0.2
    """Weight of ``exp(-(cmd_yaw - gyro_z)^2 / tracking_sigma)``."""
    w_lin_vel_z: float = -5.0
    """Weight of ``v_z^2`` (local frame)."""
    w_ang_vel_xy: float = -0.1
    """Weight of ``gyro_x^2 + gyro_y^2``."""
    w_base_height: float = -20.0
    """Weight of ``(base z - base_height_target)^2``."""
    w_action_rate: float = -0.02
    """Weight of ``|action - previous action|^2``."""
    w_similar_to_default: float = -0.4
    """Weight of ``sum |q - default_pose|``."""
    w_contact: float = 1.5
    """Weight of the fraction of feet whose contact matches the gait clock's stance."""
    w_swing_feet_z: float = 4.0
    """Weight of the swing-foot height kernel, averaged over the 4 feet."""

    # ----------------------------------------------------------------- termination
    min_upvector_z: float = 0.5
    """The episode ends when the base's up vector has world z at most this (tilt >= 60 deg)."""
