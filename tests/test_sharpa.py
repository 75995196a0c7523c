"""SharpaInhandRotation (``unilab_jax/envs/manipulation``): its model, sizes, grasp caches, the
MJX refusal, the pure pieces (action rule, tactile pipeline, draws, reward terms) and a few C
MuJoCo steps through ``make(..., sim_backend="mujoco")`` from a grasp cache written here. Golden
parity with the reference is a separate file."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from unilab_jax.config import TrainConfig
from unilab_jax.envs import registry
from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.manipulation import sharpa_observation, sharpa_randomisation, sharpa_reward
from unilab_jax.envs.manipulation.grasp_cache import (
    GraspCacheError,
    GraspCaches,
    grasp_cache_file,
    load_grasp_caches,
)
from unilab_jax.envs.manipulation.sharpa import SharpaInhandRotation
from unilab_jax.envs.manipulation.sharpa_config import TACTILE_SENSORS, SharpaInhandConfig
from unilab_jax.envs.manipulation.sharpa_model import (
    HAND_JOINTS,
    build_sharpa_model,
    friction_geoms,
    object_scale_fields,
)
from unilab_jax.envs.vec_env import make
from unilab_jax.errors import ConfigError

NAME = "SharpaInhandRotation"
REFUSAL = (
    "SharpaInhandRotation runs on C MuJoCo only: MJX refuses its contact sensors with net-force "
    'reduction; use physics="mujoco"'
)
HOME_OBJECT = (-0.09559, -0.00517, 0.61906)


def grasp_rows(n: int = 3) -> np.ndarray:
    """``n`` cache rows in the reference's format: the default hand pose, the object at home."""
    row = np.zeros(29, np.float32)
    row[:22] = np.deg2rad(np.linspace(0.0, 20.0, 22))
    row[22:25] = HOME_OBJECT
    row[25] = 1.0
    rows = np.repeat(row[None], n, axis=0)
    rows[:, 22] += np.linspace(0.0, 0.001, n, dtype=np.float32)  # tell rows apart
    return rows


@pytest.fixture(scope="module")
def task() -> SharpaInhandRotation:
    caches = GraspCaches([grasp_rows(), grasp_rows(2)], [Path("a"), Path("b")])
    return SharpaInhandRotation(SharpaInhandConfig(scale_list=(0.8, 1.5)), grasps=caches)


# --------------------------------------------------------------------------- model and sizes
def test_model_has_the_references_sizes() -> None:
    model = build_sharpa_model()
    assert (model.nq, model.nv, model.nu, model.nbody) == (29, 28, 22, 25)
    assert (model.ngeom, model.nmesh, model.nsensor, model.nsensordata) == (28, 11, 10, 30)
    assert model.opt.timestep == pytest.approx(1.0 / 240.0)
    assert tuple(model.joint(model.actuator_trnid[i, 0]).name for i in range(22)) == HAND_JOINTS
    assert [model.sensor(i).name for i in range(5)] == list(TACTILE_SENSORS)
    groups = friction_geoms(model)
    assert len(groups.object) == 1 and len(groups.elastomer) == 5 and len(groups.metal) == 21
    # Position actuators: kv from dampratio 0.9 at compile time, ctrl limited to the joint range.
    assert np.all(model.actuator_biasprm[:, 1] == -model.actuator_gainprm[:, 0])
    assert np.all(model.actuator_biasprm[:, 2] < 0)


def test_sizes_and_registry(task: SharpaInhandRotation) -> None:
    assert NAME in registry.registered_names()
    assert registry.task_family(NAME) == "inhand"
    assert task.action_size == 22 and task.episode_length == 400 and task.n_frames == 12
    assert task.control_dt == pytest.approx(0.05)
    ts = task.init_task_state(jax.random.PRNGKey(0))
    data = _data(*task.init_qpos_qvel(jax.random.PRNGKey(0)), task)
    groups = task.observe(data, ts)
    assert groups["obs"].shape == (147,) and groups["critic"].shape == (156,)


# --------------------------------------------------------------------------- MJX refusal
def test_mjx_is_refused_in_one_line_before_anything_is_built(monkeypatch) -> None:
    def no_build(*args, **kwargs):
        raise AssertionError("the task was built")

    monkeypatch.setattr(SharpaInhandRotation, "__init__", no_build)
    assert registry.mjx_refusal(NAME) == REFUSAL
    assert registry.mjx_refusal("PendulumSwingup") is None
    for attempt in (
        lambda: registry.load(NAME),
        lambda: make(NAME, 2, sim_backend="mjx"),
        lambda: TrainConfig(env=NAME, physics="mjx").validate(),
    ):
        with pytest.raises(ConfigError) as info:
            attempt()
        assert str(info.value) == REFUSAL and "\n" not in str(info.value)


# --------------------------------------------------------------------------- grasp caches
def test_cache_file_names_follow_the_reference() -> None:
    assert grasp_cache_file("/c/sharpa_grasp_linspace", 1.0) == Path(
        "/c/sharpa_grasp_linspace_1.npy"
    )
    assert grasp_cache_file("/c/g.npy", 0.8) == Path("/c/g_0.8.npy")
    assert grasp_cache_file("/c/g_{scale}_x.npy", 1.5) == Path("/c/g_1.5_x.npy")


def test_missing_caches_name_every_file_and_the_command(tmp_path: Path) -> None:
    np.save(tmp_path / "g_0.8.npy", grasp_rows())
    with pytest.raises(GraspCacheError) as info:
        load_grasp_caches(tmp_path / "g", (0.8, 1.0, 1.5))
    message = str(info.value)
    assert str(tmp_path / "g_1.npy") in message and str(tmp_path / "g_1.5.npy") in message
    assert str(tmp_path / "g_0.8.npy") not in message
    assert "sharpa-grasps" in message and "--scales 0.8 1 1.5" in message
    # A command that ends in minutes here, and how long it takes (the default, the reference's
    # 50,000 per scale, would take about a day on 2 cores).
    assert "--target 1000" in message and "about 25 minutes" in message


def test_caches_in_the_references_format_load_as_they_are(tmp_path: Path) -> None:
    wide = np.concatenate([grasp_rows(5), np.ones((5, 2), np.float32)], axis=1)  # extra columns
    np.save(tmp_path / "g_0.8.npy", wide)
    np.save(tmp_path / "g_1.npy", grasp_rows(2).astype(np.float64))
    caches = load_grasp_caches(tmp_path / "g", (0.8, 1.0))
    assert caches.rows.shape == (2, 5, 29) and caches.counts.tolist() == [5, 2]
    np.testing.assert_array_equal(caches.rows[0], grasp_rows(5))
    np.testing.assert_array_equal(caches.rows[1, 2:], np.repeat(grasp_rows(2)[-1:], 3, axis=0))
    np.save(tmp_path / "bad_0.8.npy", np.zeros((4, 28), np.float32))
    with pytest.raises(GraspCacheError, match=r"\[rows, 29\]"):
        load_grasp_caches(tmp_path / "bad", (0.8,))


# --------------------------------------------------------------------------- pure pieces
def test_action_rule(task: SharpaInhandRotation) -> None:
    model = task.model
    low, high = model.actuator_ctrlrange.T
    ts = {"targets": jnp.asarray(high * 0.9 - 0.01, jnp.float32)}
    ones = jnp.ones((22,), jnp.float32)
    up = np.asarray(task.ctrl_from_action(ones, ts))
    np.testing.assert_allclose(up, np.float32(high * 0.9), rtol=1e-6)  # clipped at 0.9 x upper
    down = np.asarray(task.targets(-ones, ts))
    np.testing.assert_allclose(down, high * 0.9 - 0.01 - 1.0 / 24.0, atol=1e-6)
    ts = {"targets": jnp.asarray(low * 0.9, jnp.float32)}
    np.testing.assert_allclose(task.targets(-ones, ts), np.float32(low * 0.9), rtol=1e-6)


def test_reset_state_from_a_grasp(task: SharpaInhandRotation) -> None:
    cfg = dataclasses.replace(task.config, joint_noise_scale=0.0)
    quiet = SharpaInhandRotation(cfg, grasps=task.grasps)
    qpos, qvel, ts = quiet.init_episode(jax.random.PRNGKey(1), jax.random.PRNGKey(2), None)
    scale = int(ts["scale_id"])
    assert any(np.array_equal(qpos, r) for r in task.grasps.rows[scale])
    assert not np.any(qvel)
    frames = np.asarray(ts["frames"])
    assert frames.shape == (3, 49)
    np.testing.assert_array_equal(frames[0], frames[2])  # no noise: the same frame 3 times
    np.testing.assert_allclose(frames[0, 22:44], qpos[:22])  # targets = the grasp's joints
    assert not np.any(frames[0, 44:])  # tactile 0
    z = float(qpos[24])
    np.testing.assert_allclose(ts["height_band"], [z - 0.02, z + 0.02], atol=1e-6)
    priv = np.asarray(
        ts["privileged"]
    )  # object delta (observe fills it), friction, mass, com, scale
    assert 0.75 <= priv[3] <= 1.25 and 0.01 <= priv[4] <= 0.25
    assert np.all(np.abs(priv[5:8]) <= 0.01) and priv[8] == pytest.approx((0.8, 1.5)[scale])
    # The env keeps its scale through resets.
    _, _, again = quiet.init_episode(jax.random.PRNGKey(3), jax.random.PRNGKey(4), ts)
    assert int(again["scale_id"]) == scale


def test_episode_model_fields(task: SharpaInhandRotation) -> None:
    model = task.model
    _, _, ts = task.init_episode(jax.random.PRNGKey(5), jax.random.PRNGKey(6), None)
    fields = {k: np.asarray(v) for k, v in ts[MODEL_PARAMS_KEY].items()}
    assert set(fields) == set(task.model_fields)
    kp_ratio = fields["actuator_gainprm"][:, 0] / model.actuator_gainprm[:, 0]
    kd_ratio = fields["actuator_biasprm"][:, 2] / model.actuator_biasprm[:, 2]
    assert np.all((kp_ratio >= 0.5 - 1e-6) & (kp_ratio <= 2.0 + 1e-6))
    assert np.all((kd_ratio >= 0.5 - 1e-6) & (kd_ratio <= 2.0 + 1e-6))
    np.testing.assert_allclose(fields["actuator_biasprm"][:, 1], -fields["actuator_gainprm"][:, 0])
    np.testing.assert_allclose(np.linalg.norm(fields["opt.gravity"]), 9.81, rtol=1e-5)
    scale = (0.8, 1.5)[int(ts["scale_id"])]
    obj = model.geom("object").id
    np.testing.assert_allclose(fields["geom_size"][obj], model.geom_size[obj] * scale, rtol=1e-6)
    groups = friction_geoms(model)
    friction = fields["geom_friction"]
    s = friction[groups.object[0], 0] / 2.0
    assert 0.75 <= s <= 1.25
    np.testing.assert_allclose(
        friction[groups.elastomer], [[2.0 * s, 0.1 * s, 0.02 * s]] * 5, rtol=1e-5
    )
    np.testing.assert_allclose(friction[groups.metal, 0], s, rtol=1e-5)
    # The floor's is not drawn (model fields are float32, as every task's).
    np.testing.assert_array_equal(friction[0], model.geom_friction[0].astype(np.float32))


def test_split_gain_scales_and_force() -> None:
    scales = np.asarray(sharpa_randomisation.split_scale(jax.random.PRNGKey(0), (4000,), 0.5, 2.0))
    assert scales.min() >= 0.5 and scales.max() <= 2.0
    assert abs(np.mean(scales < 1.0) - 0.5) < 0.05
    cfg = SharpaInhandConfig()
    decay = sharpa_randomisation.force_decay(cfg)
    assert decay == pytest.approx(0.9 ** (0.05 / 0.08))
    force = jnp.array([1.0, -2.0, 0.5], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(1), 400)
    nxt = np.asarray(
        jax.vmap(lambda k: sharpa_randomisation.next_object_force(k, force, 0.1, cfg))(keys)
    )
    kept = np.all(np.isclose(nxt, np.asarray(force) * decay), axis=1)
    assert abs(np.mean(~kept) - 0.25) < 0.07  # a new force with probability 0.25


def test_tactile_pipeline() -> None:
    cfg = SharpaInhandConfig()
    force = jnp.array([0.0, 1.0, 3.0, 9.0, 2.0])
    prev = jnp.array([0.0, 1.0, 1.0, 4.0, 0.0])
    last = jnp.full((5,), 7.0)
    fresh = jnp.ones((5,))  # no latency anywhere
    signal, kept_force, new_last = sharpa_observation.tactile_step(
        force, prev, last, fresh, fresh, cfg
    )
    np.testing.assert_allclose(signal, [0.0, 1.0, 2.0, 4.0, 1.0])  # clip 4 N, mean with the last
    np.testing.assert_allclose(kept_force, [0.0, 1.0, 3.0, 4.0, 2.0])
    np.testing.assert_allclose(new_last, signal)
    lagging = jnp.array([0.0, 1.0, 1.0, 1.0, 1.0])  # channel 0 keeps its last value
    signal, _, _ = sharpa_observation.tactile_step(force, prev, last, lagging, fresh, cfg)
    np.testing.assert_allclose(signal, [7.0, 1.0, 2.0, 4.0, 1.0])


def test_rotation_reward_is_the_angular_velocity_about_z() -> None:
    angle = 0.01
    quat = jnp.array([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)], jnp.float32)
    axis_angle = np.asarray(sharpa_reward.quat_to_axis_angle(quat))
    np.testing.assert_allclose(axis_angle, [0.0, 0.0, angle], rtol=1e-4)
    np.testing.assert_allclose(sharpa_reward.quat_to_axis_angle(-quat), axis_angle, rtol=1e-4)
    zeros = jnp.zeros((22,), jnp.float32)
    terms = sharpa_reward.reward_terms(
        pos=jnp.array(HOME_OBJECT, jnp.float32),
        quat=quat,
        prev_pos=jnp.array(HOME_OBJECT, jnp.float32),
        prev_quat=jnp.array([1.0, 0.0, 0.0, 0.0], jnp.float32),
        q=zeros,
        qdot=zeros,
        targets=zeros,
        kp=zeros,
        kd=zeros,
        default_pose=zeros,
        anchor=jnp.array(HOME_OBJECT, jnp.float32),
        rot_axis=jnp.array([0.0, 0.0, 1.0], jnp.float32),
        angvel_clip=(-0.5, 0.5),
        dt=0.05,
    )
    assert float(terms["rotate"]) == pytest.approx(0.2, rel=1e-3)
    assert float(terms["object_pos"]) == pytest.approx(1000.0)


@pytest.mark.parametrize("scale", [0.8, 1.5])
def test_scale_fields_make_the_model_mujoco_compiles_at_that_scale(scale: float) -> None:
    """The reference compiles one model per object scale from the scaled geom; ours swaps
    ``object_scale_fields`` into one model and lets ``mj_setConst`` derive the rest, as the C
    MuJoCo backend does after every change: every field of the two models must agree, the
    object body's bounding-volume box (which the collision midphase culls with) among them."""
    model = build_sharpa_model()
    compiled = build_sharpa_model(object_scale=scale)
    ours = copy.copy(model)
    for name, value in object_scale_fields(model, scale).items():
        getattr(ours, name)[...] = value
    body = model.body("object").id
    box = slice(model.body_bvhadr[body], model.body_bvhadr[body] + model.body_bvhnum[body])
    assert not np.allclose(ours.bvh_aabb[box], compiled.bvh_aabb[box])  # until mj_setConst
    mujoco.mj_setConst(ours, mujoco.MjData(ours))
    differ = []
    for name in dir(compiled):
        value = getattr(compiled, name)
        if name.startswith("_") or not isinstance(value, np.ndarray):
            continue
        if not np.allclose(getattr(ours, name), value, rtol=1e-9, atol=1e-12):
            differ.append(name)
    assert differ == []


# --------------------------------------------------------------------------- C MuJoCo steps
def test_steps_on_c_mujoco(tmp_path: Path) -> None:
    for scale in (0.8, 1.0):
        np.save(tmp_path / f"g_{scale:g}.npy", grasp_rows())
    override = {"grasp_cache_path": str(tmp_path / "g"), "scale_list": (0.8, 1.0)}
    env = make(NAME, 4, sim_backend="mujoco", env_cfg_override=override, seed=3, nthread=1)
    try:
        assert env.action_space.shape == (22,)
        state = env.init_state()
        assert state.obs["obs"].shape == (4, 147) and state.obs["critic"].shape == (4, 156)
        np.testing.assert_array_equal(state.obs["critic"][:, :147], state.obs["obs"])
        scale_ids = np.asarray(env.task_state["scale_id"]).copy()
        rng = np.random.default_rng(0)
        ended = np.zeros(4, bool)
        for _ in range(4):
            state = env.step(rng.uniform(-1, 1, (4, 22)).astype(np.float32))
            assert np.all(np.isfinite(state.reward))
            components = state.info["components"]
            assert set(components) == {f"reward/{t}" for t in sharpa_reward.REWARD_TERMS}
            total = sum(components.values())
            np.testing.assert_allclose(total, state.reward, rtol=1e-5, atol=1e-7)
            ended |= state.terminated
        # The home pose holds nothing: the object leaves its band and the env resets.
        assert ended.any()
        np.testing.assert_array_equal(env.task_state["scale_id"], scale_ids)  # kept
        z = env.batch.qpos[:, 24]
        band = np.asarray(env.task_state["height_band"])
        assert np.all((z >= band[:, 0] - 0.05) & (z <= band[:, 1] + 0.05))
    finally:
        env.close()


def _data(qpos: jax.Array, qvel: jax.Array, task: SharpaInhandRotation) -> object:
    """A stand-in physics view: the fields the task reads."""

    class View:
        pass

    view = View()
    view.qpos, view.qvel = qpos, qvel
    view.sensordata = jnp.zeros((task.model.nsensordata,), jnp.float32)
    return view


# --------------------------------------------------------------------------- grasp collection
def test_collection_resumes_from_the_rows_written(tmp_path: Path) -> None:
    from unilab_jax.envs.manipulation import sharpa_grasps

    np.save(tmp_path / "g_0.8.npy", grasp_rows(3))
    lines: list[str] = []
    path = sharpa_grasps.collect_grasps(0.8, 3, tmp_path / "g", progress=lines.append)
    assert path == tmp_path / "g_0.8.npy" and "3 grasps already" in lines[0]
    with pytest.raises(ValueError, match="one scale"):
        sharpa_grasps.GraspCollectionConfig(scale_list=(0.8, 1.0))


def test_collection_finds_a_stable_grasp(tmp_path: Path) -> None:
    from unilab_jax.envs.manipulation import sharpa_grasps

    lines: list[str] = []
    path = sharpa_grasps.collect_grasps(
        1.0, 1, tmp_path / "g", num_envs=8, nthread=1, save_every=1, progress=lines.append
    )
    rows = np.load(path)
    assert rows.shape == (1, 29) and rows.dtype == np.float32 and "1/1 grasps" in lines[-1]
    # Held: near the home pose, upright (within 30 degrees), in the height band.
    assert 0.61406 <= rows[0, 24] <= 0.62406
    assert 2.0 * math.degrees(math.acos(min(1.0, abs(float(rows[0, 25]))))) < 30.0
    # A stable grasp loads as a cache and the rotation task starts from it.
    caches = load_grasp_caches(tmp_path / "g", (1.0,))
    np.testing.assert_array_equal(caches.rows[0], rows)


def test_grasp_command(tmp_path: Path, capsys) -> None:
    from unilab_jax.cli import main

    np.save(tmp_path / "g_0.8.npy", grasp_rows(2))
    argv = ["sharpa-grasps", "--cache-path", str(tmp_path / "g"), "--scales", "0.8"]
    assert main([*argv, "--target", "2"]) == 0  # already there: nothing to collect
    assert "g_0.8.npy" in capsys.readouterr().out
    assert main([*argv, "--target", "0"]) == 2


def test_a_c_mujoco_run_reads_the_task_without_mjx(tmp_path: Path) -> None:
    """``load(..., physics="mujoco")``: the description the trainer and the facade read (sizes,
    the task), no MJX physics; its reset refuses in the one line."""
    from unilab.algos.torch.offpolicy.settings import env_dims
    from unilab_jax.envs.mujoco_task_env import MujocoTaskEnv

    np.save(tmp_path / "g_1.npy", grasp_rows())
    override = {"grasp_cache_path": str(tmp_path / "g"), "scale_list": (1.0,)}
    env = registry.load(NAME, override, physics="mujoco")
    assert isinstance(env, MujocoTaskEnv) and isinstance(env.task, SharpaInhandRotation)
    assert env.obs_size == {"obs": 147, "critic": 156} and env.action_size == 22
    with pytest.raises(ConfigError, match="C MuJoCo only"):
        env.reset(jax.random.PRNGKey(0))
    assert env_dims(NAME, override) == (147, 22, 156)
    assert type(registry.load("PendulumSwingup", physics="mujoco")).__name__ == "Env"
