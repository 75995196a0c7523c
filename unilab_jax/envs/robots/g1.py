"""G1WalkFlat: the Unitree G1 humanoid (29 actuated joints) tracking a velocity command on flat
ground.

Model. The G1 MJCF (``robot_mjcf_path("g1")``, shipped by the ``mjlab`` package; it has no
actuators, no floor and no keyframe) is edited with ``mujoco.MjSpec`` into an MJX-friendly model:

* visual meshes and the IMU sensors are removed (inertias are explicit in the MJCF, so the
  dynamics are unchanged; observations are computed from ``qpos``/``qvel``, not sensors);
* a flat floor plane is added; the *only* contacts are 4 spheres (radius 1 cm) at the corners of
  each foot sole against the floor (feet: contype 1 / conaffinity 0, floor: contype 0 /
  conaffinity 1, every other geom contype = conaffinity = 0), condim 3, friction 0.8. So a step
  has at most 8 sphere-plane contacts and no self-collision;
* one position actuator per joint (29, in joint order, ``ctrl[i]`` drives ``qpos[7 + i]``) with
  ``ctrlrange`` = the joint range and a force limit per motor class. Stiffness ``kp`` and the
  damping (as *joint* damping, integrated implicitly by Euler) and rotor armature per group:

  ========================  =====  =======  ========  =========
  joints                    kp     damping  armature  force (N m)
  ========================  =====  =======  ========  =========
  hip pitch / yaw           100    3.0      0.010     88
  hip roll                  100    3.0      0.025     139
  knee                      150    4.0      0.025     139
  ankle pitch               150    3.0      0.010     50
  ankle roll                100    2.0      0.010     50
  waist yaw                 100    3.0      0.010     88
  waist roll / pitch        100    3.0      0.007     50
  shoulders, elbow, wr.roll 40     1.0      0.004     25
  wrist pitch / yaw         20     0.5      0.002     5
  ========================  =====  =======  ========  =========

* physics: timestep 0.004 s, Euler, Newton solver with 3 iterations and 6 line-search steps,
  pyramidal friction cone; ``n_frames`` = 5, so the policy runs at 50 Hz (control_dt 0.02 s).
  One Newton iteration is not enough for MJX under exploration: with uniform random actions
  (128 envs x 300 steps) it produced joint speeds up to 650 rad/s and single-step rewards down
  to -2626 (a training run's ``reward/ang_vel_xy`` block mean fell to -1930); 2 iterations
  peaked at 90 rad/s, 3 at 61 (99.9th percentile 15, as with 4) with the lowest reward -8.4,
  at 1.8x the cost per step of one iteration at 128 envs and 3.4x at 1024 (``bench/RESULTS.md``).
  Constraint Jacobian and mass matrix: ``jacobian="auto"`` picks MuJoCo's sparse
  representation when JAX's default backend is the CPU and the dense one elsewhere (MJX's own
  choice below nv 60, the fast one on a GPU). On the CPU, MJX's dense path factorises the
  35 x 35 mass matrix and Newton Hessian with the LAPACK-free Cholesky of
  :mod:`unilab_jax.cpu_linalg` (above its unrolled size), and the sparse path is twice as fast
  (measured here at 256 envs on 1 device, 1 Newton iteration: 257 vs 502 ms per control
  step). Both are the same
  physics; C MuJoCo (``sim_backend="mujoco"``) gets the same model.

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

from dataclasses import dataclass
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
from unilab_jax.envs.robots.assets import robot_mjcf_path
from unilab_jax.envs.robots.common import base_state

__all__ = ["G1WalkFlat", "G1WalkFlatConfig", "build_g1_model"]


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


# (suffix pattern, kp, damping, armature, force limit); first match wins.
_JOINT_GROUPS: tuple[tuple[str, float, float, float, float], ...] = (
    ("hip_pitch_joint", 100.0, 3.0, 0.010, 88.0),
    ("hip_yaw_joint", 100.0, 3.0, 0.010, 88.0),
    ("hip_roll_joint", 100.0, 3.0, 0.025, 139.0),
    ("knee_joint", 150.0, 4.0, 0.025, 139.0),
    ("ankle_pitch_joint", 150.0, 3.0, 0.010, 50.0),
    ("ankle_roll_joint", 100.0, 2.0, 0.010, 50.0),
    ("waist_yaw_joint", 100.0, 3.0, 0.010, 88.0),
    ("waist_roll_joint", 100.0, 3.0, 0.007, 50.0),
    ("waist_pitch_joint", 100.0, 3.0, 0.007, 50.0),
    ("wrist_pitch_joint", 20.0, 0.5, 0.002, 5.0),
    ("wrist_yaw_joint", 20.0, 0.5, 0.002, 5.0),
    ("shoulder_pitch_joint", 40.0, 1.0, 0.004, 25.0),
    ("shoulder_roll_joint", 40.0, 1.0, 0.004, 25.0),
    ("shoulder_yaw_joint", 40.0, 1.0, 0.004, 25.0),
    ("elbow_joint", 40.0, 1.0, 0.004, 25.0),
    ("wrist_roll_joint", 40.0, 1.0, 0.004, 25.0),
)

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

# Foot contact spheres, in the ankle-roll link frame (sole corners; the MJCF's foot capsules
# span x in [-0.054, 0.132], y in [-0.026, 0.026] at z = -0.025 with radius 0.01).
_FOOT_SPHERE_RADIUS = 0.01
_FOOT_SPHERES = tuple((x, y, -0.025) for x in (-0.05, 0.125) for y in (-0.025, 0.025))
_FEET = ("left", "right")


def _g1_mjcf_path() -> str:
    """The mjlab G1 MJCF (raises ``RobotAssetError`` with the pip command when missing)."""
    return str(robot_mjcf_path("g1"))


def _group_of(joint_name: str) -> tuple[float, float, float, float]:
    for suffix, kp, damping, armature, force in _JOINT_GROUPS:
        if joint_name.endswith(suffix):
            return kp, damping, armature, force
    raise ValueError(f"G1 joint {joint_name!r} has no actuator group")


def build_g1_model(config: G1WalkFlatConfig) -> mujoco.MjModel:
    """Compile the MJX-friendly G1 model described in the module docstring."""
    spec = mujoco.MjSpec.from_file(_g1_mjcf_path())

    # Visual meshes and sensors: not needed for physics or observations.
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    for exclude in list(spec.excludes):
        spec.delete(exclude)

    # No collisions except feet vs floor.
    for geom in spec.geoms:
        geom.contype = 0
        geom.conaffinity = 0
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.0, 0.0, 0.05],
        contype=0,
        conaffinity=1,
        condim=3,
        friction=[0.8, 0.005, 0.0001],
        rgba=[0.3, 0.35, 0.4, 1.0],
    )
    for side in _FEET:
        foot = spec.body(f"{side}_ankle_roll_link")
        for i, pos in enumerate(_FOOT_SPHERES):
            foot.add_geom(
                name=f"{side}_foot_sphere{i}",
                type=mujoco.mjtGeom.mjGEOM_SPHERE,
                size=[_FOOT_SPHERE_RADIUS, 0.0, 0.0],
                pos=list(pos),
                contype=1,
                conaffinity=0,
                condim=3,
                friction=[0.8, 0.005, 0.0001],
                density=0.0,  # massless: inertias stay the MJCF's
                group=3,
            )

    # Position actuators; kd as joint damping (implicit in Euler), armature for the rotors.
    for joint in spec.joints:
        if joint.type != mujoco.mjtJoint.mjJNT_HINGE:
            continue
        kp, damping, armature, force = _group_of(joint.name)
        joint.damping = [damping, 0.0, 0.0]
        joint.armature = armature
        act = spec.add_actuator(name=joint.name.removesuffix("_joint"), target=joint.name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.set_to_position(kp=kp)
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = list(joint.range)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-force, force]

    opt = spec.option
    opt.timestep = config.timestep
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.iterations = config.solver_iterations
    opt.ls_iterations = config.ls_iterations
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.jacobian = _jacobian(config.jacobian)
    model = spec.compile()
    return model


_JACOBIANS = {"dense": mujoco.mjtJacobian.mjJAC_DENSE, "sparse": mujoco.mjtJacobian.mjJAC_SPARSE}


def _jacobian(choice: str) -> mujoco.mjtJacobian:
    """The ``opt.jacobian`` for ``G1WalkFlatConfig.jacobian`` (see the module docstring)."""
    if choice == "auto":
        choice = "sparse" if jax.default_backend() == "cpu" else "dense"
    if choice not in _JACOBIANS:
        raise ValueError(f"jacobian must be 'auto', 'dense' or 'sparse', got {choice!r}")
    return _JACOBIANS[choice]


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
        data = mujoco.MjData(model)
        data.qpos[:] = 0.0
        data.qpos[3] = 1.0
        data.qpos[7:] = default
        mujoco.mj_kinematics(model, data)
        sphere_ids = [
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"{s}_foot_sphere{i}")
            for s in _FEET
            for i in range(len(_FOOT_SPHERES))
        ]
        sole = float(np.min(data.geom_xpos[sphere_ids, 2])) - _FOOT_SPHERE_RADIUS
        qpos0 = data.qpos.copy()
        qpos0[2] = -sole

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
        self._foot_sites = jnp.asarray(
            [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, f"{s}_foot") for s in _FEET],
            jnp.int32,
        )
        # Height of the foot sites above the floor when standing (subtracted from foot height).
        data.qpos[:] = qpos0
        mujoco.mj_kinematics(model, data)
        self._site_rest_height = float(np.mean(data.site_xpos[np.asarray(self._foot_sites), 2]))
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
