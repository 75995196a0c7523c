"""The G1 motion trackers held to the REAL reference UniLab (unilabsim/UniLab @ 9aa57115):
G1MotionTrackingSAC, G1FlipTrackingSAC and G1WallFlipTrackingSAC.

``tests/golden/reference/<task>.npz`` is a rollout of the reference's own env (6 envs, recorded
actions) through automatic resets, every env ending at least once, recorded by
``bench/reference/golden_tracking.py`` in the reference's venv on holosoma's box-lifting clip
(no flip clip is available; the flip tasks' code runs on any clip):

* G1MotionTrackingSAC: 120 steps, its observation noise on, 40 resets (falls and the clip's end);
* G1FlipTrackingSAC: 100 steps on the clip's first 40 frames (``meta.rollout.clip_frames``:
  every episode ends within 40 steps), 41 resets (24 terminations: falls and low bodies; 17
  clip ends), ``mixed`` starts;
* G1WallFlipTrackingSAC: 100 steps on the same 40 frames moved 0.2 m towards the wall
  (``clip_shift``), so that the robot touches the wall in three episodes (their states then
  part from the unmoved clip's by up to 0.2 rad), 29 resets (every one the clip's end: its
  terminations are off), ``uniform`` starts;
* G1WBTObs: 210 steps, 63 resets, pushes on steps 0 and 200, its domain randomisation (the
  encoder bias, masses, centres of mass, gains, friction and push forces are the reference's
  draws too), its one-step action latency and 5-step observation history.

The replay here drives OUR task from the recorded initial state with the recorded actions on
our C MuJoCo physics, carrying its own physics and task state from step to step (what crosses
a reset is the pipeline's ``next_episode``, the rule ``post_physics`` applies); the
reference's random draws (observation noise, the sampler's draws in each mode, the reset noise)
are fed to the task's pure functions in the reference's call order. Every recorded key is
compared: the compiled model, the env's resolved config, the clip as loaded, controls, the
physics state before each step, every reward term by name, the reward, terminations and
truncations, the observation and critic groups (after resets too), the reset states, and the
sampler's probabilities, frames and failure rates. One replay per task (cached), one set of
compiled functions per task.

Bounds: the physics is MuJoCo 3.17 against the reference's 3.8 over whole episodes (a step
alone agrees within 1e-6, ``test_reference_g1.py``); the recorded episodes last at most 40
steps, over which carried states stayed within 1.3e-5 (qpos) and 4e-4 (qvel) on
G1MotionTrackingSAC (2.1e-6 and 1.6e-4 on the flip, 2.6e-5 and 5e-4 on the wall flip), about a
tenth of the bounds below. (Longer episodes part: one of 65 steps
grew from 1e-7 to 0.3 rad after step 68 in an earlier recording, so the recorded actions are
large enough, or the clip short enough, to end every episode soon.) In G1WBTObs's rollout one
episode (a robot falling under its feet's contacts) grows from 1e-7 to 5e-4 rad over its last 4
steps, 5 of 1260 (step, env) pairs; so what the task computes (rewards, observations) is
compared where the two physics agree (:func:`agreeing`, at least 99% of every rollout), and the
physics itself within :data:`PARTED` everywhere. Rewards, observations and the sampler follow
within float32 rounding. The model: every recorded array exactly, except
geom sizes, positions and orientations within 1e-6 (the reference's backend rewrites the scene
through ``MjSpec.to_xml``, which writes 6 digits: capsules given by ``fromto`` move by up to 4e-7).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.envs.motion.clips import DEFAULT_MOTION_FILE, load_motion_clips
from unilab_jax.envs.motion.sampler import adaptive_frame, bin_probabilities, mixed_frame
from unilab_jax.envs.motion.tracking import G1MotionTracking
from unilab_jax.envs.motion.tracking_obs import G1WBTObs
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task
from unilab_jax.envs.pipeline import next_episode
from unilab_jax.envs.registry import make_task

GOLDEN_DIR = Path(__file__).parent / "golden" / "reference"
TASKS = ("G1MotionTrackingSAC", "G1FlipTrackingSAC", "G1WallFlipTrackingSAC", "G1WBTObs")
#: Model arrays the reference's XML round trip (6 digits) moves; compared within 1e-6.
ROUNDED_MODEL_FIELDS = ("geom_size", "geom_pos", "geom_quat")


@cache
def golden(name: str = "G1MotionTrackingSAC") -> tuple[dict[str, np.ndarray], dict]:
    with np.load(GOLDEN_DIR / f"{name}.npz") as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(str(arrays.pop("meta_json")))


@cache
def task_of(name: str) -> G1MotionTracking:
    """Our task as the golden file's rollout ran it: on the recorded cut of the clip, if any."""
    rollout = golden(name)[1]["rollout"]
    frames = rollout.get("clip_frames")
    if frames is None:
        return make_task(name)
    clip = _cut_clip(*frames, tuple(rollout.get("clip_shift", (0.0, 0.0, 0.0))))
    return make_task(name, {"motion_file": str(clip)})


@cache
def _cut_clip(start: int, stop: int, shift: tuple[float, float, float]) -> Path:
    """The default clip's frames ``[start, stop)``, its bodies moved by ``shift`` in the
    world, in the reference's format in a temporary file (as the recorder cuts the clip)."""
    model = make_task("G1MotionTrackingSAC").model
    clips = load_motion_clips(DEFAULT_MOTION_FILE, model)
    keys = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w",
            "body_ang_vel_w")  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="unilab_jax_clip_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # nothing left in /tmp
    path = folder / f"clip_{start}_{stop}.npz"
    arrays = {k: getattr(clips, k)[start:stop].copy() for k in keys}
    arrays["body_pos_w"][:, 1:] += np.asarray(shift, np.float32)  # row 0 is the world
    np.savez(path, fps=np.array([clips.fps], np.int32), **arrays)
    return path


class Draws:
    """The reference's logged ``np.random`` calls after its construction, consumed in order."""

    def __init__(self, arrays: dict[str, np.ndarray], calls: list[dict]) -> None:
        kept = [i for i, call in enumerate(calls) if call["tag"] != "construct"]
        self.values = [arrays[f"rng.{i:04d}"] for i in kept]
        self.calls = [calls[i] for i in kept]
        self.i = 0

    def take(self, fn: str, shape: list[int] | None = None) -> np.ndarray:
        call, value = self.calls[self.i], self.values[self.i]
        assert call["fn"] == fn, f"draw {self.i}: expected {fn}, the reference called {call}"
        if shape is not None:
            assert call["shape"] == shape, f"draw {self.i}: expected {shape}, got {call}"
        self.i += 1
        return value

    def noise(self, task: G1MotionTracking, n: int) -> dict[str, np.ndarray]:
        """The observation noise of a step (none drawn when the task's noise is off)."""
        if task.config.noise_level <= 0.0:
            return {name: np.zeros((n, size), np.float32) for name, size in task.noise_slots}
        return {name: self.take("uniform").astype(np.float32) for name, _ in task.noise_slots}

    def frames(self, task: G1MotionTracking, failures: jax.Array) -> dict[str, np.ndarray]:
        """The reset frames of the sampler's mode, from the reference's draws through our
        sampler's pure functions; with ``p`` (ours) and ``p_reference`` for ``adaptive``."""
        c = task.config
        if c.sampling_mode == "adaptive":
            bins, p = self.take("choice"), self.take("choice_p")
            offset = jnp.asarray(self.take("uniform"), jnp.float32)
            frames = adaptive_frame(jnp.asarray(bins), offset, task.bins, task.num_frames)
            ours = bin_probabilities(failures, c.adaptive_uniform_ratio)
            return {"frame": frames, "p": ours, "p_reference": p}
        if c.sampling_mode == "mixed":
            coin = jnp.asarray(self.take("random"), jnp.float32)
            uniform = jnp.asarray(self.take("randint"), jnp.int32)
            return {"frame": mixed_frame(coin, uniform, c.sampling_start_ratio)}
        assert c.sampling_mode == "uniform", c.sampling_mode
        return {"frame": jnp.asarray(self.take("randint"), jnp.int32)}

    def reset(self, task: G1MotionTracking, n: int, failures: jax.Array) -> dict[str, np.ndarray]:
        drawn = self.frames(task, failures)
        pose = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        vel = np.array([[self.take("uniform") for _ in range(6)] for _ in range(n)], np.float32)
        joints = self.take("uniform").astype(np.float32)
        out = {**drawn, "pose": pose, "vel": vel, "joints": joints}
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
def replay(name: str) -> dict[str, np.ndarray]:
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
    batch_update = jax.jit(lambda ts, term, trunc: task.update_batch(ts, term, trunc, None))
    # What crosses a reset is the pipeline's rule (post_physics's): every row's next episode
    # from the carry, of which only the rows that ended are taken and on which the reference's
    # draws (frames, reset noise, randomisation) are laid.
    next_state = jax.jit(vmap(lambda k, ts: next_episode(task, k, ts)[2]))
    reset_keys = jax.random.split(jax.random.PRNGKey(1), n)  # its draws are replaced

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
        noise = draws.noise(task, len(sub["frame"]))
        if wbt:
            sub = fill(PhysicsView(rows), sub, noise)
        return sub, observe(PhysicsView(rows), sub, noise)

    def params(sub: dict) -> dict[str, np.ndarray] | None:
        return {k: np.asarray(v, np.float64) for k, v in sub["model"].items()} if wbt else None

    # The first reset: the recorded initial state and frames (its draws are checked below).
    assert draws.take("randint").shape == (n,)  # the reference staggers steps, then zeroes them
    first = draws.reset(task, n, jnp.zeros(task.bins, jnp.float32))
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
    first_qpos, first_qvel = reference_state(first["frame"], first["pose"], first["vel"],
                                             first["joints"])  # fmt: skip
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
        noise = draws.noise(task, n)
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
            r = draws.reset(task, done.size, failures)
            if "p" in r:
                push("reset.p", np.broadcast_to(r["p"], (done.size, task.bins)))
                push("reset.p_reference", np.broadcast_to(r["p_reference"], (done.size, task.bins)))
            fresh = r["frame"]
            qpos, qvel = reference_state(fresh, r["pose"], r["vel"], r["joints"])
            sub = jax.tree.map(lambda v, done=done: v[done], next_state(reset_keys, ts))
            # (clip_end stays next_episode's: every recording here is of one clip, whose end is
            # the same for any frame drawn; a several-clip recording would lay it on too.)
            frames = jnp.asarray(fresh, jnp.int32)
            sub = {**sub, "frame": frames, "obs_frame": frames, "tracked_frame": frames}
            sub = start(sub, r, qvel)
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
    result["init.first_frames"] = np.asarray(first["frame"])
    result["init.first_qpos"], result["init.first_qvel"] = map(np.asarray, (first_qpos, first_qvel))
    return result


def _reward_params() -> list:
    return [
        pytest.param(name, term, id=f"{name}-{term}")
        for name in TASKS
        for term in golden(name)[1]["rollout"]["reward_terms"]
    ]


tasks = pytest.mark.parametrize("name", TASKS)


@tasks
def test_the_config_is_the_references(name):
    """Our config against the reference env's resolved one (``meta.rollout.env_cfg``): the
    reward terms, their weights and their summation order, kernel widths, thresholds, the
    sampler, reset and observation noise, the action scale per joint and the time steps."""
    _, meta = golden(name)
    ref = meta["rollout"]["env_cfg"]
    task = task_of(name)
    c = task.config
    scales = ref["reward_config"]["scales"]
    assert list(c.weights().items()) == [(k, v) for k, v in scales.items() if v != 0]
    assert list(c.weights()) == meta["rollout"]["reward_terms"]
    for std in ("root_pos", "root_ori", "body_pos", "body_ori", "body_lin_vel",
                "body_ang_vel", "joint_pos", "joint_vel"):  # fmt: skip
        assert getattr(c, f"std_{std}") == ref["reward_config"][f"std_{std}"], std
    scale = np.broadcast_to(np.asarray(c.action_scale, np.float64), (task.action_size,))
    np.testing.assert_array_equal(
        scale, np.broadcast_to(ref["control_config"]["action_scale"], (task.action_size,))
    )
    assert c.action_latency == ref["control_config"]["simulate_action_latency"]
    assert (c.sampling_mode, c.sampling_start_ratio) == (
        ref["sampling_mode"],
        ref["sampling_start_ratio"],
    )
    assert c.truncate_on_clip_end == ref["truncate_on_clip_end"]
    for ours, theirs in (
        ("anchor_pos_z_threshold", "anchor_pos_z_threshold"),
        ("anchor_ori_threshold", "anchor_ori_threshold"),
        ("ee_body_pos_z_threshold", "ee_body_pos_z_threshold"),
        ("undesired_contact_z", "undesired_contact_z_threshold"),
        ("terminate_on_undesired_contacts", "terminate_on_undesired_contacts"),
    ):
        assert getattr(c, ours) == ref[theirs], ours
    axes = ("x", "y", "z", "roll", "pitch", "yaw")
    assert c.pose_range == tuple(tuple(ref["pose_randomization"][a]) for a in axes)
    assert c.velocity_range == tuple(tuple(ref["velocity_randomization"][a]) for a in axes)
    assert c.joint_position_range == tuple(ref["joint_position_range"])
    assert c.noise_level == ref["noise_config"]["level"]
    if c.noise_level > 0:
        for slot, _ in task.noise_slots:
            assert getattr(c, f"noise_{slot}") == ref["noise_config"][f"scale_{slot}"], slot
    assert (c.anchor_body, c.body_names, c.ee_body_names) == (
        ref["anchor_body_name"],
        tuple(ref["body_names"]),
        tuple(ref["ee_body_names"]),
    )
    assert task.model.opt.timestep == ref["sim_dt"]
    assert task.n_frames == meta["rollout"]["sim_substeps"]
    assert task.control_dt == pytest.approx(ref["ctrl_dt"], abs=1e-12)
    assert c.episode_length == meta["rollout"]["max_episode_steps"]


@tasks
def test_the_model_is_the_references(name):
    """Every recorded ``model.*`` array of the reference's compiled scene (the wall's body and
    box included) against ours: exactly, the geoms' placement within 1e-6 (module docstring);
    the reference appends its body sensors after the scene's, which ours are."""
    arrays, meta = golden(name)
    keys = [k for k in arrays if k.startswith("model.")]
    if not keys:
        pytest.skip("this golden file records no model (G1WalkFlat's: test_reference_g1.py)")
    model = task_of(name).model
    info = meta["rollout"]["model"]
    assert (model.nbody, model.ngeom, model.nq, model.nv, model.nu) == (
        info["nbody"], info["ngeom"], info["nq"], info["nv"], info["nu"],
    )  # fmt: skip
    for key in keys:
        field = key.removeprefix("model.")
        if field.startswith("opt."):
            ours = getattr(model.opt, field[4:])
        elif field in ("key_qpos", "key_ctrl"):
            ours = getattr(model, field)[0]
        else:
            ours = getattr(model, field)
        ours, ref = np.asarray(ours), arrays[key]
        if field in ("actuator_gainprm", "actuator_biasprm"):
            ours = ours[:, :3]
        if field.startswith("sensor_"):
            ref = ref[: model.nsensor]
        if field in ROUNDED_MODEL_FIELDS:
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6, err_msg=field)
        else:
            np.testing.assert_array_equal(ours, ref, err_msg=field)


def test_the_wall_is_the_references_box():
    """The wall flip's wall: the last body and geom, exactly the reference's compiled ones."""
    arrays, _ = golden("G1WallFlipTrackingSAC")
    model = task_of("G1WallFlipTrackingSAC").model
    body, geom = model.body("wall").id, model.geom("wall_collision").id
    assert (body, geom) == (model.nbody - 1, model.ngeom - 1)
    assert model.body("wall").id == model.geom_bodyid[geom]
    for field in ("body_pos", "body_quat"):
        np.testing.assert_array_equal(getattr(model, field)[body], arrays[f"model.{field}"][body])
    for field in ("geom_type", "geom_size", "geom_pos", "geom_quat", "geom_friction",
                  "geom_contype", "geom_conaffinity", "geom_condim", "geom_solref",
                  "geom_solimp", "geom_margin"):  # fmt: skip
        np.testing.assert_array_equal(
            getattr(model, field)[geom], arrays[f"model.{field}"][geom], err_msg=field
        )


@tasks
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


@tasks
def test_the_first_reset_draws_the_recorded_frames_and_states(name):
    arrays, _ = golden(name)
    ours = replay(name)
    np.testing.assert_array_equal(ours["init.first_frames"], arrays["init.frame"])
    np.testing.assert_allclose(ours["init.first_qpos"], arrays["init.qpos"], atol=1e-6)
    np.testing.assert_allclose(ours["init.first_qvel"], arrays["init.qvel"], atol=1e-5)


#: Where the two physics agree: the state after a step within these of the reference's
#: (qpos, qvel), as all of the trackers' rollouts but G1WBTObs's are.
AGREE = (1e-4, 4e-3)
#: The whole rollout's bounds: G1WBTObs's parts chaotically in one episode's last 4 steps
#: (module docstring); what the task computes is compared where the physics agrees.
PARTED = {"G1WBTObs": (1e-3, 3e-2)}
#: The share of (step, env) pairs that must agree.
COVERAGE = 0.99


@cache
def agreeing(name: str) -> np.ndarray:
    """[T, N]: the step's end state agrees (:data:`AGREE`) with the reference's, and did at
    every earlier step of the episode (G1WBTObs's history shows them)."""
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
    if name not in PARTED:
        assert mask.all(), "the physics parted from the reference's"
    return mask


@tasks
def test_controls_and_physics_follow_the_reference_through_resets(name):
    """Controls exact; the carried state within :data:`AGREE` on every step (G1WBTObs: on 99%
    of them, within :data:`PARTED` on all)."""
    arrays, _ = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    np.testing.assert_allclose(ours["step.ctrl"], arrays["step.ctrl"], atol=1e-6)
    for key, bound, parted in zip(("qpos", "qvel"), AGREE, PARTED.get(name, AGREE), strict=True):
        a, b = ours[f"step.{key}_after"], arrays[f"step.{key}_after"]
        np.testing.assert_allclose(a[mask], b[mask], atol=bound, err_msg=f"{key} after")
        a, b = ours[f"step.{key}_before"], arrays[f"step.{key}_before"]
        np.testing.assert_allclose(a[1:][mask[:-1]], b[1:][mask[:-1]], atol=bound, err_msg=key)
        np.testing.assert_allclose(a, b, atol=parted, err_msg=f"{key} before")
    np.testing.assert_array_equal(ours["step.frame_before"], arrays["step.frame_before"])
    np.testing.assert_array_equal(ours["step.frame_after"], arrays["step.frame_after"])


@pytest.mark.parametrize(("name", "term"), _reward_params())
def test_every_reward_term_matches_by_name(name, term):
    arrays, _ = golden(name)
    key = f"step.reward_raw.{term}"
    mask = agreeing(name)
    np.testing.assert_allclose(
        replay(name)[key][mask], arrays[key][mask], rtol=1e-3, atol=1e-5, err_msg=term
    )


@tasks
def test_the_reward_terminations_and_truncations_match(name):
    arrays, _ = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    np.testing.assert_allclose(
        ours["step.reward"][mask], arrays["step.reward"][mask], rtol=1e-4, atol=1e-6
    )
    np.testing.assert_array_equal(ours["step.terminated"], arrays["step.terminated"])
    np.testing.assert_array_equal(ours["step.truncated"], arrays["step.truncated"])


@tasks
def test_observations_match_with_the_reference_noise(name):
    """The observations after every step and every reset (G1WBTObs's carry the 5-step history
    of what the actor saw, its encoder bias and anchor noise)."""
    arrays, meta = golden(name)
    ours = replay(name)
    mask = agreeing(name)
    sizes = meta["rollout"]["obs_sizes"]
    for key in ("obs", "critic"):
        assert ours[f"init.{key}"].shape[1] == sizes[key]
        np.testing.assert_allclose(ours[f"init.{key}"], arrays[f"init.{key}"], atol=1e-5)
        a, b = ours[f"step.{key}"][mask], arrays[f"step.{key}"][mask]
        np.testing.assert_allclose(a, b, atol=4e-3, err_msg=key)


@tasks
def test_resets_draw_frames_states_and_observations_as_the_reference(name):
    arrays, _ = golden(name)
    ours = replay(name)
    t_env = arrays["reset.t_env"]
    assert set(t_env[:, 1]) == set(range(arrays["init.qpos"].shape[0])), "an env never reset"
    np.testing.assert_array_equal(
        ours["reset.frame"], arrays["step.frame_after"][t_env[:, 0], t_env[:, 1]]
    )
    np.testing.assert_allclose(ours["reset.qpos"], arrays["reset.qpos"], atol=1e-6)
    np.testing.assert_allclose(ours["reset.qvel"], arrays["reset.qvel"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.obs"], arrays["reset.obs"], atol=1e-5)
    np.testing.assert_allclose(ours["reset.critic"], arrays["reset.critic"], atol=1e-5)


@tasks
def test_the_sampler_rates_and_probabilities_match(name):
    arrays, _ = golden(name)
    ours = replay(name)
    np.testing.assert_allclose(
        ours["step.bin_failed_after"], arrays["step.bin_failed_after"], rtol=1e-6
    )
    if task_of(name).config.sampling_mode == "adaptive":
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
