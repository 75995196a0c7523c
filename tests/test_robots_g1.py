"""Smoke tests of the G1WalkFlat task (the reference's G1, model from the ``mjlab`` package):
sizes, a reset, random-action rollouts on both backends (on C MuJoCo G1WalkRough's too),
termination, the penalty curriculum's batch carry. Agreement with the reference itself is
``tests/test_reference_g1.py``.

The MJX step is the one compiled program ``tests/g1_mjx.py`` shares with the golden tests (the
persistent compile cache); the long rollout runs on C MuJoCo, whose steps cost milliseconds.
"""

from __future__ import annotations

import importlib.util
import math

import g1_mjx  # tests/g1_mjx.py
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        importlib.util.find_spec("mjlab") is None,
        reason="the G1 model ships with mjlab: pip install --no-deps mjlab==1.6.0",
    ),
]

NUM_ENVS = g1_mjx.BATCH


@pytest.fixture(scope="module")
def env():
    return g1_mjx.shared()[0]


@pytest.fixture(scope="module")
def mjx_rollout(env):
    """MJX: a batch reset through the step's own reset path, then 3 random-action steps."""
    step = g1_mjx.shared()[1]
    reset = step(g1_mjx.fresh_states(env, jax.random.PRNGKey(0)), jnp.zeros((NUM_ENVS, 29)))
    states, state = [reset], reset
    for k in jax.random.split(jax.random.PRNGKey(1), 3):
        state = step(state, jax.random.uniform(k, (NUM_ENVS, 29), minval=-1.0, maxval=1.0))
        states.append(state)
    return states


def _terms_sum(metrics: dict) -> np.ndarray:
    return sum(np.asarray(v) for k, v in metrics.items() if k != "reward/penalty_scale")


def test_sizes_and_spec(env):
    from unilab_jax.envs.robots.g1 import REWARD_TERMS

    task = env.task
    assert env.action_size == 29 and env.episode_length == 1000
    assert task.control_dt == pytest.approx(0.02) and task.n_frames == 3
    model = task.model
    assert (model.nq, model.nv, model.nu, model.ngeom, model.nsensordata) == (36, 35, 29, 42, 49)
    shapes = jax.eval_shape(lambda: g1_mjx.fresh_states(env, jax.random.PRNGKey(0)))
    assert {k: v.shape[-1] for k, v in shapes.obs.items()} == {"obs": 98, "critic": 101}
    assert set(shapes.metrics) == {f"reward/{t}" for t in (*REWARD_TERMS, "penalty_scale")}
    lo, hi = env.reward_bounds
    # The reward is at most 0.02 x (2 + 1.5 + 5 + 10) = 0.37.
    assert lo < 0.0 and 0.37 < hi < 0.5
    assert task.mirror is not None and task.mirror.obs.size == 98


def test_mjx_reset_stands_upright_with_its_episode_draws(env, mjx_rollout):
    reset = mjx_rollout[0]
    assert bool(jnp.all(reset.truncated)) and not bool(jnp.any(reset.step_count))
    obs, critic = np.asarray(reset.obs["obs"]), np.asarray(reset.obs["critic"])
    ts = reset.task_state
    # Upright torso: minus its z axis is (0, 0, -1); joints at the stand pose up to noise.
    np.testing.assert_allclose(obs[:, 3:6], np.tile([0.0, 0.0, -1.0], (NUM_ENVS, 1)), atol=2e-3)
    np.testing.assert_allclose(critic[:, 6:35], 0.0, atol=1e-6)
    assert np.abs(obs[:, 6:35]).max() <= 0.01 + 1e-6
    np.testing.assert_array_equal(obs[:, 64:93], 0.0)  # no action yet
    np.testing.assert_array_equal(obs[:, 93:96], np.asarray(ts["command"]))
    np.testing.assert_array_equal(obs[:, 96:98], np.asarray(ts["gait_phase"]))
    np.testing.assert_allclose(obs[:, 97] - obs[:, 96], math.pi, atol=1e-6)
    # The reset's base velocity U(-0.5, 0.5) shows in the pelvis IMU's velocity (x 2).
    assert 0.0 < np.abs(critic[:, 98:]).max() < 2.0 * (0.5 * math.sqrt(3) + 0.5 * 0.1) + 0.1
    np.testing.assert_allclose(np.asarray(reset.physics.qpos[:, 2]), 0.754, atol=1e-6)
    # Per-episode gains in the task state, one multiplier per env.
    kp = (
        np.asarray(ts["model"]["actuator_gainprm"][:, :, 0]) / env.task.model.actuator_gainprm[:, 0]
    )
    assert np.all((kp > 0.9 - 1e-6) & (kp < 1.1 + 1e-6)) and np.ptp(kp, axis=1).max() < 1e-6
    np.testing.assert_array_equal(ts["penalty_scale"], 0.5)


def test_mjx_random_actions_stay_finite_and_the_terms_sum_to_the_reward(mjx_rollout):
    for state in mjx_rollout[1:]:
        for leaf in jax.tree.leaves((state.obs, state.reward, state.physics.qpos)):
            assert bool(jnp.all(jnp.isfinite(leaf)))
        np.testing.assert_allclose(_terms_sum(state.metrics), state.reward, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(state.metrics["reward/penalty_scale"], 0.5)
        assert bool(jnp.all(state.reward < 0.37))


@pytest.fixture(scope="module", params=["G1WalkFlat", "G1WalkRough"])
def c_rollout(request):
    """C MuJoCo: 8 envs, 150 steps of +-1 random actions (falls: episodes end and reset), on
    both floors."""
    from unilab_jax.envs import make

    venv = make(request.param, NUM_ENVS, sim_backend="mujoco", nthread=1)
    rng = np.random.default_rng(0)
    steps = []
    try:
        venv.init_state(seed=0, stagger=False)
        for _ in range(150):
            action = rng.uniform(-1.0, 1.0, (NUM_ENVS, 29)).astype(np.float32)
            out = venv.step(action)
            steps.append(
                (out, venv.state.info["episode_step"].copy(), venv.snapshot()["task_state"])
            )
    finally:
        venv.close()
    return steps


def test_c_mujoco_random_actions_fall_reset_and_stay_finite(c_rollout):
    ended = 0
    for out, _, _ in c_rollout:
        assert np.isfinite(out.reward).all() and np.isfinite(out.obs["critic"]).all()
        assert np.isfinite(out.final_observation["critic"]).all()
        components = {k: v for k, v in out.info["components"].items()}
        np.testing.assert_allclose(_terms_sum(components), out.reward, rtol=1e-5, atol=1e-6)
        done = out.terminated | out.truncated
        ended += int(done.sum())
        if done.any():
            # A fresh episode: no action yet in its observation, the final one kept apart.
            np.testing.assert_array_equal(out.obs["obs"][done, 64:93], 0.0)
            assert np.abs(out.final_observation["obs"][done, 64:93]).max() > 0.0
    assert ended >= NUM_ENVS  # +-1 actions topple the robot within a few seconds


def test_curriculum_carry_survives_resets_and_follows_the_terminations(c_rollout):
    """One scale and mean length for the batch, kept across automatic resets; with 8 envs the
    window is 1 episode, so the mean is that of the last step's terminated episodes."""
    mean = 0.0
    lengths = np.zeros(NUM_ENVS, int)
    for out, _, task_state in c_rollout:
        lengths += 1
        if out.terminated.any():
            mean = float(lengths[out.terminated].mean())
        lengths[out.terminated | out.truncated] = 0
        scale = np.asarray(task_state["penalty_scale"])
        np.testing.assert_allclose(np.asarray(task_state["mean_episode_length"]), mean)
        # Short episodes (< 150 steps) shrink the scale, clipped at its minimum 0.5.
        np.testing.assert_array_equal(scale, 0.5)


def test_fall_and_low_pelvis_terminate(env):
    """The termination rule on states set by hand (C MuJoCo's forward pass for the sensors)."""
    from unilab_jax.envs.mujoco_backend import PhysicsView

    task = env.task
    model, data = task.model, mujoco.MjData(task.model)
    terminated = jax.jit(task.terminated)

    def flags(qpos: np.ndarray) -> bool:
        data.qpos[:] = qpos
        mujoco.mj_forward(model, data)
        view = PhysicsView(
            {
                "qpos": jnp.asarray(data.qpos, jnp.float32),
                "qvel": jnp.asarray(data.qvel, jnp.float32),
                "sensordata": jnp.asarray(data.sensordata, jnp.float32),
            }
        )
        return bool(terminated(view, {}))

    stand = model.key_qpos[0].copy()
    assert not flags(stand)
    for degrees, ends in ((60.0, False), (70.0, True)):  # pitched about y: tilt limit 65
        tilted = stand.copy()
        tilted[3:7] = [
            math.cos(math.radians(degrees) / 2),
            0.0,
            math.sin(math.radians(degrees) / 2),
            0.0,
        ]
        assert flags(tilted) == ends, degrees
    low = stand.copy()
    low[2] = 0.29
    assert flags(low)
