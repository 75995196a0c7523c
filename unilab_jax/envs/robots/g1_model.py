"""The G1 walking models: mjlab's G1 MJCF edited with ``mujoco.MjSpec`` into the reference's.

The reference UniLab (unilabsim/UniLab @ 9aa57115) compiles its own ``scene_flat.xml``
(G1WalkFlat: its ``g1.xml`` plus a floor, contact sensors and the ``stand`` keyframe) or
``scene_rough.xml`` (G1WalkRough: ``g1.xml`` on a height field) with ``discardvisual``.
Its bodies, joints and inertias are mjlab's G1 (``robot_mjcf_path("g1")``, the ``mjlab``
package), so :func:`build_g1_model` rebuilds either model from mjlab's file; every compiled
array the golden files record (``tests/golden/reference/G1Walk{Flat,Rough}.npz``, ``model.*``)
comes out identical. The edits (both terrains unless said):

* ``discardvisual``: visual meshes dropped (every inertia is explicit, so no dynamics change);
  timestep ``0.02 / 3`` s (3 substeps per 0.02 s control step), ``implicitfast`` integrator;
  MuJoCo's defaults otherwise (Newton, 100 iterations, 50 line-search steps, tolerance 1e-8,
  pyramidal cone, ``jacobian`` auto);
* every hinge: ``armature`` 0.01, ``frictionloss`` 0.3 (no joint damping: the damping is the
  actuators' ``kv``);
* collisions: all 41 of mjlab's collision geoms (capsules and spheres; self-collision on except
  parent-child and mjlab's 4 excludes) plus a floor plane. Under each foot, 4 contact spheres
  (radius 5 mm, priority 1, friction 0.6) come first, then mjlab's 7 sole capsules with friction
  0.6: a sole touches the floor with friction 0.6, any other geom with 1.0 (MuJoCo takes the
  maximum of equal priorities);
* the floor (geom 0, ``floor``): ``flat``, a plane (priority 0: the soles' friction 0.6 wins);
  ``rough``, the height field ``data/g1_rough_hfield.png`` (256 x 256 over 20 m x 20 m, heights
  0 to 0.05 m, base depth 0.1 m; :data:`HFIELD_PATH`) with ``contype`` 1, ``conaffinity`` 0,
  priority 1 and friction 1.0, so every contact with it, soles included, has friction 1.0;
* 29 position actuators in joint order (``ctrl[i]`` drives ``qpos[7 + i]``), ``kp`` and ``kv``
  per motor (:data:`MOTORS`; they are mjlab's armature x (2 pi 10 Hz)^2 and 2 x 2 x armature x
  2 pi 10 Hz, rounded to 3 decimals), force-limited, *no* ctrl range (targets are not clipped);
* sensors in the reference's order (:data:`SENSORS`; read through :func:`sensor_slices`):
  IMU velocimeter / gyro / accelerometer / z axis at the pelvis and the torso, foot site
  position / orientation / z axis (13, 41 values), and, ``flat`` only, per-sphere floor contact
  (8 more; the reference's rough scene has none, and no reward term reads them);
* keyframe ``stand``: pelvis at 0.754 m (``flat``) or 0.79 m (``rough``), slightly bent legs,
  arms at the sides.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from unilab_jax.envs.robots.assets import robot_mjcf_path

__all__ = [
    "FOOT_CONTACT_POINTS",
    "HFIELD_PATH",
    "MOTORS",
    "SENSORS",
    "STAND_JOINTS",
    "TERRAINS",
    "build_g1_model",
    "g1_spec",
    "sensor_slices",
]

#: Per motor (joint name without side and ``_joint``): ``(kp, kv, force limit)``.
MOTORS: dict[str, tuple[float, float, float]] = {
    "hip_pitch": (40.179, 2.558, 88.0),
    "hip_roll": (99.098, 6.309, 139.0),
    "hip_yaw": (40.179, 2.558, 88.0),
    "knee": (99.098, 6.309, 139.0),
    "ankle_pitch": (28.501, 1.814, 50.0),
    "ankle_roll": (28.501, 1.814, 50.0),
    "waist_yaw": (40.179, 2.558, 88.0),
    "waist_roll": (28.501, 1.814, 50.0),
    "waist_pitch": (28.501, 1.814, 50.0),
    "shoulder_pitch": (14.251, 0.907, 25.0),
    "shoulder_roll": (14.251, 0.907, 25.0),
    "shoulder_yaw": (14.251, 0.907, 25.0),
    "elbow": (14.251, 0.907, 25.0),
    "wrist_roll": (14.251, 0.907, 25.0),
    "wrist_pitch": (16.778, 1.068, 5.0),
    "wrist_yaw": (16.778, 1.068, 5.0),
}

#: Foot contact spheres ``(x, y)`` in the ankle-roll link frame, at z = -0.03 (heel left,
#: heel right, toe left, toe right of each foot).
FOOT_CONTACT_POINTS = ((-0.05, 0.025), (-0.05, -0.025), (0.12, 0.03), (0.12, -0.03))
_FOOT_SPHERE_RADIUS = 0.005
_FOOT_FRICTION = (0.6, 0.005, 0.0001)

_S = mujoco.mjtSensor
#: ``(name, type, site, cutoff)`` of the site sensors, in sensordata order; the 8 foot contact
#: sensors follow them (``{side}_foot_contact_{i}``: sphere i against the floor, "found").
SENSORS: tuple[tuple[str, mujoco.mjtSensor, str, float], ...] = (
    ("pelvis_local_linvel", _S.mjSENS_VELOCIMETER, "imu_in_pelvis", 0.0),
    ("pelvis_gyro", _S.mjSENS_GYRO, "imu_in_pelvis", 34.9),
    ("pelvis_acceleration", _S.mjSENS_ACCELEROMETER, "imu_in_pelvis", 157.0),
    ("pelvis_upvector", _S.mjSENS_FRAMEZAXIS, "imu_in_pelvis", 0.0),
    ("torso_gyro", _S.mjSENS_GYRO, "imu_in_torso", 34.9),
    ("torso_acceleration", _S.mjSENS_ACCELEROMETER, "imu_in_torso", 157.0),
    ("torso_upvector", _S.mjSENS_FRAMEZAXIS, "imu_in_torso", 0.0),
    ("left_foot_pos", _S.mjSENS_FRAMEPOS, "left_foot", 0.0),
    ("left_foot_quat", _S.mjSENS_FRAMEQUAT, "left_foot", 0.0),
    ("left_foot_upvector", _S.mjSENS_FRAMEZAXIS, "left_foot", 0.0),
    ("right_foot_pos", _S.mjSENS_FRAMEPOS, "right_foot", 0.0),
    ("right_foot_quat", _S.mjSENS_FRAMEQUAT, "right_foot", 0.0),
    ("right_foot_upvector", _S.mjSENS_FRAMEZAXIS, "right_foot", 0.0),
)

_SIDES = ("left", "right")
#: The ``stand`` keyframe's joint angles (joint order), also the policy's default pose.
STAND_JOINTS: tuple[float, ...] = (
    (-0.312, 0.0, 0.0, 0.669, -0.363, 0.0) * 2
    + (0.0, 0.0, 0.0)
    + (0.2, 0.2, 0.0, 0.6, 0.0, 0.0, 0.0)
    + (0.2, -0.2, 0.0, 0.6, 0.0, 0.0, 0.0)
)
#: The floors: ``"flat"`` (G1WalkFlat's plane) and ``"rough"`` (G1WalkRough's height field).
TERRAINS = ("flat", "rough")
#: The stand keyframe's pelvis height per terrain (the rough floor's heights reach 0.05 m).
_STAND_HEIGHT = {"flat": 0.754, "rough": 0.79}
#: The rough floor's height field (``data/README.md`` names its origin) and its MuJoCo size
#: ``(x half-extent, y half-extent, max height, base depth)``.
HFIELD_PATH = Path(__file__).resolve().parent / "data" / "g1_rough_hfield.png"
_HFIELD_SIZE = (10.0, 10.0, 0.05, 0.1)


def build_g1_model(terrain: str = "flat") -> mujoco.MjModel:
    """Compile the reference's G1 walking model on ``terrain`` (:data:`TERRAINS`; module
    docstring) from mjlab's G1 MJCF."""
    return g1_spec(terrain).compile()


def g1_spec(terrain: str = "flat") -> mujoco.MjSpec:
    """The G1 model on ``terrain`` (module docstring) as an uncompiled ``MjSpec``, for scenes
    that add to it (the wall of ``envs/motion/flip.py``)."""
    if terrain not in TERRAINS:
        raise ValueError(f"unknown G1 terrain {terrain!r}; choose one of {', '.join(TERRAINS)}")
    spec = mujoco.MjSpec.from_file(str(robot_mjcf_path("g1")))
    spec.compiler.discardvisual = True
    spec.option.timestep = 0.02 / 3.0
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    for joint in spec.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_HINGE:
            joint.armature = 0.01
            joint.frictionloss = 0.3
    for side in _SIDES:
        _replace_sole(spec, side)
    _add_floor(spec, terrain)
    for sensor in list(spec.sensors):  # mjlab's IMU sensors: replaced by the reference's
        spec.delete(sensor)
    _add_actuators(spec)
    _add_sensors(spec, foot_contacts=terrain == "flat")
    stand = (0.0, 0.0, _STAND_HEIGHT[terrain], 1.0, 0.0, 0.0, 0.0, *STAND_JOINTS)
    spec.add_key(name="stand", qpos=list(stand), ctrl=list(STAND_JOINTS))
    return spec


def _add_floor(spec: mujoco.MjSpec, terrain: str) -> None:
    """The floor geom, ``floor``: a plane or the rough height field (module docstring)."""
    if terrain == "flat":
        spec.worldbody.add_geom(
            name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05]
        )
        return
    spec.add_hfield(name="hfield", file=str(HFIELD_PATH), size=list(_HFIELD_SIZE))
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_HFIELD,
        hfieldname="hfield",
        contype=1,
        conaffinity=0,
        priority=1,
        friction=[1.0, 0.005, 0.0001],
    )


def _replace_sole(spec: mujoco.MjSpec, side: str) -> None:
    """The 4 contact spheres under a foot, then mjlab's 7 sole capsules (re-added after them,
    so the spheres come first in geom order) with the sole's friction."""
    foot = spec.body(f"{side}_ankle_roll_link")
    capsules = [g for g in foot.geoms if g.name.startswith(f"{side}_foot")]
    kept = [(g.name, list(g.fromto)) for g in capsules]
    for geom in capsules:
        spec.delete(geom)
    for i, (x, y) in enumerate(FOOT_CONTACT_POINTS):
        foot.add_geom(
            name=f"{side}_foot_contact_{i}_geom",
            type=mujoco.mjtGeom.mjGEOM_SPHERE,
            size=[_FOOT_SPHERE_RADIUS, 0.0, 0.0],
            pos=[x, y, -0.03],
            priority=1,
            friction=list(_FOOT_FRICTION),
            condim=3,
            contype=1,
            conaffinity=1,
            group=3,
        )
    capsule_class = spec.find_default("foot_capsule")
    for name, fromto in kept:
        foot.add_geom(capsule_class, name=name, fromto=fromto, friction=list(_FOOT_FRICTION))


def _motor(joint_name: str) -> tuple[float, float, float]:
    name = joint_name.removesuffix("_joint")
    for side in _SIDES:
        name = name.removeprefix(f"{side}_")
    return MOTORS[name]


def _add_actuators(spec: mujoco.MjSpec) -> None:
    """One position actuator per hinge, named as its joint: ``kp``, ``kv`` (a bias force, which
    implicitfast integrates implicitly), force limit, no ctrl limit."""
    for joint in spec.joints:
        if joint.type != mujoco.mjtJoint.mjJNT_HINGE:
            continue
        kp, kv, force = _motor(joint.name)
        actuator = spec.add_actuator(
            name=joint.name, target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT
        )
        actuator.set_to_position(kp=kp, kv=kv)
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-force, force]


def _add_sensors(spec: mujoco.MjSpec, foot_contacts: bool) -> None:
    for name, kind, site, cutoff in SENSORS:
        sensor = spec.add_sensor(
            name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site
        )
        sensor.cutoff = cutoff
    if not foot_contacts:
        return
    for side in _SIDES:
        for i in range(len(FOOT_CONTACT_POINTS)):
            sensor = spec.add_sensor(
                name=f"{side}_foot_contact_{i}",
                type=_S.mjSENS_CONTACT,
                objtype=mujoco.mjtObj.mjOBJ_GEOM,
                objname="floor",
                reftype=mujoco.mjtObj.mjOBJ_GEOM,
                refname=f"{side}_foot_contact_{i}_geom",
            )
            sensor.intprm = [1, 1, 1]  # data "found", reduce "mindist", 1 contact


def sensor_slices(model: mujoco.MjModel) -> dict[str, slice]:
    """Each sensor's ``[start, stop)`` in ``sensordata``, by name."""
    return {
        model.sensor(i).name: slice(
            int(model.sensor_adr[i]), int(model.sensor_adr[i] + model.sensor_dim[i])
        )
        for i in range(model.nsensor)
    }
