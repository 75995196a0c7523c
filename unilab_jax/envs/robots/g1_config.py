"""The tunable parameters of G1WalkFlat: :class:`G1WalkFlatConfig`.

One frozen dataclass for the physics (``timestep``, solver iterations, ``jacobian``: read by
:func:`~unilab_jax.envs.robots.g1_model.build_g1_model`), the action scale and initial noise,
the velocity commands, the gait clock, termination and the reward weights (read by
:class:`~unilab_jax.envs.robots.g1.G1WalkFlat`, whose docstring gives what each term does).
``load("G1WalkFlat", {field: value})`` replaces fields.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["G1WalkFlatConfig"]


@dataclass(frozen=True)
class G1WalkFlatConfig:
    """Tunable parameters of :class:`G1WalkFlat`."""

    episode_length: int = 1000
    n_frames: int = 5
    timestep: float = 0.004
    solver_iterations: int = 3
    ls_iterations: int = 6
    jacobian: str = "auto"  # "auto" (sparse on a CPU JAX backend, else dense), "dense", "sparse"
    action_scale: float = 0.25
    init_joint_noise: float = 0.05
    # Velocity command ranges (vx, vy in m/s, yaw rate in rad/s) and the resampling period.
    command_vx: tuple[float, float] = (-0.5, 1.0)
    command_vy: tuple[float, float] = (-0.3, 0.3)
    command_yaw: tuple[float, float] = (-0.5, 0.5)
    command_resample_steps: int = 500
    # Gait clock.
    gait_period: float = 0.8
    swing_height: float = 0.08
    # Termination.
    min_pelvis_height: float = 0.5
    max_tilt_deg: float = 60.0
    # Reward weights and kernel widths.
    tracking_sigma: float = 0.25
    w_tracking_lin_vel: float = 1.0
    w_tracking_ang_vel: float = 0.5
    w_alive: float = 0.1
    w_feet_phase: float = 0.2
    feet_phase_sigma: float = 0.005
    w_lin_vel_z: float = 1.0
    w_ang_vel_xy: float = 0.05
    w_orientation: float = 1.0
    w_action_rate: float = 0.01
    w_joint_deviation: float = 0.1
