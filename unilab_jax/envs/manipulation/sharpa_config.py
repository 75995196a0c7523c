"""SharpaInhandRotation's tunable parameters, with the reference's values.

Every default is the value the reference UniLab (unilabsim/UniLab at 9aa57115) runs its SAC recipe
with: ``conf/offpolicy/task/sac/sharpa_inhand/mujoco_hora.yaml`` where it sets one, else its env
config's default (``envs/manipulation/sharpa_inhand/base.py``, ``rotation.py``). What each
becomes is in the task's docstring (``sharpa.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DEFAULT_GRASP_CACHE",
    "REWARD_WEIGHTS",
    "SCALES",
    "TACTILE_SENSORS",
    "SharpaInhandConfig",
]

Range = tuple[float, float]

#: The eight object scales of the recipe (``domain_rand.scale_list``).
SCALES = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)
#: The contact-force sensors read as the five tactile signals (thumb, index, middle, ring,
#: pinky elastomers against the object), in the observation's order.
TACTILE_SENSORS = tuple(
    f"contact_right_{finger}_elastomer_force"
    for finger in ("thumb", "index", "middle", "ring", "pinky")
)
#: Reward weights in the reference's order (before the control step's 0.05).
REWARD_WEIGHTS = (
    ("rotate", 2.5),
    ("obj_linvel", -0.3),
    ("pose_diff", -0.4),
    ("torque", -0.1),
    ("work", -0.5),
    ("object_pos", 0.003),
)
#: Where the grasp caches are looked for by default: ``<prefix>_<scale>.npy`` (the reference's
#: ``caches/sharpa_grasp_linspace`` prefix, under the user's cache folder).
DEFAULT_GRASP_CACHE = "~/.cache/unilab_jax/caches/sharpa_grasp_linspace"


@dataclass(frozen=True)
class SharpaInhandConfig:
    """Tunable parameters of SharpaInhandRotation (module docstring: where each comes from)."""

    # --- physics and control
    timestep: float = 1.0 / 240.0
    """Physics step (s): ``sim_dt`` (the XML says 0.002; the reference sets it after compiling)."""
    n_frames: int = 12
    """Physics steps per control step (``ctrl_dt`` 12/240 = 0.05 s, 20 Hz)."""
    episode_length: int = 400
    """Control steps before truncation (``max_episode_seconds`` 20 / 0.05)."""
    action_scale: float = 1.0 / 24.0
    """Joint targets move by ``action_scale * action`` per control step."""
    dof_limits_scale: float = 0.9
    """Targets are clipped to the actuators' ctrl range times this (both bounds multiplied)."""

    # --- observation
    obs_lag_steps: int = 3
    """Frames the actor sees, oldest first (the last ``obs_lag_steps`` of the history)."""
    obs_history_len: int = 80
    """The reference's history length; only its last ``obs_lag_steps`` frames are ever
    observed by this task, so that is all the task keeps."""
    clip_obs: float = 5.0
    """Every frame, the observation and the critic observation are clipped to +-clip_obs."""
    enable_tactile: bool = True
    binary_contact: bool = False
    """True: tactile signals are 0/1 contacts (force above ``contact_threshold``) with dropout
    noise; False (the recipe): smoothed forces, no noise."""
    contact_smooth: float = 0.5
    """Tactile force = ``contact_smooth * f + (1 - contact_smooth) * f_prev``."""
    contact_threshold: float = 0.05
    tactile_force_clip_max: float = 4.0
    """Each sensor's force magnitude is clipped to [0, this] (N) before smoothing."""
    tactile_sensors: tuple[str, ...] = TACTILE_SENSORS
    disable_tactile_ids: tuple[int, ...] = ()
    """Tactile channels forced to 0."""
    include_friction_scale: bool = True
    """The critic's privileged values include the friction multiplier (9 values; 8 without)."""

    # --- reward and termination
    reward_weights: tuple[tuple[str, float], ...] = REWARD_WEIGHTS
    angvel_clip: Range = (-0.5, 0.5)
    """The rotation reward: the object's angular velocity about ``rot_axis``, clipped."""
    rot_axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    reset_height_lower: float = 0.59906
    reset_height_upper: float = 0.63906
    """The termination band's width is ``upper - lower`` (0.04 m), centred on each episode's
    initial object height."""
    object_pos_anchor: tuple[float, float, float] = (-0.09559, -0.00517, 0.61906)
    """The object position the ``object_pos`` reward and the privileged position change are
    measured from: the scene's ``home`` keyframe (``use_default_object_pose_for_object_pos_
    anchor: true``)."""

    # --- grasp caches
    grasp_cache_path: str = DEFAULT_GRASP_CACHE
    """Cache files: ``<path>_<scale>.npy`` (``path`` ending in ``.npy``: ``<stem>_<scale>.npy``;
    containing ``{scale}``: formatted), one per object scale, the reference's format."""

    # --- domain randomisation
    scale_list: tuple[float, ...] = SCALES
    """Object size multipliers, one model variant each; an env keeps its scale."""
    randomize_gravity_direction: bool = True
    gravity_magnitude: float = 9.81
    randomize_pd_gains: bool = True
    p_gain_scale: Range = (0.5, 2.0)
    d_gain_scale: Range = (0.5, 2.0)
    """Each actuator's kp (kd) is multiplied by U(lower, 1) or U(1, upper), each with
    probability 1/2."""
    randomize_friction: bool = True
    friction_scale: Range = (0.75, 1.25)
    elastomer_base_friction: float = 2.0
    metal_base_friction: float = 1.0
    object_base_friction: float = 2.0
    """Sliding friction of each material before the episode's multiplier (the torsional and
    rolling coefficients keep their ratio to it)."""
    randomize_com: bool = True
    com_offset: Range = (-0.01, 0.01)
    """Added to the object's centre of mass on each axis (m)."""
    randomize_mass: bool = True
    mass: Range = (0.01, 0.25)
    """The object's mass (kg), drawn."""
    force_scale: float = 2.0
    """Random object force: ``N(0, 1)^3 * mass * force_scale`` (N), 0 disables."""
    random_force_prob: float = 0.25
    """Per control step, the probability of a new random force (else the old one decays)."""
    force_decay: float = 0.9
    force_decay_interval: float = 0.08
    """The force decays by ``force_decay ** (control step / force_decay_interval)`` a step."""
    joint_noise_scale: float = 0.02
    """Added to each normalised joint position in every frame: U(-1, 1) * this."""
    contact_latency: float = 0.005
    """Per step and finger, the probability that the tactile signal keeps its last value."""
    contact_sensor_noise: float = 0.01
    """``binary_contact`` only: the probability that a contact reads 0."""

    def __post_init__(self) -> None:
        if not self.scale_list or any(s <= 0 for s in self.scale_list):
            raise ValueError(f"scale_list must be non-empty and positive, got {self.scale_list}")
        if self.dof_limits_scale <= 0:
            raise ValueError(f"dof_limits_scale must be positive, got {self.dof_limits_scale}")
        if not 1 <= self.obs_lag_steps <= self.obs_history_len:
            raise ValueError(
                f"obs_lag_steps {self.obs_lag_steps} must be in [1, obs_history_len "
                f"{self.obs_history_len}]"
            )
        for name, (low, high) in (("p_gain_scale", self.p_gain_scale),
                                  ("d_gain_scale", self.d_gain_scale)):  # fmt: skip
            if not low <= 1.0 <= high:
                raise ValueError(f"{name} must satisfy lower <= 1 <= upper, got {(low, high)}")
        if math.hypot(*self.rot_axis) <= 1e-8:
            raise ValueError("rot_axis must be non-zero")
        if self.gravity_magnitude <= 0:
            raise ValueError(f"gravity_magnitude must be positive, got {self.gravity_magnitude}")

    @property
    def control_dt(self) -> float:
        """Seconds per control step (0.05)."""
        return self.timestep * self.n_frames

    @property
    def height_band(self) -> float:
        """Width of the termination band (m)."""
        return self.reset_height_upper - self.reset_height_lower
