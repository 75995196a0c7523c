"""G1WalkFlat: the Unitree G1 humanoid (29 actuated joints) tracking a velocity command on flat
ground.

This module holds the task (:class:`G1WalkFlat`: commands, observation, reward, termination,
initial state) and documents it below. The model (the mjlab G1 MJCF rebuilt with
``mujoco.MjSpec``: contacts, actuators and their gains, physics options, and why) is
``g1_model.py``; the tunable parameters, :class:`G1WalkFlatConfig`, are ``g1_config.py``. Both
are re-exported here.

qpos layout: ``[pelvis pos (3), pelvis quat wxyz (4), 29 joints]`` (nq 36); qvel: ``[pelvis
linear velocity (3, world frame), pelvis angular velocity (3, pelvis frame), 29 joints]`` (nv 35).
Joint order (MJCF order): left leg (hip pitch, hip roll, hip yaw, knee, ankle pitch, ankle roll),
right leg (same), waist (yaw, roll, pitch), left arm (shoulder pitch, roll, yaw, elbow, wrist
roll, pitch, yaw), right arm (same).

Action (29) in [-1, 1]: joint position targets ``default_pose + action_scale * action``
(``action_scale`` 0.25 rad), clipped to the joint ranges.

Default pose: slightly bent knees (hip pitch -0.15, knee 0.35, ankle pitch -0.2, shoulder pitch
0.2, shoulder roll +-0.2, elbow 0.6 rad), pelvis height (0.78 m) chosen so the foot spheres touch
the floor. Holding this pose (zero action) is not statically stable: the compliant position
servos let the robot tip over within about 2-3 s, so a policy has to balance actively.

Observation "obs" (98), all in the pelvis frame where a frame applies:

====================  =====  ==============================================================
slice                 size   content
====================  =====  ==============================================================
[0:3]                 3      gyro: pelvis angular velocity (``qvel[3:6]``)
[3:6]                 3      projected gravity (unit vector, ``[0, 0, -1]`` when upright)
[6:35]                29     joint position minus default pose
[35:64]               29     joint velocity (rad/s, unscaled)
[64:93]               29     last action
[93:96]               3      velocity command (vx, vy, yaw rate)
[96:98]               2      gait phase clock (sin, cos of 2 pi phase)
====================  =====  ==============================================================

Observation "critic" (101): "obs" followed by the pelvis linear velocity in the pelvis frame (3).

Task state: ``command`` [3], ``last_action`` [29], ``phase`` [] (in [0, 1), advances by
``control_dt / gait_period`` per step, gait period 0.8 s, random at reset) and ``steps`` [] (int32
control steps since reset; the command is redrawn uniformly from vx in [-0.5, 1.0], vy in
[-0.3, 0.3], yaw rate in [-0.5, 0.5] at reset and every 500 control steps).

Reward (per control step, not scaled by dt), components logged as ``reward/<name>``::

    tracking_lin_vel  =  1.0  * exp(-|cmd_xy - v_xy|^2 / 0.25)    (v in the pelvis frame)
    tracking_ang_vel  =  0.5  * exp(-(cmd_yaw - w_z)^2 / 0.25)
    alive             =  0.1
    feet_phase        =  0.2  * exp(-sum_feet (h_foot - h_target)^2 / 0.005)
                              h_target = 0.08 m * max(0, sin(2 pi (phase + offset))),
                              offset 0 for the left foot and 0.5 for the right
    lin_vel_z         = -1.0  * v_z^2                              (pelvis, world frame)
    ang_vel_xy        = -0.05 * |w_xy|^2
    orientation       = -1.0  * |projected_gravity_xy|^2
    action_rate       = -0.01 * |action - last_action|^2
    joint_deviation   = -0.1  * |q_waist,arms - default|^2

A robot that stands still keeps ``alive``, part of the phase term and
``exp(-|cmd|^2 / 0.25)`` of the tracking terms (positive), which is less than a robot that
tracks the command (up to 1.8 per step).

Termination: pelvis height below 0.5 m, or the torso tilted more than 60 degrees from upright.
Truncation: 1000 control steps (20 s).

Initial state: default pose plus ``U[-0.05, 0.05]`` rad per joint (clipped to the range), zero
velocity, random gait phase.

``reward_bounds`` = (-0.3, 1.8): per-step rewards lie in roughly [-3, 1.8] for a robot that does
not fall (rarely below -0.3 for long); the default value support is
``reward_bounds / (1 - gamma)``, (-10, 60) at gamma 0.97.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from unilab_jax.envs.base import Task
from unilab_jax.envs.mirror import (
    COMMAND,
    PSEUDOVECTOR,
    VECTOR,
    MirrorMap,
    concat,
    floating_base_mirror,
    hinge_mirror,
    signs,
)
from unilab_jax.envs.robots.common import base_state
from unilab_jax.envs.robots.g1_config import G1WalkFlatConfig
from unilab_jax.envs.robots.g1_model import build_g1_model, foot_site_ids, standing_qpos

__all__ = ["G1WalkFlat", "G1WalkFlatConfig", "build_g1_model"]


# Default pose (radians); joints not listed are 0.
_DEFAULT_POSE: dict[str, float] = {
    "left_hip_pitch_joint": -0.15,
    "right_hip_pitch_joint": -0.15,
    "left_knee_joint": 0.35,
    "right_knee_joint": 0.35,
    "left_ankle_pitch_joint": -0.2,
    "right_ankle_pitch_joint": -0.2,
    "left_shoulder_pitch_joint": 0.2,
    "right_shoulder_pitch_joint": 0.2,
    "left_shoulder_roll_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
    "left_elbow_joint": 0.6,
    "right_elbow_joint": 0.6,
}


class G1WalkFlat(Task):
    """Unitree G1 velocity tracking on flat ground (see module docstring)."""

    reward_bounds = (-0.3, 1.8)

    def __init__(self, config: G1WalkFlatConfig | None = None) -> None:
        super().__init__(config or G1WalkFlatConfig())
        model = build_g1_model(self.config)
        self._model = model
        if model.nu != 29 or model.nq != 36 or model.nv != 35:
            raise ValueError(f"unexpected G1 model sizes nq={model.nq} nv={model.nv} nu={model.nu}")

        joint_names = [model.joint(j).name for j in range(1, model.njnt)]
        self.joint_names = tuple(joint_names)
        default = np.array([_DEFAULT_POSE.get(n, 0.0) for n in joint_names])
        lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
        # Pelvis height that puts the lowest foot sphere on the floor in the default pose.
        qpos0, self._site_rest_height = standing_qpos(model, default)

        self._default_qpos = jnp.asarray(qpos0, jnp.float32)
        self._default_joints = jnp.asarray(default, jnp.float32)
        self._joint_lo = jnp.asarray(lo, jnp.float32)
        self._joint_hi = jnp.asarray(hi, jnp.float32)
        upper = [
            i
            for i, n in enumerate(joint_names)
            if n.startswith(
                ("waist", "left_s", "right_s", "left_e", "right_e", "left_w", "right_w")
            )
        ]
        self._upper_idx = jnp.asarray(upper, jnp.int32)
        self._torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
        self._foot_sites = jnp.asarray(foot_site_ids(model), jnp.int32)
        self._mirror = self._build_mirror()

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def mirror(self) -> MirrorMap:
        """Left-right mirror map (module docstring, "Mirror")."""
        return self._mirror

    def _build_mirror(self) -> MirrorMap:
        joints = hinge_mirror(self._model, self.joint_names)  # also the action's map
        clock = signs(-1.0, -1.0)  # phase + 1/2: the feet swap their half-periods
        obs = concat(PSEUDOVECTOR, VECTOR, joints, joints, joints, COMMAND, clock)
        qpos, qvel = floating_base_mirror(joints)
        return MirrorMap(obs=obs, critic=concat(obs, VECTOR), action=joints, qpos=qpos, qvel=qvel)

    @property
    def default_qpos(self) -> jax.Array:
        """Standing pose: ``[0, 0, h, 1, 0, 0, 0, default joints]``."""
        return self._default_qpos

    # ----------------------------------------------------------------- helpers
    def _sample_command(self, key: jax.Array) -> jax.Array:
        c = self.config
        lo = jnp.array([c.command_vx[0], c.command_vy[0], c.command_yaw[0]], jnp.float32)
        hi = jnp.array([c.command_vx[1], c.command_vy[1], c.command_yaw[1]], jnp.float32)
        return jax.random.uniform(key, (3,), minval=lo, maxval=hi)

    @staticmethod
    def _base(data: Any) -> dict[str, jax.Array]:
        lin_vel, gyro, gravity = base_state(data)
        return {"gyro": gyro, "gravity": gravity, "lin_vel": lin_vel}

    def _foot_heights(self, data: Any) -> jax.Array:
        return data.site_xpos[self._foot_sites, 2] - self._site_rest_height

    # ----------------------------------------------------------------- Task API
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        s = self.config.init_joint_noise
        noise = jax.random.uniform(key, (29,), minval=-s, maxval=s)
        joints = jnp.clip(self._default_joints + noise, self._joint_lo, self._joint_hi)
        qpos = self._default_qpos.at[7:].set(joints)
        qvel = jnp.zeros((self._model.nv,), jnp.float32)
        return qpos, qvel

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        k_cmd, k_phase = jax.random.split(key)
        return {
            "command": self._sample_command(k_cmd),
            "last_action": jnp.zeros((29,), jnp.float32),
            "phase": jax.random.uniform(k_phase, ()),
            "steps": jnp.zeros((), jnp.int32),
        }

    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        target = self._default_joints + self.config.action_scale * action
        return jnp.clip(target, self._joint_lo, self._joint_hi)

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        base = self._base(data)
        angle = 2.0 * jnp.pi * task_state["phase"]
        obs = jnp.concatenate(
            [
                base["gyro"],
                base["gravity"],
                data.qpos[7:] - self._default_joints,
                data.qvel[6:],
                task_state["last_action"],
                task_state["command"],
                jnp.stack([jnp.sin(angle), jnp.cos(angle)]),
            ]
        )
        return {"obs": obs, "critic": jnp.concatenate([obs, base["lin_vel"]])}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        c = self.config
        base = self._base(data)
        cmd = task_state["command"]
        lin_err = jnp.sum(jnp.square(cmd[:2] - base["lin_vel"][:2]))
        yaw_err = jnp.square(cmd[2] - base["gyro"][2])

        phase = task_state["phase"] + jnp.array([0.0, 0.5])
        target_h = c.swing_height * jnp.maximum(0.0, jnp.sin(2.0 * jnp.pi * phase))
        feet_err = jnp.sum(jnp.square(self._foot_heights(data) - target_h))

        upper = data.qpos[7:][self._upper_idx] - self._default_joints[self._upper_idx]
        components = {
            "tracking_lin_vel": c.w_tracking_lin_vel * jnp.exp(-lin_err / c.tracking_sigma),
            "tracking_ang_vel": c.w_tracking_ang_vel * jnp.exp(-yaw_err / c.tracking_sigma),
            "alive": jnp.asarray(c.w_alive, jnp.float32),
            "feet_phase": c.w_feet_phase * jnp.exp(-feet_err / c.feet_phase_sigma),
            "lin_vel_z": -c.w_lin_vel_z * jnp.square(data.qvel[2]),
            "ang_vel_xy": -c.w_ang_vel_xy * jnp.sum(jnp.square(base["gyro"][:2])),
            "orientation": -c.w_orientation * jnp.sum(jnp.square(base["gravity"][:2])),
            "action_rate": -c.w_action_rate
            * jnp.sum(jnp.square(action - task_state["last_action"])),
            "joint_deviation": -c.w_joint_deviation * jnp.sum(jnp.square(upper)),
        }
        total = sum(components.values())
        return total, components

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        del task_state
        low = data.qpos[2] < self.config.min_pelvis_height
        torso_up = data.xmat[self._torso, 2, 2]  # z component of the torso's z axis
        tilted = torso_up < np.cos(np.deg2rad(self.config.max_tilt_deg))
        return low | tilted

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        del data
        steps = task_state["steps"] + 1
        resample = steps % self.config.command_resample_steps == 0
        command = jnp.where(resample, self._sample_command(key), task_state["command"])
        phase = jnp.mod(task_state["phase"] + self.control_dt / self.config.gait_period, 1.0)
        return {
            "command": command,
            "last_action": jnp.asarray(action, jnp.float32),
            "phase": phase,
            "steps": steps,
        }
