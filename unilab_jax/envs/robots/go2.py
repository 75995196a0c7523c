"""Go2JoystickFlat: the reference UniLab's Unitree Go2 following a velocity command on flat ground.

This is the reference UniLab (unilabsim/UniLab at 9aa57115) ``Go2JoystickFlat`` with its
off-policy MuJoCo owner config (``flashsac/go2_joystick_flat/mujoco.yaml``), held to it by the
golden-file tests (``tests/test_reference_go2.py``). This module holds the task class (its
control, gait clock, task state, mirror map, termination) and documents the whole task below;
its parts live beside it, and their public names are re-exported here:

- ``go2_model.py``: the model (Menagerie's Go2 rebuilt into the reference's);
- ``go2_config.py``: the tunable parameters, :class:`Go2JoystickFlatConfig` (defaults: the
  owner's values);
- ``go2_randomisation.py``: the random draws and what each becomes: reset state, command,
  domain randomisation (the per-episode model fields), pushes;
- ``go2_observation.py``: the sensors the task reads, the observation noise and the
  observation groups' layout;
- ``go2_reward.py``: the reward terms and their weights.

Orders. qpos / qvel joints, the feet and the observation's joint slices: FL, FR, RL, RR, each
leg (hip, thigh, calf). Actuators, hence the action and ``ctrl``: FR, FL, RR, RL.

* **Control** (0.02 s, 2 physics steps of 0.01 s): ``ctrl = default_pose + 0.4 * action``,
  the default pose taken per actuator (the reference adds the joint-ordered pose to the
  actuator-ordered action; both legs of a pair share their pose, so the numbers are the
  same); ctrl is not clamped, torques are (to 23.7 / 23.7 / 45.43 N m). Position actuators
  ``kp (ctrl - q) - kd qdot`` at every physics step, plus joint damping 0.5 and friction
  loss 0.2. Every control step starts the constraint solver cold and C MuJoCo keeps its state
  in float32 between control steps, as the reference's batched pool does.
* **Gait clock**: one phase for the whole batch, never reset per env (kept across automatic
  resets): ``phase = fmod(phase + 2 Hz * 0.02, 1)`` per control step from 0; feet phases
  (FL, FR, RL, RR) = ``(phase, phase + 0.5, phase + 0.5, phase) mod 1``, all zero until the
  first step. A foot is in stance while its phase is below 0.6.
* **Observation** "obs" (49), no scaling or clipping; sensors are those MuJoCo evaluated at the
  start of the last physics step, joint state the final one::

      [ 0: 3] gyro (imu site frame)                          + U(-1, 1) * level * noise_gyro
      [ 3: 6] -(upvector + noise): minus the base z axis in world coordinates (0, 0, -1 upright)
      [ 6:18] joint positions - default pose (joint order)   + U(-1, 1) * level * 0.01
      [18:30] joint velocities (joint order)                 + U(-1, 1) * level * 0.1
      [30:42] the action just applied (actuator order; 0 in a reset observation)
      [42:45] velocity command (vx, vy, yaw rate)
      [45:49] feet phases (FL, FR, RL, RR)

  "critic" (52): the *noisy* "obs" followed by the imu's local linear velocity (+ noise with
  ``noise_linvel``, 0 by default). The noise draws come from a key in the task state that
  every step and every reset refresh (``noise_level`` 0: no noise).
* **Command**: uniform in vx [-0.6, 1.0] m/s, vy [-0.4, 0.4] m/s, yaw rate [-0.8, 0.8] rad/s,
  drawn at reset, never resampled.
* **Reward** = 0.02 x (sum of ``weight * term``, in float32 in this order), components logged as
  ``reward/<name>`` = ``0.02 * weight * term`` (they sum to the reward).
  v: imu local linear velocity, w: gyro, c: command, q: joint positions, a: action, p_i: feet
  phases, z_i: world height of the foot sphere centres, found_i: the foot contact sensors::

      tracking_lin_vel     1.0  * exp(-|c_xy - v_xy|^2 / 0.4)
      tracking_ang_vel     0.2  * exp(-(c_yaw - w_z)^2 / 0.4)
      lin_vel_z           -5.0  * v_z^2
      ang_vel_xy          -0.1  * |w_xy|^2
      base_height        -20.0  * (base z - 0.3)^2
      action_rate         -0.02 * |a - a_prev|^2                (a_prev = 0 after a reset)
      similar_to_default  -0.4  * sum |q - default_pose|
      contact              1.5  * mean_i [(found_i > 0.1) == (p_i < 0.6)]
      swing_feet_z         4.0  * sum_i exp(-(z_i - 0.1)^2 / 0.01) [p_i >= 0.6] / 4

* **Termination**: the base's up vector has world z <= 0.5 (tilted 60 degrees or more).
  **Truncation** after 1000 control steps (20 s).
* **Reset**: the ``home`` pose (base at 0.3 m, joints at the default pose), base x, y offset by
  ``U(-0.5, 0.5)``, yaw ``U(-pi, pi)``, the 6 free-joint velocities ``U(-0.5, 0.5)``, joint
  velocities 0; the reset observation reads the sensors of that state.
* **Domain randomisation** per episode (``Task.model_fields``): all 12 ``kp`` = 35 x
  ``U(0.9, 1.1)``, all 12 ``kd`` = 0.5 x ``U(0.9, 1.1)``, base mass 6.921 + ``U(-1.5, 1.5)`` kg,
  base centre of mass x + ``U(-0.05, 0.05)`` m, gravity ``U((0, 0, -9.81), (0, 0, -9.81))``.
  **Pushes**: on steps 0, 750, 1500, ... of a step counter the batch shares (never reset per
  env), a world-frame force ``U(-1, 1) * (1, 1, 0.5)`` N on the base's centre of mass, held over
  that control step (``Task.xfrc_applied``).
* ``reward_bounds`` = (-0.6, 0.1): the reward is at most 0.094 (all positive terms at their
  maximum: 1 + 0.2 + 1.5 + 4 x 2 / 4, times 0.02; at most two feet swing at once); robots
  thrown around by +-1 actions reach -0.53 (golden rollout), uniform random actions -0.15
  (32 envs x 200 steps on C MuJoCo). The default value support is
  ``reward_bounds / (1 - gamma)``.
* **Mirror** (``Task.mirror``; ours, the reference defines no symmetry for Go2): the reflection
  through the sagittal plane (``unilab_jax.envs.mirror``). "obs": gyro as a pseudo-vector
  ``(-x, y, -z)``, ``-upvector`` as a vector ``(x, -y, z)``, joint positions and velocities
  over the joint order and the action over the actuator order by :func:`hinge_mirror` (FL <->
  FR, RL <-> RR; hips flip sign, thighs and calves keep it), the command ``(vx, -vy, -yaw)``,
  the feet phases FL <-> FR, RL <-> RR; "critic" adds the linear velocity as a vector; qpos /
  qvel by :func:`floating_base_mirror`. Swapping the feet phases is the clock half a cycle on,
  so a mirrored transition is one of the robot whose clock is ``phase + 0.5``: the reward is
  the same (every term is left-right symmetric: the feet terms sum over the swapped feet with
  their swapped phases), as are the noise, the domain randomisation (scalar gains, base mass,
  centre of mass along x, gravity and push drawn symmetric in y) and the command box (vy, yaw
  rate symmetric). The batch shares one clock, so a mirrored row is a state no env of *this*
  batch is in, but one of the same task (what symmetry augmentation needs); the first
  observation's all-zero feet phases are their own mirror. The model is nearly symmetric: the
  base's products of inertia xy, yz are 1.2e-4, -3.1e-5 kg m^2 (of 0.1) and Menagerie's FL
  upper calf cylinder is not FR's mirror (radius 12 vs 13 mm); a mirrored pair one control
  step on differs by at most 4e-5 in qpos, 3e-3 in qvel (``tests/test_symmetry.py``).

Per-episode model constants: C MuJoCo runs ``mj_setConst`` on each simulation's model after
its DR fields change, as the reference does; MJX replaces the fields but not the constants
derived from them, so the task computes the ones MJX reads (body / dof inverse weights, subtree
masses: :func:`~unilab_jax.envs.robots.common.setconst_weights`) and hands them over as model
fields too (without them MJX's median one-step error grows 7x; ``tests/test_reference_go2.py``).

Deviations from the reference (``tests/test_reference_go2.py`` measures the agreement):
random numbers are JAX's (the same distributions, not numpy's global stream); the DR values are
float32 (gravity -9.81 is -9.8100004 m/s^2, a base mass is rounded to 1e-7 relative); the
action is clipped to [-1, 1] (the reference's actor's tanh is anyway); the reference's
construction-time draws, the episode counters its ``init_state`` draws and zeroes again and
its ``info`` aliasing quirk have no counterpart; the reference logs reward components without
the factor 0.02.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.mirror import SignedPermutation, hinge_mirror, left_right_partner
from unilab_jax.envs.robots import go2_observation, go2_randomisation, go2_reward
from unilab_jax.envs.robots.common import (
    LocomotionTask,
    apply_obs_noise,
    body_force,
    locomotion_mirror,
    model_field,
    uniform_noise,
    weighted_reward,
)
from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig
from unilab_jax.envs.robots.go2_model import (
    ACTUATOR_LEGS,
    BASE_BODY,
    FEET,
    build_go2_model,
    sensor_slices,
)
from unilab_jax.envs.robots.go2_observation import NOISE_SLOTS
from unilab_jax.envs.robots.go2_randomisation import DERIVED_FIELDS, DR_DRAWS
from unilab_jax.envs.robots.go2_reward import REWARD_TERMS

__all__ = [
    "ACTUATOR_LEGS",
    "DERIVED_FIELDS",
    "DR_DRAWS",
    "NOISE_SLOTS",
    "REWARD_TERMS",
    "Go2JoystickFlat",
    "Go2JoystickFlatConfig",
    "apply_obs_noise",
    "build_go2_model",
    "feet_phase",
]


def feet_phase(phase: jax.Array) -> jax.Array:
    """Feet phases [4] (FL, FR, RL, RR) of the gait clock ``phase`` (trot: diagonal pairs)."""
    other = jnp.mod(phase + jnp.float32(0.5), jnp.float32(1.0))
    return jnp.stack([phase, other, other, phase])


class Go2JoystickFlat(LocomotionTask):
    """The reference Go2 joystick task on flat ground (module docstring)."""

    reward_bounds = (-0.6, 0.1)
    command_obs = slice(42, 45)

    reset_forward = True  # the reset observation reads sensors
    solver_warmstart = False
    float32_state = True
    model_fields = (
        "actuator_gainprm",
        "actuator_biasprm",
        "body_mass",
        "body_ipos",
        "opt.gravity",
        *DERIVED_FIELDS,
    )
    #: The gait clock and the push schedule belong to the batch, not to an episode.
    persistent_state = ("phase", "feet_phase", "step_counter", "push_force")

    def __init__(self, config: Go2JoystickFlatConfig | None = None) -> None:
        cfg = config or Go2JoystickFlatConfig()
        model = build_go2_model(cfg)
        joint_names = [model.joint(j).name for j in range(1, model.njnt)]  # qpos order
        actuated = [model.joint(j).name for j in model.actuator_trnid[:, 0]]  # FR, FL, RR, RL
        # Feet (FL, FR, RL, RR): FL <-> FR, RL <-> RR, i.e. the clock half a cycle on.
        feet = SignedPermutation(tuple(FEET.index(left_right_partner(f)) for f in FEET), (1.0,) * 4)
        mirror = locomotion_mirror(
            hinge_mirror(model, joint_names), hinge_mirror(model, actuated), feet
        )  # ours: the reference defines no symmetry for Go2
        home = np.asarray(model.key_qpos[0], np.float32)
        super().__init__(cfg, model, home[7:], mirror)
        self._slices = sensor_slices(model)
        self._base = model.body(BASE_BODY).id
        self._home = jnp.asarray(home)
        # Per actuator, the default pose of the joint it drives.
        joint_of = [int(model.jnt_qposadr[j]) for j in model.actuator_trnid[:, 0]]
        self._ctrl_offset = jnp.asarray(home[joint_of])
        self._nominal = {
            f: jnp.asarray(model_field(model, f), jnp.float32)
            for f in self.model_fields
            if f not in DERIVED_FIELDS
        }
        self._phase_step = float(cfg.gait_frequency * self.control_dt)
        self._noise_scales = go2_observation.noise_scales(cfg)
        self._weights = go2_reward.reward_weights(cfg)

    @property
    def sensor_slices(self) -> dict[str, slice]:
        """Each sensor's slice of ``sensordata``."""
        return dict(self._slices)

    @property
    def noise_scales(self) -> dict[str, float]:
        """Noise half-width per :data:`NOISE_SLOTS` slot, before ``noise_level``."""
        return dict(self._noise_scales)

    # -------------------------------------------------- resets (go2_randomisation.py)
    def initial_qpos_qvel(
        self, xy_offset: jax.Array, yaw: jax.Array, base_qvel: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """A reset's ``(qpos [19], qvel [18])`` from its draws: the home pose moved by
        ``xy_offset`` [2], turned by ``yaw`` about z, free-joint velocity ``base_qvel`` [6]."""
        return go2_randomisation.reset_qpos_qvel(
            self._home, xy_offset, yaw, base_qvel, self.model.nv
        )

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.initial_qpos_qvel(*go2_randomisation.draw_reset(key, self.config))

    def draw_randomisation(self, key: jax.Array) -> dict[str, jax.Array]:
        """One episode's domain-randomisation draws (:data:`DR_DRAWS`)."""
        return go2_randomisation.draw_randomisation(key, self.config)

    def randomised_values(self, draws: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The physical values of one episode's draws: ``kp``, ``kd`` (shared by the 12
        actuators), ``base_mass``, ``base_com`` [3] (base centre of mass, body frame) and
        ``gravity`` [3]."""
        return go2_randomisation.randomised_values(draws, self._nominal, self._base, self.config)

    def episode_model(self, values: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The per-episode model fields (``Task.model_fields``) of :meth:`randomised_values`,
        with the inverse weights ``mj_setConst`` would derive from them (for MJX)."""
        return go2_randomisation.episode_model(values, self._nominal, self._base, self.model)

    def draw_command(self, key: jax.Array) -> jax.Array:
        """An episode's velocity command [3] (vx, vy, yaw rate), uniform in the config's box."""
        return go2_randomisation.draw_command(key, self.config)

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        k_cmd, k_dr, k_noise, k_push = jax.random.split(key, 4)
        counter = jnp.zeros((), jnp.int32)
        return {
            "command": self.draw_command(k_cmd),
            "action": jnp.zeros((self.action_size,), jnp.float32),
            MODEL_PARAMS_KEY: self.episode_model(
                self.randomised_values(self.draw_randomisation(k_dr))
            ),
            "noise_key": k_noise,
            "phase": jnp.zeros((), jnp.float32),
            "feet_phase": jnp.zeros((len(FEET),), jnp.float32),
            "step_counter": counter,
            "push_force": self.push_force(k_push, counter),
        }

    # -------------------------------------------------- pushes (go2_randomisation.py)
    def is_push_step(self, step_counter: jax.Array) -> jax.Array:
        """The batch's control step ``step_counter`` carries a push (0, 750, 1500, ...)."""
        return go2_randomisation.is_push_step(step_counter, self.config)

    def push_force(self, key: jax.Array, step_counter: jax.Array) -> jax.Array:
        """The world-frame force [3] on the base during step ``step_counter`` (0 if none)."""
        return go2_randomisation.push_force(key, step_counter, self.config)

    def xfrc_applied(self, task_state: dict[str, jax.Array]) -> jax.Array:
        return body_force(self.model.nbody, self._base, task_state["push_force"])

    # -------------------------------------------------- step
    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        return action * self.config.action_scale + self._ctrl_offset

    def advance_phase(self, phase: jax.Array) -> jax.Array:
        """The gait clock one control step later (float32, as the reference)."""
        return jnp.fmod(phase + jnp.float32(self._phase_step), jnp.float32(1.0))

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        del data
        k_noise, k_push = jax.random.split(key)
        phase = self.advance_phase(task_state["phase"])
        counter = task_state["step_counter"] + 1
        return {
            **task_state,
            "action": jnp.asarray(action, jnp.float32),
            "noise_key": k_noise,
            "phase": phase,
            "feet_phase": feet_phase(phase),
            "step_counter": counter,
            "push_force": self.push_force(k_push, counter),
        }

    # -------------------------------------------------- observation (go2_observation.py)
    def sensors(self, data: Any) -> dict[str, jax.Array]:
        """What the task reads from the physics: the imu's ``gyro``, ``linvel`` (local) and
        ``upvector``, the feet's world positions ``feet_pos`` [4, 3] and contact sensors
        ``feet_found`` [4] (feet order), ``qpos``, ``qvel``."""
        return go2_observation.read_sensors(data, self._slices)

    def draw_obs_noise(self, key: jax.Array) -> dict[str, jax.Array]:
        """``U(-1, 1)`` draws of every :data:`NOISE_SLOTS` slot."""
        return uniform_noise(key, NOISE_SLOTS)

    def observation(
        self,
        clean: Mapping[str, jax.Array],
        draws: Mapping[str, jax.Array] | None,
        task_state: Mapping[str, jax.Array],
    ) -> dict[str, jax.Array]:
        """The observation groups from the clean :data:`NOISE_SLOTS` inputs and their noise
        draws (None: noise off)."""
        return go2_observation.observation_groups(
            clean, draws, task_state, self.config.noise_level, self._noise_scales
        )

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        clean = go2_observation.clean_inputs(self.sensors(data), self.default_pose)
        draws = None
        if self.config.noise_level > 0:
            draws = self.draw_obs_noise(task_state["noise_key"])
        return self.observation(clean, draws, task_state)

    # -------------------------------------------------- reward (go2_reward.py)
    def reward_terms(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The unweighted reward terms (:data:`REWARD_TERMS`) of the step that applied
        ``action`` from ``task_state`` and ended in ``data``."""
        phases = feet_phase(self.advance_phase(task_state["phase"]))
        return go2_reward.reward_terms(
            self.sensors(data), action, task_state, phases, self.default_pose, self.config
        )

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        return weighted_reward(
            self.reward_terms(data, action, task_state), self._weights, self.control_dt
        )

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        return self.sensors(data)["upvector"][2] <= self.config.min_upvector_z
