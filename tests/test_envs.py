"""Tests for unilab_jax.envs on real MJX physics.

Compilation dominates the cost, so every task is loaded once per module with a short episode
(``episode_length`` = 6, which exercises automatic resets within a few steps) and its
``jit(vmap(reset))`` / ``jit(vmap(step))`` are shared by all tests. Longer rollouts reuse the same
compiled step and rewind ``step_count`` to 0 before each call, which keeps one episode running
without a recompile for a different ``episode_length``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.envs import Env, EnvState, UnknownEnvError, load, registered_names
from unilab_jax.envs.robots import ROBOT_TASKS

BATCH = 8
SHORT_EPISODE = 6
EXPECTED_SIZES = {
    "PendulumSwingup": (1, {"obs": 3, "critic": 3}),
    "CartpoleBalance": (1, {"obs": 5, "critic": 6}),
    "CheetahRun": (6, {"obs": 17, "critic": 19}),
}

# Robot tasks have their own smoke tests (tests/test_robots_*.py), one compile per model.
SMOKE_NAMES = [name for name in registered_names() if name not in ROBOT_TASKS]


@dataclasses.dataclass
class Compiled:
    env: Env
    reset: object
    step: object

    def random_actions(self, key: jax.Array) -> jax.Array:
        shape = (BATCH, self.env.action_size)
        return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)

    def step_no_truncation(self, state: EnvState, action: jax.Array) -> EnvState:
        """Step with step_count rewound so the time limit cannot end the episode."""
        return self.step(state.replace(step_count=jnp.zeros_like(state.step_count)), action)


_CACHE: dict[str, Compiled] = {}


def compiled(name: str) -> Compiled:
    if name not in _CACHE:
        env = load(name, config_override={"episode_length": SHORT_EPISODE})
        _CACHE[name] = Compiled(env, jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))
    return _CACHE[name]


def initial_state(c: Compiled, seed: int = 0) -> EnvState:
    return c.reset(jax.random.split(jax.random.PRNGKey(seed), BATCH))


def assert_finite(tree: object) -> None:
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite value in state"


@pytest.mark.parametrize("name", SMOKE_NAMES)
def test_smoke_reset_step_autoreset(name: str) -> None:
    c = compiled(name)
    env = c.env
    action_size, sizes = EXPECTED_SIZES[name]
    assert env.name == name
    assert env.action_size == action_size
    assert env.obs_size == sizes
    assert env.episode_length == SHORT_EPISODE
    assert env.reward_bounds is not None and env.reward_bounds[0] < 0 < env.reward_bounds[1]

    state = initial_state(c)
    structure = jax.tree.structure(state)
    for group, size in sizes.items():
        assert state.obs[group].shape == (BATCH, size)
        assert state.obs[group].dtype == jnp.float32
    assert state.reward.dtype == jnp.float32 and state.reward.shape == (BATCH,)
    assert state.terminated.dtype == jnp.bool_ and state.truncated.dtype == jnp.bool_
    assert state.step_count.dtype == jnp.int32
    assert not bool(jnp.any(state.step_count))
    assert all(k.startswith("reward/") for k in state.metrics)
    assert all(not bool(jnp.any(v)) for v in state.metrics.values())
    assert_finite(state)

    key = jax.random.PRNGKey(1)
    for t in range(1, 2 * SHORT_EPISODE + 2):
        key, k_act = jax.random.split(key)
        prev = state
        state = c.step(state, c.random_actions(k_act))
        assert jax.tree.structure(state) == structure
        assert_finite(state)
        for group, size in sizes.items():
            assert state.obs[group].shape == (BATCH, size)
        reward = np.asarray(state.reward)
        assert np.all(reward >= -0.1 - 1e-5) and np.all(reward <= 1.0 + 1e-5)
        changed = np.any(np.asarray(state.key) != np.asarray(prev.key), axis=-1)
        assert changed.all(), "the PRNG key must advance"
        done = np.asarray(state.terminated | state.truncated)
        # Without termination every env truncates exactly at the episode length.
        if name != "CartpoleBalance":
            assert not bool(jnp.any(state.terminated))
            assert bool(jnp.all(state.truncated == (t % SHORT_EPISODE == 0)))
        expected_count = np.where(done, 0, np.asarray(prev.step_count) + 1)
        np.testing.assert_array_equal(np.asarray(state.step_count), expected_count)
        for group in sizes:
            # final_obs differs from obs only where the episode ended.
            same = np.asarray(state.final_obs[group] == state.obs[group]).all(axis=-1)
            assert np.all(same[~done])


@pytest.mark.parametrize("name", ["PendulumSwingup", "CheetahRun"])
def test_final_obs_is_pre_reset_observation(name: str) -> None:
    c = compiled(name)
    state = initial_state(c, seed=3)
    actions = c.random_actions(jax.random.PRNGKey(4))
    for _ in range(SHORT_EPISODE - 1):
        state = c.step(state, actions)
    assert bool(jnp.all(state.step_count == SHORT_EPISODE - 1))

    ended = c.step(state, actions)
    # Reference: the same transition (same physics, action and key) with the step count rewound,
    # so no reset happens and obs is exactly what the step computed.
    reference = c.step_no_truncation(state, actions)
    assert bool(jnp.all(ended.truncated)) and not bool(jnp.any(reference.truncated))
    for group in ended.obs:
        np.testing.assert_array_equal(ended.final_obs[group], reference.obs[group])
        np.testing.assert_array_equal(reference.final_obs[group], reference.obs[group])
    np.testing.assert_array_equal(ended.reward, reference.reward)
    for k in ended.metrics:
        np.testing.assert_array_equal(ended.metrics[k], reference.metrics[k])

    # The new obs is a fresh episode, exactly reset() of the reset part of the split key.
    assert not bool(jnp.any(ended.step_count))
    k_reset = jax.vmap(lambda k: jax.random.split(k, 3)[1])(state.key)
    fresh = c.reset(k_reset)
    np.testing.assert_array_equal(ended.physics.qpos, fresh.physics.qpos)
    for group in ended.obs:
        np.testing.assert_array_equal(ended.obs[group], fresh.obs[group])
        assert not np.allclose(ended.obs[group], ended.final_obs[group])
    np.testing.assert_allclose(ended.physics.time, 0.0)


def test_cartpole_push_terminates_not_truncates() -> None:
    c = compiled("CartpoleBalance")
    state = initial_state(c, seed=5)
    push = jnp.ones((BATCH, 1))
    ended = np.zeros(BATCH, bool)
    for _ in range(200):
        state = c.step_no_truncation(state, push)
        term = np.asarray(state.terminated)
        assert not bool(jnp.any(state.truncated))
        newly = term & ~ended
        if newly.any():
            # The ended step shows the fallen pole (|theta| > 0.4) in the critic's raw angle.
            theta = np.asarray(state.final_obs["critic"][:, 5])
            x = np.asarray(state.final_obs["obs"][:, 0])
            assert np.all((np.abs(theta[newly]) > 0.4) | (np.abs(x[newly]) > 2.4))
            assert np.all(np.asarray(state.step_count)[newly] == 0)
            assert np.all(np.abs(np.asarray(state.obs["critic"][:, 5])[newly]) <= 0.05 + 1e-6)
        ended |= term
        if ended.all():
            break
    assert ended.all(), "a constant full push must topple every pole"


def test_pendulum_controller_beats_random() -> None:
    c = compiled("PendulumSwingup")

    def controller(obs: np.ndarray) -> np.ndarray:
        cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
        theta = np.arctan2(sin, cos)
        # Energy pumping towards the upright energy m g l (I = m l^2 = 1), PD near the top.
        energy = 0.5 * vel**2 + 9.81 * cos
        pump = np.clip(2.0 * (9.81 - energy) * vel, -1.0, 1.0)
        pd = np.clip(-(10.0 * theta + 3.0 * vel) / 2.0, -1.0, 1.0)
        return np.where(cos > 0.9, pd, pump)[:, None].astype(np.float32)

    episode = 200  # the task's default episode length
    returns = {}
    for policy in ("random", "controller"):
        state = initial_state(c, seed=7)
        key = jax.random.PRNGKey(8)
        total = np.zeros(BATCH)
        for _ in range(episode):
            key, k_act = jax.random.split(key)
            if policy == "random":
                action = c.random_actions(k_act)
            else:
                action = controller(np.asarray(state.obs["obs"]))
            state = c.step_no_truncation(state, action)
            total += np.asarray(state.reward)
        returns[policy] = total.mean()
    assert returns["controller"] > 140.0, returns
    assert returns["controller"] > returns["random"] + 60.0, returns


def test_cheetah_random_actions_stay_finite_for_1000_steps() -> None:
    c = compiled("CheetahRun")
    state = initial_state(c, seed=9)
    key = jax.random.PRNGKey(10)
    for _ in range(1000):
        key, k_act = jax.random.split(key)
        state = c.step_no_truncation(state, c.random_actions(k_act))
        # The divergence safety net would report terminated; it must never fire.
        assert not bool(jnp.any(state.terminated))
    assert_finite(state)
    qvel = np.asarray(state.physics.qvel)
    assert np.abs(qvel).max() < 100.0
    torso_height = np.asarray(state.obs["critic"][:, -1])
    assert np.all(torso_height > 0.0) and np.all(torso_height < 2.0)


def test_unknown_name_lists_registered_names() -> None:
    with pytest.raises(UnknownEnvError) as info:
        load("NoSuchTask")
    assert isinstance(info.value, ValueError)
    for name in ("PendulumSwingup", "CartpoleBalance", "CheetahRun"):
        assert name in str(info.value)
    assert set(registered_names()) >= {"PendulumSwingup", "CartpoleBalance", "CheetahRun"}


def test_bad_override_field_names_valid_fields() -> None:
    with pytest.raises(ValueError, match="episode_length") as info:
        load("PendulumSwingup", config_override={"episode_lenght": 10})
    assert "episode_lenght" in str(info.value)


def test_override_applies_to_model() -> None:
    env = load("PendulumSwingup", config_override={"max_torque": 3.0, "episode_length": 50})
    assert env.episode_length == 50
    assert env.task.model.actuator_gear[0, 0] == pytest.approx(3.0)
    assert env.task.control_dt == pytest.approx(0.05)
