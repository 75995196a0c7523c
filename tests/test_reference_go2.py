"""Go2JoystickFlat against the reference UniLab's golden file.

``tests/golden/reference/Go2JoystickFlat.npz`` was recorded from the real reference (UniLab at
9aa57115, mujoco-uni 3.8.0; its README names every key). Each test feeds a recorded input to
the functions our task and backends run and compares with the recorded output:

1. the compiled model, field for field (exact);
2. one control step of C MuJoCo (our ``MujocoBatchPhysics`` with the task's ctrl, push and
   per-episode model fields) from every recorded state of the main and the push rollout, and
   the task's observation, reward and termination on our physics. MuJoCo 3.17 is not the
   reference's 3.8, so this agrees to the version difference the spec reports, not bitwise:
   measured qpos 2.6e-6, qvel 2.65e-4 (median 2.9e-6), sensors 4.4e-5, critic 2.65e-4 (its
   joint velocities), reward 8.3e-7;
3. observation, every reward term (raw and weighted), the reward, termination, truncation and
   the batch's carry through :func:`~unilab_jax.envs.base.post_physics` (what both backends
   run) on the *recorded* post-step physics: float32 rounding apart, exact (observations
   bitwise; raw terms to 1 float32 ulp, e.g. 1.5e-5 of an ``ang_vel_xy`` of 230);
4. one MJX step (our ``Env``'s ``MjxPhysics``) from recorded states: float32 and MJX's solver
   (:data:`MJX_QPOS_TOL`, :data:`MJX_QVEL_TOL`, :data:`MJX_QVEL_MEDIAN_TOL`);
5. the observation noise from the recorded draws, and our own draws' statistics;
6. resets built from the recorded draws (state, DR values, reset observation on C MuJoCo),
   the rollout's automatic resets, and our own reset draws' ranges;
7. the push schedule and force.

MJX keeps the nominal model's derived constants when the DR fields change; C MuJoCo (and the
reference) recompute them with ``mj_setConst``. Measured on all 480 recorded steps, MJX without
them: qvel median 8.3e-4 (max 2.4e-2); with those C MuJoCo computes injected: median 1.1e-4
(max 2.5e-2). So the task computes them in JAX (``setconst_weights``, checked against
``mj_setConst`` here): median 1.1e-4, max 2.5e-2 (qpos max 6.4e-4, median 2.1e-6); the maxima
are MJX's float32 solver (100 Newton iterations, elliptic cones, impratio 100), with or
without the constants. The median bound below fails without them (7.4e-4 on the steps
checked here, against 1.4e-4).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from unilab_jax.envs.base import Env, observation_groups, post_physics
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task
from unilab_jax.envs.robots.assets import RobotAssetError, robot_mjcf_path
from unilab_jax.envs.robots.go2 import (
    FEET,
    REWARD_TERMS,
    Go2JoystickFlat,
    Go2JoystickFlatConfig,
)

GOLDEN = Path(__file__).resolve().parent / "golden" / "reference" / "Go2JoystickFlat.npz"
N = 8  # envs of every recorded rollout

# C MuJoCo 3.17 vs the reference's 3.8, one control step from the same float32 state:
# measured max 2.63e-6 (qpos) and 2.65e-4 (qvel; median 2.9e-6).
C_QPOS_TOL = 1e-5
C_QVEL_TOL = 5e-4
# The sensors the task reads (measured 4.4e-5, foot contacts equal) and the reward.
C_SENSOR_TOL = 1e-4
C_REWARD_TOL = 1e-5
# MJX (float32) vs the reference, one control step: measured on the 48 states checked here
# qpos 5.0e-5, qvel 4.8e-3 (median 1.4e-4); over all 480 (module docstring) qpos 6.4e-4, qvel
# 2.5e-2 (median 1.1e-4). The checked steps include the push (t = 0) and falling robots.
MJX_QPOS_TOL = 1e-3
MJX_QVEL_TOL = 3e-2
MJX_QVEL_MEDIAN_TOL = 3e-4
MJX_STEPS = range(0, 60, 10)
# Golden noise slot names -> ours.
SLOT_NAMES = {
    "gyro": "gyro",
    "upvector": "upvector",
    "joint_pos_minus_default": "joint_pos",
    "joint_vel": "joint_vel",
    "local_linvel": "linvel",
}


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    try:
        robot_mjcf_path("go2")
    except RobotAssetError as err:
        pytest.skip(str(err))
    with np.load(GOLDEN) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def task(golden) -> Go2JoystickFlat:
    """The task as the golden rollouts ran it: the owner config with noise off."""
    return Go2JoystickFlat(Go2JoystickFlatConfig(noise_level=0.0))


@pytest.fixture(scope="module")
def post(task):
    """``post_physics`` of the task, jitted over a batch of ``N`` (compiled once)."""

    def run(data, action, task_state, key, step_count):
        state, _ = post_physics(task, data, action, task_state, key, step_count)
        return state.replace(physics=None)

    return jax.jit(jax.vmap(run))


@pytest.fixture(scope="module")
def c_physics(task):
    trace = trace_task(task, jax.devices("cpu")[0])
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        N,
        trace.template,
        trace.fields,
        name="Go2JoystickFlat",
        nthread=1,
        model_fields=task.model_fields,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
    )
    yield physics
    physics.close()


@pytest.fixture(scope="module")
def episode_model(task):
    return jax.jit(jax.vmap(task.episode_model))


# --------------------------------------------------------------------- recorded inputs
def _values(g: dict, prefix: str, t: int) -> dict[str, jax.Array]:
    """The DR values in force during step ``t`` (``randomised_values``' form)."""
    return {
        "kp": jnp.asarray(g[f"{prefix}.kp"][t, :, 0], jnp.float32),
        "kd": jnp.asarray(g[f"{prefix}.kd"][t, :, 0], jnp.float32),
        "base_mass": jnp.asarray(g[f"{prefix}.base_mass"][t], jnp.float32),
        "base_com": jnp.asarray(g[f"{prefix}.com"][t], jnp.float32),
        "gravity": jnp.asarray(g[f"{prefix}.gravity"][t], jnp.float32),
    }


def _state_before(g: dict, prefix: str, t: int, episode_model) -> dict[str, jax.Array]:
    """The task state in force when step ``t``'s action was chosen."""
    main = prefix == "step"
    phase = g["step.phase"][t - 1] if main and t else np.zeros(N, np.float32)
    feet = g["step.feet_phase"][t - 1] if main and t else np.zeros((N, 4), np.float32)
    return {
        "command": jnp.asarray(g["step.commands"][t] if main else np.zeros((N, 3))),
        "action": jnp.asarray(g["step.last_action_before"][t] if main else np.zeros((N, 12))),
        "model": episode_model(_values(g, prefix, t)),
        "noise_key": jax.random.split(jax.random.PRNGKey(t), N),
        "phase": jnp.asarray(phase, jnp.float32),
        "feet_phase": jnp.asarray(feet, jnp.float32),
        "step_counter": jnp.full((N,), g[f"{prefix}.step_counter_before"][t], jnp.int32),
        "push_force": jnp.asarray(g[f"{prefix}.xfrc_base"][t], jnp.float32),
    }


def _sensordata(task: Go2JoystickFlat, sensors: dict[str, np.ndarray]) -> np.ndarray:
    """``sensordata`` [n, nsensordata] with the sensors the task reads set from recorded
    values (``gyro``, ``local_linvel``, ``upvector`` [n, 3], ``feet_pos`` [n, 4, 3],
    ``feet_contact_found`` [n, 4]); the rest NaN, so reading them would show."""
    n = len(sensors["gyro"])
    out = np.full((n, task.model.nsensordata), np.nan, np.float32)
    slices = task.sensor_slices
    for name in ("gyro", "local_linvel", "upvector"):
        out[:, slices[name]] = sensors[name]
    for i, leg in enumerate(FEET):
        out[:, slices[f"{leg}_pos"]] = sensors["feet_pos"][:, i]
        out[:, slices[f"{leg}_foot_contact"]] = sensors["feet_contact_found"][:, i, None]
    return out


def _recorded_view(task: Go2JoystickFlat, g: dict, t: int) -> PhysicsView:
    """The physics after step ``t`` as the reference recorded it."""
    sensors = {k[len("step.sensor.") :]: v[t] for k, v in g.items() if k.startswith("step.sensor.")}
    return PhysicsView(
        {
            "qpos": jnp.asarray(g["step.qpos_after"][t], jnp.float32),
            "qvel": jnp.asarray(g["step.qvel_after"][t], jnp.float32),
            "sensordata": jnp.asarray(_sensordata(task, sensors)),
        }
    )


def _host(params: dict) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in params.items()}


# --------------------------------------------------------------------- 1. model
def test_model_equals_the_reference_model(golden, task) -> None:
    model = task.model
    meta = json.loads(str(golden["meta_json"]))
    keys = [k for k in golden if k.startswith("model.")]
    assert len(keys) == 36
    for key in keys:
        name = key[len("model.") :]
        if name == "default_angles":
            ours = np.asarray(task.default_pose)
        elif name == "key_qpos":
            ours = model.key_qpos[0]
        elif name.startswith("opt."):
            ours = np.asarray(getattr(model.opt, name[4:]))
        else:
            ours = np.asarray(getattr(model, name))
            if name in ("actuator_gainprm", "actuator_biasprm"):
                ours = ours[:, :3]
        np.testing.assert_allclose(ours, golden[key], rtol=0, atol=1e-9, err_msg=name)
    for kind, count in (
        ("body", model.nbody),
        ("joint", model.njnt),
        ("geom", model.ngeom),
        ("actuator", model.nu),
        ("sensor", model.nsensor),
    ):
        names = [getattr(model, kind)(i).name for i in range(count)]
        assert names == meta[f"{kind}_names"], kind
    opt = model.opt
    assert (opt.cone, opt.impratio, opt.iterations, opt.ls_iterations) == (
        mujoco.mjtCone.mjCONE_ELLIPTIC,
        100.0,
        100,
        50,
    )
    assert (task.n_frames, task.episode_length) == (2, 1000)


# --------------------------------------------------------------------- 2. C MuJoCo
@pytest.mark.parametrize("prefix", ["step", "push"])
def test_c_mujoco_step_reproduces_the_recorded_physics(
    golden, task, c_physics, episode_model, post, prefix
) -> None:
    """Our C MuJoCo backend, from each recorded state with the recorded DR values and push:
    the state after the step, and (main rollout) the observation, reward and termination
    the task computes from our physics."""
    ctrl_fn = jax.jit(jax.vmap(task.ctrl_from_action))
    xfrc_fn = jax.jit(jax.vmap(task.xfrc_applied))
    g, main = golden, prefix == "step"
    err = dict.fromkeys(("ctrl", "qpos", "qvel", "sensors", "critic", "reward"), 0.0)
    for t in range(len(g[f"{prefix}.ctrl"])):
        state = _state_before(g, prefix, t, episode_model)
        action = jnp.asarray(g["step.action"][t] if main else np.zeros((N, 12), np.float32))
        ctrl = np.asarray(ctrl_fn(action, state))
        before = g[f"{prefix}.qpos_before"][t], g[f"{prefix}.qvel_before"][t]
        c_physics.init(None, *before, _host(state["model"]))
        c_physics.step(ctrl, np.asarray(xfrc_fn(state)))
        batch = c_physics.batch
        err["ctrl"] = max(err["ctrl"], np.abs(ctrl - g[f"{prefix}.ctrl"][t]).max())
        err["qpos"] = max(err["qpos"], np.abs(batch.qpos - g[f"{prefix}.qpos_after"][t]).max())
        err["qvel"] = max(err["qvel"], np.abs(batch.qvel - g[f"{prefix}.qvel_after"][t]).max())
        if not main:
            continue
        view = c_physics.view()
        recorded = np.asarray(_recorded_view(task, g, t).sensordata)
        read = ~np.isnan(recorded)
        err["sensors"] = max(err["sensors"], np.abs(view["sensordata"] - recorded)[read].max())
        steps = jnp.asarray(g["step.steps_before"][t], jnp.int32)
        keys = jax.random.split(jax.random.PRNGKey(t), N)
        out = post(PhysicsView(view), action, state, keys, steps)
        critic = np.abs(out.final_obs["critic"] - g["step.critic"][t]).max()
        err["critic"] = max(err["critic"], critic)
        err["reward"] = max(err["reward"], np.abs(out.reward - g["step.reward"][t]).max())
        np.testing.assert_array_equal(out.terminated, g["step.terminated"][t])
    print(f"C MuJoCo one step ({prefix}):", {k: f"{v:.2e}" for k, v in err.items()})
    assert err["ctrl"] <= 1e-6
    assert err["qpos"] <= C_QPOS_TOL and err["qvel"] <= C_QVEL_TOL
    assert err["sensors"] <= C_SENSOR_TOL
    assert err["critic"] <= C_QVEL_TOL and err["reward"] <= C_REWARD_TOL


def test_observation_reward_and_ends_from_the_recorded_physics(
    golden, task, post, episode_model
) -> None:
    g = golden
    terms_fn = jax.jit(jax.vmap(task.reward_terms))
    err: dict[str, float] = {}

    def check(name: str, ours, ref, atol: float, rtol: float = 0.0) -> None:
        ours, ref = np.asarray(ours), np.asarray(ref)
        err[name] = max(err.get(name, 0.0), float(np.abs(ours - ref).max()))
        np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol, err_msg=name)

    for t in range(len(g["step.action"])):
        state = _state_before(g, "step", t, episode_model)
        view, action = _recorded_view(task, g, t), jnp.asarray(g["step.action"][t])
        steps = jnp.asarray(g["step.steps_before"][t], jnp.int32)
        out = post(view, action, state, jax.random.split(jax.random.PRNGKey(t), N), steps)
        check("obs", out.final_obs["obs"], g["step.obs"][t], 1e-5)
        check("critic", out.final_obs["critic"], g["step.critic"][t], 1e-5)
        check("reward", out.reward, g["step.reward"][t], 1e-6)
        raw = terms_fn(view, action, state)
        for name in REWARD_TERMS:
            # float32 ulps of terms up to ~230 (ang_vel_xy of a falling robot)
            check(f"raw.{name}", raw[name], g[f"step.reward_raw.{name}"][t], 1e-6, 1e-6)
            weighted = out.metrics[f"reward/{name}"]
            check(f"reward/{name}", weighted, g[f"step.reward.{name}"][t], 1e-6)
        np.testing.assert_array_equal(out.terminated, g["step.terminated"][t])
        np.testing.assert_array_equal(out.truncated, g["step.truncated"][t])
        np.testing.assert_array_equal(out.step_count, g["step.steps_after"][t])
        # The gait clock and the push counter are the batch's: kept where an episode ended.
        np.testing.assert_array_equal(out.task_state["phase"], g["step.phase"][t])
        np.testing.assert_array_equal(out.task_state["feet_phase"], g["step.feet_phase"][t])
        assert np.all(np.asarray(out.task_state["step_counter"]) == t + 1)
    assert set(out.metrics) == {f"reward/{k}" for k in REWARD_TERMS}
    assert g["step.terminated"].sum() == 6 and g["step.truncated"].sum() == 1
    print("post_physics on the recorded physics:", {k: f"{v:.1e}" for k, v in err.items()})


# --------------------------------------------------------------------- 3. MJX
def test_mjx_step_reproduces_the_recorded_physics(golden, task, post, episode_model) -> None:
    from mujoco import mjx

    env = Env(task, "Go2JoystickFlat")
    template = mjx.make_data(env.physics.mjx_model, impl="jax")

    def one_step(qpos, qvel, action, task_state):
        data = template.replace(qpos=qpos, qvel=qvel)
        ctrl = task.ctrl_from_action(action, task_state)
        params, xfrc = task_state["model"], task.xfrc_applied(task_state)
        return env.physics.step(data, ctrl, params, xfrc)

    step = jax.jit(jax.vmap(one_step))
    g, qpos_err, qvel_err, obs_err = golden, [], [], 0.0
    for t in MJX_STEPS:
        state = _state_before(g, "step", t, episode_model)
        qpos = jnp.asarray(g["step.qpos_before"][t], jnp.float32)
        qvel = jnp.asarray(g["step.qvel_before"][t], jnp.float32)
        action = jnp.asarray(g["step.action"][t])
        data = step(qpos, qvel, action, state)
        qpos_err += list(np.abs(np.asarray(data.qpos) - g["step.qpos_after"][t]).max(axis=1))
        qvel_err += list(np.abs(np.asarray(data.qvel) - g["step.qvel_after"][t]).max(axis=1))
        steps = jnp.asarray(g["step.steps_before"][t], jnp.int32)
        out = post(data, action, state, jax.random.split(jax.random.PRNGKey(t), N), steps)
        obs_err = max(obs_err, float(np.abs(out.final_obs["critic"] - g["step.critic"][t]).max()))
        np.testing.assert_array_equal(out.terminated, g["step.terminated"][t])
    print(
        f"MJX one step: qpos max {max(qpos_err):.2e}, qvel max {max(qvel_err):.2e} "
        f"(median {np.median(qvel_err):.2e}), critic max {obs_err:.2e}"
    )
    assert max(qpos_err) <= MJX_QPOS_TOL and max(qvel_err) <= MJX_QVEL_TOL
    assert np.median(qvel_err) <= MJX_QVEL_MEDIAN_TOL
    assert obs_err <= MJX_QVEL_TOL  # the joint velocities dominate


def test_setconst_weights_match_mujoco(task, episode_model) -> None:
    """The derived constants the task hands MJX equal ``mj_setConst``'s (float32)."""
    keys = jax.random.split(jax.random.PRNGKey(3), N)
    values = jax.vmap(lambda k: task.randomised_values(task.draw_randomisation(k)))(keys)
    params = _host(episode_model(values))
    for i in range(N):
        model = copy.copy(task.model)
        for name in task.model_fields:
            target = model.opt.gravity if name == "opt.gravity" else getattr(model, name)
            target[...] = params[name][i]
        mujoco.mj_setConst(model, mujoco.MjData(model))
        for name in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
            ref = getattr(model, name)
            np.testing.assert_allclose(params[name][i], ref, rtol=2e-6, atol=1e-7, err_msg=name)


# --------------------------------------------------------------------- 4. noise
def test_noise_application_reproduces_the_recorded_noisy_observation(golden) -> None:
    task = Go2JoystickFlat()  # the owner's noise level 1.0
    g = golden
    observation = jax.jit(jax.vmap(task.observation))
    # (key pattern, step or None for the initial reset, noisy obs key, noisy critic key)
    cases = [("noise.{}.{}", t, "noise.obs", "noise.critic") for t in range(10)]
    cases.append(("noise.init_{}.{}", None, "noise.init_obs", "noise.init_critic"))
    for pattern, t, obs_key, critic_key in cases:
        pick = (lambda a, t=t: a[t]) if t is not None else (lambda a: a)
        clean, draws = {}, {}
        for k, ours in SLOT_NAMES.items():
            clean[ours] = jnp.asarray(pick(g[pattern.format("clean", k)]))
            draws[ours] = jnp.asarray(pick(g[pattern.format("raw", k)]))
        state = {  # the initial reset observation: no action yet, the clock not started
            "action": jnp.asarray(pick(g["noise.action"]) if t is not None else np.zeros((N, 12))),
            "command": jnp.asarray(g["noise.commands"][0]),  # never resampled
            "feet_phase": jnp.asarray(
                pick(g["noise.feet_phase"]) if t is not None else np.zeros((N, 4))
            ),
        }
        out = observation(clean, draws, state)
        np.testing.assert_allclose(out["obs"], pick(g[obs_key]), rtol=0, atol=1e-6)
        np.testing.assert_allclose(out["critic"], pick(g[critic_key]), rtol=0, atol=1e-6)
    for k, ours in SLOT_NAMES.items():
        assert float(g[f"noise.scale.{k}"]) == task.noise_scales[ours], k


def test_own_noise_draws_are_uniform_on_the_right_slices(task) -> None:
    noisy_task = Go2JoystickFlat()
    n = 4000
    view = PhysicsView(
        {
            "qpos": jnp.asarray(task.model.key_qpos[0], jnp.float32),
            "qvel": jnp.zeros(task.model.nv, jnp.float32),
            "sensordata": jnp.linspace(-1.0, 1.0, task.model.nsensordata, dtype=jnp.float32),
        }
    )
    state = {
        "action": jnp.zeros(12),
        "command": jnp.zeros(3),
        "feet_phase": jnp.zeros(4),
    }
    observe = jax.jit(jax.vmap(lambda k: noisy_task.observe(view, {**state, "noise_key": k})))
    out = observe(jax.random.split(jax.random.PRNGKey(0), n))
    clean = task.observe(view, {**state, "noise_key": jax.random.PRNGKey(0)})
    noise = np.asarray(out["critic"] - clean["critic"])  # [n, 52]
    np.testing.assert_array_equal(out["critic"][:, :49], out["obs"])  # the critic reuses it
    cfg = noisy_task.config
    for sl, scale in ((slice(6, 18), cfg.noise_joint_pos), (slice(18, 30), cfg.noise_joint_vel)):
        u = noise[:, sl] / (cfg.noise_level * scale)  # U(-1, 1) up to float32 rounding
        assert np.abs(u).max() <= 1.0 + 1e-3 and np.abs(u).max() > 0.99
        assert abs(u.mean()) < 0.02 and abs(u.var() - 1.0 / 3.0) < 0.02
        counts = np.histogram(u, bins=10, range=(-1.0, 1.0))[0] / u.size
        assert np.all(np.abs(counts - 0.1) < 0.01), counts
        # independent across slots and envs: no correlation between neighbouring columns
        assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.06
    silent = np.r_[0:6, 30:52]  # gyro, up vector, action, command, phases, linvel: scale 0
    np.testing.assert_array_equal(noise[:, silent], 0.0)
    # A step refreshes the noise key: the next observation gets new draws.
    before = {
        **state,
        "noise_key": jax.random.PRNGKey(1),
        "phase": jnp.zeros(()),
        "step_counter": jnp.zeros((), jnp.int32),
        "push_force": jnp.zeros(3),
    }
    after = noisy_task.update_task_state(view, jnp.zeros(12), before, jax.random.PRNGKey(2))
    assert not np.array_equal(after["noise_key"], before["noise_key"])


# --------------------------------------------------------------------- 5. resets
def _reset_observation(task, c_physics, observe, qpos, qvel, params, state) -> dict:
    c_physics.init(None, np.asarray(qpos), np.asarray(qvel), _host(params))
    view = PhysicsView(c_physics.view())
    return jax.device_get(observe(view, state))


def test_resets_from_the_recorded_draws(golden, task, c_physics, episode_model) -> None:
    g = golden
    raw = {k[len("resets.raw.") :]: v for k, v in g.items() if k.startswith("resets.raw.")}
    build = jax.jit(jax.vmap(task.initial_qpos_qvel))
    qpos, qvel = build(
        jnp.asarray(raw["xy_offset"], jnp.float32),
        jnp.asarray(raw["yaw"], jnp.float32),
        jnp.asarray(raw["base_qvel"], jnp.float32),
    )
    np.testing.assert_allclose(qpos, g["resets.qpos"], rtol=0, atol=3e-7)
    np.testing.assert_allclose(qvel, g["resets.qvel"], rtol=0, atol=1e-7)
    draws = {
        "base_mass_delta": raw["base_mass_delta"],
        "com_offset_x": raw["com_offset_x"],
        "gravity": raw["gravity"],
        "kp_multiplier": raw["kp_multiplier"],
        "kd_multiplier": raw["kd_multiplier"],
    }
    values = jax.jit(jax.vmap(task.randomised_values))(
        {k: jnp.asarray(v, jnp.float32) for k, v in draws.items()}
    )
    force = {k[len("resets.in_force.") :]: v for k, v in g.items() if "in_force" in k}
    np.testing.assert_allclose(values["kp"], force["kp"][:, 0], rtol=1e-6)
    np.testing.assert_allclose(values["kd"], force["kd"][:, 0], rtol=1e-6)
    np.testing.assert_allclose(values["base_mass"], force["base_mass"], rtol=1e-6)
    np.testing.assert_allclose(values["base_com"], force["com"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(values["gravity"], force["gravity"], rtol=1e-6)
    observe = jax.jit(jax.vmap(lambda d, s: observation_groups(task, d, s)))
    for rows in np.split(np.arange(len(qpos)), len(qpos) // N):
        params = episode_model(jax.tree.map(lambda x, r=rows: x[r], values))
        fields = _host(params)
        kp, kd = fields["actuator_gainprm"][..., 0], -fields["actuator_biasprm"][..., 2]
        np.testing.assert_allclose(kp, force["kp"][rows], rtol=1e-6)
        np.testing.assert_allclose(kd, force["kd"][rows], rtol=1e-6)
        state = {
            "action": jnp.zeros((N, 12)),
            "command": jnp.asarray(g["resets.commands"][rows]),
            "feet_phase": jnp.zeros((N, 4)),
            "noise_key": jax.random.split(jax.random.PRNGKey(0), N),
        }
        obs = _reset_observation(task, c_physics, observe, qpos[rows], qvel[rows], params, state)
        np.testing.assert_allclose(obs["obs"], g["resets.obs"][rows], rtol=0, atol=1e-5)
        np.testing.assert_allclose(obs["critic"], g["resets.critic"][rows], rtol=0, atol=1e-5)


def test_automatic_reset_observation_of_the_rollout(golden, task, c_physics, episode_model) -> None:
    """The rollout's automatic resets return the reset state's observation with the batch's
    current (advanced) gait clock."""
    g = golden
    k = len(g["step.autoreset.step"])
    rows = np.r_[np.arange(k), np.zeros(N - k, int)]  # padded to the batch
    a = {name: g[f"step.autoreset.{name}"][rows] for name in ("step", "qpos", "qvel", "commands")}
    nominal_com = task.model.body_ipos[task.model.body("base").id]
    values = {
        "kp": jnp.asarray(g["step.autoreset.kp"][rows], jnp.float32),
        "kd": jnp.asarray(g["step.autoreset.kd"][rows], jnp.float32),
        "base_mass": jnp.asarray(6.921 + g["step.autoreset.base_mass_delta"][rows], jnp.float32),
        "base_com": jnp.asarray(
            nominal_com + np.outer(g["step.autoreset.com_x"][rows], [1, 0, 0]), jnp.float32
        ),
        "gravity": jnp.tile(jnp.asarray([0.0, 0.0, -9.81], jnp.float32), (N, 1)),
    }
    state = {
        "action": jnp.zeros((N, 12)),
        "command": jnp.asarray(a["commands"]),
        "feet_phase": jnp.asarray(g["step.feet_phase"][a["step"], 0]),
        "noise_key": jax.random.split(jax.random.PRNGKey(0), N),
    }
    observe = jax.jit(jax.vmap(lambda d, s: observation_groups(task, d, s)))
    obs = _reset_observation(
        task, c_physics, observe, a["qpos"], a["qvel"], episode_model(values), state
    )
    expected = g["step.autoreset.critic_returned"]
    np.testing.assert_allclose(obs["critic"][:k], expected, rtol=0, atol=1e-5)


def test_own_reset_draws_lie_in_the_reference_ranges(task, episode_model) -> None:
    n = 2000
    keys = jax.random.split(jax.random.PRNGKey(7), n)
    qpos, qvel = jax.jit(jax.vmap(task.init_qpos_qvel))(keys)
    draws = jax.jit(jax.vmap(task.draw_randomisation))(keys)
    values = jax.jit(jax.vmap(task.randomised_values))(draws)
    home = task.model.key_qpos[0]
    qpos, qvel = np.asarray(qpos), np.asarray(qvel)
    assert np.all(np.abs(qpos[:, :2] - home[:2]) <= 0.5) and qpos[:, :2].std() > 0.25
    np.testing.assert_array_equal(qpos[:, 2], np.float32(0.3))
    np.testing.assert_allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(qpos[:, 4:6], 0.0)  # a turn about z only
    yaw = 2.0 * np.arctan2(qpos[:, 6], qpos[:, 3])
    assert yaw.min() < -3.0 and yaw.max() > 3.0
    np.testing.assert_array_equal(qpos[:, 7:], np.tile(np.float32(home[7:]), (n, 1)))
    assert np.all(np.abs(qvel[:, :6]) <= 0.5) and np.abs(qvel[:, :6]).max() > 0.49
    np.testing.assert_array_equal(qvel[:, 6:], 0.0)
    cmd = np.asarray(jax.jit(jax.vmap(task.draw_command))(keys))
    low, high = np.float32([-0.6, -0.4, -0.8]), np.float32([1.0, 0.4, 0.8])
    assert np.all(cmd >= low) and np.all(cmd <= high)
    for name, lo, hi in (("kp", 31.5, 38.5), ("kd", 0.45, 0.55), ("base_mass", 5.421, 8.421)):
        v = np.asarray(values[name])
        assert lo - 1e-5 <= v.min() and v.max() <= hi + 1e-5 and v.std() > 0.2 * (hi - lo) / 4
    com = np.asarray(values["base_com"])
    assert np.all(np.abs(com[:, 0] - 0.021112) <= 0.05 + 1e-7)
    np.testing.assert_array_equal(com[:, 1:], np.tile(np.float32([0.0, -0.005366]), (n, 1)))
    np.testing.assert_array_equal(values["gravity"], np.tile(np.float32([0, 0, -9.81]), (n, 1)))
    fields = episode_model(jax.tree.map(lambda x: x[:N], values))
    gain = np.asarray(fields["actuator_gainprm"][:, :, 0])
    assert np.all(gain == gain[:, :1])  # one kp per env, shared by the 12 actuators


# --------------------------------------------------------------------- 6. pushes
def test_push_schedule_matches_the_recorded_one(golden) -> None:
    g = golden
    task = Go2JoystickFlat(Go2JoystickFlatConfig(push_interval=4, noise_level=0.0))
    keys = jax.random.split(jax.random.PRNGKey(0), N)
    state = {
        "action": jnp.zeros((N, 12)),
        "phase": jnp.zeros(N),
        "feet_phase": jnp.zeros((N, 4)),
        "noise_key": keys,
        "step_counter": jnp.zeros(N, jnp.int32),
        "push_force": jax.vmap(task.push_force)(keys, jnp.zeros(N, jnp.int32)),
    }
    update = jax.jit(jax.vmap(lambda s, k: task.update_task_state(None, jnp.zeros(12), s, k)))
    xfrc = jax.jit(jax.vmap(task.xfrc_applied))
    pushed, counters = [], []
    for t in range(len(g["push.push"])):
        counters.append(int(state["step_counter"][0]))
        force = np.asarray(xfrc(state))
        pushed.append(bool(np.any(force)))
        if pushed[-1]:
            assert np.all(np.any(force[:, 1, :3] != 0, axis=1))  # every env, on the base
            np.testing.assert_array_equal(np.delete(force, 1, axis=1), 0.0)
            np.testing.assert_array_equal(force[:, 1, 3:], 0.0)  # no torque
        state = update(state, jax.random.split(jax.random.PRNGKey(t), N))
    assert counters == g["push.step_counter_before"].tolist()
    assert pushed == g["push.push"].tolist() == [t % 4 == 0 for t in range(9)]
    assert g["step.push"].tolist() == [t == 0 for t in range(60)]  # interval 750: step 0 only
    default = Go2JoystickFlat(Go2JoystickFlatConfig())
    steps = np.flatnonzero(np.asarray(jax.vmap(default.is_push_step)(jnp.arange(3001))))
    assert steps.tolist() == [0, 750, 1500, 2250, 3000]


def test_push_force_distribution(golden, task) -> None:
    force = np.asarray(
        jax.jit(jax.vmap(task.push_force))(
            jax.random.split(jax.random.PRNGKey(5), 20000), jnp.zeros(20000, jnp.int32)
        )
    )
    limit = np.array([1.0, 1.0, 0.5])
    u = force / limit
    assert np.all(np.abs(u) <= 1.0) and np.all(np.abs(u).max(axis=0) > 0.999)
    assert np.all(np.abs(u.mean(axis=0)) < 0.02) and np.all(np.abs(u.var(axis=0) - 1 / 3) < 0.01)
    pushes = golden["push.xfrc_base"][golden["push.push"]].reshape(-1, 3)
    recorded = np.concatenate([pushes, golden["step.xfrc_base"][0]])
    assert np.all(np.abs(recorded) <= limit) and np.abs(recorded / limit).max() > 0.9
    keys = jax.random.split(jax.random.PRNGKey(6), 8)
    off_schedule = jax.vmap(task.push_force)(keys, jnp.full(8, 5, jnp.int32))
    np.testing.assert_array_equal(off_schedule, 0.0)
