"""The G1WalkFlat model: the mjlab G1 MJCF rebuilt into an MJX-friendly model, and its stand.

:func:`build_g1_model` compiles the model from a :class:`~unilab_jax.envs.robots.g1_config.
G1WalkFlatConfig`; :func:`standing_qpos` finds the pelvis height at which the default pose
stands on the floor. The task that runs on this model (observation, reward, commands) is
:class:`~unilab_jax.envs.robots.g1.G1WalkFlat`.

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
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np

from unilab_jax.envs.robots.assets import robot_mjcf_path
from unilab_jax.envs.robots.g1_config import G1WalkFlatConfig

__all__ = ["FEET", "build_g1_model", "foot_site_ids", "standing_qpos"]

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

# Foot contact spheres, in the ankle-roll link frame (sole corners; the MJCF's foot capsules
# span x in [-0.054, 0.132], y in [-0.026, 0.026] at z = -0.025 with radius 0.01).
_FOOT_SPHERE_RADIUS = 0.01
_FOOT_SPHERES = tuple((x, y, -0.025) for x in (-0.05, 0.125) for y in (-0.025, 0.025))
FEET = ("left", "right")


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
    _strip_visuals_and_sensors(spec)
    _add_floor_and_foot_spheres(spec)
    _add_position_actuators(spec)
    _set_physics_options(spec, config)
    model = spec.compile()
    return model


def _strip_visuals_and_sensors(spec: mujoco.MjSpec) -> None:
    """Visual meshes and sensors: not needed for physics or observations."""
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    for exclude in list(spec.excludes):
        spec.delete(exclude)


def _add_floor_and_foot_spheres(spec: mujoco.MjSpec) -> None:
    """No collisions except feet vs floor: a floor plane and 4 spheres under each sole."""
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
    for side in FEET:
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


def _add_position_actuators(spec: mujoco.MjSpec) -> None:
    """Position actuators; kd as joint damping (implicit in Euler), armature for the rotors."""
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


def _set_physics_options(spec: mujoco.MjSpec, config: G1WalkFlatConfig) -> None:
    """Timestep, Euler integrator, Newton solver, pyramidal cone, Jacobian representation."""
    opt = spec.option
    opt.timestep = config.timestep
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.iterations = config.solver_iterations
    opt.ls_iterations = config.ls_iterations
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.jacobian = _jacobian(config.jacobian)


_JACOBIANS = {"dense": mujoco.mjtJacobian.mjJAC_DENSE, "sparse": mujoco.mjtJacobian.mjJAC_SPARSE}


def _jacobian(choice: str) -> mujoco.mjtJacobian:
    """The ``opt.jacobian`` for ``G1WalkFlatConfig.jacobian`` (see the module docstring)."""
    if choice == "auto":
        choice = "sparse" if jax.default_backend() == "cpu" else "dense"
    if choice not in _JACOBIANS:
        raise ValueError(f"jacobian must be 'auto', 'dense' or 'sparse', got {choice!r}")
    return _JACOBIANS[choice]


def foot_site_ids(model: mujoco.MjModel) -> list[int]:
    """Ids of the MJCF's ``left_foot`` / ``right_foot`` sites, in :data:`FEET` order."""
    return [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, f"{s}_foot") for s in FEET]


def standing_qpos(model: mujoco.MjModel, default_joints: np.ndarray) -> tuple[np.ndarray, float]:
    """The standing ``qpos`` and the foot sites' mean height in it.

    ``qpos``: upright pelvis at the height that puts the lowest foot sphere on the floor with
    the joints at ``default_joints``; the site height is what the task subtracts from a foot's
    height (its height above the floor when standing).
    """
    data = mujoco.MjData(model)
    data.qpos[:] = 0.0
    data.qpos[3] = 1.0
    data.qpos[7:] = default_joints
    mujoco.mj_kinematics(model, data)
    sphere_ids = [
        mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"{s}_foot_sphere{i}")
        for s in FEET
        for i in range(len(_FOOT_SPHERES))
    ]
    sole = float(np.min(data.geom_xpos[sphere_ids, 2])) - _FOOT_SPHERE_RADIUS
    qpos0 = data.qpos.copy()
    qpos0[2] = -sole
    data.qpos[:] = qpos0
    mujoco.mj_kinematics(model, data)
    site_rest_height = float(np.mean(data.site_xpos[foot_site_ids(model), 2]))
    return qpos0, site_rest_height
