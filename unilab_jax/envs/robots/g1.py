"""G1WalkFlat and G1WalkRough: the reference UniLab's Unitree G1 humanoid (29 joints) walking on
flat ground and on a height field.

This is the reference UniLab (unilabsim/UniLab at 9aa57115) ``G1WalkFlat`` with its TD3 owner
config (``conf/offpolicy``, ``task=td3/g1_walk_flat/mujoco``), held to it by the golden-file
tests (``tests/test_reference_g1.py``), and its ``G1WalkRough``
(``task=sac/g1_walk_rough/mujoco``, whose env section is G1WalkFlat's): the same task on the
rough scene (:class:`G1WalkRough`; everything below holds for both, except the floor, the
keyframe's pelvis height, 0.79 m there, and the foot contact sensors, which the rough scene
lacks and no term reads). The model (mjlab's G1 rebuilt into the reference's) is
``g1_model.py``; the tunable parameters, :class:`G1WalkFlatConfig`, are ``g1_config.py``
(defaults: the owner's values); the penalty curriculum is ``g1_curriculum.py``; building a
reset from its draws is ``g1_reset.py``.

Orders: qpos ``[pelvis pos, pelvis quat wxyz, 29 joints]`` (nq 36), qvel ``[pelvis linear
velocity (world), angular velocity (pelvis frame), 29 joints]`` (nv 35). Joints = actuators =
action: left leg (hip pitch, roll, yaw, knee, ankle pitch, roll), right leg, waist (yaw, roll,
pitch), left arm (shoulder pitch, roll, yaw, elbow, wrist roll, pitch, yaw), right arm.

* **Control** (0.02 s, 3 physics steps of 1/150 s, implicitfast): ``ctrl = default_pose +
  action`` (the ``stand`` keyframe's angles; not clipped); position actuators ``kp (ctrl - q) -
  kv qdot`` clamped to the motors' torque limits, joint friction loss 0.3 N m. Every control
  step starts the constraint solver cold and C MuJoCo keeps its state in float32 between
  control steps, as the reference's batched pool does.
* **Gait clock** (left, right), radians: ``(p, p + pi)`` at reset with ``p ~ U(0, 2 pi)``,
  each step ``phase = (phase + 2 pi 1.5 Hz 0.02 s) mod 2 pi``. The foot target height ``h``
  is a cubic Bezier rise to 0.09 m over the first half cycle and fall over the second
  (:func:`feet_height_target`).
* **Observation** "obs" (98), from the sensors MuJoCo evaluated at the start of the last
  physics step and the final joint state::

      [ 0: 3] torso gyro (torso frame)          (+ U(-1, 1) * level * noise_gyro) * 0.25
      [ 3: 6] -(torso z axis in world coordinates + noise): (0, 0, -1) upright
      [ 6:35] joint angles - default pose       + U(-1, 1) * level * 0.01
      [35:64] (joint velocities                 + U(-1, 1) * level * 0.1) * 0.05
      [64:93] the action just applied (0 in a reset observation)
      [93:96] velocity command (vx, vy, yaw rate)
      [96:98] gait phases (left, right), raw radians

  "critic" (101): the same 98 without noise, then the pelvis IMU's local linear velocity x 2.
  The noise draws come from a key in the task state that every step and every reset refresh.
* **Command**: ``U((-0.6, -0.4, -0.8), (1.0, 0.4, 0.8))`` per episode, vx and vy set to 0 when
  ``|(vx, vy)| <= 0.2``; never resampled.
* **Reward** = 0.02 x (sum of ``weight * term`` in :data:`REWARD_TERMS` order), the penalty
  weights (negative) times the curriculum scale ``s`` (``g1_curriculum.py``); components logged
  as ``reward/<name>`` = ``0.02 * weight * term`` (``* s`` for penalties; the terms sum to
  the reward) and ``reward/penalty_scale`` = ``s`` (not a term). v: pelvis IMU local linear
  velocity, w: torso gyro, up: torso z axis (world), c: command, a: action, q: joints, quat /
  z: foot site orientation (w, x, y, z) / world height::

      tracking_lin_vel       2.0  exp(-|c_xy - v_xy|^2 / 0.25)
      tracking_ang_vel       1.5  exp(-(c_yaw - w_z)^2 / 0.25)
      penalty_ang_vel_xy    -1.0  |w_xy|^2
      penalty_orientation  -10.0  |up_xy|^2
      penalty_action_rate   -4.0  |a - a_prev|^2                (a_prev = 0 after a reset)
      pose                  -0.5  sum_j pose_weight_j (q_j - default_j)^2
      penalty_feet_ori     -20.0  sum_feet quat_x^2 + quat_y^2
      feet_phase             5.0  exp(-sum_feet (z - h(phase))^2 / 0.04)
      alive                 10.0

* **Termination**: torso tilted more than 65 degrees, or pelvis below 0.3 m (absolute height,
  on the rough floor too, as the reference's). **Truncation**
  after 1000 control steps (20 s).
* **Reset**: the ``stand`` keyframe with base x, y + ``U(-0.5, 0.5)``, yaw ``U(-pi, pi)``, the
  6 free-joint velocities ``U(-0.5, 0.5)``, joints at rest; the reset observation reads the
  sensors of that state (``g1_reset.py``).
* **Domain randomisation** per episode (``Task.model_fields``): every actuator's ``kp`` times
  one ``U(0.9, 1.1)``, every ``kv`` times another (``g1_reset.actuator_gains``).
* ``reward_bounds`` = (-1.0, 0.4): the reward is at most 0.37 (every positive term at 1); a
  robot standing still after a reset gets about 0.3; random actions (golden rollout, half of
  the envs at +-1) give -0.9 at the median and -3.2 at worst (action rate, pose, torso spin).
  (The reference's TD3 fixes its value support at +-10 instead, about +-0.3 per step at
  gamma 0.97.)
* **Mirror**: left and right joints swap (roll and yaw joints change sign), the gait phases
  swap; this is the reference's own symmetry map.

Deviations from the reference (the golden tests measure what they cost): random numbers are
JAX's (the same distributions, not numpy's global stream); per-episode gains, the curriculum
mean and scale are float32 (the reference's float64); the reference's construction-time draws,
the staggered ``steps`` its ``init_state`` zeroes again, and its collector's habits (an
``env.step(zeros)`` before collecting; terminal transitions stored with action 0 because the
auto-reset zeroes the caller's action array in place) have no counterpart: they are collector
behaviour, not the task. The reference replaces a non-finite reward by 0; here it reaches the
training loop, which stops (``base.py``). Our envs clip actions to [-1, 1] (the reference's env
does not clip; its TD3 actor's tanh keeps them inside). MJX replaces the gains per env but keeps
the nominal model's derived constants (gains enter none). On G1WalkRough's height field MJX
returns at most 4 contacts per colliding geom where C MuJoCo (the reference's physics) returns
one per penetrating prism: the feet feel other forces there (``docs/robots.md``). The
curriculum's batch is one device's share when a run spans several devices
(``Task.update_batch``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.mirror import SignedPermutation, hinge_mirror
from unilab_jax.envs.robots.common import (
    LocomotionTask,
    apply_obs_noise,
    locomotion_mirror,
    uniform_noise,
    weighted_reward,
)
from unilab_jax.envs.robots.g1_config import G1WalkFlatConfig
from unilab_jax.envs.robots.g1_curriculum import curriculum_window, update_penalty_curriculum
from unilab_jax.envs.robots.g1_model import build_g1_model, sensor_slices
from unilab_jax.envs.robots.g1_reset import (
    actuator_gains,
    commands_from_draw,
    gait_phase_from_draw,
    reset_qpos_qvel,
)

__all__ = [
    "NOISE_SLOTS",
    "REWARD_TERMS",
    "G1WalkFlat",
    "G1WalkFlatConfig",
    "G1WalkRough",
    "advance_gait_phase",
    "apply_obs_noise",
    "build_g1_model",
    "feet_height_target",
    "noise_scales",
    "observation_vector",
]

#: Reward terms in the order the reference sums them.
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "penalty_ang_vel_xy",
    "penalty_orientation",
    "penalty_action_rate",
    "pose",
    "penalty_feet_ori",
    "feet_phase",
    "alive",
)
#: Noisy observation inputs, in the reference's draw order, with their sizes.
NOISE_SLOTS = (("gyro", 3), ("gravity", 3), ("joint_angle", 29), ("joint_vel", 29))
_TWO_PI = 2.0 * math.pi
# The observation's fixed scalings (the reference's "walk profile").
_GYRO_SCALE, _JOINT_VEL_SCALE, _LINVEL_SCALE = 0.25, 0.05, 2.0


# --------------------------------------------------------------------- the reference's rules
def advance_gait_phase(phase: jax.Array, delta: float) -> jax.Array:
    """One control step of the gait clock: ``(phase + delta) mod 2 pi`` in float32."""
    return jnp.mod(phase + jnp.float32(delta), jnp.float32(_TWO_PI))


def feet_height_target(phase: jax.Array, swing_height: float) -> jax.Array:
    """Target foot height for each gait phase: with ``x = phase / 2 pi`` wrapped to [0, 1),
    ``H B(2x)`` for ``x <= 1/2`` and ``H (1 - B(2x - 1))`` after, ``B(t) = t^3 + 3 t^2 (1 - t)``
    (a cubic Bezier from 0 to ``H`` and back)."""
    pi = jnp.float32(math.pi)
    # Wrapped to [-pi, pi), then shifted back: the reference's float32 roundings.
    x = (jnp.fmod(phase + pi, jnp.float32(_TWO_PI)) - pi + pi) / jnp.float32(_TWO_PI)
    height = jnp.float32(swing_height)

    def bezier(t: jax.Array) -> jax.Array:
        return t**3 + 3.0 * (t**2 * (1.0 - t))

    rise = height * bezier(2.0 * x)
    fall = height + (0.0 - height) * bezier(2.0 * x - 1.0)
    return jnp.where(x <= 0.5, rise, fall)


def noise_scales(config: G1WalkFlatConfig) -> dict[str, float]:
    """Each noise slot's scale (:data:`NOISE_SLOTS`) in ``config``."""
    return {
        "gyro": config.noise_gyro,
        "gravity": config.noise_gravity,
        "joint_angle": config.noise_joint_angle,
        "joint_vel": config.noise_joint_vel,
    }


def observation_vector(signals: Mapping[str, jax.Array], carry: jax.Array) -> jax.Array:
    """The 98-entry observation ``[..., 98]`` of ``signals`` (:data:`NOISE_SLOTS`: the torso
    gyro, the torso z axis, joint angles - default, joint velocities) and ``carry`` ``[..., 34]``
    (the action just applied, the command, the gait phases)."""
    return jnp.concatenate(
        [
            signals["gyro"] * _GYRO_SCALE,
            -signals["gravity"],
            signals["joint_angle"],
            signals["joint_vel"] * _JOINT_VEL_SCALE,
            carry,
        ],
        axis=-1,
    )


# --------------------------------------------------------------------- the task
class G1WalkFlat(LocomotionTask):
    """The reference G1WalkFlat (module docstring)."""

    terrain = "flat"
    """The floor (``g1_model.TERRAINS``) the model is built with."""
    reward_bounds = (-1.0, 0.4)
    command_obs = slice(93, 96)
    reset_forward = True  # the reset observation reads sensors
    model_fields = ("actuator_gainprm", "actuator_biasprm")
    persistent_state = ("penalty_scale", "mean_episode_length")
    solver_warmstart = False
    float32_state = True

    def __init__(self, config: G1WalkFlatConfig | None = None) -> None:
        model = build_g1_model(self.terrain)
        joint_names = tuple(model.joint(j).name for j in range(1, model.njnt))
        joints = hinge_mirror(model, joint_names)  # also the action's map
        phases = SignedPermutation((1, 0), (1.0, 1.0))  # left <-> right
        mirror = locomotion_mirror(joints, joints, phases)
        # The default pose, which ``ctrl`` is centred on: the ``stand`` keyframe's joint angles.
        super().__init__(config or G1WalkFlatConfig(), model, model.key_qpos[0, 7:], mirror)
        c = self.config
        self.joint_names = joint_names
        self._sensor = sensor_slices(model)
        self._key_qpos = jnp.asarray(model.key_qpos[0], jnp.float32)
        self._gainprm = jnp.asarray(model.actuator_gainprm, jnp.float32)
        self._biasprm = jnp.asarray(model.actuator_biasprm, jnp.float32)
        self._pose_weights = jnp.asarray(c.pose_weights, jnp.float32)
        self._phase_delta = _TWO_PI * c.gait_frequency * self.control_dt
        self._weights = {t: float(getattr(c, f"w_{t}")) for t in REWARD_TERMS}
        self._noise_scales = noise_scales(c)

    def sensor(self, data: Any, name: str) -> jax.Array:
        """One sensor's value from ``data.sensordata``."""
        return data.sensordata[self._sensor[name]]

    # ----------------------------------------------------------------- reset
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.config
        k_xy, k_yaw, k_qvel = jax.random.split(key, 3)
        r, v = c.reset_xy_range, c.reset_base_qvel_limit
        xy = jax.random.uniform(k_xy, (2,), minval=-r, maxval=r)
        yaw = jax.random.uniform(k_yaw, (), minval=-math.pi, maxval=math.pi)
        base_qvel = jax.random.uniform(k_qvel, (6,), minval=-v, maxval=v)
        return reset_qpos_qvel(self._key_qpos, xy, yaw, base_qvel, self.model.nv)

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        c = self.config
        k_cmd, k_phase, k_kp, k_kd, k_noise = jax.random.split(key, 5)
        command = jax.random.uniform(
            k_cmd, (3,), minval=jnp.asarray(c.command_low), maxval=jnp.asarray(c.command_high)
        )
        phase = jax.random.uniform(k_phase, (), minval=0.0, maxval=_TWO_PI)
        kp = jax.random.uniform(
            k_kp, (), minval=c.kp_multiplier_range[0], maxval=c.kp_multiplier_range[1]
        )
        kd = jax.random.uniform(
            k_kd, (), minval=c.kd_multiplier_range[0], maxval=c.kd_multiplier_range[1]
        )
        return {
            "command": commands_from_draw(command, c.min_command_speed),
            "last_action": jnp.zeros((self.action_size,), jnp.float32),
            "gait_phase": gait_phase_from_draw(phase),
            "noise_key": k_noise,
            MODEL_PARAMS_KEY: actuator_gains(self._gainprm, self._biasprm, kp, kd),
            "penalty_scale": jnp.float32(c.curriculum_initial_scale),
            "mean_episode_length": jnp.float32(0.0),
        }

    # ----------------------------------------------------------------- step
    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        return action * jnp.float32(self.config.action_scale) + self.default_pose

    def clean_signals(self, data: Any) -> dict[str, jax.Array]:
        """The observation's physical inputs before noise (:data:`NOISE_SLOTS`)."""
        return {
            "gyro": self.sensor(data, "torso_gyro"),
            "gravity": self.sensor(data, "torso_upvector"),
            "joint_angle": data.qpos[7:] - self.default_pose,
            "joint_vel": data.qvel[6:],
        }

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        clean = self.clean_signals(data)
        carry = jnp.concatenate(
            [task_state["last_action"], task_state["command"], task_state["gait_phase"]]
        )
        critic = jnp.concatenate(
            [
                observation_vector(clean, carry),
                self.sensor(data, "pelvis_local_linvel") * _LINVEL_SCALE,
            ]
        )
        level = self.config.noise_level
        if level <= 0.0:
            return {"obs": critic[:-3], "critic": critic}
        draws = uniform_noise(task_state["noise_key"], NOISE_SLOTS)
        noisy = apply_obs_noise(clean, draws, level, self._noise_scales)
        return {"obs": observation_vector(noisy, carry), "critic": critic}

    def reward_terms(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The unweighted terms of this step (:data:`REWARD_TERMS`); ``task_state`` is the one
        in force when ``action`` was chosen (the gait clock is advanced here, as the reference
        advances it before the physics)."""
        c = self.config
        linvel = self.sensor(data, "pelvis_local_linvel")
        gyro = self.sensor(data, "torso_gyro")
        up = self.sensor(data, "torso_upvector")
        cmd = task_state["command"]
        phase = advance_gait_phase(task_state["gait_phase"], self._phase_delta)
        target = feet_height_target(phase, c.swing_height)
        feet_z = jnp.stack(
            [self.sensor(data, "left_foot_pos")[2], self.sensor(data, "right_foot_pos")[2]]
        )
        quats = jnp.stack(
            [self.sensor(data, "left_foot_quat"), self.sensor(data, "right_foot_quat")]
        )
        return {
            "tracking_lin_vel": jnp.exp(
                -jnp.sum(jnp.square(cmd[:2] - linvel[:2])) / c.tracking_sigma
            ),
            "tracking_ang_vel": jnp.exp(-jnp.square(cmd[2] - gyro[2]) / c.tracking_sigma),
            "penalty_ang_vel_xy": jnp.sum(jnp.square(gyro[:2])),
            "penalty_orientation": jnp.square(up[0]) + jnp.square(up[1]),
            "penalty_action_rate": jnp.sum(jnp.square(action - task_state["last_action"])),
            "pose": jnp.sum(self._pose_weights * jnp.square(data.qpos[7:] - self.default_pose)),
            "penalty_feet_ori": jnp.sum(jnp.square(quats[:, 1:3])),
            "feet_phase": jnp.exp(-jnp.sum(jnp.square(feet_z - target)) / c.feet_phase_sigma),
            "alive": jnp.float32(1.0),
        }

    def reward_weights(self, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """The weight in force of each term: penalties (negative weights) times the curriculum
        scale."""
        scale = task_state["penalty_scale"]
        return {t: w * scale if w < 0 else jnp.float32(w) for t, w in self._weights.items()}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        terms = self.reward_terms(data, action, task_state)
        total, components = weighted_reward(terms, self.reward_weights(task_state), self.control_dt)
        components["penalty_scale"] = task_state["penalty_scale"]
        return total, components

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        up_z = self.sensor(data, "torso_upvector")[2]
        tilt = jnp.arccos(jnp.clip(up_z, -1.0, 1.0))
        low = data.qpos[2] < self.config.min_base_height
        return (tilt > np.deg2rad(self.config.max_tilt_deg)) | low

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        del data
        return {
            **task_state,
            "last_action": jnp.asarray(action, jnp.float32),
            "gait_phase": advance_gait_phase(task_state["gait_phase"], self._phase_delta),
            "noise_key": key,
        }

    def update_batch(
        self,
        task_state: dict[str, jax.Array],
        terminated: jax.Array,
        truncated: jax.Array,
        episode_length: jax.Array,
    ) -> dict[str, jax.Array]:
        """The penalty curriculum (``g1_curriculum.py``) over the batch's terminated episodes;
        one scale for the batch, broadcast to every env."""
        del truncated  # the reference counts terminated episodes only
        num_envs = terminated.shape[0]
        scale, mean = update_penalty_curriculum(
            task_state["penalty_scale"][0],
            task_state["mean_episode_length"][0],
            episode_length,
            terminated,
            curriculum_window(num_envs, self.config),
            self.config,
        )
        return {
            **task_state,
            "penalty_scale": jnp.full((num_envs,), scale, jnp.float32),
            "mean_episode_length": jnp.full((num_envs,), mean, jnp.float32),
        }


class G1WalkRough(G1WalkFlat):
    """The reference G1WalkRough: G1WalkFlat's task (config, rewards, terminations, resets,
    mirror) on the rough scene, a height field up to 5 cm high, with the ``stand`` keyframe's
    pelvis at 0.79 m (``g1_model.py``)."""

    terrain = "rough"
