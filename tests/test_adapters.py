"""MuJoCo Playground and Brax envs through our Env API (``unilab_jax.envs.adapters``).

One cheap env per source: ``playground/CartpoleBalance`` and ``brax/inverted_pendulum`` (the
Brax env whose termination fires within a few random steps, so the terminated path is covered
too). Each is loaded once per module with a short episode and its ``jit(vmap(reset))`` /
``jit(vmap(step))`` are shared; one short training run per source (SAC on Playground, TD3 on
Brax) goes through ``unilab_jax.trainer.train``.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.config import TrainConfig
from unilab_jax.envs import EnvState, UnknownEnvError, make
from unilab_jax.envs.adapters import adapter_names, load_adapter
from unilab_jax.trainer import resolve_algo_config

pytestmark = pytest.mark.timeout(600)

HAS_PLAYGROUND = importlib.util.find_spec("mujoco_playground") is not None
HAS_BRAX = importlib.util.find_spec("brax") is not None
needs_playground = pytest.mark.skipif(
    not HAS_PLAYGROUND, reason="MuJoCo Playground not installed (pip install playground==0.2.0)"
)
needs_brax = pytest.mark.skipif(not HAS_BRAX, reason="Brax not installed (pip install brax)")

BATCH = 8
SHORT_EPISODE = 6
ENVS = {
    # name: (skip marker, action_size, obs_size)
    "playground/CartpoleBalance": (needs_playground, 1, {"obs": 5, "critic": 5}),
    "brax/inverted_pendulum": (needs_brax, 1, {"obs": 4, "critic": 4}),
}
PARAMS = [pytest.param(name, marks=mark) for name, (mark, *_) in ENVS.items()]


@dataclasses.dataclass
class Compiled:
    env: object
    reset: object
    step: object


_CACHE: dict[str, Compiled] = {}


def compiled(name: str) -> Compiled:
    if name not in _CACHE:
        env = load_adapter(name, {"episode_length": SHORT_EPISODE})
        _CACHE[name] = Compiled(env, jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)))
    return _CACHE[name]


def random_actions(c: Compiled, key: jax.Array) -> jax.Array:
    """Full-range random actions in even envs, small ones in odd envs (so that a fragile
    task such as the inverted pendulum both terminates and reaches its time limit)."""
    actions = jax.random.uniform(key, (BATCH, c.env.action_size), minval=-1.0, maxval=1.0)
    scale = jnp.where(jnp.arange(BATCH) % 2 == 0, 1.0, 0.05)[:, None]
    return actions * scale


def assert_finite(tree: object) -> None:
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert bool(jnp.all(jnp.isfinite(leaf))), "non-finite value in state"


# --------------------------------------------------------------------------- names and errors
def test_other_names_are_not_adapters() -> None:
    assert load_adapter("CartpoleBalance", None) is None
    assert load_adapter("gym/Pendulum-v1", None) is None


@needs_playground
def test_playground_names_and_errors() -> None:
    names = adapter_names()
    assert "playground/CheetahRun" in names and "playground/CartpoleBalance" in names
    with pytest.raises(UnknownEnvError, match="playground/CheetahRun"):
        load_adapter("playground/NoSuchTask", None)
    with pytest.raises(ValueError, match="episode_length"):
        load_adapter("playground/CartpoleBalance", {"no_such_field": 1})
    env = load_adapter("playground/CartpoleBalance", {"episode_length": 7})
    assert env.episode_length == 7 and env.foreign._config.impl == "jax" and env.full_reset
    # CheetahRun's reset simulates 200 steps: it restarts from first states by default
    assert not load_adapter("playground/CheetahRun", None).full_reset
    # The value support follows the discount: at Brax's 0.99 it holds returns up to
    # 1 / (1 - 0.99) = 100 (rewards in [0, 1]); the gamma-0.97 support (-1, 40) would clip.
    sac = resolve_algo_config("sac", env, {"gamma": 0.99})
    assert (sac.v_min, sac.v_max) == (-3.0, 120.0)
    assert (resolve_algo_config("td3", env, None).v_max) == 40.0  # the default 0.97
    explicit = resolve_algo_config("sac", env, {"gamma": 0.99, "v_max": 50.0})
    assert (explicit.v_min, explicit.v_max) == (-3.0, 50.0)  # an explicit edge wins


@needs_brax
def test_brax_names_and_errors() -> None:
    names = adapter_names()
    assert "brax/ant" in names and "brax/halfcheetah" in names
    with pytest.raises(UnknownEnvError, match="brax/ant"):
        load_adapter("brax/no_such_env", None)
    assert load_adapter("brax/inverted_pendulum", None).episode_length == 1000


# --------------------------------------------------------------------------- env behaviour
@pytest.mark.parametrize("name", PARAMS)
def test_smoke_reset_step_time_limit(name: str) -> None:
    c = compiled(name)
    env = c.env
    _, action_size, sizes = ENVS[name]
    assert env.name == name
    assert env.action_size == action_size
    assert env.obs_size == sizes
    assert env.episode_length == SHORT_EPISODE

    state = c.reset(jax.random.split(jax.random.PRNGKey(0), BATCH))
    assert isinstance(state, EnvState)
    for group, size in sizes.items():
        assert state.obs[group].shape == (BATCH, size)
        assert state.obs[group].dtype == jnp.float32
    assert state.reward.shape == (BATCH,) and state.step_count.shape == (BATCH,)
    assert all(v.shape == (BATCH,) for v in state.metrics.values())
    assert all(k.startswith("reward/") for k in state.metrics)
    # reset and step produce the same pytree types (no second compile of a jitted step)
    keys = jax.random.split(jax.random.PRNGKey(0), BATCH)
    actions = jnp.zeros((BATCH, env.action_size))
    after_step, after_reset = jax.eval_shape(c.step, state, actions), jax.eval_shape(c.reset, keys)
    assert jax.tree.structure(after_step) == jax.tree.structure(after_reset)
    describe = lambda t: [(x.shape, x.dtype, x.weak_type) for x in jax.tree.leaves(t)]  # noqa: E731
    assert describe(after_step) == describe(after_reset)

    key = jax.random.PRNGKey(1)
    saw_truncation = saw_termination = False
    for _ in range(50):
        key, k = jax.random.split(key)
        prev = state
        actions = random_actions(c, k)
        state = c.step(prev, actions)
        assert_finite(state)
        done = np.asarray(state.terminated | state.truncated)
        # the time limit fires exactly at episode_length control steps (unless terminated)
        np.testing.assert_array_equal(
            np.asarray(state.truncated), np.asarray(prev.step_count) + 1 >= SHORT_EPISODE
        )
        np.testing.assert_array_equal(
            np.asarray(state.step_count), np.where(done, 0, np.asarray(prev.step_count) + 1)
        )
        ended = np.asarray(state.truncated & ~state.terminated)
        if ended.any():
            saw_truncation = True
            # final_obs is the true last observation: the same step without a time limit
            # (step_count rewound, same key) continues the episode from exactly that obs.
            cont = c.step(prev.replace(step_count=jnp.zeros_like(prev.step_count)), actions)
            for g in ("obs", "critic"):
                np.testing.assert_allclose(
                    np.asarray(state.final_obs[g])[ended], np.asarray(cont.obs[g])[ended]
                )
                assert not np.allclose(
                    np.asarray(state.obs[g])[ended], np.asarray(state.final_obs[g])[ended]
                )
        saw_termination |= bool(state.terminated.any())
        # envs that did not end keep obs == final_obs
        for g in ("obs", "critic"):
            np.testing.assert_array_equal(
                np.asarray(state.obs[g])[~done], np.asarray(state.final_obs[g])[~done]
            )
    assert saw_truncation
    if name == "brax/inverted_pendulum":
        assert saw_termination, "random actions should topple the pendulum within 6 steps"


@needs_playground
def test_restart_from_first_state_without_full_reset() -> None:
    """full_reset=False restarts each env from its first state (no reset while stepping)."""
    env = load_adapter("playground/CartpoleBalance", {"episode_length": 3, "full_reset": False})
    assert not env.full_reset
    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), BATCH))
    first_obs = np.asarray(state.obs["obs"])
    step = jax.jit(jax.vmap(env.step))
    actions = jnp.full((BATCH, env.action_size), 0.5)
    for i in range(1, 7):
        prev_obs = state.obs["obs"]
        state = step(state, actions)
        if i % 3:
            assert not state.truncated.any()
        else:
            assert state.truncated.all()
            np.testing.assert_array_equal(np.asarray(state.obs["obs"]), first_obs)
            assert not np.allclose(np.asarray(state.final_obs["obs"]), first_obs)
            assert not np.allclose(np.asarray(state.final_obs["obs"]), np.asarray(prev_obs))


# --------------------------------------------------------------------------- training
TRAIN = [
    pytest.param("playground/CartpoleBalance", "sac", marks=needs_playground),
    pytest.param("brax/inverted_pendulum", "td3", marks=needs_brax),
]


@pytest.mark.parametrize(("name", "algo"), TRAIN)
def test_short_training_run(name: str, algo: str) -> None:
    from unilab_jax.trainer import train

    config = TrainConfig(
        env=name,
        algo=algo,
        num_envs=8,
        replay_buffer_n=64,
        batch_size=32,
        updates_per_step=2,
        max_iterations=20,
        log_interval=10,
        save_interval=0,
        eval_envs=0,
        env_overrides={"episode_length": 10},
    )
    algo_config = {"actor_hidden_dim": 16, "critic_hidden_dim": 32, "num_atoms": 11}
    result = train(config, algo_config, quiet=True)
    assert result.summary["completed_iterations"] == 20
    assert result.summary["mean_episode_length"] is not None  # episodes ended and were counted
    learner = result.history[-1]["learner"]
    assert learner, "learning should have started"
    assert all(np.isfinite(v) for v in learner.values())
    assert any("loss" in k for k in learner)
    assert result.history[-1]["components"]


# --------------------------------------------------------------------------- numpy VecEnv
@needs_brax
def test_vec_env_make_runs_an_adapter_on_mjx_only() -> None:
    """``unilab_jax.envs.make`` (the torch collector's env API) takes adapter names on
    ``"mjx"``; on ``"mujoco"`` it says that C MuJoCo runs only the registered tasks."""
    name = "brax/inverted_pendulum"
    with pytest.raises(ValueError, match=r"sim_backend='mjx' only .*PendulumSwingup"):
        make(name, BATCH, "mujoco")
    with make(name, BATCH, "mjx", {"episode_length": SHORT_EPISODE}) as env:
        assert env.action_space.shape == (1,)
        assert env.max_episode_steps == SHORT_EPISODE
        state = env.init_state(stagger=False)
        assert state.obs["obs"].shape == (BATCH, 4)
        ended = np.zeros(BATCH, bool)
        for _ in range(SHORT_EPISODE):
            state = env.step(np.ones((BATCH, 1), np.float32))
            assert np.isfinite(state.reward).all()
            ended |= state.terminated | state.truncated
        assert ended.all()  # every env fell or hit the time limit, and was reset
        assert (state.info["episode_step"] < SHORT_EPISODE).all()
