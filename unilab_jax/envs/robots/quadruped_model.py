"""The quadruped model: the Go1 MJCF rebuilt into an MJX-friendly model standing on a floor.

:class:`RobotSpec` (with :data:`GO1`) is what a task needs to know about one robot MJCF;
:func:`build_quadruped_model` compiles the model for a spec and a
:class:`~unilab_jax.envs.robots.quadruped_config.QuadrupedJoystickConfig`, in the steps below
(one function each). The task that runs on these models is
:class:`~unilab_jax.envs.robots.quadruped.QuadrupedJoystick`.

Model: the Unitree Go1 from the ``mjlab`` package (see :mod:`unilab_jax.envs.robots.assets`;
installed with ``pip install --no-deps ...`` and never imported). The robot MJCF is rebuilt with
``mujoco.MjSpec`` into an MJX-friendly model:

* a flat floor plane is added; the robot's own collision geoms are removed and the visual
  meshes made non-colliding, so the **only contacts are 4 foot spheres with the floor**
  (sphere-plane, condim 3, friction 0.8; no self-collision, no trunk/knee contacts);
* sensors and keyframes of the source file are dropped (everything the task reads is computed
  from ``qpos`` / ``qvel`` / ``actuator_force``, the same on MJX and C MuJoCo); a ``home``
  keyframe with the standing pose is added;
* 12 position actuators on the leg joints: ``kp`` = 35 N m/rad, ctrlrange = joint range, torque
  limits per robot (Go1 23.7 / 23.7 / 35.55 N m for hip / thigh / knee); the derivative gain
  is joint damping 0.5 N m s/rad (implicit in the integrator), armature 0.01, no joint
  friction loss;
* physics: timestep 0.004 s, 5 physics steps per control step (50 Hz control); Newton solver,
  2 iterations (1 is unstable in C MuJoCo: the trunk gets launched), 6 line-search
  iterations, pyramidal friction cone, Euler integrator.
* the trunk is placed at the height where the lowest foot touches the floor in the default pose
  (the MJCF's ``home`` key, else :attr:`RobotSpec.default_leg_pose`), so ``qpos0`` and the
  added ``home`` key are the stand.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from unilab_jax.envs.robots.assets import robot_mjcf_path
from unilab_jax.envs.robots.quadruped_config import QuadrupedJoystickConfig

__all__ = ["GO1", "LEGS", "PARTS", "RobotSpec", "build_quadruped_model"]

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
    default_pose = _source_default_pose(spec, robot)
    _strip_keys_sensors_actuators(spec)
    _keep_only_foot_contacts(spec, robot, config)
    ranges = _add_leg_actuators(spec, joint_names, robot, config)
    _set_physics_options(spec, config)

    model = spec.compile()
    lo, hi = np.asarray(ranges).T
    default_pose = np.clip(default_pose, lo, hi)
    qpos = _standing_qpos(model, robot, default_pose)
    # Rebuild with the trunk at that height (so qpos0 is the stand) and a "home" key.
    spec.body(robot.trunk).pos = [0.0, 0.0, qpos[2]]
    spec.body(robot.trunk).quat = [1.0, 0.0, 0.0, 0.0]
    spec.add_key(name="home", qpos=qpos.tolist(), ctrl=default_pose.tolist())
    model = spec.compile()
    return model, default_pose


def _source_default_pose(spec: mujoco.MjSpec, robot: RobotSpec) -> np.ndarray:
    """Default pose: the MJCF's "home" key when it has one, else the robot spec's stand."""
    home = next((k for k in spec.keys if k.name == "home"), None)
    if home is not None and len(home.qpos) == 19:
        return np.asarray(list(home.qpos), np.float64)[7:19]
    return np.tile(np.asarray(robot.default_leg_pose, np.float64), 4)


def _strip_keys_sensors_actuators(spec: mujoco.MjSpec) -> None:
    """Drop the source file's keyframes, sensors and actuators (the task adds its own)."""
    for key in list(spec.keys):
        spec.delete(key)
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    for actuator in list(spec.actuators):
        spec.delete(actuator)


def _keep_only_foot_contacts(
    spec: mujoco.MjSpec, robot: RobotSpec, config: QuadrupedJoystickConfig
) -> None:
    """Collision: drop the robot's collision geoms, keep visual meshes without contacts, add a
    floor plane and one sphere per foot (the only contacts)."""
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


def _add_leg_actuators(
    spec: mujoco.MjSpec,
    joint_names: list[str],
    robot: RobotSpec,
    config: QuadrupedJoystickConfig,
) -> list[tuple[float, float]]:
    """Joint damping / armature and one position actuator per leg joint; returns the joint
    ranges ``[(lo, hi)]`` in joint order."""
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
    return ranges


def _set_physics_options(spec: mujoco.MjSpec, config: QuadrupedJoystickConfig) -> None:
    """Timestep, Newton solver iterations, pyramidal cone, impratio 1, Euler integrator."""
    opt = spec.option
    opt.timestep = config.timestep
    opt.iterations = config.solver_iterations
    opt.ls_iterations = config.ls_iterations
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.impratio = 1.0
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER


def _standing_qpos(model: mujoco.MjModel, robot: RobotSpec, default_pose: np.ndarray) -> np.ndarray:
    """``qpos`` of the default pose, upright, with the trunk at the height at which the lowest
    foot just touches the floor."""
    data = mujoco.MjData(model)
    qpos = model.qpos0.copy()
    qpos[:7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    qpos[7:] = default_pose
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    feet = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot") for leg in LEGS]
    height = -float(np.min(data.geom_xpos[feet, 2])) + robot.foot_radius
    qpos[2] = height
    return qpos
