"""MuJoCo Playground and Brax envs through our Env API (``unilab_jax.envs.adapters``).

One cheap env per source: ``playground/CartpoleBalance`` and ``brax/inverted_pendulum`` (the
Brax env whose termination fires within a few random steps, so the terminated path is covered
too), plus Playground's Go1 joystick task (locomotion: dict observations, robot meshes from
an installed package). Each is loaded once per module with a short episode and its
``jit(vmap(reset))`` / ``jit(vmap(step))`` are shared; one short training run goes through
``unilab_jax.training.trainer.train`` (the tiny SAC run on Playground's Go1).
Every locomotion task that loads offline has its sizes checked (traced, not compiled); one
whose robot files are absent must fail naming them.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY, TINY_SAC  # tests/tiny.py

from unilab_jax.envs import EnvState, UnknownEnvError, make
from unilab_jax.envs.adapters import adapter_names, load_adapter
from unilab_jax.training.trainer import resolve_algo_config

pytestmark = pytest.mark.timeout(600)

HAS_PLAYGROUND = importlib.util.find_spec("mujoco_playground") is not None
HAS_BRAX = importlib.util.find_spec("brax") is not None
needs_playground = pytest.mark.skipif(
    not HAS_PLAYGROUND, reason="MuJoCo Playground not installed (pip install playground==0.2.0)"
)
needs_brax = pytest.mark.skipif(not HAS_BRAX, reason="Brax not installed (pip install brax)")


def needs_model(task: str) -> pytest.MarkDecorator:
    """Skip unless Playground and the robot files of locomotion task ``task`` are here."""
    if not HAS_PLAYGROUND:
        return needs_playground
    from unilab_jax.envs.adapters.menagerie import missing_files

    missing = missing_files(task)
    return pytest.mark.skipif(
        bool(missing), reason=f"{task}'s robot files are absent (mjlab==1.6.0 ships them)"
    )


GO1 = "playground/Go1JoystickFlatTerrain"
BATCH = 8
SHORT_EPISODE = 6
ENVS = {
    # name: (skip marker, action_size, obs_size)
    "playground/CartpoleBalance": (needs_playground, 1, {"obs": 5, "critic": 5}),
    "brax/inverted_pendulum": (needs_brax, 1, {"obs": 4, "critic": 4}),
}
#: Go1 (locomotion: "state" is the actor's observation, "privileged_state" the critic's) is
#: stepped by its short training run only: compiling MJX's Go1 step takes a minute on a CPU,
#: so its smoke checks live there (G1's sizes are checked below, its step by hand: minutes).
NEEDS_GO1 = needs_model("Go1JoystickFlatTerrain")
#: Go1 restarts from first states: its step then compiles without a reset inside (MJX's
#: forward; half the compile time); the fresh-reset path is the same code as Cartpole's.
OVERRIDES = {GO1: {"full_reset": False}}
#: Playground locomotion tasks whose robot files installed packages ship (mjlab: Go1, G1):
#: name -> (action_size, obs_size, episode_length from Playground's config).
LOCOMOTION = {
    "Go1JoystickFlatTerrain": (12, {"obs": 48, "critic": 123}, 1000),
    "Go1JoystickRoughTerrain": (12, {"obs": 48, "critic": 123}, 1000),
    "Go1Getup": (12, {"obs": 42, "critic": 91}, 300),
    "Go1Handstand": (12, {"obs": 45, "critic": 94}, 500),
    "Go1Footstand": (12, {"obs": 45, "critic": 94}, 500),
    "G1JoystickFlatTerrain": (29, {"obs": 103, "critic": 216}, 1000),
    "G1JoystickRoughTerrain": (29, {"obs": 103, "critic": 216}, 1000),
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
        env = load_adapter(name, {"episode_length": SHORT_EPISODE, **OVERRIDES.get(name, {})})
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


@pytest.mark.parametrize("task", [pytest.param(t, marks=needs_model(t)) for t in LOCOMOTION])
def test_playground_locomotion_sizes(task: str) -> None:
    """Each locomotion task with its robot files loads offline and is listed; sizes, time
    limit and value support come from the task (traced, not compiled)."""
    from mujoco_playground._src import mjx_env

    default_menagerie = mjx_env.MENAGERIE_PATH
    action_size, sizes, episode_length = LOCOMOTION[task]
    env = load_adapter(f"playground/{task}", None)
    assert f"playground/{task}" in adapter_names()
    assert mjx_env.MENAGERIE_PATH is default_menagerie  # pointed elsewhere only while loading
    assert env.foreign._config.impl == "jax"
    assert env.action_size == action_size and env.obs_size == sizes
    assert env.episode_length == episode_length
    assert env.full_reset == (task != "Go1Getup")  # Go1Getup's reset settles for 125 steps
    low, high = env.reward_bounds
    assert low <= 0.0 < high < 0.2  # rewards are scaled by ctrl_dt = 0.02


@needs_model("Go1Getup")
def test_menagerie_folder_of_links(tmp_path, monkeypatch) -> None:
    """Go1's meshes are laid out as Menagerie's ``unitree_go1/assets`` (links to mjlab's
    files, under the names Playground's MJCF uses); a damaged folder is rebuilt."""
    from unilab_jax.envs.adapters import menagerie

    if (menagerie._playground_menagerie() / "unitree_go1" / "assets" / "trunk.stl").is_file():
        pytest.skip("Playground's own Menagerie folder is used here")
    monkeypatch.setenv(menagerie.CACHE_ENV, str(tmp_path))
    root = menagerie.menagerie_root("Go1Getup")
    assert root.parent == tmp_path
    assets = root / "unitree_go1" / "assets"
    names = {"calf.stl", "hip.stl", "thigh.stl", "thigh_mirror.stl", "trunk.stl"}
    assert {p.name for p in assets.iterdir()} == names
    trunk = assets / "trunk.stl"
    assert trunk.is_symlink() and "mjlab" in trunk.resolve().parts
    trunk.unlink()
    assert menagerie.menagerie_root("Go1Getup") == root and trunk.is_file()


@needs_playground
def test_playground_tasks_without_robot_files_fail_naming_them() -> None:
    """A locomotion task whose Menagerie files no installed package ships (Spot) is not
    listed, and loading it says which file is missing and where it comes from."""
    from unilab_jax.envs.adapters.menagerie import MissingModelError
    from unilab_jax.envs.adapters.playground import unavailable_playground_names

    unavailable = unavailable_playground_names()
    if "SpotGetup" not in unavailable:
        pytest.skip("Menagerie's Spot model is present here")
    names = adapter_names()
    assert not any(f"playground/{t}" in names for t in unavailable)
    assert "boston_dynamics_spot/assets/body_0.obj" in unavailable["SpotGetup"]
    with pytest.raises(MissingModelError) as err:
        load_adapter("playground/SpotGetup", None)
    message = str(err.value)
    assert "mujoco_menagerie/boston_dynamics_spot/assets/body_0.obj" in message
    assert "mujoco_menagerie git repository" in message
    assert isinstance(err.value, UnknownEnvError)  # the CLI reports it as one line


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
# One adapter run through the trainer: Playground's Go1 (dict observations, auto-resets, reward
# components), which covers what a DM Control run and Brax's inverted pendulum (flat
# observations, already wrapped into the "obs" group by the adapter: the smoke test above) did.


@NEEDS_GO1
def test_short_locomotion_training_run() -> None:
    """The tiny SAC run on Playground's Go1 joystick (5-step episodes, so envs end episodes
    and auto-reset): dict observations (actor 48, critic 123) through the trainer, finite
    returns, learner metrics and reward components."""
    from unilab_jax.training.trainer import train

    config = dataclasses.replace(
        TINY, env=GO1, env_overrides={**TINY.env_overrides, **OVERRIDES[GO1]}
    )
    result = train(config, dict(TINY_SAC), quiet=True)
    assert result.summary["completed_iterations"] == TINY.max_iterations
    returns = [h["mean_return"] for h in result.history if h["mean_return"] is not None]
    assert returns and all(np.isfinite(r) for r in returns)  # episodes ended and reset
    assert sum(h["episodes"] for h in result.history) >= TINY.num_envs  # 6 steps > 5
    learner = result.history[-1]["learner"]
    assert learner and all(np.isfinite(v) for v in learner.values())
    components = result.history[-1]["components"]
    assert "reward/tracking_lin_vel" in components
    assert all(np.isfinite(v) for v in components.values())


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
