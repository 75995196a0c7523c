"""The G1 tracker's profiles on both physics. G1MotionTrackingSAC: its MJX step against the
reference's recorded rollout, the clip's end and a fall ending episodes on MJX, sizes, the
config's refusals, and a C MuJoCo rollout through resets with the sampler's failure rates
moving. G1WBTObs: its MJX physics with its per-episode model fields and push against the
reference's recorded steps, and C MuJoCo collection carrying the actor's history through
resets. The flips: C MuJoCo through resets, the wall flip's MJX step traced. Agreement with
the reference's own env through resets on C MuJoCo is ``tests/test_reference_tracking.py``.

Two MJX programs are compiled: G1MotionTrackingSAC's ``jit(env.step_batch)`` at the golden
file's 6 envs (the states are built without compiling ``reset``, whose program costs as much
again) and G1WBTObs's physics step (its whole step, with the reset's model constants, took 97 s
to compile on the shared 2-core CPU, against 43 s for the physics).
"""

from __future__ import annotations

import functools
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_reference_tracking import Draws, dr_draws, golden

from unilab_jax.envs import load, make
from unilab_jax.envs.base import Env, EnvState, model_params
from unilab_jax.envs.motion.tracking_obs import G1WBTObs

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        importlib.util.find_spec("holosoma") is None,
        reason="the default clip ships with holosoma: pip install --no-deps holosoma==0.0.3",
    ),
]

#: Steps of the recorded rollout the MJX step is compared over (every env's first episode
#: lasts longer: the first reset is at step 8).
MJX_STEPS = 6


@functools.cache
def shared(name: str = "G1MotionTrackingSAC") -> tuple[Env, object]:
    env = load(name)
    return env, jax.jit(env.step_batch)


def states(env: Env, qpos, qvel, frame, step_count, key, **extra) -> EnvState:
    """A batch at ``(qpos, qvel)`` tracking ``frame``, in ``reset``'s structure and dtypes
    (``extra``: more of the task state, e.g. G1WBTObs's model fields and push)."""
    n = len(qpos)
    keys = jax.random.split(key, n)
    like = jax.eval_shape(jax.vmap(env.reset), keys)
    blank = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), like)
    physics = jax.tree.map(
        lambda x: jnp.broadcast_to(x, (n, *x.shape)), env.physics._template
    ).replace(qpos=jnp.asarray(qpos, jnp.float32), qvel=jnp.asarray(qvel, jnp.float32))
    frame = jnp.asarray(frame, jnp.int32)
    task_state = {
        **blank.task_state,
        "frame": frame,
        "obs_frame": frame,
        "tracked_frame": frame,
        "clip_end": jnp.full((n,), env.task.num_frames - 1, jnp.int32),
        "noise_key": keys,
        **extra,
    }
    return blank.replace(
        physics=physics,
        task_state=task_state,
        step_count=jnp.asarray(step_count, jnp.int32),
        key=keys,
    )


def first_episode(task: G1WBTObs, arrays: dict, meta: dict) -> dict:
    """G1WBTObs's first episodes as the reference drew them (model fields, encoder bias) and
    its first push (on step 0), from the golden file's draws."""
    draws = Draws(arrays, meta["rollout"]["rng_calls"])
    draws.take("randint")
    n = len(arrays["init.qpos"])
    first = draws.reset(task, n, jnp.zeros(task.bins, jnp.float32))
    draws.noise(task, n)
    limit = np.float32(task.config.push_max_force)
    force = draws.take("uniform", [n, 3]).astype(np.float32) * limit
    extra = jax.vmap(task.episode_state)(dr_draws(first), jnp.asarray(arrays["init.qvel"]))
    counter = jnp.zeros(n, jnp.int32)
    return {**extra, "step_counter": counter, "push_force": jnp.asarray(force)}


@pytest.fixture(scope="module")
def mjx_rollout():
    """The recorded rollout's first steps on MJX, carrying MJX's own state."""
    arrays, _ = golden()
    env, step = shared()
    n = arrays["init.qpos"].shape[0]
    state = states(
        env,
        arrays["init.qpos"],
        arrays["init.qvel"],
        arrays["init.frame"],
        jnp.zeros(n),
        jax.random.PRNGKey(0),
    )
    out = []
    for t in range(MJX_STEPS):
        qpos = np.asarray(state.physics.qpos)
        state = step(state, jnp.asarray(arrays["step.action"][t]))
        out.append((qpos, state))
    return out


def test_mjx_follows_the_reference_rollout(mjx_rollout):
    """MJX (float32, MuJoCo 3.17's JAX implementation) against the reference's C MuJoCo over
    the first 6 steps of full-scale random actions: most of the state within 1e-4 and all of
    it within 5e-2 (a light wrist driven against its 5 N m limit parts most), the clean critic
    observation (noise is drawn by each side) likewise within 2e-3 and 2 (joint velocities),
    every reward term and the reward within 3%, the same terminations and truncations."""
    arrays, meta = golden()
    for t, (qpos, state) in enumerate(mjx_rollout):
        error = np.abs(qpos - arrays["step.qpos_before"][t])
        assert np.median(error) < 1e-4 and error.max() < 5e-2, (t, error.max())
        critic = np.abs(np.asarray(state.final_obs["critic"]) - arrays["step.critic"][t])
        assert np.median(critic) < 2e-3 and critic.max() < 2.0, (t, critic.max())
        np.testing.assert_allclose(state.reward, arrays["step.reward"][t], rtol=3e-2, atol=3e-4)
        np.testing.assert_array_equal(state.terminated, arrays["step.terminated"][t])
        np.testing.assert_array_equal(state.truncated, arrays["step.truncated"][t])
        for name in meta["rollout"]["reward_terms"]:
            ours = np.asarray(state.metrics[f"reward/{name}"])
            weight = meta["rollout"]["reward_weights"][name] * 0.02
            ref = arrays[f"step.reward_raw.{name}"][t] * weight
            np.testing.assert_allclose(ours, ref, rtol=3e-2, atol=1e-4, err_msg=name)


#: G1WBTObs's steps checked on MJX (step 0 carries a push).
WBT_MJX_STEPS = 4


def test_mjx_physics_of_g1wbtobs_with_its_randomised_model_and_push():
    """G1WBTObs on MJX, one compiled program: its physics (0.005 s x 4) on each env's own
    model fields (gains, pelvis mass and centre of mass, foot friction, the constants
    ``mj_setConst`` derives) with its push, from each recorded state of the first steps (step
    0 pushes 85-310 N) to the reference's next: within 2e-4 (qpos) and 2e-2 (qvel), medians
    below 1e-6 and 1e-4. (The whole step compiles in about 100 s on a 2-core CPU, beyond this
    suite's budget; the task's functions are the ones the C MuJoCo replay checks.)"""
    arrays, meta = golden("G1WBTObs")
    env = load("G1WBTObs")
    task, physics = env.task, env.physics
    ts = {"last_action": jnp.zeros((6, task.action_size)), **first_episode(task, arrays, meta)}

    def one_step(qpos, qvel, params, ctrl, xfrc):
        data = physics.step(physics.init(qpos, qvel, params), ctrl, params, xfrc)
        return data.qpos, data.qvel

    step = jax.jit(jax.vmap(one_step))
    for t in range(WBT_MJX_STEPS):
        action = jnp.asarray(arrays["step.action"][t])
        ctrl = jax.vmap(task.ctrl_from_action)(action, ts)
        np.testing.assert_allclose(ctrl, arrays["step.ctrl"][t], atol=1e-6)
        xfrc = jax.vmap(task.xfrc_applied)(ts)
        np.testing.assert_allclose(xfrc, arrays["step.xfrc"][t], rtol=1e-6, atol=1e-4)
        qpos, qvel = step(
            jnp.asarray(arrays["step.qpos_before"][t]),
            jnp.asarray(arrays["step.qvel_before"][t]),
            model_params(ts),
            ctrl,
            xfrc,
        )
        error_q = np.abs(np.asarray(qpos) - arrays["step.qpos_after"][t])
        error_v = np.abs(np.asarray(qvel) - arrays["step.qvel_after"][t])
        assert error_q.max() < 2e-4 and np.median(error_q) < 1e-6, (t, error_q.max())
        assert error_v.max() < 2e-2 and np.median(error_v) < 1e-4, (t, error_v.max())
        pushed = bool(np.any(arrays["step.xfrc"][t]))
        ts = {**ts, "last_action": action, "push_force": jnp.zeros((6, 3))}
        assert pushed == (t == 0)


def test_mjx_ends_episodes_at_the_clip_end_and_on_a_fall():
    """Env 0 tracks the clip's last frame: its next step is truncated, not terminated, and it
    restarts at a drawn frame; env 1 starts half a metre below the clip's anchor height:
    terminated. Every leaf stays finite, the sizes are the reference's."""
    arrays, _ = golden()
    env, step = shared()
    frame = np.array(arrays["init.frame"])
    frame[0] = env.task.num_frames - 1
    zero = np.zeros(6, np.float32)
    exact = [env.task.reference_state(f, zero, zero, np.zeros(29, np.float32)) for f in frame]
    qpos, qvel = (np.stack([np.asarray(s[i]) for s in exact]) for i in (0, 1))
    qpos[1, 2] -= 0.6
    state = states(env, qpos, qvel, frame, np.zeros(6), jax.random.PRNGKey(1))
    after = step(state, jnp.zeros((6, 29)))
    assert after.obs["obs"].shape == (6, 160) and after.obs["critic"].shape == (6, 289)
    assert bool(after.truncated[0]) and not bool(after.terminated[0])
    assert bool(after.terminated[1])
    restarted = np.asarray(after.task_state["frame"])[:2]
    assert np.all(restarted == np.asarray(after.task_state["obs_frame"])[:2])
    assert np.all(np.asarray(after.step_count)[:2] == 0)
    # The failure rates moved for the one terminated episode, in the bin of its frame.
    rates = np.asarray(after.task_state["sampler_failures"])
    assert np.all(rates == rates[0]) and rates[0].sum() == pytest.approx(0.001)
    assert rates[0].argmax() == frame[1] * env.task.bins // env.task.num_frames
    for leaf in jax.tree.leaves(after):
        assert np.all(np.isfinite(np.asarray(leaf, np.float64))), "a non-finite leaf"


def test_c_mujoco_rollout_resets_and_moves_the_sampler():
    """C MuJoCo collection: 300 zero-action steps of 8 envs end episodes (falls and clip
    ends), every observation finite, the failure rates (the batch's) moved off zero."""
    env = make("G1MotionTrackingSAC", num_envs=8, sim_backend="mujoco", seed=3)
    try:
        state = env.init_state()
        ended = 0
        for _ in range(300):
            state = env.step(np.zeros((8, 29), np.float32))
            ended += int(np.sum(state.terminated | state.truncated))
            assert np.all(np.isfinite(state.obs["obs"])) and np.all(np.isfinite(state.reward))
        rates = np.asarray(env.snapshot()["task_state"]["sampler_failures"])
    finally:
        env.close()
    assert ended >= 8
    assert np.all(rates == rates[0]) and rates[0].sum() > 0


FLIPS = ("G1FlipTrackingSAC", "G1WallFlipTrackingSAC")


@pytest.mark.parametrize("name", FLIPS)
def test_the_flips_run_on_c_mujoco_through_resets(name):
    """C MuJoCo collection on the default clip, 100 steps of full-scale random actions: the
    reference's sizes, finite through episodes that end (at seed 5 some start close enough to
    the clip's end; the wall flip's end only there, never terminated)."""
    env = make(name, num_envs=4, sim_backend="mujoco", seed=5)
    rng = np.random.default_rng(0)
    try:
        state = env.init_state()
        assert state.obs["obs"].shape == (4, 160) and state.obs["critic"].shape == (4, 289)
        ended = terminated = 0
        for _ in range(100):
            state = env.step(rng.uniform(-1, 1, (4, 29)).astype(np.float32))
            ended += int(np.sum(state.terminated | state.truncated))
            terminated += int(np.sum(state.terminated))
            assert np.all(np.isfinite(state.obs["critic"])) and np.all(np.isfinite(state.reward))
    finally:
        env.close()
    assert ended >= 1
    if name == "G1WallFlipTrackingSAC":
        assert terminated == 0


def test_the_wall_flip_traces_on_mjx():
    """The wall flip's MJX step traces (shapes only; not compiled: a G1 step costs 60-200 s to
    compile here, and the tracker's MJX physics is compared above): MJX takes the wall scene's
    box. (The flip's scene is G1WalkFlat's at 0.005 s; tracing it too would cost 30 s more.)"""
    env = load("G1WallFlipTrackingSAC")
    assert env.task.model.opt.timestep == 0.005 and env.task.n_frames == 4
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    states = jax.eval_shape(jax.vmap(env.reset), keys)
    after = jax.eval_shape(env.step_batch, states, jax.ShapeDtypeStruct((2, 29), jnp.float32))
    assert after.obs["obs"].shape == (2, 160) and after.obs["critic"].shape == (2, 289)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"sampling_mode": "nearest"}, "sampling_mode='nearest' is not one of"),
        ({"truncate_on_clip_end": False}, "truncate_on_clip_end=False"),
        ({"anchor_body": "head_link"}, "anchor_body 'head_link' is not one of body_names"),
        ({"ee_body_names": ("left_toe",)}, r"ee_body_names \['left_toe'\] are not in body_names"),
    ],
)
def test_bad_settings_are_refused_before_anything_is_built(override, message):
    with pytest.raises(ValueError, match=message):
        load("G1MotionTrackingSAC", override)


def test_an_exported_policy_names_its_clip_and_action_rule():
    from unilab_jax.policy.export.metadata import env_description

    clip = "holosoma:sub3_largebox_003_mj"
    _, scaling, data = env_description("G1MotionTrackingSAC", {"motion_file": [clip]}, 160, 29)
    assert data["motion_files"] == [clip] and data["clip_frames"] == [325] and data["fps"] == 50
    assert data["anchor_body"] == "torso_link" and len(data["body_names"]) == 14
    assert len(data["sha256"]) == 64
    assert scaling["kind"] == "affine_clipped" and scaling["action_scale"] == 2.0


def test_c_mujoco_g1wbtobs_carries_the_actors_history_through_resets():
    """C MuJoCo collection of G1WBTObs (4 envs, 80 steps of random actions, ending episodes):
    every history block (gyro, joint angles, joint velocities, actions; 5 steps, oldest first)
    of a step's observation is the previous one's moved one step on, its newest entry the
    critic's clean gyro, joint angles and velocities within the noise (and encoder bias)
    bounds and the action just taken; a fresh episode's (the first reset's too) holds its
    first entry 5 times; sizes 514 / 289, all finite."""
    n, steps = 4, 80
    blocks = ((64, 3), (79, 29), (224, 29), (369, 29))
    # Per block: the critic's clean slice and the noise bound (level 1: gyro 0.2, joint angle
    # 0.01 plus the encoder bias 0.01, joint velocity 0.5; the action exact).
    clean = ((slice(70, 73), 0.2), (slice(73, 102), 0.02), (slice(102, 131), 0.5))
    clean += ((slice(131, 160), 0.0),)

    def newest_is_seen(group: dict) -> None:
        for (start, size), (where, bound) in zip(blocks, clean, strict=True):
            newest = history(group["obs"], start, size)[:, 4]
            error = np.abs(newest - group["critic"][:, where])
            assert np.all(error <= bound + 1e-5), (start, error.max())

    def history(obs: np.ndarray, start: int, size: int) -> np.ndarray:
        return obs[:, start : start + 5 * size].reshape(len(obs), 5, size)

    def filled(obs: np.ndarray) -> None:
        for start, size in blocks:
            h = history(obs, start, size)
            np.testing.assert_array_equal(h, np.broadcast_to(h[:, :1], h.shape))

    env = make("G1WBTObs", num_envs=n, sim_backend="mujoco", seed=5)
    rng = np.random.default_rng(0)
    try:
        state = env.init_state()
        assert state.obs["obs"].shape == (n, 514) and state.obs["critic"].shape == (n, 289)
        filled(state.obs["obs"])
        newest_is_seen(state.obs)
        ended = 0
        for _ in range(steps):
            before = state.obs["obs"].copy()
            action = rng.uniform(-1, 1, (n, 29)).astype(np.float32)
            state = env.step(action)
            final, done = state.final_observation["obs"], state.terminated | state.truncated
            for start, size in blocks:
                h, h0 = history(final, start, size), history(before, start, size)
                np.testing.assert_array_equal(h[:, :4], h0[:, 1:])
            np.testing.assert_array_equal(history(final, 369, 29)[:, 4], action)
            filled(state.obs["obs"][done])
            newest_is_seen(state.obs)
            newest_is_seen(state.final_observation)
            ended += int(done.sum())
            assert np.all(np.isfinite(state.obs["obs"])) and np.all(np.isfinite(state.reward))
    finally:
        env.close()
    assert ended >= n
