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
7. the push schedule and force;
8. the carried rollout (``carry.*``): our task on our C MuJoCo from the recorded first reset
   with the recorded actions, 40 steps through 10 automatic resets (every env at least once)
   and 6 pushes, carrying its own state (``post_physics``'s carry, as ``MujocoVecEnv`` runs
   it); only the reference's random draws (reset states, commands, DR values, push forces) are
   fed in, in its call order. Every ``carry.*`` key is compared (:data:`CARRY_BOUNDS`,
   :data:`CARRY_EXACT`) or named with the reason it is not. Measured: qpos 9.4e-6, qvel 9.4e-4,
   observations 9.4e-4, reward 3.3e-6; flags, counters, commands, last actions, gait clock and
   the reset observations as recorded. The MJX test also steps the carried rollout's pushed
   steps and compares the base's linear velocity (3.6e-5) against a bound (1e-4) ten times
   below a push's effect (1.0e-3 median).

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
# MJX's base linear velocity after the carried rollout's 6 pushed steps (48 rows) vs the
# recorded one: measured max 3.6e-5 (median 4.9e-7), while the push changes it by 1.0e-3
# (median; 1.7e-4 to 1.4e-3): MJX ignoring the force would be 10x past the bound.
MJX_PUSH_TOL = 1e-4
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
    main = prefix != "push"  # the push rollout: zero actions, no command or clock recorded
    phase = g[f"{prefix}.phase"][t - 1] if main and t else np.zeros(N, np.float32)
    feet = g[f"{prefix}.feet_phase"][t - 1] if main and t else np.zeros((N, 4), np.float32)
    return {
        "command": jnp.asarray(g[f"{prefix}.commands"][t] if main else np.zeros((N, 3))),
        "action": jnp.asarray(g[f"{prefix}.last_action_before"][t] if main else np.zeros((N, 12))),
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
    # The pushes: the carried rollout's pushed steps (the same program), with and without the
    # recorded force. A push changes the base's linear velocity by force x 0.02 s / mass
    # (about 3e-3 m/s at most): MJX's change of it must follow the recorded one far closer.
    dv_err, effect = [], []
    for t in np.flatnonzero(g["carry.push"]):
        state = _state_before(g, "carry", t, episode_model)
        qpos = jnp.asarray(g["carry.qpos_before"][t], jnp.float32)
        qvel = jnp.asarray(g["carry.qvel_before"][t], jnp.float32)
        action = jnp.asarray(g["carry.action"][t])
        pushed = np.asarray(step(qpos, qvel, action, state).qvel)[:, :3]
        free = {**state, "push_force": jnp.zeros_like(state["push_force"])}
        unpushed = np.asarray(step(qpos, qvel, action, free).qvel)[:, :3]
        dv_err += list(np.abs(pushed - g["carry.qvel_after"][t][:, :3]).max(axis=1))
        effect += list(np.abs(pushed - unpushed).max(axis=1))
    print(
        f"MJX pushed steps: base linear velocity max error {max(dv_err):.2e} (median "
        f"{np.median(dv_err):.2e}); the push's effect median {np.median(effect):.2e} "
        f"(min {min(effect):.2e}, max {max(effect):.2e})"
    )
    assert max(dv_err) <= MJX_PUSH_TOL and np.median(effect) > 5 * MJX_PUSH_TOL


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


# --------------------------------------------------------------------- 7. carried rollout
#: The recorded order of a reset's ``np.random.uniform`` draws (``carry_rng``; the initial
#: reset's ``randint`` of staggered episode steps comes first and is overwritten by the preset).
RESET_DRAWS = (
    "xy_offset",
    "yaw",
    "base_qvel",
    "command",
    "base_mass_delta",
    "com_offset_x",
    "gravity",
    "kp_multiplier",
    "kd_multiplier",
)
#: Max abs difference of our carried rollout (C MuJoCo 3.17, float32 JAX) from the recorded
#: one (mujoco-uni 3.8, float64 numpy) over its 40 steps x 8 envs, per golden key (without
#: ``carry.``), 2-3x the measured value in the comment. One control step from the reference's
#: own states differs by up to 2.65e-4 in qvel (MuJoCo 3.17 vs 3.8, module docstring); carried
#: over the short episodes here the difference stays below 1e-3.
CARRY_BOUNDS = {
    "qpos_before": 2.5e-5,  # 9.4e-6
    "qpos_after": 2.5e-5,  # 9.4e-6
    "qvel_before": 2.5e-3,  # 9.4e-4
    "qvel_after": 2.5e-3,  # 9.4e-4
    "time_before": 1e-7,  # 0 (float32 sums of 0.02 on both sides)
    "sensor.gyro": 2e-4,  # 7.5e-5
    "sensor.local_linvel": 3e-5,  # 1.0e-5
    "sensor.upvector": 5e-6,  # 2.0e-6
    "sensor.feet_pos": 5e-6,  # 1.7e-6
    "sensor.feet_contact_found": 0.0,  # 0
    "obs": 2.5e-3,  # 9.4e-4 (joint velocities)
    "critic": 2.5e-3,  # 9.4e-4
    "obs_returned": 2.5e-3,  # 9.4e-4 (the rows not reset; the reset rows: below)
    "critic_returned": 2.5e-3,  # 9.4e-4
    "reward": 1e-5,  # 3.3e-6
    "reward_sum_before_dt": 5e-4,  # 1.6e-4 (the reward / 0.02)
    "reward.*": 1e-5,  # weighted terms: 3.3e-6 (ang_vel_xy), 1.5e-6 (lin_vel_z), < 3e-7 others
    "reward_raw.ang_vel_xy": 5e-3,  # 1.6e-3 (|w_xy|^2 of a falling robot, up to ~200)
    "reward_raw.*": 1e-4,  # 2.7e-5 (tracking_ang_vel), 1.6e-5, 1.5e-5, < 4e-6 others
}
#: Every ``carry.*`` key of the golden file is compared (CARRY_COMPARED, by the two carried
#: rollout tests), fed in (CARRY_INPUTS) or named here with the reason it is not compared.
CARRY_INPUTS = {
    "carry.action": "the recorded actions drive the replay",
    "carry.episode_steps_preset": "the episode counters the recorder preset after the first "
    "reset (replacing its randint), so that every env truncates",
}
CARRY_NOT_COMPARED = {
    "carry.reset_mask": "terminated | truncated, both compared",
}


def _carry_draws(g: dict, meta: dict) -> tuple[dict, dict]:
    """The carried rollout's recorded draws by tag (``"init_state"``, ``"step<t>"``): reset
    draws ``{tag: {RESET_DRAWS name: [K, ...]}}`` and push draws ``{t: [N, 3]}``."""
    resets: dict[str, list] = {}
    pushes: dict[int, np.ndarray] = {}
    for i, call in enumerate(meta["carry_rollout"]["rng_calls"]):
        tag, value = call["tag"], g[f"carry_rng.{i:04d}"]
        if tag == "construct" or call["fn"] != "uniform":
            continue
        if call["low"] == -1.0 and call["high"] == 1.0 and call["shape"] == [N, 3]:
            assert tag.startswith("step") and tag not in resets  # before the step's resets
            pushes[int(tag[4:])] = value
        else:
            resets.setdefault(tag, []).append(value)
    assert all(len(v) == len(RESET_DRAWS) for v in resets.values()), resets.keys()
    return {t: dict(zip(RESET_DRAWS, v, strict=True)) for t, v in resets.items()}, pushes


@pytest.fixture(scope="module")
def carried(golden, c_physics):
    """The recorded carried rollout replayed by our task on our C MuJoCo batch, carrying our
    own state (``post_physics``, whose carry keeps the batch's gait clock and push counter and
    starts every other task-state leaf afresh where an episode ended, as ``MujocoVecEnv``
    runs it). Only what the reference draws at random is taken from the recording, in its
    call order: each reset's pose, velocity, command and DR values, and each push's force.
    Returns per key our values ``ours[key]`` ``[T, N, ...]`` (``init.*``: ``[N, ...]``;
    ``reset_rows.*``: ``[K, ...]``), keyed as the golden file."""
    from unilab_jax.envs.robots.go2_reward import reward_weights

    g, meta = golden, json.loads(str(golden["meta_json"]))
    cfg = meta["carry_rollout"]
    task = Go2JoystickFlat(
        Go2JoystickFlatConfig(noise_level=0.0, push_interval=cfg["push_interval"])
    )
    resets, pushes = _carry_draws(g, meta)
    weights = reward_weights(task.config)
    post = jax.jit(jax.vmap(lambda *a: post_physics(task, *a)[0].replace(physics=None, obs=None)))
    control = jax.jit(jax.vmap(task.ctrl_from_action))
    xfrc_fn = jax.jit(jax.vmap(task.xfrc_applied))
    observe = jax.jit(jax.vmap(lambda d, s: observation_groups(task, d, s)))
    terms_fn = jax.jit(jax.vmap(task.reward_terms))
    is_push = jax.jit(jax.vmap(task.is_push_step))
    read = jax.jit(jax.vmap(task.sensors))
    base = task.model.body("base").id

    def episodes(d: dict[str, np.ndarray]) -> tuple:
        """Our reset builders on the recorded draws of K envs: qpos, qvel, command, model."""
        f32 = {k: jnp.asarray(v, jnp.float32) for k, v in d.items()}
        qpos, qvel = jax.vmap(task.initial_qpos_qvel)(
            f32["xy_offset"], f32["yaw"], f32["base_qvel"]
        )
        draws = {
            "base_mass_delta": f32["base_mass_delta"],
            "com_offset_x": f32["com_offset_x"],
            "gravity": f32["gravity"],
            "kp_multiplier": f32["kp_multiplier"][:, 0],
            "kd_multiplier": f32["kd_multiplier"][:, 0],
        }
        values = jax.vmap(task.randomised_values)(draws)
        return qpos, qvel, f32["command"], jax.vmap(task.episode_model)(values)

    def with_rows(state: dict, ids: np.ndarray, command, model) -> dict:
        state = dict(state)
        state["command"] = state["command"].at[ids].set(command)
        state["model"] = jax.tree.map(lambda x, y: x.at[ids].set(y), state["model"], model)
        return state

    ours: dict[str, list] = {}

    def put(key: str, value) -> None:
        ours.setdefault(key, []).append(np.array(value))  # a copy: the batch's are views

    keys = jax.random.split(jax.random.PRNGKey(0), N)  # noise off, resets and pushes recorded
    # The first reset: our init_task_state, its random leaves replaced by the recorded draws.
    state = jax.jit(jax.vmap(task.init_task_state))(keys)
    qpos, qvel, command, model = episodes(resets["init_state"])
    state = with_rows(state, np.arange(N), command, model)
    c_physics.init(None, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), _host(model))
    view = c_physics.view()
    obs = observe(PhysicsView(view), state)
    init = {
        "init.qpos": c_physics.batch.qpos.copy(),
        "init.qvel": c_physics.batch.qvel.copy(),
        "init.commands": np.asarray(state["command"]),
        "init_obs": np.asarray(obs["obs"]),
        "init_critic": np.asarray(obs["critic"]),
    }
    step_count = np.asarray(g["carry.episode_steps_preset"], np.int32)
    rows: dict[str, list] = {"t_env": [], "obs_next": [], "critic_next": []}
    for t in range(len(g["carry.action"])):
        # The push: our schedule on our carried counter, the recorded force draw.
        pushed = np.asarray(is_push(state["step_counter"]))
        assert pushed.all() == (t in pushes) and pushed.all() == pushed.any(), t
        if t in pushes:
            force = pushes[t] * np.asarray(task.config.push_max_force)
            state["push_force"] = jnp.asarray(force, jnp.float32)
        fields = _host(state["model"])
        put("push", pushed.any())
        put("xfrc_base", np.asarray(xfrc_fn(state))[:, base, :3])
        put("step_counter_before", state["step_counter"][0])
        put("steps_before", step_count)
        put("commands", state["command"])
        put("last_action_before", state["action"])
        put("kp", fields["actuator_gainprm"][..., 0])
        put("kd", -fields["actuator_biasprm"][..., 2])
        put("base_mass", fields["body_mass"][:, base])
        put("com", fields["body_ipos"][:, base])
        put("gravity", fields["opt.gravity"])
        put("qpos_before", c_physics.batch.qpos)
        put("qvel_before", c_physics.batch.qvel)
        put("time_before", c_physics.batch.time)
        action = jnp.asarray(g["carry.action"][t])
        ctrl = np.asarray(control(action, state))
        put("ctrl", ctrl)
        c_physics.step(ctrl, np.asarray(xfrc_fn(state)))
        view = c_physics.view()
        put("qpos_after", c_physics.batch.qpos)
        put("qvel_after", c_physics.batch.qvel)
        sensors = read(PhysicsView(view))
        for name, mine in SENSOR_NAMES.items():
            put(f"sensor.{name}", sensors[mine])
        raw = terms_fn(PhysicsView(view), action, state)
        out = post(PhysicsView(view), action, state, keys, jnp.asarray(step_count))
        total = np.zeros(N, np.float32)
        for name in REWARD_TERMS:
            put(f"reward_raw.{name}", raw[name])
            put(f"reward.{name}", out.metrics[f"reward/{name}"])
            total += np.asarray(raw[name]) * np.float32(weights[name])
        put("reward_sum_before_dt", total)
        put("reward", out.reward)
        put("terminated", out.terminated)
        put("truncated", out.truncated)
        put("steps_after", out.step_count)
        put("obs", out.final_obs["obs"])
        put("critic", out.final_obs["critic"])
        put("phase", out.task_state["phase"])
        put("feet_phase", out.task_state["feet_phase"])
        state = dict(out.task_state)
        done = np.flatnonzero(np.asarray(out.terminated | out.truncated))
        returned = {k: np.array(v) for k, v in out.final_obs.items()}
        if done.size:  # our reset (MujocoVecEnv._step's), the recorded draws
            assert f"step{t}" in resets, (t, done)  # the reference reset at this step too
            qpos, qvel, command, model = episodes(resets[f"step{t}"])
            # The draws are for the envs the reference reset, in env order.
            assert len(qpos) == len(done), (t, done)
            state = with_rows(state, done, command, model)
            c_physics.init(
                done, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), _host(model)
            )
            c_physics.refresh_rows(view, done)
            fresh = observe(PhysicsView(view), state)
            for k in returned:
                returned[k][done] = np.asarray(fresh[k])[done]
            rows["t_env"] += [[t, e] for e in done]
            rows["obs_next"].append(returned["obs"][done])
            rows["critic_next"].append(returned["critic"][done])
        put("obs_returned", returned["obs"])
        put("critic_returned", returned["critic"])
        step_count = np.asarray(out.step_count)
    result = {f"carry.{k}": np.stack(v) for k, v in ours.items()}
    result.update({f"carry.{k}": v for k, v in init.items()})
    result["carry.reset_rows.t_env"] = np.asarray(rows["t_env"], np.int32)
    for k in ("obs_next", "critic_next"):
        result[f"carry.reset_rows.{k}"] = np.concatenate(rows[k])
    return result


#: Golden sensor names -> the task's.
SENSOR_NAMES = {
    "gyro": "gyro",
    "local_linvel": "linvel",
    "upvector": "upvector",
    "feet_pos": "feet_pos",
    "feet_contact_found": "feet_found",
}
#: Compared exactly (flags, counters, what our carry holds): key -> absolute tolerance
#: (0: equal; float64 products of the reference's float32 draws round to 1 float32 ulp).
CARRY_EXACT = {
    "carry.terminated": 0,
    "carry.truncated": 0,
    "carry.steps_before": 0,
    "carry.steps_after": 0,
    "carry.step_counter_before": 0,
    "carry.push": 0,
    "carry.reset_rows.t_env": 0,
    "carry.commands": 0,
    "carry.init.commands": 0,
    "carry.last_action_before": 0,
    "carry.phase": 0,
    "carry.feet_phase": 0,
    "carry.ctrl": 1e-6,
    "carry.xfrc_base": 1e-7,
    "carry.kp": 4e-6,
    "carry.kd": 1e-7,
    "carry.base_mass": 1e-6,
    "carry.com": 1e-8,
    "carry.gravity": 1e-6,
    "carry.init.qpos": 3e-7,
    "carry.init.qvel": 1e-7,
    "carry.init_obs": 1e-5,
    "carry.init_critic": 1e-5,
    "carry.reset_rows.obs_next": 1e-5,
    "carry.reset_rows.critic_next": 1e-5,
}


def _carry_bound(key: str) -> float:
    name = key[len("carry.") :]
    if name in CARRY_BOUNDS:
        return CARRY_BOUNDS[name]
    return CARRY_BOUNDS[name.split(".")[0] + ".*"]


def test_carried_rollout_through_resets_follows_the_reference(golden, carried) -> None:
    """Our task on our C MuJoCo, carrying its own state through 40 steps in which every env
    ends and restarts (10 resets: 7 truncations, 3 falls) and 6 pushes land: physics, sensors,
    observations (those returned after a reset included), the reward and every reward term,
    raw and weighted, within :data:`CARRY_BOUNDS`."""
    g = golden
    ended = g["carry.terminated"] | g["carry.truncated"]
    assert ended.any(axis=0).all() and ended.sum() == len(g["carry.reset_rows.t_env"]) == 10
    assert g["carry.push"].sum() == 6
    keys = {k for k in g if k.startswith("carry.")}
    handled = set(CARRY_EXACT) | set(CARRY_INPUTS) | set(CARRY_NOT_COMPARED)
    approx = sorted(keys - handled)
    assert set(approx) <= set(carried), sorted(set(approx) - set(carried))
    shapes = {k: (carried[k].shape, g[k].shape) for k in approx}
    assert all(a == b for a, b in shapes.values()), shapes
    worst = {}
    for key in approx:
        ours, ref = np.asarray(carried[key], np.float64), np.asarray(g[key], np.float64)
        worst[key] = float(np.abs(ours - ref).max())
    print("carried rollout, max abs:", {k[6:]: f"{v:.1e}" for k, v in worst.items()})
    for key, err in worst.items():
        assert err <= _carry_bound(key), (key, err, _carry_bound(key))


def test_carried_rollout_ends_restarts_and_carries_as_the_reference(golden, carried) -> None:
    """Ends, restarts, episode counters, the push schedule and forces, commands, last actions,
    gait clock, DR values and the reset states and observations of our carried state: the
    reference's, exactly where both compute in float32, to its rounding where in float64."""
    g = golden
    for key, atol in CARRY_EXACT.items():
        ours, ref = np.asarray(carried[key]), np.asarray(g[key])
        assert ours.shape == ref.shape, (key, ours.shape, ref.shape)
        if atol == 0:
            np.testing.assert_array_equal(ours, ref.astype(ours.dtype), err_msg=key)
        else:
            np.testing.assert_allclose(ours, ref, rtol=0, atol=atol, err_msg=key)
    # An ended episode's last action is not carried into the next: the reset rows show 0.
    done = g["carry.reset_mask"]
    assert np.array_equal(done, g["carry.terminated"] | g["carry.truncated"])
    np.testing.assert_array_equal(carried["carry.last_action_before"][1:][done[:-1]], 0.0)
