"""The tunable parameters of the quadruped joystick tasks: :class:`QuadrupedJoystickConfig`.

One frozen dataclass for the physics and actuation (timestep, ``kp``, damping, armature, foot
friction, solver iterations: read by
:func:`~unilab_jax.envs.robots.quadruped_model.build_quadruped_model`, so they rebuild the
model), the action scale, the velocity commands and gait clock, the reward weights,
termination and the initial state (read by
:class:`~unilab_jax.envs.robots.quadruped.QuadrupedJoystick`, whose docstring gives what each
term does); and the per-robot subclass :class:`Go1JoystickFlatConfig`.
``load("Go1JoystickFlat", {field: value})`` replaces fields.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Go1JoystickFlatConfig", "QuadrupedJoystickConfig"]


@dataclass(frozen=True)
class QuadrupedJoystickConfig:
    """Tunable parameters of :class:`QuadrupedJoystick` (physics fields rebuild the model)."""

    episode_length: int = 1000
    n_frames: int = 5
    timestep: float = 0.004
    # Physics / actuation.
    kp: float = 35.0
    joint_damping: float = 0.5
    armature: float = 0.01
    foot_friction: float = 0.8
    solver_iterations: int = 2
    ls_iterations: int = 6
    action_scale: float = 0.3
    # Commands.
    vx_range: tuple[float, float] = (-1.0, 1.0)
    vy_range: tuple[float, float] = (-0.5, 0.5)
    yaw_rate_range: tuple[float, float] = (-1.0, 1.0)
    command_resample_steps: int = 500
    gait_frequency: float = 2.0
    # Reward weights.
    tracking_sigma: float = 0.25
    w_tracking_lin_vel: float = 1.0
    w_tracking_ang_vel: float = 0.5
    w_lin_vel_z: float = -0.5
    w_ang_vel_xy: float = -0.02
    w_orientation: float = -1.0
    w_torques: float = -2e-5
    w_action_rate: float = -0.01
    w_alive: float = 0.2
    w_termination: float = -5.0
    # Termination and initial state.
    min_height: float = 0.15
    max_tilt_gravity_z: float = -0.5
    init_joint_noise: float = 0.1
    random_yaw: bool = True


@dataclass(frozen=True)
class Go1JoystickFlatConfig(QuadrupedJoystickConfig):
    """Config of :class:`Go1JoystickFlat`."""
