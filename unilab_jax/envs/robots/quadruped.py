"""Go1JoystickFlat: a Unitree quadruped follows a velocity command on flat ground.

This module holds the task (:class:`QuadrupedJoystick` and its per-robot subclass
:class:`Go1JoystickFlat`: commands, gait clock, observation, reward, termination, initial
state) and documents it below. The model (the Unitree Go1 from ``mjlab``, rebuilt with
``mujoco.MjSpec``: foot-only contacts, position actuators, physics options, and why) and
:class:`RobotSpec` are ``quadruped_model.py``; the tunable parameters,
:class:`QuadrupedJoystickConfig` and :class:`Go1JoystickFlatConfig`, are
``quadruped_config.py``. All are re-exported here. (Go2JoystickFlat is the reference UniLab's
task, a module of its own: ``go2.py``.)

Joint order is the MJCF's (Go1: FR, FL, RR, RL), each leg
``[hip (abduction), thigh, calf (knee)]``.

* **Action** (12) in [-1, 1]: target joint positions
  ``clip(default_pose + action_scale * action, joint range)`` with ``action_scale`` = 0.3.
* **Actor observation** (49)::

      [ 0: 3] base angular velocity, body frame (gyro)
      [ 3: 6] projected gravity (gravity unit vector in the body frame; (0, 0, -1) upright)
      [ 6:18] joint positions - default pose
      [18:30] joint velocities
      [30:42] last action
      [42:45] velocity command (vx, vy, yaw rate), body frame
      [45:49] gait clock: sin, cos of the phase of foot pair A, sin, cos of pair B (pair A =
              front-left + rear-right, pair B = front-right + rear-left, half a cycle apart;
              ``gait_frequency`` = 2 Hz)

  **Critic observation** (52): the actor observation + base linear velocity in the body frame (3).
* **Command**: uniform in vx [-1, 1] m/s, vy [-0.5, 0.5] m/s, yaw rate [-1, 1] rad/s, drawn at
  reset and redrawn every 500 control steps (10 s).
* **Reward** (components logged as ``reward/<name>``; v, w: base linear / angular velocity in
  the body frame, g: projected gravity, tau: actuator torques, a: action)::

      tracking_lin_vel  =  1.0  * exp(-|v_xy - cmd_xy|^2 / 0.25)
      tracking_ang_vel  =  0.5  * exp(-(w_z - cmd_yaw)^2 / 0.25)
      lin_vel_z         = -0.5  * v_z^2
      ang_vel_xy        = -0.02 * |w_xy|^2
      orientation       = -1.0  * |g_xy|^2
      torques           = -2e-5 * |tau|^2
      action_rate       = -0.01 * |a - a_prev|^2
      alive             =  0.2  while not fallen, else 0
      termination       = -5.0  on the step that ends the episode with a fall, else 0

  A robot standing still under a command of ~0.5 m/s gets about +0.9 per step; one tracking
  the command gets up to 1.7.
* **Termination** (a fall): trunk tilted more than ~60 degrees (projected gravity z > -0.5) or
  trunk origin below ``min_height`` (Go1: 0.15 m; standing ~0.28 m). Trunk and knees do
  not collide with the floor, so the height test is what catches a collapse.
  **Truncation** after 1000 control steps (20 s).
* **Initial state**: standing pose (thigh 0.9, calf -1.8 rad, hip 0) with ``U[-0.1, 0.1]`` rad
  joint noise, random yaw, the trunk at the height where the feet touch the ground, zero
  velocity; random gait phase.
* ``reward_bounds`` = (-0.3, 1.8): the per-step reward lies in about [-2, 1.7] while not falling
  (rarely below -0.3 for long) plus one -5 at a fall; the default value support is
  ``reward_bounds / (1 - gamma)``, (-10, 60) at gamma 0.97, holding discounted returns of
  roughly [-10, 57].
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from unilab_jax.envs.mirror import SignedPermutation, hinge_mirror
from unilab_jax.envs.robots.common import (
    LocomotionTask,
    base_state,
    locomotion_mirror,
    yaw_quaternion,
)
from unilab_jax.envs.robots.quadruped_config import (
    Go1JoystickFlatConfig,
    QuadrupedJoystickConfig,
)
from unilab_jax.envs.robots.quadruped_model import GO1, RobotSpec, build_quadruped_model

__all__ = [
    "Go1JoystickFlat",
    "Go1JoystickFlatConfig",
    "QuadrupedJoystick",
    "QuadrupedJoystickConfig",
    "RobotSpec",
    "build_quadruped_model",
]


class QuadrupedJoystick(LocomotionTask):
    """A quadruped following a (vx, vy, yaw rate) command on flat ground (module docstring)."""

    reward_bounds = (-0.3, 1.8)
    command_obs = slice(42, 45)
    reward_times_dt = False
    #: The robot model; set by subclasses.
    robot: ClassVar[RobotSpec]

    def __init__(self, config: QuadrupedJoystickConfig | None = None) -> None:
        cfg = config or self.default_config()
        model, default_pose = build_quadruped_model(self.robot, cfg)
        names = [model.joint(i).name for i in range(1, model.njnt)]
        joints = hinge_mirror(model, names)  # also the action's map
        # FL <-> FR and RL <-> RR exchange the trot pairs: (sin A, cos A, sin B, cos B) ->
        # (sin B, cos B, sin A, cos A), i.e. the phase shifted by half a cycle.
        clock = SignedPermutation((2, 3, 0, 1), (1.0, 1.0, 1.0, 1.0))
        super().__init__(cfg, model, default_pose, locomotion_mirror(joints, joints, clock))
        self._qpos0 = jnp.asarray(model.key_qpos[0], jnp.float32)  # the standing pose
        self._joint_lo = jnp.asarray(model.jnt_range[1:, 0], jnp.float32)
        self._joint_hi = jnp.asarray(model.jnt_range[1:, 1], jnp.float32)
        leg_of = [n.split("_")[0] for n in names[::3]]
        # Trot pairs: (FL, RR) = A, (FR, RL) = B; per leg, 0 for pair A and 1 for pair B.
        self._leg_pair = tuple(0 if leg in ("FL", "RR") else 1 for leg in leg_of)
        self._phase_step = 2.0 * math.pi * cfg.gait_frequency * self.control_dt

    @classmethod
    def default_config(cls) -> QuadrupedJoystickConfig:
        return QuadrupedJoystickConfig()

    # ----------------------------------------------------------------- helpers
    def _sample_command(self, key: jax.Array) -> jax.Array:
        cfg = self.config
        lo = jnp.array([cfg.vx_range[0], cfg.vy_range[0], cfg.yaw_rate_range[0]])
        hi = jnp.array([cfg.vx_range[1], cfg.vy_range[1], cfg.yaw_rate_range[1]])
        return jax.random.uniform(key, (3,), minval=lo, maxval=hi)

    def _fallen(self, data: Any) -> jax.Array:
        _, _, gravity = base_state(data)
        tilted = gravity[2] > self.config.max_tilt_gravity_z
        low = data.qpos[2] < self.config.min_height
        return tilted | low

    # ----------------------------------------------------------------- task API
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_joint, k_yaw = jax.random.split(key)
        s = self.config.init_joint_noise
        joints = self.default_pose + jax.random.uniform(k_joint, (12,), minval=-s, maxval=s)
        joints = jnp.clip(joints, self._joint_lo, self._joint_hi)
        yaw = jax.random.uniform(k_yaw, (), minval=-math.pi, maxval=math.pi)
        yaw = yaw if self.config.random_yaw else jnp.zeros(())
        qpos = jnp.concatenate([self._qpos0[:3], yaw_quaternion(yaw), joints])
        qvel = jnp.zeros((self.model.nv,), jnp.float32)
        return qpos, qvel

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        k_cmd, k_phase = jax.random.split(key)
        return {
            "command": self._sample_command(k_cmd),
            "last_action": jnp.zeros((12,), jnp.float32),
            "phase": jax.random.uniform(k_phase, (), minval=0.0, maxval=2.0 * math.pi),
            "step": jnp.zeros((), jnp.int32),
        }

    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        target = self.default_pose + self.config.action_scale * action
        return jnp.clip(target, self._joint_lo, self._joint_hi)

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        del data
        step = task_state["step"] + 1
        resample = (step % self.config.command_resample_steps) == 0
        command = jnp.where(resample, self._sample_command(key), task_state["command"])
        phase = jnp.mod(task_state["phase"] + self._phase_step, 2.0 * math.pi)
        return {
            "command": command,
            "last_action": jnp.asarray(action, jnp.float32),
            "phase": phase,
            "step": step,
        }

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        lin_vel, ang_vel, gravity = base_state(data)
        phase = task_state["phase"]
        clock = jnp.array(
            [jnp.sin(phase), jnp.cos(phase), jnp.sin(phase + math.pi), jnp.cos(phase + math.pi)]
        )
        obs = jnp.concatenate(
            [
                ang_vel,
                gravity,
                data.qpos[7:19] - self.default_pose,
                data.qvel[6:18],
                task_state["last_action"],
                task_state["command"],
                clock,
            ]
        )
        return {"obs": obs, "critic": jnp.concatenate([obs, lin_vel])}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        cfg = self.config
        lin_vel, ang_vel, gravity = base_state(data)
        cmd = task_state["command"]
        fallen = self._fallen(data).astype(jnp.float32)
        lin_err = jnp.sum(jnp.square(lin_vel[:2] - cmd[:2]))
        ang_err = jnp.square(ang_vel[2] - cmd[2])
        components = {
            "tracking_lin_vel": cfg.w_tracking_lin_vel * jnp.exp(-lin_err / cfg.tracking_sigma),
            "tracking_ang_vel": cfg.w_tracking_ang_vel * jnp.exp(-ang_err / cfg.tracking_sigma),
            "lin_vel_z": cfg.w_lin_vel_z * jnp.square(lin_vel[2]),
            "ang_vel_xy": cfg.w_ang_vel_xy * jnp.sum(jnp.square(ang_vel[:2])),
            "orientation": cfg.w_orientation * jnp.sum(jnp.square(gravity[:2])),
            "torques": cfg.w_torques * jnp.sum(jnp.square(data.actuator_force)),
            "action_rate": cfg.w_action_rate
            * jnp.sum(jnp.square(action - task_state["last_action"])),
            "alive": cfg.w_alive * (1.0 - fallen),
            "termination": cfg.w_termination * fallen,
        }
        total = sum(components.values())
        return total, components

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        return self._fallen(data)


class Go1JoystickFlat(QuadrupedJoystick):
    """Unitree Go1 joystick locomotion on flat ground (see the module docstring)."""

    robot = GO1

    @classmethod
    def default_config(cls) -> Go1JoystickFlatConfig:
        return Go1JoystickFlatConfig()
