"""Go2JoystickFlat: the reference UniLab's Unitree Go2 following a velocity command on flat ground.

This is the reference UniLab (unilabsim/UniLab at 9aa57115) ``Go2JoystickFlat`` with its
off-policy MuJoCo owner config (``flashsac/go2_joystick_flat/mujoco.yaml``), held to it by the
golden-file tests (``tests/test_reference_go2.py``). The model (Menagerie's Go2 rebuilt into
the reference's) is ``go2_model.py``; the tunable parameters, :class:`Go2JoystickFlatConfig`,
are ``go2_config.py`` (defaults: the owner's values). Both are re-exported here.

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

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.mirror import SignedPermutation, hinge_mirror, left_right_partner
from unilab_jax.envs.robots.common import (
    SETCONST_FIELDS,
    LocomotionTask,
    apply_obs_noise,
    body_force,
    interval_push,
    locomotion_mirror,
    model_field,
    position_gains,
    setconst_weights,
    uniform,
    uniform_noise,
    weighted_reward,
    yaw_quaternion,
)
from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig
from unilab_jax.envs.robots.go2_model import (
    ACTUATOR_LEGS,
    BASE_BODY,
    FEET,
    build_go2_model,
    sensor_slices,
)

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

#: Noisy observation inputs, in the reference's draw order, with their sizes.
NOISE_SLOTS = (("gyro", 3), ("upvector", 3), ("joint_pos", 12), ("joint_vel", 12), ("linvel", 3))
#: Reward terms in the order the reference sums them.
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "lin_vel_z",
    "ang_vel_xy",
    "base_height",
    "action_rate",
    "similar_to_default",
    "contact",
    "swing_feet_z",
)
#: Model constants ``mj_setConst`` derives from the masses, which MJX does not recompute: the
#: task computes them per episode (:func:`~unilab_jax.envs.robots.common.setconst_weights`).
DERIVED_FIELDS = SETCONST_FIELDS
#: Episode draws of the domain randomisation (each a scalar but gravity [3]).
DR_DRAWS = ("base_mass_delta", "com_offset_x", "gravity", "kp_multiplier", "kd_multiplier")


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
        self._noise_scales = {
            "gyro": cfg.noise_gyro,
            "upvector": cfg.noise_upvector,
            "joint_pos": cfg.noise_joint_pos,
            "joint_vel": cfg.noise_joint_vel,
            "linvel": cfg.noise_linvel,
        }
        self._weights = {name: float(getattr(cfg, f"w_{name}")) for name in REWARD_TERMS}

    @property
    def sensor_slices(self) -> dict[str, slice]:
        """Each sensor's slice of ``sensordata``."""
        return dict(self._slices)

    @property
    def noise_scales(self) -> dict[str, float]:
        """Noise half-width per :data:`NOISE_SLOTS` slot, before ``noise_level``."""
        return dict(self._noise_scales)

    # ----------------------------------------------------------------- resets
    def initial_qpos_qvel(
        self, xy_offset: jax.Array, yaw: jax.Array, base_qvel: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """A reset's ``(qpos [19], qvel [18])`` from its draws: the home pose moved by
        ``xy_offset`` [2], turned by ``yaw`` about z, free-joint velocity ``base_qvel`` [6]."""
        qpos = self._home.at[0:2].add(xy_offset).at[3:7].set(yaw_quaternion(yaw))
        qvel = jnp.zeros((self.model.nv,), jnp.float32).at[0:6].set(base_qvel)
        return qpos, qvel

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_xy, k_yaw, k_vel = jax.random.split(key, 3)
        cfg = self.config
        xy = uniform(k_xy, (2,), -cfg.init_xy_range, cfg.init_xy_range)
        yaw = uniform(k_yaw, (), -math.pi, math.pi)
        base_qvel = uniform(k_vel, (6,), -cfg.init_base_vel, cfg.init_base_vel)
        return self.initial_qpos_qvel(xy, yaw, base_qvel)

    def draw_randomisation(self, key: jax.Array) -> dict[str, jax.Array]:
        """One episode's domain-randomisation draws (:data:`DR_DRAWS`)."""
        cfg = self.config
        keys = jax.random.split(key, 5)
        return {
            "base_mass_delta": uniform(keys[0], (), *cfg.added_mass_range),
            "com_offset_x": uniform(keys[1], (), *cfg.com_offset_x_range),
            "gravity": uniform(keys[2], (3,), cfg.gravity_low, cfg.gravity_high),
            "kp_multiplier": uniform(keys[3], (), *cfg.kp_multiplier_range),
            "kd_multiplier": uniform(keys[4], (), *cfg.kd_multiplier_range),
        }

    def randomised_values(self, draws: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The physical values of one episode's draws: ``kp``, ``kd`` (shared by the 12
        actuators), ``base_mass``, ``base_com`` [3] (base centre of mass, body frame) and
        ``gravity`` [3]."""
        cfg, base = self.config, self._base
        nominal_com = self._nominal["body_ipos"][base]
        return {
            "kp": cfg.kp * jnp.asarray(draws["kp_multiplier"], jnp.float32),
            "kd": cfg.kd * jnp.asarray(draws["kd_multiplier"], jnp.float32),
            "base_mass": self._nominal["body_mass"][base] + draws["base_mass_delta"],
            "base_com": nominal_com.at[0].add(draws["com_offset_x"]),
            "gravity": jnp.asarray(draws["gravity"], jnp.float32),
        }

    def episode_model(self, values: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The per-episode model fields (``Task.model_fields``) of :meth:`randomised_values`,
        with the inverse weights ``mj_setConst`` would derive from them (for MJX)."""
        nominal, base = self._nominal, self._base
        gains = position_gains(
            nominal["actuator_gainprm"], nominal["actuator_biasprm"], values["kp"], values["kd"]
        )
        fields = {
            **gains,
            "body_mass": nominal["body_mass"].at[base].set(values["base_mass"]),
            "body_ipos": nominal["body_ipos"].at[base].set(values["base_com"]),
            "opt.gravity": jnp.asarray(values["gravity"], jnp.float32),
        }
        return {**fields, **setconst_weights(self.model, fields)}

    def draw_command(self, key: jax.Array) -> jax.Array:
        """An episode's velocity command [3] (vx, vy, yaw rate), uniform in the config's box."""
        return uniform(key, (3,), self.config.command_low, self.config.command_high)

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

    # ----------------------------------------------------------------- pushes
    def is_push_step(self, step_counter: jax.Array) -> jax.Array:
        """The batch's control step ``step_counter`` carries a push (0, 750, 1500, ...)."""
        interval = self.config.push_interval
        if interval <= 0:
            return jnp.zeros((), bool)
        return step_counter % interval == 0

    def push_force(self, key: jax.Array, step_counter: jax.Array) -> jax.Array:
        """The world-frame force [3] on the base during step ``step_counter`` (0 if none)."""
        cfg = self.config
        return interval_push(key, step_counter, cfg.push_interval, cfg.push_max_force)

    def xfrc_applied(self, task_state: dict[str, jax.Array]) -> jax.Array:
        return body_force(self.model.nbody, self._base, task_state["push_force"])

    # ----------------------------------------------------------------- step
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

    def sensors(self, data: Any) -> dict[str, jax.Array]:
        """What the task reads from the physics: the imu's ``gyro``, ``linvel`` (local) and
        ``upvector``, the feet's world positions ``feet_pos`` [4, 3] and contact sensors
        ``feet_found`` [4] (feet order), ``qpos``, ``qvel``."""
        sd, s = data.sensordata, self._slices
        return {
            "gyro": sd[s["gyro"]],
            "linvel": sd[s["local_linvel"]],
            "upvector": sd[s["upvector"]],
            "feet_pos": jnp.stack([sd[s[f"{leg}_pos"]] for leg in FEET]),
            "feet_found": jnp.concatenate([sd[s[f"{leg}_foot_contact"]] for leg in FEET]),
            "qpos": data.qpos,
            "qvel": data.qvel,
        }

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
        x = dict(clean)
        if draws is not None:
            x = apply_obs_noise(clean, draws, self.config.noise_level, self._noise_scales)
        obs = jnp.concatenate(
            [
                x["gyro"],
                -x["upvector"],
                x["joint_pos"],
                x["joint_vel"],
                task_state["action"],
                task_state["command"],
                task_state["feet_phase"],
            ]
        )
        return {"obs": obs, "critic": jnp.concatenate([obs, x["linvel"]])}

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        s = self.sensors(data)
        clean = {
            "gyro": s["gyro"],
            "upvector": s["upvector"],
            "joint_pos": s["qpos"][7:19] - self.default_pose,
            "joint_vel": s["qvel"][6:18],
            "linvel": s["linvel"],
        }
        draws = None
        if self.config.noise_level > 0:
            draws = self.draw_obs_noise(task_state["noise_key"])
        return self.observation(clean, draws, task_state)

    def reward_terms(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The unweighted reward terms (:data:`REWARD_TERMS`) of the step that applied
        ``action`` from ``task_state`` and ended in ``data``."""
        cfg = self.config
        s = self.sensors(data)
        v, w, cmd = s["linvel"], s["gyro"], task_state["command"]
        phases = feet_phase(self.advance_phase(task_state["phase"]))
        swing = phases >= cfg.stance_fraction
        contact = s["feet_found"] > cfg.contact_threshold
        foot_z = s["feet_pos"][:, 2]
        height = jnp.exp(-jnp.square(foot_z - cfg.swing_height_target) / cfg.swing_height_sigma)
        n_feet = len(FEET)
        return {
            "tracking_lin_vel": jnp.exp(-jnp.sum(jnp.square(cmd[:2] - v[:2])) / cfg.tracking_sigma),
            "tracking_ang_vel": jnp.exp(-jnp.square(cmd[2] - w[2]) / cfg.tracking_sigma),
            "lin_vel_z": jnp.square(v[2]),
            "ang_vel_xy": jnp.sum(jnp.square(w[:2])),
            "base_height": jnp.square(s["qpos"][2] - cfg.base_height_target),
            "action_rate": jnp.sum(jnp.square(action - task_state["action"])),
            "similar_to_default": jnp.sum(jnp.abs(s["qpos"][7:19] - self.default_pose)),
            "contact": jnp.sum((contact == ~swing).astype(jnp.float32)) / n_feet,
            "swing_feet_z": jnp.sum(height * swing) / n_feet,
        }

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        return weighted_reward(
            self.reward_terms(data, action, task_state), self._weights, self.control_dt
        )

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        return self.sensors(data)["upvector"][2] <= self.config.min_upvector_z
