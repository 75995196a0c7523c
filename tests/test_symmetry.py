"""Symmetry augmentation: the tasks' mirror maps against the physics, and the updates' batches.

Where a mirror map can go wrong, and the test that catches it:

* a joint's sign or partner: the signs read from the model's joint axes must match the joint
  kinds (roll / yaw / hip abduction flip, pitch keeps), and the mirrored pose must put every
  body at the mirror image of its partner's place (forward kinematics, the real models);
* the observation layout (command, gait clock, pseudo-vectors): the observation of the
  mirrored state must be the mirrored observation, and the reward and termination unchanged
  (Go2: the mirrored state's clock, which the batch shares, is half a cycle on);
* the dynamics: the mirrored state stepped with the mirrored action must give the mirrored next
  state, on C MuJoCo for every robot (``envs.make(..., sim_backend="mujoco")``: the same task
  code) and on MJX for Go1 (the task's ``Env``; MJX's G1 step alone took a minute to compile).

The robot models are not exactly left-right symmetric (measured with this file's
:func:`symmetrized`: the G1 torso's centre of mass sits 0.34 mm off the sagittal plane and its
shoulders 10 um off their mirror places; the Go1 trunk's centre of mass is 2 mm off and its calf
masses 1 mm; G1's left sole capsule 1 ends 1 mm off the mirror of the right foot's; the Go2
base's products of inertia xy, yz are 1.2e-4, -3.1e-5 kg m^2 (of 0.1) and its FL upper calf
cylinder is not the mirror of FR's: radius 12 vs 13 mm). Stepping the real models, that
asymmetry dominates (C MuJoCo, one control step, worst of 24 states: G1 1.8e-3 in qpos and
9e-2 rad/s in qvel, Go1 1e-2 and 1.8 rad/s; Go2, 16 states, 3.9e-5 and 3.1e-3), so the
dynamics tests step *symmetrized* copies (each body's mass, centre of mass, inertia and
position averaged with its partner's mirror; G1's capsule and Go2's cylinder made the mirror of
their partners). There the mirror error is the solver's rounding: measured at most 4e-15 /
1.2e-12 (qpos / qvel) on C MuJoCo in float64 (G1's and Go2's float32 state rounds it away: 0)
and 3e-6 / 8.5e-4 on MJX in float32 (its 2-3 Newton iterations do not converge, so the float32
rounding of a permuted problem stays visible), while one wrong joint sign gives about 0.1 / 2-17.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from unilab_jax.algos.agent import Transition
from unilab_jax.algos.hyperparams import SACConfig, TD3Config
from unilab_jax.algos.sac import make_sac, make_sac_networks, sac_actor_loss, sac_critic_loss
from unilab_jax.algos.symmetry import mirror_transition, resolve_mirror, symmetric_batch
from unilab_jax.algos.td3 import make_td3, make_td3_networks, td3_actor_loss, td3_critic_loss
from unilab_jax.config import TrainConfig
from unilab_jax.envs import load, make, make_task, registry
from unilab_jax.envs.base import Env, observation_groups
from unilab_jax.envs.mirror import (
    PSEUDOVECTOR,
    VECTOR,
    MirrorMap,
    SignedPermutation,
    concat,
    left_right_partner,
)
from unilab_jax.envs.robots.assets import RobotAssetError, robot_mjcf_path
from unilab_jax.envs.robots.go2 import feet_phase as go2_feet_phase
from unilab_jax.errors import ConfigError

pytestmark = pytest.mark.timeout(900)

ROBOT = {"G1WalkFlat": "g1", "Go1JoystickFlat": "go1", "Go2JoystickFlat": "go2"}
TASKS = sorted(ROBOT)
REFLECT = np.diag([1.0, -1.0, 1.0])
PAIRS = 4  # states per check; each is stepped next to its mirror in one batch of 2 * PAIRS


#: Config overrides of the tasks these tests build: no observation noise (the mirrored
#: observation is compared with the mirrored one entry by entry) and, for the dynamics, no
#: per-episode randomisation (a mirrored pair must run on the same model) and no pushes.
OVERRIDES = {"G1WalkFlat": {"noise_level": 0.0}, "Go2JoystickFlat": {"noise_level": 0.0}}
_SAME_GAINS = {"kp_multiplier_range": (1.0, 1.0), "kd_multiplier_range": (1.0, 1.0)}
SAME_DR = {
    "G1WalkFlat": _SAME_GAINS,
    "Go2JoystickFlat": {
        **_SAME_GAINS,
        "added_mass_range": (0.0, 0.0),
        "com_offset_x_range": (0.0, 0.0),
        "push_interval": 0,
    },
}
#: The task-state key of the last action (the observation's and ``action_rate``'s).
LAST_ACTION = {"Go2JoystickFlat": "action"}


@functools.cache
def _real_task(name: str):
    try:
        robot_mjcf_path(ROBOT[name])
    except RobotAssetError as err:
        pytest.skip(str(err))
    return make_task(name, OVERRIDES.get(name))


def _reference_data(model: mujoco.MjModel) -> mujoco.MjData:
    """Kinematics of the reference pose: base at the origin, unrotated, joints at 0."""
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0
    data.qpos[:7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    mujoco.mj_kinematics(model, data)
    return data


def symmetrized(model: mujoco.MjModel) -> mujoco.MjModel:
    """``model`` with every body's position, mass, centre of mass and inertia averaged with its
    mirror partner's mirror image (in place; returned for convenience). Body orientations and
    joint axes are already exact mirrors in these models (``hinge_mirror`` checks the axes)."""
    data = _reference_data(model)
    partner = [model.body(left_right_partner(model.body(b).name)).id for b in range(model.nbody)]
    pos = {0: data.xpos[0].copy()}
    for b in range(1, model.nbody):  # parents come first
        p = partner[b]
        pos[b] = 0.5 * (data.xpos[b] + REFLECT @ data.xpos[p])
        parent = model.body_parentid[b]
        if parent:
            model.body_pos[b] = data.xmat[parent].reshape(3, 3).T @ (pos[b] - pos[parent])
    world_inertia = {}
    for b in range(1, model.nbody):
        frame = data.ximat[b].reshape(3, 3)
        world_inertia[b] = frame @ np.diag(model.body_inertia[b]) @ frame.T
    com = {b: data.xipos[b].copy() for b in range(1, model.nbody)}
    for b in range(1, model.nbody):
        p = partner[b]
        rot = data.xmat[b].reshape(3, 3)
        centre = 0.5 * (com[b] + REFLECT @ com[p])
        inertia = 0.5 * (world_inertia[b] + REFLECT @ world_inertia[p] @ REFLECT)
        model.body_ipos[b] = rot.T @ (centre - pos[b])
        moments, axes = np.linalg.eigh(rot.T @ inertia @ rot)
        if np.linalg.det(axes) < 0:
            axes[:, 0] *= -1.0
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, axes.reshape(-1))
        model.body_inertia[b], model.body_iquat[b] = moments, quat
        model.body_mass[b] = 0.5 * (model.body_mass[b] + model.body_mass[p])
    mujoco.mj_setConst(model, mujoco.MjData(model))  # derived constants of the new inertias
    return model


def _symmetric_task(name: str):
    """A fresh task whose model is :func:`symmetrized` (skipped without the robot asset)."""
    _real_task(name)
    task = make_task(name, {**OVERRIDES.get(name, {}), **SAME_DR.get(name, {})})
    symmetrized(task.model)
    model = task.model
    if name == "G1WalkFlat":
        # mjlab's left sole capsule 1 ends at y = -0.027, its mirror (right capsule 7) at
        # 0.026: the right foot's capsule is the exact mirror of the left's other edge.
        left, right = (model.geom(f"{s}_foot1_collision").id for s in ("left", "right"))
    elif name == "Go2JoystickFlat":
        # Menagerie's FL upper calf cylinder (radius 12 mm, 8 mm forward, tilted 12 degrees)
        # is not the FR one's (13 mm, 10 mm, 11.5 degrees; RL, RR as FR): made FR's, which
        # lies in the calf's x-z plane, so it is its own mirror.
        left, right = (model.geom(f"{s}_calf_geom1").id for s in ("FL", "FR"))
    else:
        return task
    for field in ("geom_pos", "geom_quat", "geom_size", "geom_rbound", "geom_aabb"):
        getattr(model, field)[left] = getattr(model, field)[right]
    return task


def mirror_task_state(name: str, state: dict, mirror: MirrorMap) -> dict:
    """The task carry of the mirrored robot: the command and last action mirrored; the gait
    clock of the mirrored feet (G1: the left and right feet's phases swap; quadrupeds: the
    phase shifts by half a cycle, so the trot pairs swap; Go2's feet phases, which its
    observation reads, follow its clock, which its reward reads)."""
    state = dict(state)
    state["command"] = state["command"] * jnp.array([1.0, -1.0, -1.0])
    last = LAST_ACTION.get(name, "last_action")
    state[last] = mirror.action.apply(state[last])
    if name == "G1WalkFlat":
        state["gait_phase"] = state["gait_phase"][..., ::-1]
    elif name == "Go2JoystickFlat":
        state["phase"] = jnp.mod(state["phase"] + jnp.float32(0.5), jnp.float32(1.0))
        state["feet_phase"] = go2_feet_phase(state["phase"])
    else:
        state["phase"] = jnp.mod(state["phase"] + math.pi, 2.0 * math.pi)
    return state


def _task_state(name: str, task, seed: int, rng: np.random.Generator) -> dict:
    """A task carry with a random command, last action and (Go2) gait clock."""
    state = task.init_task_state(jax.random.PRNGKey(seed))
    last = jnp.asarray(rng.uniform(-1.0, 1.0, task.action_size), jnp.float32)
    state[LAST_ACTION.get(name, "last_action")] = last
    if name == "Go2JoystickFlat":  # its clock starts at 0 (feet phases all 0): one mid-cycle
        state["phase"] = jnp.float32(rng.uniform(0.0, 1.0))
        state["feet_phase"] = go2_feet_phase(state["phase"])
    return state


def _random_pose(task, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A standing-height pose, tilted and turned, with joints anywhere in their ranges and
    random velocities."""
    model = task.model
    qpos = np.array(model.qpos0 if model.nkey == 0 else model.key_qpos[0], np.float64)
    qpos[:3] = [rng.normal(), rng.normal(), qpos[2]]
    quat = np.array([1.0, *rng.normal(0.0, 0.2, 3)])
    qpos[3:7] = quat / np.linalg.norm(quat)
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    qpos[7:] = rng.uniform(lo, hi)
    return qpos, rng.normal(0.0, 1.0, model.nv)


# --- the maps ---------------------------------------------------------------------------------


def test_a_mirror_map_must_be_its_own_inverse():
    SignedPermutation((1, 0, 2), (1.0, 1.0, -1.0))
    with pytest.raises(ValueError, match="its own inverse"):
        SignedPermutation((1, 2, 0), (1.0, 1.0, 1.0))  # a 3-cycle
    with pytest.raises(ValueError, match="its own inverse"):
        SignedPermutation((1, 0), (1.0, -1.0))  # the swap would flip a sign twice
    with pytest.raises(ValueError, match="not a permutation"):
        SignedPermutation((0, 0), (1.0, 1.0))


def test_registry_names_the_tasks_with_a_mirror_and_others_have_none():
    # G1WalkRough is G1WalkFlat's task on a height field, with its map (the reference's:
    # tests/test_reference_g1.py); a mirrored state stands on another patch of that floor, so
    # the dynamics checks here run on the flat one.
    assert registry.mirrored_names() == sorted([*TASKS, "G1WalkRough"])
    assert load("PendulumSwingup").mirror is None


@pytest.mark.parametrize("name", TASKS)
def test_joint_signs_read_from_the_axes_match_the_joint_kinds(name):
    """Roll and yaw joints (G1) and hip abduction (quadrupeds) flip sign, pitch joints keep it:
    what the MJCF axes gave must be what the joint names say, over the joints (qpos / qvel)
    and over the actuators (the action; Go2's order is not its joints')."""
    task = _real_task(name)
    model = task.model
    flips = ("roll", "yaw") if name == "G1WalkFlat" else ("hip",)

    def expected(joints: list[str]) -> SignedPermutation:
        return SignedPermutation(
            tuple(joints.index(left_right_partner(j)) for j in joints),
            tuple(-1.0 if any(k in j for k in flips) else 1.0 for j in joints),
        )

    joints = [model.joint(j).name for j in range(1, model.njnt)]
    actuated = [model.joint(j).name for j in model.actuator_trnid[:, 0]]
    mirror = task.mirror
    assert mirror.action == expected(actuated)
    assert mirror.qvel == concat(VECTOR, PSEUDOVECTOR, expected(joints))
    sizes = Env(task, name).obs_size
    assert (mirror.obs.size, mirror.critic.size) == (sizes["obs"], sizes["critic"])
    assert (mirror.qpos.size, mirror.qvel.size) == (task.model.nq, task.model.nv)


@pytest.mark.parametrize("name", TASKS)
def test_mirrored_pose_puts_every_body_at_its_partners_mirror_image(name):
    task = _real_task(name)
    model, mirror = task.model, task.mirror
    partner = [model.body(left_right_partner(model.body(b).name)).id for b in range(model.nbody)]
    rng = np.random.default_rng(0)
    data, mirrored = mujoco.MjData(model), mujoco.MjData(model)
    worst = 0.0
    for _ in range(5):
        data.qpos[:], _ = _random_pose(task, rng)
        mirrored.qpos[:] = mirror.qpos.apply(data.qpos)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_kinematics(model, mirrored)
        want = data.xpos @ REFLECT  # row b: M x_b
        worst = max(worst, float(np.abs(mirrored.xpos[partner] - want).max()))
    print(f"{name}: worst body position error of the mirrored pose {worst:.1e} m")
    # The models' own asymmetry: G1's shoulders sit 1e-5 m off their mirror places.
    assert worst < 5e-5, worst


def _physics_view(model: mujoco.MjModel, data: mujoco.MjData):
    """The fields the tasks read, in MJX's layout, from a C MuJoCo ``data``."""
    return types.SimpleNamespace(
        qpos=jnp.asarray(data.qpos, jnp.float32),
        qvel=jnp.asarray(data.qvel, jnp.float32),
        xpos=jnp.asarray(data.xpos, jnp.float32),
        xmat=jnp.asarray(data.xmat.reshape(-1, 3, 3), jnp.float32),
        site_xpos=jnp.asarray(data.site_xpos, jnp.float32),
        actuator_force=jnp.asarray(data.actuator_force, jnp.float32),
        sensordata=jnp.asarray(data.sensordata, jnp.float32),
    )


@pytest.mark.parametrize("name", TASKS)
def test_observation_of_the_mirrored_state_is_the_mirrored_observation(name):
    """Also: the reward and the termination flag are those of the original state."""
    task = _real_task(name)
    model, mirror = task.model, task.mirror
    rng = np.random.default_rng(1)
    data, mirrored = mujoco.MjData(model), mujoco.MjData(model)
    for seed in range(4):
        data.qpos[:], data.qvel[:] = _random_pose(task, rng)
        action = jnp.asarray(rng.uniform(-1.0, 1.0, task.action_size), jnp.float32)
        state = _task_state(name, task, seed, rng)
        data.ctrl[:] = np.asarray(task.ctrl_from_action(action, state))
        mirrored.qpos[:] = mirror.qpos.apply(data.qpos)
        mirrored.qvel[:] = mirror.qvel.apply(data.qvel)
        mirrored.ctrl[:] = np.asarray(task.ctrl_from_action(mirror.action.apply(action), state))
        for d in (data, mirrored):
            mujoco.mj_forward(model, d)
        m_state = mirror_task_state(name, state, mirror)
        obs = observation_groups(task, _physics_view(model, data), state)
        m_obs = observation_groups(task, _physics_view(model, mirrored), m_state)
        for key, m_map in (("obs", mirror.obs), ("critic", mirror.critic)):
            np.testing.assert_allclose(m_obs[key], m_map.apply(obs[key]), rtol=1e-5, atol=1e-5)
        reward, parts = task.reward(_physics_view(model, data), action, state)
        m_reward, m_parts = task.reward(
            _physics_view(model, mirrored), mirror.action.apply(action), m_state
        )
        for part in parts:
            np.testing.assert_allclose(m_parts[part], parts[part], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(m_reward, reward, rtol=1e-4, atol=1e-5)
        assert bool(task.terminated(_physics_view(model, mirrored), m_state)) == bool(
            task.terminated(_physics_view(model, data), state)
        )


# --- the physics ------------------------------------------------------------------------------


@dataclasses.dataclass
class MjxCase:
    name: str
    task: object
    reset: object
    step: object


#: MJX's dynamics on one robot: the task code is C MuJoCo's, checked on every robot below.
MJX_TASKS = ["Go1JoystickFlat"]


@pytest.fixture(scope="module", params=MJX_TASKS)
def mjx_case(request) -> MjxCase:
    name = request.param
    task = _symmetric_task(name)
    env = Env(task, name)
    return MjxCase(name, task, jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))


def _assert_mirror_errors(name, backend, qpos_err, qvel_err, typical, worst):
    """Bounds on the median and the worst per-env error (see the module docstring)."""
    qpos_err, qvel_err = np.asarray(qpos_err), np.asarray(qvel_err)
    print(
        f"{name} {backend}: mirror error per env, qpos median {np.median(qpos_err):.1e} "
        f"max {qpos_err.max():.1e}, qvel median {np.median(qvel_err):.1e} max {qvel_err.max():.1e}"
    )
    assert np.median(qpos_err) < typical[0] and np.median(qvel_err) < typical[1]
    assert qpos_err.max() < worst[0] and qvel_err.max() < worst[1]


def test_mjx_mirrored_state_steps_to_the_mirrored_next_state(mjx_case):
    case, mirror = mjx_case, mjx_case.task.mirror
    action_size = case.task.action_size
    rng = np.random.default_rng(2)
    state = case.reset(jax.random.split(jax.random.PRNGKey(3), 2 * PAIRS))
    qpos_err, qvel_err = [], []
    for _ in range(4):
        # Step on (contacts, velocities, the solver's warm start), then mirror the first half.
        state = case.step(state, jnp.asarray(rng.uniform(-0.5, 0.5, (2 * PAIRS, action_size))))
        first = jax.tree.map(lambda x: x[:PAIRS], state)
        physics = first.physics.replace(
            qpos=mirror.qpos.apply(first.physics.qpos),
            qvel=mirror.qvel.apply(first.physics.qvel),
            qacc_warmstart=mirror.qvel.apply(first.physics.qacc_warmstart),
        )
        task_state = jax.vmap(lambda s: mirror_task_state(case.name, s, mirror))(first.task_state)
        second = first.replace(physics=physics, task_state=task_state)
        pairs = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), first, second)
        action = jnp.asarray(rng.uniform(-0.7, 0.7, (PAIRS, action_size)), jnp.float32)
        after = case.step(pairs, jnp.concatenate([action, mirror.action.apply(action)]))
        assert not bool(jnp.any(after.done))
        p = after.physics
        qpos_err += list(np.abs(mirror.qpos.apply(p.qpos[:PAIRS]) - p.qpos[PAIRS:]).max(axis=1))
        qvel_err += list(np.abs(mirror.qvel.apply(p.qvel[:PAIRS]) - p.qvel[PAIRS:]).max(axis=1))
        obs = after.obs["critic"]
        np.testing.assert_allclose(
            obs[PAIRS:], mirror.critic.apply(obs[:PAIRS]), atol=0.05 * max(1.0, qvel_err[-1])
        )
    _assert_mirror_errors(case.name, "MJX", qpos_err, qvel_err, (1e-4, 1e-2), (1e-3, 0.5))


@pytest.mark.parametrize("name", TASKS)
def test_c_mujoco_mirrored_state_steps_to_the_mirrored_next_state(name):
    """Physics only: the task carries stay unmirrored, so Go2's batch-wide gait clock (which
    no env of a batch can hold half a cycle on) does not matter; its ctrl does not read it."""
    task = _symmetric_task(name)
    mirror = task.mirror
    scratch = f"test/{name}-symmetrized"
    registry.register(scratch, lambda config, task=task: task, task.config)
    try:
        venv = make(scratch, 2 * PAIRS, sim_backend="mujoco", nthread=1)
    finally:
        registry._REGISTRY.pop(scratch)  # noqa: SLF001  (a test-only entry)
    rng = np.random.default_rng(4)
    qpos_err, qvel_err = [], []
    try:
        venv.init_state(seed=5, stagger=False)
        batch = venv.batch
        for _ in range(4):
            venv.step(rng.uniform(-0.5, 0.5, (2 * PAIRS, task.action_size)).astype(np.float32))
            for field, m_map in (("qpos", mirror.qpos), ("qvel", mirror.qvel)):
                values = getattr(batch, field)
                values[PAIRS:] = m_map.apply(np.array(values[:PAIRS]))
            warm = batch.qacc_warmstart
            warm[PAIRS:] = mirror.qvel.apply(np.array(warm[:PAIRS]))
            action = rng.uniform(-0.7, 0.7, (PAIRS, task.action_size)).astype(np.float32)
            out = venv.step(np.concatenate([action, mirror.action.apply(action)]))
            assert not (out.terminated | out.truncated).any()
            qpos, qvel = np.array(batch.qpos), np.array(batch.qvel)
            qpos_err += list(np.abs(mirror.qpos.apply(qpos[:PAIRS]) - qpos[PAIRS:]).max(axis=1))
            qvel_err += list(np.abs(mirror.qvel.apply(qvel[:PAIRS]) - qvel[PAIRS:]).max(axis=1))
    finally:
        venv.close()
    _assert_mirror_errors(name, "C MuJoCo", qpos_err, qvel_err, (1e-9, 1e-7), (1e-8, 1e-6))


# --- the updates ------------------------------------------------------------------------------

OBS, CRITIC, ACT = 7, 9, 4
_ACTION = SignedPermutation((1, 0, 2, 3), (1.0, 1.0, -1.0, 1.0))
_OBS = concat(SignedPermutation((0, 1, 2), (-1.0, 1.0, -1.0)), _ACTION)
# A toy task's map: a pseudo-vector, a left/right pair, a flipped and a kept entry; the critic
# adds a two-entry pair with a flip on both.
MIRROR = MirrorMap(
    obs=_OBS,
    critic=concat(_OBS, SignedPermutation((1, 0), (-1.0, -1.0))),
    action=_ACTION,
    qpos=_ACTION,
    qvel=_ACTION,
)
SIZES = dict(actor_hidden_dim=16, critic_hidden_dim=16, num_atoms=11, v_min=-5.0, v_max=5.0)


def toy_batch(seed: int, rows: int = 8) -> Transition:
    keys = jax.random.split(jax.random.PRNGKey(seed), 6)
    return Transition(
        obs=jax.random.normal(keys[0], (rows, OBS)),
        critic=jax.random.normal(keys[1], (rows, CRITIC)),
        actions=jax.random.uniform(keys[2], (rows, ACT), minval=-1.0, maxval=1.0),
        rewards=jax.random.normal(keys[3], (rows,)),
        next_obs=jax.random.normal(keys[4], (rows, OBS)),
        next_critic=jax.random.normal(keys[5], (rows, CRITIC)),
        terminated=(jnp.arange(rows) % 3 == 0).astype(jnp.float32),
        truncated=(jnp.arange(rows) % 4 == 1).astype(jnp.float32),
    )


def test_symmetric_batch_is_the_first_half_then_its_mirror():
    batch = toy_batch(0, rows=6)
    out = symmetric_batch(MIRROR, batch)
    half = jax.tree.map(lambda x: x[:3], batch)
    for field, m_map in (
        ("obs", MIRROR.obs),
        ("next_obs", MIRROR.obs),
        ("critic", MIRROR.critic),
        ("next_critic", MIRROR.critic),
        ("actions", MIRROR.action),
    ):
        value = getattr(half, field)
        expected = jnp.concatenate([value, value[:, list(m_map.index)] * jnp.array(m_map.sign)])
        np.testing.assert_array_equal(getattr(out, field), expected, err_msg=field)
    for field in ("rewards", "terminated", "truncated"):  # repeated, in the same row order
        value = getattr(half, field)
        np.testing.assert_array_equal(getattr(out, field), jnp.concatenate([value, value]))
    with pytest.raises(ConfigError, match="must be even"):
        symmetric_batch(MIRROR, toy_batch(0, rows=5))


def _make(algo: str, **config):
    if algo == "sac":
        return make_sac, SACConfig(**SIZES, **config)
    return make_td3, TD3Config(**SIZES, **config)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_update_with_symmetry_is_the_update_on_the_augmented_batch(algo):
    """``B`` rows in: the update trains on the first ``B / 2`` and their mirrors (normalised
    after mirroring), nothing else; critic, temperature and actor alike."""
    maker, config = _make(algo, obs_normalization=True)
    plain = maker(config, OBS, CRITIC, ACT)
    sym = maker(dataclasses.replace(config, use_symmetry=True), OBS, CRITIC, ACT, mirror=MIRROR)
    state = plain.init(jax.random.PRNGKey(0))
    stats = toy_batch(9, rows=32)
    state = plain.update_normalizers(state, stats.obs * 2.0 + 1.0, stats.critic - 1.0)
    batch, key = toy_batch(1), jax.random.PRNGKey(2)
    augmented = symmetric_batch(MIRROR, batch)
    for update in ("update_critic", "update_actor"):
        got = jax.jit(getattr(sym, update))(state, batch, key)
        want = jax.jit(getattr(plain, update))(state, augmented, key)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), got, want)
        unmirrored = jax.jit(getattr(plain, update))(state, batch, key)[1]
        loss = "qf_loss" if update == "update_critic" else "actor_loss"
        assert abs(float(unmirrored[loss]) - float(got[1][loss])) > 1e-4


def _symmetrize_input(kernel: jax.Array, m_map: SignedPermutation, axis: int) -> jax.Array:
    """Average a kernel with its mirror along the input ``axis``: the layer's output becomes
    the same for an input and its mirror."""
    mirrored = jnp.take(kernel, jnp.asarray(m_map.index), axis=axis)
    shape = [1] * kernel.ndim
    shape[axis] = m_map.size
    return 0.5 * (kernel + mirrored * jnp.asarray(m_map.sign).reshape(shape))


def _equivariant_head(layer: dict, m_map: SignedPermutation, signs: bool = True) -> dict:
    """Average a head with its mirror along the output: outputs on the map's +1 eigenspace."""
    sign = jnp.asarray(m_map.sign if signs else [1.0] * m_map.size)
    index = jnp.asarray(m_map.index)
    return {
        "kernel": 0.5 * (layer["kernel"] + layer["kernel"][:, index] * sign),
        "bias": 0.5 * (layer["bias"] + layer["bias"][index] * sign),
    }


def _randomized(params, key, scale=0.3):
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(
        tree, [x + scale * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    )


def symmetric_networks(algo: str, networks, key):
    """Random actor and critic parameters with ``critic(M s, M a) == critic(s, a)`` and
    ``actor(M s) == M actor(s)`` (SAC: ``log_std(M s) == P log_std(s)``, no signs)."""
    k_actor, k_critic, k_rand = jax.random.split(key, 3)
    actor = networks.actor.init(k_actor, jnp.zeros((1, OBS)))
    critic = networks.critic.init(k_critic, jnp.zeros((1, CRITIC)), jnp.zeros((1, ACT)))
    actor, critic = _randomized(actor, k_rand), _randomized(critic, k_rand)
    joint = concat(MIRROR.critic, MIRROR.action)  # the critic's input is concat(critic, action)
    c = critic["params"]
    c["dense_0"]["kernel"] = _symmetrize_input(c["dense_0"]["kernel"], joint, axis=1)
    a = actor["params"]
    a["trunk"]["dense_0"]["kernel"] = _symmetrize_input(
        a["trunk"]["dense_0"]["kernel"], MIRROR.obs, axis=0
    )
    a["mu"] = _equivariant_head(a["mu"], MIRROR.action)
    if algo == "sac":
        a["log_std"] = _equivariant_head(a["log_std"], MIRROR.action, signs=False)
    return actor, critic


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_mirrored_batch_leaves_the_loss_of_a_symmetric_network_unchanged(algo):
    """With a symmetric actor and critic (and no noise), every loss is the same on a batch and
    on its mirror; with the random networks they were built from, it is not."""
    noise_free = {"policy_noise": 0.0} if algo == "td3" else {}
    _, config = _make(algo, obs_normalization=False, **noise_free)
    batch = toy_batch(3)
    zeros = jnp.zeros((batch.rewards.shape[0], ACT))
    if algo == "sac":
        networks = make_sac_networks(config, ACT)

        def losses(actor, critic, b):
            kw = dict(networks=networks, config=config)
            log_alpha = jnp.log(0.2)
            c = sac_critic_loss(critic, critic, actor, log_alpha, b, zeros, **kw)[0]
            return c, sac_actor_loss(actor, critic, log_alpha, b, zeros, **kw)[0]
    else:
        networks = make_td3_networks(config, ACT)

        def losses(actor, critic, b):
            kw = dict(networks=networks, config=config)
            c = td3_critic_loss(critic, critic, actor, b, zeros, **kw)[0]
            return c, td3_actor_loss(actor, critic, b, **kw)[0]

    losses = jax.jit(losses)
    actor, critic = symmetric_networks(algo, networks, jax.random.PRNGKey(4))
    mirrored = mirror_transition(MIRROR, batch)
    np.testing.assert_allclose(losses(actor, critic, mirrored), losses(actor, critic, batch), 1e-5)
    k_actor, k_critic = jax.random.split(jax.random.PRNGKey(5))
    raw_actor = _randomized(networks.actor.init(k_actor, jnp.zeros((1, OBS))), k_actor)
    raw_critic = networks.critic.init(k_critic, jnp.zeros((1, CRITIC)), jnp.zeros((1, ACT)))
    gap = np.subtract(losses(raw_actor, raw_critic, mirrored), losses(raw_actor, raw_critic, batch))
    assert np.all(np.abs(gap) > 1e-4), gap


def test_td3_symmetric_update_of_a_symmetric_network_equals_the_plain_update_on_half():
    """Without smoothing noise a symmetric critic sees each mirrored row as its original, so
    the augmented update's losses are those of the plain update on the first half."""
    _, config = _make("td3", obs_normalization=False, policy_noise=0.0)
    plain = make_td3(config, OBS, CRITIC, ACT)
    sym = make_td3(dataclasses.replace(config, use_symmetry=True), OBS, CRITIC, ACT, mirror=MIRROR)
    actor, critic = symmetric_networks("td3", make_td3_networks(config, ACT), jax.random.key(6))
    state = plain.init(jax.random.PRNGKey(0))
    state = state.replace(actor_params=actor, critic_params=critic, target_critic_params=critic)
    batch, key = toy_batch(7), jax.random.PRNGKey(8)
    half = jax.tree.map(lambda x: x[:4], batch)
    for update, loss in (("update_critic", "qf_loss"), ("update_actor", "actor_loss")):
        got = jax.jit(getattr(sym, update))(state, batch, key)[1][loss]
        want = jax.jit(getattr(plain, update))(state, half, key)[1][loss]
        np.testing.assert_allclose(got, want, rtol=1e-5)


# --- configuration ----------------------------------------------------------------------------


def test_symmetry_on_a_task_without_a_mirror_fails_before_building():
    with pytest.raises(ConfigError, match="PendulumSwingup declares no mirror map.*G1WalkFlat"):
        resolve_mirror(True, load("PendulumSwingup"), 8)
    assert resolve_mirror(False, load("PendulumSwingup"), 7) is None
    from unilab_jax.training.trainer import Trainer

    config = TrainConfig(env="PendulumSwingup", algo="td3", num_envs=4, batch_size=8)
    with pytest.raises(ConfigError, match="declares no mirror map"):
        Trainer(config, {"use_symmetry": True, **SIZES})


def test_symmetry_with_an_odd_batch_per_device_fails_before_building():
    env = types.SimpleNamespace(name="Toy", mirror=MIRROR)
    assert resolve_mirror(True, env, 8) is MIRROR
    with pytest.raises(ConfigError, match="batch_size a multiple of 2"):
        resolve_mirror(True, env, 7)
    assert resolve_mirror(True, env, 16, num_devices=4) is MIRROR
    with pytest.raises(ConfigError, match=r"per device \(12 over 4\).*multiple of 8"):
        resolve_mirror(True, env, 12, num_devices=4)


def test_use_symmetry_must_be_a_bool_and_the_mirror_must_fit():
    with pytest.raises(ConfigError, match="use_symmetry is 1"):
        SACConfig(use_symmetry=1).validate()
    with pytest.raises(ValueError, match="obs maps 7 entries for size 8"):
        make_sac(SACConfig(**SIZES, use_symmetry=True), OBS + 1, CRITIC, ACT, mirror=MIRROR)
    # Without a mirror the agent still acts (a checkpoint's policy); its updates refuse.
    agent = make_sac(SACConfig(**SIZES, use_symmetry=True), OBS, CRITIC, ACT)
    state = agent.init(jax.random.PRNGKey(0))
    assert agent.act(state, jnp.zeros((2, OBS))).shape == (2, ACT)
    with pytest.raises(ConfigError, match="needs the task's mirror map"):
        agent.update_critic(state, toy_batch(0), jax.random.PRNGKey(1))
