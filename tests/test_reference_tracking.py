"""The G1 tracker's profiles held to the REAL reference UniLab (unilabsim/UniLab @ 9aa57115).

``tests/golden/reference/<task>.npz`` is a rollout of the reference's own env (6 envs, recorded
actions, its observation noise on) through automatic resets, every env ending at least once
(falls and the clip's end), recorded by ``bench/reference/golden_tracking.py`` in the
reference's venv on holosoma's box-lifting clip: G1MotionTrackingSAC (120 steps, 40 resets) and
G1WBTObs (210 steps, 63 resets, pushes on steps 0 and 200, its domain randomisation). One
replay serves both (:func:`replay`): it drives OUR task from the recorded initial state with the
recorded actions on our C MuJoCo physics, carrying its own physics and task state from step to
step; the reference's random draws (observation noise, the sampler's bins and offsets, the
reset noise, and G1WBTObs's encoder bias, masses, centres of mass, gains, friction and push
forces) are fed to the task's pure functions in the reference's call order. Every recorded key
is compared: the clip as loaded, controls (with G1WBTObs's one-step latency), the physics state
before each step, every reward term by name, the reward, terminations and truncations, the
observation and critic groups (after resets too; G1WBTObs's with its 5-step history), the reset
states, the sampler's probabilities, frames and failure rates, and G1WBTObs's model fields per
reset, its randomised geoms and its pushes.

Bounds: the physics is MuJoCo 3.17 against the reference's 3.8 over whole episodes (a step
alone agrees within 1e-6, ``test_reference_g1.py``). G1MotionTrackingSAC's episodes last at
most 38 steps, over which carried states stayed within 1.3e-5 (qpos) and 4e-4 (qvel), about a
tenth of :data:`AGREE`. (Longer episodes part: one of 65 steps grew from 1e-7 to 0.3 rad after
step 68 in an earlier recording, so the recorded actions are large enough to end every episode
soon.) In G1WBTObs's rollout one episode (env 5, steps 89-109, a robot falling under its feet's
contacts) grows from 1e-7 to 5e-4 rad over its last 4 steps, 5 of 1260 (step, env) pairs; so
what the task computes (rewards, observations) is compared where the two physics agree
(:func:`agreeing`, at least 99% of every rollout), and the physics itself within
:data:`PARTED` everywhere. Rewards, observations and the sampler follow within float32 rounding.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.envs import make_task
from unilab_jax.envs.motion.sampler import adaptive_frame, bin_probabilities
from unilab_jax.envs.motion.tracking import G1MotionTracking
from unilab_jax.envs.motion.tracking_obs import G1WBTObs
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task

GOLDEN = Path(__file__).parent / "golden" / "reference"
#: The tracker's profiles recorded from the reference.
TASKS = ("G1MotionTrackingSAC", "G1WBTObs")


@cache
def golden(name: str = "G1MotionTrackingSAC") -> tuple[dict[str, np.ndarray], dict]:
    with np.load(GOLDEN / f"{name}.npz") as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(str(arrays.pop("meta_json")))


@cache
def task_of(name: str) -> G1MotionTracking:
    return make_task(name)


class Draws:
    """The reference's logged ``np.random`` calls after its construction, consumed in order."""

    def __init__(self, arrays: dict[str, np.ndarray], calls: list[dict]) -> None:
        kept = [i for i, call in enumerate(calls) if call["tag"] != "construct"]
        self.values = [arrays[f"rng.{i:04d}"] for i in kept]
        self.calls = [calls[i] for i in kept]
        self.i = 0

    def next_is(self, fn: str, shape: list[int]) -> bool:
        call = self.calls[self.i] if self.i < len(self.calls) else {}
        return call.get("fn") == fn and call.get("shape") == shape

    def take(self, fn: str, shape: list[int] | None = None) -> np.ndarray:
        call, value = self.calls[self.i], self.values[self.i]
        assert call["fn"] == fn, f"draw {self.i}: expected {fn}, the reference called {call}"
        if shape is not None:
            assert call["shape"] == shape, f"draw {self.i}: expected {shape}, got {call}"
        self.i += 1
        return value

    def noise(self, task: G1MotionTracking) -> dict[str, np.ndarray]:
        return {name: self.take("uniform").astype(np.float32) for name, _ in task.noise_slots}

    def reset(self, n: int, task: G1MotionTracking) -> dict[str, np.ndarray]:
        bins, p = self.take("choice"), self.take("choice_p")
        offset = self.take("uniform")
        pose = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        vel = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        joints = self.take("uniform").astype(np.float32)
        out = {"bin": bins, "p": p, "offset": offset, "pose": pose, "vel": vel, "joints": joints}
        if isinstance(task, G1WBTObs):
            # G1WBTObs's provider: the encoder bias, the common rules (mass, centre of mass x, y,
            # z, kp, kd), the feet's friction, then y and z of the centre of mass again (kept).
            out["encoder_bias"] = self.take("uniform", [n, 29]).astype(np.float32)
            out["base_mass_delta"] = self.take("uniform", [n])
            com_x = self.take("uniform", [n])
            self.take("uniform", [n]), self.take("uniform", [n])  # overwritten below
            out["kp_multiplier"] = self.take("uniform", [n, 1])[:, 0]
            out["kd_multiplier"] = self.take("uniform", [n, 1])[:, 0]
            out["foot_friction"] = self.take("uniform", [n, 1])[:, 0]
            com_y, com_z = self.take("uniform", [n]), self.take("uniform", [n])
            out["com_offset"] = np.stack([com_x, com_y, com_z], axis=1)
        return out


def dr_draws(r: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """G1WBTObs's episode draws (``draw_randomisation``'s keys) from a reset's reference draws."""
    keys = ("encoder_bias", "base_mass_delta", "com_offset", "kp_multiplier", "kd_multiplier")
    return {k: jnp.asarray(r[k], jnp.float32) for k in (*keys, "foot_friction")}


@cache
def replay(name: str = "G1MotionTrackingSAC") -> dict[str, np.ndarray]:
    """Our task through the recorded rollout (module docstring); arrays named as the golden
    file's ``step.*`` / ``reset.*`` keys, plus the sampler's draws (and G1WBTObs's model
    fields and pushes)."""
    arrays, meta = golden(name)
    task = task_of(name)
    wbt = isinstance(task, G1WBTObs)
    cpu = jax.devices("cpu")[0]
    trace = trace_task(task, cpu)
    n, steps = meta["rollout"]["num_envs"], meta["rollout"]["num_steps"]
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        n,
        trace.template,
        trace.fields,
        name=name,
        nthread=1,
        model_fields=task.model_fields,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
    )
    draws = Draws(arrays, meta["rollout"]["rng_calls"])
    vmap = jax.vmap
    observe = jax.jit(vmap(task.observation))
    reward = jax.jit(vmap(lambda d, a, ts: (task.reward_terms(d, a, ts), task.reward(d, a, ts)[0])))
    terminated = jax.jit(vmap(task.terminated))
    if wbt:  # the step's noise is the observation's: the history's newest entry has it too
        advance = jax.jit(vmap(task.advance))
        fill = jax.jit(vmap(task.fill_history))
        episode = jax.jit(vmap(lambda d, qvel: task.episode_state(d, qvel)))
        xfrc_of = jax.jit(vmap(task.xfrc_applied))
        pushes = jax.jit(vmap(task.push_force))
    else:
        update = jax.jit(vmap(task.update_task_state))
        advance = lambda d, a, ts, k, noise: update(d, a, ts, k)  # noqa: E731
    ends = jax.jit(vmap(task.ends_episode))
    ctrl_of = jax.jit(vmap(task.ctrl_from_action))
    reference_state = jax.jit(vmap(task.reference_state))
    frames_of = jax.jit(lambda b, o: adaptive_frame(b, o, task.bins, task.num_frames))
    batch_update = jax.jit(lambda ts, term, trunc: task.update_batch(ts, term, trunc, None))
    ratio = task.config.adaptive_uniform_ratio
    out: dict[str, list] = {}

    def push(key: str, value) -> None:
        out.setdefault(key, []).append(np.asarray(value))

    def start(sub: dict, r: dict, qvel) -> dict:
        """A fresh episode's task state (its model fields applied by the caller) from the
        reference's draws; its history is filled by ``first_observation``."""
        if wbt:  # padded to the batch's size: one compilation of the model fields' program
            k = len(qvel)
            padded = jax.tree.map(
                lambda x: jnp.concatenate([x] + [x[:1]] * (n - k)),
                (dr_draws(r), jnp.asarray(qvel, jnp.float32)),
            )
            sub = {**sub, **jax.tree.map(lambda x: x[:k], episode(*padded))}
            for key, value in sub["model"].items():
                push(f"reset.model.{key}", value)
        return sub

    def first_observation(rows: dict, sub: dict) -> tuple[dict, dict]:
        noise = draws.noise(task)
        if wbt:
            sub = fill(PhysicsView(rows), sub, noise)
        return sub, observe(PhysicsView(rows), sub, noise)

    def params(sub: dict) -> dict[str, np.ndarray] | None:
        return {k: np.asarray(v, np.float64) for k, v in sub["model"].items()} if wbt else None

    # The first reset: the recorded initial state and frames (its draws are checked below).
    assert draws.take("randint").shape == (n,)  # the reference staggers steps, then zeroes them
    first = draws.reset(n, task)
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
    if wbt:
        ts["step_counter"] = jnp.zeros((n,), jnp.int32)
        ts["push_force"] = jnp.zeros((n, 3), jnp.float32)
    ts = start(ts, first, arrays["init.qvel"])
    physics.init(None, arrays["init.qpos"], arrays["init.qvel"], params(ts))
    ts, init_obs = first_observation(physics.view(), ts)
    push("init.first_frames", frames_of(jnp.asarray(first["bin"]), jnp.asarray(first["offset"])))
    push("init.first_p", bin_probabilities(jnp.zeros(task.bins, jnp.float32), ratio))
    for t in range(steps):
        action = jnp.asarray(arrays["step.action"][t])
        if wbt:  # our schedule decides whether the reference's push draw comes now
            pushing = np.any(np.asarray(pushes(ts["noise_key"], ts["step_counter"])) != 0, axis=1)
            assert pushing.all() or not pushing.any(), "the batch shares its push schedule"
            push("pushing", pushing[0])
            force = np.zeros((n, 3), np.float32)
            if pushing[0]:
                limit = np.float32(task.config.push_max_force)
                force = draws.take("uniform", [n, 3]).astype(np.float32) * limit
            ts = {**ts, "push_force": jnp.asarray(force)}
        push("qpos_before", physics.batch.qpos.astype(np.float32))
        push("qvel_before", physics.batch.qvel.astype(np.float32))
        push("frame_before", ts["frame"])
        ctrl = ctrl_of(action, ts)
        push("ctrl", ctrl)
        xfrc = np.asarray(xfrc_of(ts)) if wbt else None
        if wbt:
            push("xfrc", xfrc)
        physics.step(np.asarray(ctrl, np.float64), xfrc)
        push("qpos_after", physics.batch.qpos.copy())
        push("qvel_after", physics.batch.qvel.copy())
        view = PhysicsView(physics.view())
        terms, total = reward(view, action, ts)
        for term in meta["rollout"]["reward_terms"]:
            push(f"reward_raw.{term}", terms[term])
        push("reward", total)
        term = terminated(view, ts)
        noise = draws.noise(task)
        ts = advance(view, action, ts, ts["noise_key"], noise)
        trunc = ends(ts) & ~term
        push("terminated", term)
        push("truncated", trunc)
        obs = observe(view, ts, noise)
        push("obs", obs["obs"])
        push("critic", obs["critic"])
        ts = batch_update(ts, term, trunc)
        failures = ts["sampler_failures"][0]
        push("bin_failed_after", failures)
        done = np.flatnonzero(np.asarray(term | trunc))
        if done.size:
            r = draws.reset(done.size, task)
            push(
                "reset.p",
                np.broadcast_to(bin_probabilities(failures, ratio), (done.size, task.bins)),
            )
            push("reset.p_reference", np.broadcast_to(r["p"], (done.size, task.bins)))
            fresh = frames_of(jnp.asarray(r["bin"]), jnp.asarray(r["offset"], jnp.float32))
            qpos, qvel = reference_state(fresh, r["pose"], r["vel"], r["joints"])
            ts = {**ts}
            for key in ("frame", "obs_frame", "tracked_frame"):
                ts[key] = ts[key].at[done].set(fresh)
            ts["last_action"] = ts["last_action"].at[done].set(0.0)
            ts["clip_end"] = ts["clip_end"].at[done].set(task.num_frames - 1)
            sub = start(jax.tree.map(lambda v, done=done: v[done], ts), r, qvel)
            qpos, qvel = np.asarray(qpos, np.float64), np.asarray(qvel, np.float64)
            physics.init(done, qpos, qvel, params(sub))
            push("reset.frame", fresh)
            push("reset.qpos", physics.batch.qpos[done].astype(np.float32))
            push("reset.qvel", physics.batch.qvel[done].astype(np.float32))
            rows = {k: v[done] for k, v in physics.view().items()}
            sub, fresh_obs = first_observation(rows, sub)
            ts = jax.tree.map(lambda a, b, done=done: a.at[done].set(b), ts, sub)
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


@pytest.mark.parametrize("name", TASKS)
def test_the_clip_loads_as_the_reference_loads_it(name):
    arrays, _ = golden(name)
    task = task_of(name)
    ids = arrays["clip.body_ids"]
    np.testing.assert_array_equal(task.body_ids, ids)
    clips = task.clips
    np.testing.assert_array_equal(clips.joint_pos, arrays["clip.joint_pos"])
    np.testing.assert_array_equal(clips.joint_vel, arrays["clip.joint_vel"])
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_array_equal(getattr(clips, key)[:, ids], arrays[f"clip.{key}"], key)
    np.testing.assert_array_equal(task.default_pose, arrays["default_angles"])


@pytest.mark.parametrize("name", TASKS)
def test_the_first_reset_draws_the_recorded_frames(name):
    arrays, _ = golden(name)
    np.testing.assert_array_equal(replay(name)["init.first_frames"], arrays["init.frame"])


#: Where the two physics agree: the state after a step within these of the reference's
#: (qpos, qvel), as all of G1MotionTrackingSAC's rollout is.
AGREE = (1e-4, 4e-3)
#: G1WBTObs's whole rollout: one episode parts chaotically in its last 4 steps (module
#: docstring); what the task computes is compared where the physics agrees (:func:`agreeing`).
PARTED = {"G1MotionTrackingSAC": AGREE, "G1WBTObs": (1e-3, 3e-2)}
#: The share of (step, env) pairs that must agree.
COVERAGE = 0.99


@cache
def agreeing(name: str) -> np.ndarray:
    """[T, N]: the step's end state agrees (:data:`AGREE`) with the reference's, and did at
    every earlier step of the episode (its history shows them)."""
    arrays, _ = golden(name)
    ours = replay(name)
    qpos = np.abs(ours["step.qpos_after"] - arrays["step.qpos_after"]).max(axis=2)
    qvel = np.abs(ours["step.qvel_after"] - arrays["step.qvel_after"]).max(axis=2)
    close = (qpos <= AGREE[0]) & (qvel <= AGREE[1])
    ended = np.zeros_like(close)
    t_env = arrays["reset.t_env"]
    ended[t_env[:, 0], t_env[:, 1]] = True
    mask = np.zeros_like(close)
    parted = np.zeros(close.shape[1], bool)
    for t in range(close.shape[0]):
        parted |= ~close[t]
        mask[t] = ~parted
        parted &= ~ended[t]
    assert mask.mean() >= COVERAGE, f"the physics agrees on {mask.mean():.3f} of the rollout"
    return mask


@pytest.mark.parametrize("name", TASKS)
def test_controls_and_physics_follow_the_reference_through_resets(name):
    """Controls exact; the carried state within :data:`AGREE` on 99% of the steps (all of
    G1MotionTrackingSAC's), within :data:`PARTED` on all."""
    arrays, _ = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    np.testing.assert_allclose(ours["step.ctrl"], arrays["step.ctrl"], atol=1e-6)
    for key, bound, parted in zip(("qpos", "qvel"), AGREE, PARTED[name], strict=True):
        a, b = ours[f"step.{key}_before"], arrays[f"step.{key}_before"]
        np.testing.assert_allclose(a[1:][mask[:-1]], b[1:][mask[:-1]], atol=bound, err_msg=key)
        np.testing.assert_allclose(a, b, atol=parted, err_msg=key)
    np.testing.assert_array_equal(ours["step.frame_before"], arrays["step.frame_before"])
    np.testing.assert_array_equal(ours["step.frame_after"], arrays["step.frame_after"])


@pytest.mark.parametrize(
    ("name", "term"),
    [(name, term) for name in TASKS for term in golden(name)[1]["rollout"]["reward_terms"]],
)
def test_every_reward_term_matches_by_name(name, term):
    arrays, meta = golden(name)
    assert task_of(name).config.weights() == meta["rollout"]["reward_weights"]
    key = f"step.reward_raw.{term}"
    mask = agreeing(name)
    np.testing.assert_allclose(
        replay(name)[key][mask], arrays[key][mask], rtol=1e-3, atol=1e-5, err_msg=term
    )


@pytest.mark.parametrize("name", TASKS)
def test_the_reward_terminations_and_truncations_match(name):
    arrays, _ = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    np.testing.assert_allclose(
        ours["step.reward"][mask], arrays["step.reward"][mask], rtol=1e-4, atol=1e-6
    )
    np.testing.assert_array_equal(ours["step.terminated"], arrays["step.terminated"])
    np.testing.assert_array_equal(ours["step.truncated"], arrays["step.truncated"])


@pytest.mark.parametrize("name", TASKS)
def test_observations_match_with_the_reference_noise(name):
    """The observations after every step and every reset: G1WBTObs's carry the 5-step history
    of what the actor saw, its encoder bias and anchor noise."""
    arrays, meta = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    sizes = meta["rollout"].get("obs_sizes", {})  # recorded for G1WBTObs: 514 and 289
    for key in ("obs", "critic"):
        assert ours[f"init.{key}"].shape[1] == sizes.get(key, arrays[f"init.{key}"].shape[1])
        np.testing.assert_allclose(ours[f"init.{key}"], arrays[f"init.{key}"], atol=1e-5)
        a, b = ours[f"step.{key}"][mask], arrays[f"step.{key}"][mask]
        np.testing.assert_allclose(a, b, atol=4e-3, err_msg=key)


@pytest.mark.parametrize("name", TASKS)
def test_resets_draw_frames_states_and_observations_as_the_reference(name):
    arrays, _ = golden(name)
    ours = replay(name)
    t_env = arrays["reset.t_env"]
    np.testing.assert_array_equal(
        ours["reset.frame"], arrays["step.frame_after"][t_env[:, 0], t_env[:, 1]]
    )
    np.testing.assert_allclose(ours["reset.qpos"], arrays["reset.qpos"], atol=1e-6)
    np.testing.assert_allclose(ours["reset.qvel"], arrays["reset.qvel"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.obs"], arrays["reset.obs"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.critic"], arrays["reset.critic"], atol=1e-5)


@pytest.mark.parametrize("name", TASKS)
def test_the_sampler_rates_and_probabilities_match(name):
    arrays, _ = golden(name)
    ours = replay(name)
    np.testing.assert_allclose(
        ours["step.bin_failed_after"], arrays["step.bin_failed_after"], rtol=1e-6
    )
    np.testing.assert_allclose(ours["reset.p"], ours["reset.p_reference"], rtol=1e-6)


# --------------------------------------------------------------------- G1WBTObs's own parts
def test_wbt_model_and_randomised_geoms_are_the_references():
    """0.005 s x 4; the same 14 sole capsules get the drawn friction (same ids and names)."""
    arrays, meta = golden("G1WBTObs")
    task = task_of("G1WBTObs")
    assert task.model.opt.timestep == arrays["model.opt.timestep"] == 0.005
    assert task.n_frames == meta["rollout"]["sim_substeps"] == 4
    np.testing.assert_array_equal(task.friction_geoms, arrays["dr.foot_geom_ids"])
    names = [task.model.geom(int(i)).name for i in task.friction_geoms]
    assert names == arrays["dr.foot_geom_names"].tolist()
    assert task.push_body == int(arrays["dr.push_body_id"])
    np.testing.assert_allclose(task.nominal_kp, arrays["dr.nominal_kp"], rtol=1e-7)
    np.testing.assert_allclose(task.nominal_kd, arrays["dr.nominal_kd"], rtol=1e-7)


def test_wbt_domain_randomisation_gives_the_references_model_fields():
    """Every reset's model fields (the first reset's too) from the reference's draws against
    those its pool received: gains, pelvis mass and centre of mass, every geom's friction."""
    arrays, _ = golden("G1WBTObs")
    ours = replay("G1WBTObs")
    k = len(arrays["dr.reset.env_ids"])
    assert ours["reset.model.body_mass"].shape[0] == k
    np.testing.assert_allclose(
        ours["reset.model.actuator_gainprm"][:, :, 0], arrays["dr.reset.kp"], rtol=2e-7
    )
    np.testing.assert_allclose(
        -ours["reset.model.actuator_biasprm"][:, :, 1], arrays["dr.reset.kp"], rtol=2e-7
    )
    np.testing.assert_allclose(
        -ours["reset.model.actuator_biasprm"][:, :, 2], arrays["dr.reset.kd"], rtol=2e-7
    )
    np.testing.assert_allclose(
        ours["reset.model.body_mass"], arrays["dr.reset.body_mass"], rtol=2e-7
    )
    ipos = arrays["dr.reset.body_ipos"].reshape(k, -1, 3)
    np.testing.assert_allclose(ours["reset.model.body_ipos"], ipos, rtol=0, atol=1e-8)
    friction = arrays["dr.reset.geom_friction"].reshape(k, -1, 3)
    np.testing.assert_allclose(ours["reset.model.geom_friction"], friction, rtol=2e-7)


def test_wbt_pushes_follow_the_references_schedule_and_force():
    """Pushes on steps 0 and 200 of the rollout (every 200 steps of the batch's counter), the
    reference's force on the pelvis, nothing elsewhere."""
    arrays, _ = golden("G1WBTObs")
    ours = replay("G1WBTObs")
    recorded = np.any(arrays["step.xfrc"] != 0, axis=(1, 2, 3))
    np.testing.assert_array_equal(ours["step.pushing"], recorded)
    assert np.flatnonzero(recorded).tolist() == [0, 200]
    np.testing.assert_allclose(ours["step.xfrc"], arrays["step.xfrc"], rtol=1e-6, atol=1e-4)
