"""G1MotionTrackingSAC held to the REAL reference UniLab (unilabsim/UniLab @ 9aa57115).

``tests/golden/reference/G1MotionTrackingSAC.npz`` is a rollout of the reference's own env (6
envs, 120 control steps of recorded actions, its observation noise on) through 39 automatic
resets, every env ending at least once (falls and the clip's end), recorded by
``bench/reference/golden_tracking.py`` in the reference's venv on holosoma's box-lifting clip.
The replay here drives OUR task from the recorded initial state with the recorded actions on
our C MuJoCo physics, carrying its own physics and task state from step to step; the reference's
random draws (observation noise, the sampler's bins and offsets, the reset noise) are fed to the
task's pure functions in the reference's call order. Every recorded key is compared: the clip
as loaded, controls, the physics state before each step, every reward term by name, the reward,
terminations and truncations, the observation and critic groups (after resets too), the reset
states, and the sampler's probabilities, frames and failure rates.

Bounds: the physics is MuJoCo 3.17 against the reference's 3.8 over whole episodes (a step
alone agrees within 1e-6, ``test_reference_g1.py``); the recorded episodes last at most 38
steps, over which carried states stayed within 1.3e-5 (qpos) and 4e-4 (qvel), about a tenth of
the bounds below. (Longer episodes part: one of 65 steps grew from 1e-7 to 0.3 rad after step
68 in an earlier recording, so the recorded actions are large enough to end every episode
soon.) Rewards, observations and the sampler follow within float32 rounding.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.envs.motion.sampler import adaptive_frame, bin_probabilities
from unilab_jax.envs.motion.tracking import NOISE_SLOTS, G1MotionTracking
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task

GOLDEN = Path(__file__).parent / "golden" / "reference" / "G1MotionTrackingSAC.npz"


@cache
def golden() -> tuple[dict[str, np.ndarray], dict]:
    with np.load(GOLDEN) as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(str(arrays.pop("meta_json")))


class Draws:
    """The reference's logged ``np.random`` calls, consumed in order."""

    def __init__(self, arrays: dict[str, np.ndarray], calls: list[dict]) -> None:
        self.values = [arrays[f"rng.{i:04d}"] for i in range(len(calls))]
        self.calls = calls
        self.i = 0

    def take(self, fn: str) -> np.ndarray:
        call, value = self.calls[self.i], self.values[self.i]
        assert call["fn"] == fn, f"draw {self.i}: expected {fn}, the reference called {call}"
        self.i += 1
        return value

    def noise(self) -> dict[str, np.ndarray]:
        return {name: self.take("uniform").astype(np.float32) for name, _ in NOISE_SLOTS}

    def reset(self, n: int) -> dict[str, np.ndarray]:
        bins, p = self.take("choice"), self.take("choice_p")
        offset = self.take("uniform")
        pose = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        vel = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        joints = self.take("uniform").astype(np.float32)
        return {"bin": bins, "p": p, "offset": offset, "pose": pose, "vel": vel, "joints": joints}


@cache
def replay() -> dict[str, np.ndarray]:
    """Our task through the recorded rollout (module docstring); arrays named as the golden
    file's ``step.*`` / ``reset.*`` keys, plus the sampler's draws."""
    arrays, meta = golden()
    task = G1MotionTracking()
    cpu = jax.devices("cpu")[0]
    trace = trace_task(task, cpu)
    n, steps = meta["rollout"]["num_envs"], meta["rollout"]["num_steps"]
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        n,
        trace.template,
        trace.fields,
        name="G1MotionTrackingSAC",
        nthread=1,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
    )
    draws = Draws(arrays, meta["rollout"]["rng_calls"])
    vmap = jax.vmap
    observe = jax.jit(vmap(task.observation))
    reward = jax.jit(vmap(lambda d, a, ts: (task.reward_terms(d, a, ts), task.reward(d, a, ts)[0])))
    terminated = jax.jit(vmap(task.terminated))
    advance = jax.jit(vmap(lambda d, a, ts, k: task.update_task_state(d, a, ts, k)))
    ends = jax.jit(vmap(task.ends_episode))
    ctrl_of = jax.jit(vmap(task.ctrl_from_action))
    reference_state = jax.jit(vmap(task.reference_state))
    frames_of = jax.jit(lambda b, o: adaptive_frame(b, o, task.bins, task.num_frames))
    batch_update = jax.jit(lambda ts, term, trunc: task.update_batch(ts, term, trunc, None))
    ratio = task.config.adaptive_uniform_ratio

    # The first reset: the recorded initial state and frames (its draws are checked below).
    assert draws.take("randint").shape == (n,)  # the reference staggers steps, then zeroes them
    first = draws.reset(n)
    physics.init(None, arrays["init.qpos"], arrays["init.qvel"])
    frame = jnp.asarray(arrays["init.frame"], jnp.int32)
    zeros = jnp.zeros((n, task.action_size), jnp.float32)
    ts = {
        "frame": frame,
        "obs_frame": frame,
        "clip_end": jnp.full((n,), task.num_frames - 1, jnp.int32),
        "last_action": zeros,
        "noise_key": jax.random.split(jax.random.PRNGKey(0), n),
        "sampler_failures": jnp.zeros((n, task.bins), jnp.float32),
        "tracked_frame": frame,
    }
    out: dict[str, list] = {}

    def push(key: str, value) -> None:
        out.setdefault(key, []).append(np.asarray(value))

    init_obs = observe(PhysicsView(physics.view()), ts, draws.noise())
    push("init.first_frames", frames_of(jnp.asarray(first["bin"]), jnp.asarray(first["offset"])))
    push("init.first_p", bin_probabilities(jnp.zeros(task.bins, jnp.float32), ratio))
    for t in range(steps):
        action = jnp.asarray(arrays["step.action"][t])
        push("qpos_before", physics.batch.qpos.astype(np.float32))
        push("qvel_before", physics.batch.qvel.astype(np.float32))
        push("frame_before", ts["frame"])
        ctrl = ctrl_of(action, ts)
        push("ctrl", ctrl)
        physics.step(np.asarray(ctrl, np.float64))
        push("qpos_after", physics.batch.qpos.copy())
        push("qvel_after", physics.batch.qvel.copy())
        view = PhysicsView(physics.view())
        terms, total = reward(view, action, ts)
        for name in meta["rollout"]["reward_terms"]:
            push(f"reward_raw.{name}", terms[name])
        push("reward", total)
        term = terminated(view, ts)
        ts = advance(view, action, ts, ts["noise_key"])
        trunc = ends(ts) & ~term
        push("terminated", term)
        push("truncated", trunc)
        obs = observe(view, ts, draws.noise())
        push("obs", obs["obs"])
        push("critic", obs["critic"])
        ts = batch_update(ts, term, trunc)
        failures = ts["sampler_failures"][0]
        push("bin_failed_after", failures)
        done = np.flatnonzero(np.asarray(term | trunc))
        if done.size:
            r = draws.reset(done.size)
            push(
                "reset.p",
                np.broadcast_to(bin_probabilities(failures, ratio), (done.size, task.bins)),
            )
            push("reset.p_reference", np.broadcast_to(r["p"], (done.size, task.bins)))
            fresh = frames_of(jnp.asarray(r["bin"]), jnp.asarray(r["offset"], jnp.float32))
            qpos, qvel = reference_state(fresh, r["pose"], r["vel"], r["joints"])
            physics.init(done, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64))
            push("reset.frame", fresh)
            push("reset.qpos", physics.batch.qpos[done].astype(np.float32))
            push("reset.qvel", physics.batch.qvel[done].astype(np.float32))
            ts = {**ts}
            for key in ("frame", "obs_frame", "tracked_frame"):
                ts[key] = ts[key].at[done].set(fresh)
            ts["last_action"] = ts["last_action"].at[done].set(0.0)
            ts["clip_end"] = ts["clip_end"].at[done].set(task.num_frames - 1)
            sub = {k: v[done] for k, v in ts.items()}
            rows = {k: v[done] for k, v in physics.view().items()}
            fresh_obs = observe(PhysicsView(rows), sub, draws.noise())
            push("reset.obs", fresh_obs["obs"])
            push("reset.critic", fresh_obs["critic"])
        push("frame_after", ts["frame"])
    assert draws.i == len(draws.values), "the reference drew more than the replay consumed"
    physics.close()
    result = {
        f"step.{k}": np.stack(v) for k, v in out.items() if not k.startswith(("reset.", "init."))
    }
    result.update({k: np.concatenate(v) for k, v in out.items() if k.startswith("reset.")})
    result["init.obs"], result["init.critic"] = map(
        np.asarray, (init_obs["obs"], init_obs["critic"])
    )
    result["init.first_frames"] = out["init.first_frames"][0]
    return result


def test_the_clip_loads_as_the_reference_loads_it():
    arrays, _ = golden()
    task = G1MotionTracking()
    ids = arrays["clip.body_ids"]
    np.testing.assert_array_equal(task.body_ids, ids)
    clips = task.clips
    np.testing.assert_array_equal(clips.joint_pos, arrays["clip.joint_pos"])
    np.testing.assert_array_equal(clips.joint_vel, arrays["clip.joint_vel"])
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_array_equal(getattr(clips, key)[:, ids], arrays[f"clip.{key}"], key)
    np.testing.assert_array_equal(task.default_pose, arrays["default_angles"])


def test_the_first_reset_draws_the_recorded_frames():
    arrays, _ = golden()
    np.testing.assert_array_equal(replay()["init.first_frames"], arrays["init.frame"])


def test_controls_and_physics_follow_the_reference_through_resets():
    arrays, _ = golden()
    ours = replay()
    np.testing.assert_allclose(ours["step.ctrl"], arrays["step.ctrl"], atol=1e-6)
    np.testing.assert_allclose(ours["step.qpos_before"], arrays["step.qpos_before"], atol=1e-4)
    np.testing.assert_allclose(ours["step.qvel_before"], arrays["step.qvel_before"], atol=4e-3)
    np.testing.assert_array_equal(ours["step.frame_before"], arrays["step.frame_before"])
    np.testing.assert_array_equal(ours["step.frame_after"], arrays["step.frame_after"])


@pytest.mark.parametrize("term", golden()[1]["rollout"]["reward_terms"])
def test_every_reward_term_matches_by_name(term):
    arrays, _ = golden()
    key = f"step.reward_raw.{term}"
    np.testing.assert_allclose(replay()[key], arrays[key], rtol=1e-3, atol=1e-5, err_msg=term)


def test_the_reward_terminations_and_truncations_match():
    arrays, _ = golden()
    ours = replay()
    np.testing.assert_allclose(ours["step.reward"], arrays["step.reward"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(ours["step.terminated"], arrays["step.terminated"])
    np.testing.assert_array_equal(ours["step.truncated"], arrays["step.truncated"])


def test_observations_match_with_the_reference_noise():
    arrays, _ = golden()
    ours = replay()
    for key in ("obs", "critic"):
        np.testing.assert_allclose(ours[f"init.{key}"], arrays[f"init.{key}"], atol=1e-5)
        np.testing.assert_allclose(ours[f"step.{key}"], arrays[f"step.{key}"], atol=4e-3)


def test_resets_draw_frames_states_and_observations_as_the_reference():
    arrays, _ = golden()
    ours = replay()
    t_env = arrays["reset.t_env"]
    np.testing.assert_array_equal(
        ours["reset.frame"], arrays["step.frame_after"][t_env[:, 0], t_env[:, 1]]
    )
    np.testing.assert_allclose(ours["reset.qpos"], arrays["reset.qpos"], atol=1e-6)
    np.testing.assert_allclose(ours["reset.qvel"], arrays["reset.qvel"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.obs"], arrays["reset.obs"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.critic"], arrays["reset.critic"], atol=1e-5)


def test_the_sampler_rates_and_probabilities_match():
    arrays, _ = golden()
    ours = replay()
    np.testing.assert_allclose(
        ours["step.bin_failed_after"], arrays["step.bin_failed_after"], rtol=1e-6
    )
    np.testing.assert_allclose(ours["reset.p"], ours["reset.p_reference"], rtol=1e-6)
