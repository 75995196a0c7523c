"""Tests for the G1WalkFlat task (Unitree G1 humanoid, model from the ``mjlab`` package).

Compiling the G1 step is expensive (tens of seconds on CPU), so one ``jit(vmap(reset))`` and one
``jit(vmap(step))`` at ``BATCH`` envs are built per module and shared by every test, including
the MJX-vs-C-MuJoCo comparison (which steps C MuJoCo from the state the compiled step started
from).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        importlib.util.find_spec("mjlab") is None,
        reason="the G1 model ships with mjlab: pip install --no-deps mjlab==1.6.0",
    ),
]

BATCH = 8


@dataclasses.dataclass
class Compiled:
    env: object
    reset: object
    step: object

    def initial(self, seed: int = 0):
        return self.reset(jax.random.split(jax.random.PRNGKey(seed), BATCH))


@pytest.fixture(scope="module")
def g1() -> Compiled:
    from unilab_jax.envs.base import Env
    from unilab_jax.envs.robots.g1 import G1WalkFlat

    env = Env(G1WalkFlat(), name="G1WalkFlat")
    return Compiled(env, jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))


def _finite(tree: object) -> bool:
    return all(
        bool(jnp.all(jnp.isfinite(x)))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.floating)
    )


def test_sizes_and_model(g1: Compiled) -> None:
    env = g1.env
    assert env.action_size == 29
    assert env.obs_size == {"obs": 98, "critic": 101}
    assert env.episode_length == 1000
    assert env.task.control_dt == pytest.approx(0.02)
    lo, hi = env.reward_bounds
    assert lo < 0 < hi
    model = env.task.model
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    # Only the foot spheres and the floor can collide.
    colliding = [
        model.geom(i).name
        for i in range(model.ngeom)
        if model.geom_contype[i] or model.geom_conaffinity[i]
    ]
    assert "floor" in colliding
    assert all(n == "floor" or "_foot_sphere" in n for n in colliding)
    # Position actuators whose ctrlrange is the joint range.
    np.testing.assert_allclose(model.actuator_ctrlrange, model.jnt_range[1:])


def test_reset_is_standing_and_obs_layout(g1: Compiled) -> None:
    state = g1.initial()
    assert state.obs["obs"].shape == (BATCH, 98) and state.obs["critic"].shape == (BATCH, 101)
    obs = np.asarray(state.obs["obs"])
    np.testing.assert_allclose(obs[:, 3:6], np.tile([0.0, 0.0, -1.0], (BATCH, 1)), atol=1e-5)
    assert np.abs(obs[:, 6:35]).max() <= 0.05 + 1e-6  # joint noise around the default pose
    np.testing.assert_array_equal(obs[:, 93:96], np.asarray(state.task_state["command"]))
    np.testing.assert_allclose(np.sum(obs[:, 96:98] ** 2, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(state.obs["critic"][:, :98], obs)
    assert 0.7 < float(state.physics.qpos[0, 2]) < 0.85
    assert all(k.startswith("reward/") for k in state.metrics)
    expected = {
        "tracking_lin_vel",
        "tracking_ang_vel",
        "alive",
        "feet_phase",
        "lin_vel_z",
        "ang_vel_xy",
        "orientation",
        "action_rate",
        "joint_deviation",
    }
    assert {k.removeprefix("reward/") for k in state.metrics} == expected


def test_random_actions_stay_finite(g1: Compiled) -> None:
    """200 uniform-random steps: finite, and no blow-up short of NaN either (with 1 Newton
    iteration MJX reached joint speeds of 650 rad/s and step rewards of -2626 here; with 3
    the worst of 128 envs x 300 steps was 61 rad/s and -8.4)."""
    state = g1.initial(seed=1)
    key = jax.random.PRNGKey(2)
    top_speed, low_reward = 0.0, 0.0
    for _ in range(200):
        key, k = jax.random.split(key)
        state = g1.step(state, jax.random.uniform(k, (BATCH, 29), minval=-1.0, maxval=1.0))
        assert _finite(state.obs) and _finite(state.reward)
        top_speed = max(top_speed, float(jnp.abs(state.physics.qvel).max()))
        low_reward = min(low_reward, float(state.reward.min()))
    assert top_speed < 150.0 and low_reward > -20.0, (top_speed, low_reward)
    assert _finite(state)
    assert set(state.metrics) >= {"reward/tracking_lin_vel", "reward/alive"}
    for v in state.metrics.values():
        assert v.shape == (BATCH,)
    np.testing.assert_allclose(
        np.asarray(sum(state.metrics.values())), np.asarray(state.reward), rtol=1e-5, atol=1e-5
    )


def test_fall_terminates(g1: Compiled) -> None:
    state = g1.initial(seed=3)
    # Lay the robot on its side (90 degrees about x), well above the floor.
    quat = jnp.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0])
    qpos = state.physics.qpos.at[:, 3:7].set(quat)
    state = state.replace(physics=state.physics.replace(qpos=qpos))
    ended = g1.step(state, jnp.zeros((BATCH, 29)))
    assert bool(jnp.all(ended.terminated)) and not bool(jnp.any(ended.truncated))
    assert not bool(jnp.any(ended.step_count))  # reset into a fresh standing episode
    # The final observation shows the fallen robot: gravity along the body's y axis.
    assert float(jnp.min(jnp.abs(ended.final_obs["obs"][:, 4]))) > 0.8
    np.testing.assert_allclose(
        ended.obs["obs"][:, 3:6], np.tile([0, 0, -1.0], (BATCH, 1)), atol=1e-5
    )

    # Pelvis below 0.5 m terminates too (checked on the pure function: stepping from there would
    # push the feet deep into the floor).
    upright = g1.initial(seed=4)
    terminated = jax.jit(jax.vmap(g1.env.task.terminated))
    assert not bool(jnp.any(terminated(upright.physics, upright.task_state)))
    low = upright.physics.replace(qpos=upright.physics.qpos.at[:, 2].set(0.45))
    assert bool(jnp.all(terminated(low, upright.task_state)))


def test_standing_earns_less_than_tracking(g1: Compiled) -> None:
    state = g1.initial(seed=5)
    task = g1.env.task
    command = state.task_state["command"]
    reward = jax.jit(jax.vmap(task.reward))
    zeros = jnp.zeros((BATCH, 29))
    standing, _ = reward(state.physics, zeros, state.task_state)
    # The same standing pose moving exactly as commanded (upright, so body frame == world).
    qvel = state.physics.qvel.at[:, 0:2].set(command[:, :2]).at[:, 5].set(command[:, 2])
    tracking, parts = reward(state.physics.replace(qvel=qvel), zeros, state.task_state)
    assert bool(jnp.all(standing > 0.0))
    assert bool(jnp.all(tracking > standing))
    np.testing.assert_allclose(parts["tracking_lin_vel"], task.config.w_tracking_lin_vel, rtol=1e-5)


def test_mjx_matches_c_mujoco_one_step(g1: Compiled) -> None:
    """One control step (5 substeps) from the same state: MJX (float32) vs C MuJoCo (float64)."""
    task = g1.env.task
    state = g1.initial(seed=6)
    # Settle a few steps so contacts and the solver warm start are active.
    for _ in range(5):
        state = g1.step(state, jnp.zeros((BATCH, 29)))
    action = jax.random.uniform(jax.random.PRNGKey(7), (BATCH, 29), minval=-0.5, maxval=0.5)
    after = g1.step(state, action)
    assert not bool(jnp.any(after.terminated | after.truncated))

    model = task.model
    data = mujoco.MjData(model)
    ctrl = np.asarray(jax.vmap(task.ctrl_from_action)(action, state.task_state))
    qpos_err, qvel_err = np.zeros(BATCH), np.zeros(BATCH)
    for i in range(BATCH):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = np.asarray(state.physics.qpos[i])
        data.qvel[:] = np.asarray(state.physics.qvel[i])
        data.qacc_warmstart[:] = np.asarray(state.physics.qacc_warmstart[i])
        data.ctrl[:] = ctrl[i]
        mujoco.mj_step(model, data, nstep=task.n_frames)
        qpos_err[i] = np.abs(data.qpos - np.asarray(after.physics.qpos[i])).max()
        qvel_err[i] = np.abs(data.qvel - np.asarray(after.physics.qvel[i])).max()
    print(f"MJX vs C one control step per env: |dqpos| {qpos_err}, |dqvel| {qvel_err}")
    # Measured: most envs agree to ~1e-6 in qpos and ~1e-4 in qvel (float32 vs float64); an env
    # whose foot sphere sits at the contact boundary can switch contact in one backend only,
    # which gave 1.5e-4 / 1.4e-2 for one env of 8. Bound the typical and the worst env.
    assert np.median(qpos_err) < 1e-5 and np.median(qvel_err) < 2e-3, (qpos_err, qvel_err)
    assert qpos_err.max() < 2e-3 and qvel_err.max() < 0.2, (qpos_err, qvel_err)


def test_c_mujoco_backend_runs(g1: Compiled) -> None:
    from unilab_jax.envs.vec_env import MujocoVecEnv

    venv = MujocoVecEnv(g1.env.task, "G1WalkFlat", num_envs=4, seed=0, nthread=1)
    try:
        state = venv.init_state(stagger=False)
        assert state.obs["obs"].shape == (4, 98) and state.obs["critic"].shape == (4, 101)
        rng = np.random.default_rng(0)
        for _ in range(20):
            actions = rng.uniform(-0.5, 0.5, (4, 29)).astype(np.float32)
            state = venv.step(actions)  # raises FloatingPointError if the physics diverged
            assert np.isfinite(state.reward).all() and np.isfinite(state.obs["critic"]).all()
        assert {k for k in state.info["log"]} >= {"reward/tracking_lin_vel", "reward/feet_phase"}
    finally:
        venv.close()
