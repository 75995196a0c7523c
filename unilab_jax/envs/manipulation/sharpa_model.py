"""The SharpaInhandRotation model: the reference's Sharpa Wave scene, as its backend compiles it.

:func:`build_sharpa_model` compiles ``data/sharpa_wave/scene.xml`` (the reference's files, see
``data/README.md``) as the reference UniLab (9aa57115) does: visual geoms discarded (its backend's
``discardvisual``; here the visual geoms and the meshes no geom uses are deleted from the
``MjSpec``, which gives the same model without reading the visual mesh files, not shipped), then
the physics step set to ``config.timestep`` (1/240 s). One difference: the object body is
compiled as not "simple" (``MjsBody.simple``), because its centre of mass is randomised per
episode; this changes the mass matrix's sparsity bookkeeping (``dof_simplenum``, ``M_rowadr``),
no physical field. Sizes: nq 29 (22 hand joints, then the
object's free joint: position 22:25, quaternion wxyz 25:29), nv 28, nu 22 position actuators
(kp from the XML, kv from ``dampratio`` 0.9 at compile time), 25 bodies, 28 geoms, 10 contact
sensors (``data="force"``, ``reduce="netforce"``: 3 values each, 30 in all) of which the first
five, the elastomers against the object, are the tactile signals. The hand's bodies have
``gravcomp`` 1; the object is a cylinder of radius 0.02 m, half-height 0.016 m, mass 0.05 kg,
condim 6.

:func:`object_scale_fields` gives the model fields of one object scale: the reference compiles a
model variant per scale with the object geom's size multiplied (``GeomSizeOverride``), which
changes the geom's size, bounding sphere and box, and the body's inertia (its mass, 0.05 kg on the
geom, stays); these are exactly those fields scaled (a uniformly scaled solid's inertia scales
with the square of the scale). The rest, the body's bounding-volume box (``bvh_aabb``, which the
collision midphase culls with) and the constants of the mass matrix, ``mj_setConst`` derives
from them, as the C MuJoCo backend runs it after every change: the result equals the variant
MuJoCo compiles, field for field (``tests/test_sharpa.py``).

:func:`friction_geoms` sorts the collision geoms into the three friction materials of the
reference's randomisation: the object, the hand's elastomers, the hand's other (metal) geoms.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np

from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig

__all__ = [
    "DEFAULT_HAND_POSE_DEG",
    "HAND_BASE_BODY",
    "HAND_JOINTS",
    "OBJECT_BODY",
    "OBJECT_GEOM",
    "SCENE_XML",
    "FrictionGeoms",
    "build_sharpa_model",
    "friction_geoms",
    "object_scale_fields",
    "sensor_slices",
]

SCENE_XML = Path(__file__).resolve().parent / "data" / "sharpa_wave" / "scene.xml"
HAND_BASE_BODY = "right_hand_C_MC"
OBJECT_BODY = "object"
OBJECT_GEOM = "object"
#: The 22 actuated joints, in qpos (and actuator) order.
HAND_JOINTS = (
    "right_thumb_CMC_FE",
    "right_thumb_CMC_AA",
    "right_thumb_MCP_FE",
    "right_thumb_MCP_AA",
    "right_thumb_IP",
    *(
        f"right_{finger}_{joint}"
        for finger in ("index", "middle", "ring")
        for joint in ("MCP_FE", "MCP_AA", "PIP", "DIP")
    ),
    "right_pinky_CMC",
    "right_pinky_MCP_FE",
    "right_pinky_MCP_AA",
    "right_pinky_PIP",
    "right_pinky_DIP",
)
#: The hand pose the ``pose_diff`` penalty measures from (degrees, joint order): the reference's
#: ``SOURCE_DEFAULT_HAND_JOINT_POS_DEG`` (from sharpa-rl-lab's init state).
DEFAULT_HAND_POSE_DEG = (
    95.12771, -3.11244, 14.81626, -1.03493, 12.23986,
    65.21091, 6.1133, 15.58495, 5.90325,
    31.74149, -0.95812, 41.88173, 12.844,
    31.72383, 9.84458, 35.22366, 18.02839,
    10.9712, 68.30895, 7.99151, 5.89626, 5.89875,
)  # fmt: skip


def build_sharpa_model(
    config: SharpaInhandConfig | None = None, object_scale: float | None = None
) -> mujoco.MjModel:
    """Compile the reference's Sharpa scene (module docstring) with ``config``'s time step;
    with ``object_scale``, the object geom's size times it, as the reference compiles its
    variant of one scale (the task swaps :func:`object_scale_fields` into one model instead)."""
    config = config or SharpaInhandConfig()
    spec = mujoco.MjSpec.from_file(str(SCENE_XML))
    for geom in [g for g in spec.geoms if g.contype == 0 and g.conaffinity == 0]:
        spec.delete(geom)
    used = {g.meshname for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH}
    for mesh in [m for m in spec.meshes if m.name not in used]:
        spec.delete(mesh)
    # The object's centre of mass moves per episode: not a "simple" body, whose mass matrix
    # shortcuts assume it at the body frame (MuJoCo's mj_setConst refuses the moved one).
    spec.body(OBJECT_BODY).simple = False
    if object_scale is not None:
        geom = spec.geom(OBJECT_GEOM)
        geom.size = [v * object_scale for v in geom.size]
    model = spec.compile()
    model.opt.timestep = config.timestep
    names = tuple(model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu))
    if names != HAND_JOINTS or model.nq != 29:
        raise ValueError(f"{SCENE_XML}: unexpected joints {names} (nq {model.nq})")
    return model


def sensor_slices(model: mujoco.MjModel) -> dict[str, slice]:
    """Each named sensor's slice of ``sensordata``."""
    slices = {}
    for i in range(model.nsensor):
        start = int(model.sensor_adr[i])
        slices[model.sensor(i).name] = slice(start, start + int(model.sensor_dim[i]))
    return slices


def object_scale_fields(model: mujoco.MjModel, scale: float) -> dict[str, np.ndarray]:
    """The model fields of the object at ``scale`` times its size (full fields, float64):
    ``geom_size``, ``geom_rbound``, ``geom_aabb`` and ``body_inertia``."""
    geom = model.geom(OBJECT_GEOM).id
    body = model.body(OBJECT_BODY).id
    fields = {
        "geom_size": np.array(model.geom_size),
        "geom_rbound": np.array(model.geom_rbound),
        "geom_aabb": np.array(model.geom_aabb),
        "body_inertia": np.array(model.body_inertia),
    }
    fields["geom_size"][geom] *= scale
    fields["geom_rbound"][geom] *= scale
    fields["geom_aabb"][geom] *= scale
    fields["body_inertia"][body] *= scale * scale
    return fields


class FrictionGeoms(NamedTuple):
    """Geom ids of the three friction materials (the reference's ``_resolve_friction_geom_
    ids``): the object; the hand's collision geoms named ``*elastomer*``; its other collision
    geoms. The floor is none of them (its friction is never drawn)."""

    object: np.ndarray
    elastomer: np.ndarray
    metal: np.ndarray


def friction_geoms(model: mujoco.MjModel) -> FrictionGeoms:
    """The geoms of each friction material (:class:`FrictionGeoms`)."""
    base = model.body(HAND_BASE_BODY).id
    hand = {b for b in range(model.nbody) if _descends_from(model, b, base)}
    elastomer, metal = [], []
    for g in range(model.ngeom):
        if model.geom_bodyid[g] not in hand:
            continue
        if model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0:
            continue
        (elastomer if "elastomer" in model.geom(g).name else metal).append(g)
    obj = np.array([model.geom(OBJECT_GEOM).id])
    return FrictionGeoms(obj, np.array(elastomer), np.array(metal))


def _descends_from(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body != root and body != 0:
        body = int(model.body_parentid[body])
    return body == root
