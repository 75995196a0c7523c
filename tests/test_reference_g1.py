"""Golden-file tests: our G1WalkFlat against the reference UniLab's (unilabsim/UniLab @ 9aa57115,
TD3 owner), recorded in ``tests/golden/reference/G1WalkFlat.npz`` (its README names every key).

Every check calls the functions the task itself runs (the model builder, the backends' physics
step, ``post_physics`` with the task's observation / reward / termination / carry update, the
module-level rules of ``g1.py``, ``g1_reset.py`` and ``g1_curriculum.py``), fed with the
reference's recorded inputs. Measured agreement (mujoco 3.17.0 here, mujoco-uni 3.8.0 in the
recording):

* model: every recorded ``model.*`` array is identical (max abs difference 0);
* C MuJoCo (``MujocoBatchPhysics``: cold solver, float32 state, the recorded per-env kp/kd),
  one control step from each of the 480 recorded states: 479 rows give the recorded state
  and sensors exactly after the float32 rounding both keep; one row (t=0, env 7, where MuJoCo
  3.8 and 3.17 take different contact/solver paths, as the spec's replay found) differs by
  5.3e-7 in qpos, 7.9e-5 in qvel and 1.05e-5 in sensordata. Then the observations (critic and
  actor, noise off) are exact outside that row (3.9e-6 in it), raw reward terms agree to
  1.5e-7 relative (float32 sums in another order), weighted terms to 3.6e-7, the reward to
  4.8e-7; termination, truncation, gait phase and curriculum scale exactly;
* MJX (our ``Env``, float32, vs the float64 recording) from 24 recorded states (every env at
  t=0 and t=30, 8 terminal rows): qpos 2e-7 median / 6.4e-5 worst, qvel 1.2e-5 / 4.7e-3
  (contacts, a 100-iteration Newton solve in float32), critic worst 2.4e-4, reward 4.1e-6,
  weighted terms 4.2e-6, terminations exact (the test's bounds are 3-25x these). This needs
  ``base.mjx_step``'s implicitfast rule for force-clamped actuators (C MuJoCo's): with MJX's
  own, a saturated wrist ended 1.3 rad/s off after one substep;
* the curriculum in float32 follows the reference's float64 scale to 5e-7 (mean length 1e-6
  relative) over 1600 updates.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import g1_mjx  # tests/g1_mjx.py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        importlib.util.find_spec("mjlab") is None,
        reason="the G1 model ships with mjlab: pip install --no-deps mjlab==1.6.0",
    ),
]

GOLDEN = Path(__file__).resolve().parent / "golden" / "reference" / "G1WalkFlat.npz"


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def meta(golden) -> dict:
    return json.loads(str(golden["meta_json"]))


@pytest.fixture(scope="module")
def quiet_task():
    """The owner's task with the observation noise off, as the rollout was recorded."""
    from unilab_jax.envs.robots.g1 import G1WalkFlat, G1WalkFlatConfig

    return G1WalkFlat(G1WalkFlatConfig(noise_level=0.0))


def _rows(x: np.ndarray) -> np.ndarray:
    """``[T, N, ...]`` -> ``[T * N, ...]`` (row ``t * N + env``)."""
    return x.reshape(-1, *x.shape[2:])


def _view(fields: dict):
    """The fields as the task sees them (``PhysicsView``, as the C MuJoCo backend passes)."""
    from unilab_jax.envs.mujoco_backend import PhysicsView

    return PhysicsView(fields)


def _terms() -> tuple[str, ...]:
    from unilab_jax.envs.robots.g1 import REWARD_TERMS

    return REWARD_TERMS


def _gains(kp: np.ndarray, kd: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row model fields ``[R, nu, 10]`` of recorded gains (float64, as recorded)."""
    from unilab_jax.envs.robots.g1_model import build_g1_model

    model = build_g1_model()
    gain = np.tile(model.actuator_gainprm, (len(kp), 1, 1))
    bias = np.tile(model.actuator_biasprm, (len(kp), 1, 1))
    gain[:, :, 0], bias[:, :, 1], bias[:, :, 2] = kp, -kp, -kd
    return {"actuator_gainprm": gain, "actuator_biasprm": bias}


def _state_before(golden, task) -> dict[str, jax.Array]:
    """Each recorded row's task carry before its step ``[R, ...]``: the previous action (0 at
    an episode's first step), the command, gait phase, gains and the curriculum scale used."""
    action = golden["step.action"]
    previous = np.concatenate([np.zeros_like(action[:1]), action[:-1]])
    previous[golden["step.episode_step_before"] == 0] = 0.0
    rows = len(_rows(action))
    scale = np.repeat(golden["step.curriculum_scale_used"], action.shape[1])
    gains = _gains(_rows(golden["step.kp"]), _rows(golden["step.kd"]))
    state = {
        "command": _rows(golden["step.commands"]),
        "last_action": _rows(previous),
        "gait_phase": _rows(golden["step.gait_phase_before"]),
        "noise_key": np.zeros((rows, 2), np.uint32),
        "model": gains,
        "penalty_scale": scale,
        "mean_episode_length": np.zeros(rows),
    }
    like = jax.eval_shape(
        jax.vmap(task.init_task_state), jax.random.split(jax.random.PRNGKey(0), 2)
    )
    return jax.tree.map(lambda s, x: jnp.asarray(x, s.dtype), like, state)


# --------------------------------------------------------------------- model and mirror
def test_model_is_the_reference_model(golden, quiet_task):
    model = quiet_task.model
    for key in (k for k in golden if k.startswith("model.")):
        field = key.removeprefix("model.")
        ours = getattr(model.opt, field[4:]) if field.startswith("opt.") else getattr(model, field)
        ours = np.asarray(ours)
        want = golden[key]
        if field.startswith("key_"):
            ours = ours[0]
        elif field in ("actuator_gainprm", "actuator_biasprm"):
            ours = ours[:, : want.shape[1]]
        assert ours.shape == want.shape, field
        np.testing.assert_array_equal(ours, want, err_msg=field)
    np.testing.assert_array_equal(quiet_task.default_pose, golden["default_angles"])
    pose_weights = np.asarray(quiet_task.config.pose_weights, np.float32)
    np.testing.assert_array_equal(pose_weights, golden["pose_weights"])


def test_names_and_sensor_layout_are_the_references(meta, quiet_task):
    import mujoco

    model, ref = quiet_task.model, meta["model"]
    for kind, n, names in (
        (mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body_names"),
        (mujoco.mjtObj.mjOBJ_GEOM, model.ngeom, "geom_names"),
        (mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint_names"),
        (mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu, "actuator_names"),
        (mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor, "sensor_names"),
        (mujoco.mjtObj.mjOBJ_SITE, model.nsite, "site_names"),
    ):
        assert [mujoco.mj_id2name(model, kind, i) for i in range(n)] == ref[names]
    from unilab_jax.envs.robots.g1_model import sensor_slices

    slices = {k: [v.start, v.stop] for k, v in sensor_slices(model).items()}
    assert slices == ref["sensor_slices"]
    option = ref["option"]
    assert (model.opt.integrator, model.opt.solver, model.opt.iterations) == (
        option["integrator"],
        option["solver"],
        option["iterations"],
    )
    assert (model.opt.ls_iterations, model.opt.tolerance, model.opt.cone) == (
        option["ls_iterations"],
        option["tolerance"],
        option["cone"],
    )
    assert (model.opt.jacobian, model.opt.impratio, model.opt.disableflags) == (
        option["jacobian"],
        option["impratio"],
        option["disableflags"],
    )


def test_mirror_is_the_references_left_right_map(golden, quiet_task):
    mirror = quiet_task.mirror
    for part in ("action", "obs", "critic"):
        ours = getattr(mirror, part)
        np.testing.assert_array_equal(ours.index, golden[f"symmetry.{part}_perm"], err_msg=part)
        np.testing.assert_array_equal(ours.sign, golden[f"symmetry.{part}_sign"], err_msg=part)


# --------------------------------------------------------------------- C MuJoCo, one step
@dataclasses.dataclass
class CStep:
    qpos: np.ndarray  # [R, nq] after the step (float32-rounded, as the backend keeps it)
    qvel: np.ndarray
    view: dict  # the PhysicsView fields the task reads
    state: object  # post_physics's EnvState [R]
    before: dict  # the task carry before the step [R]


@pytest.fixture(scope="module")
def c_step(golden, quiet_task) -> CStep:
    """Every recorded row stepped once by our C MuJoCo backend and our post-physics code."""
    from unilab_jax.envs.base import post_physics
    from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task

    task = quiet_task
    cpu = jax.devices("cpu")[0]
    trace = trace_task(task, cpu)
    rows = len(_rows(golden["step.action"]))
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        rows,
        trace.template,
        trace.fields,
        name="G1WalkFlat",
        nthread=2,
        model_fields=task.model_fields,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
    )
    try:
        gains = _gains(_rows(golden["step.kp"]), _rows(golden["step.kd"]))
        qpos = _rows(golden["step.qpos_before"]).astype(np.float64)
        physics.init(None, qpos, _rows(golden["step.qvel_before"]).astype(np.float64), gains)
        before = _state_before(golden, task)
        action = jnp.asarray(_rows(golden["step.action"]))
        ctrl = np.asarray(jax.jit(jax.vmap(task.ctrl_from_action))(action, before))
        np.testing.assert_array_equal(ctrl, _rows(golden["step.ctrl"]))
        physics.step(ctrl)
        view = physics.view()
        post = jax.jit(jax.vmap(lambda *a: post_physics(task, *a)[0].replace(physics=None)))
        keys = jax.random.split(jax.random.PRNGKey(0), rows)
        steps = jnp.asarray(_rows(golden["step.episode_step_before"]))
        state = post(PhysicsView(view), action, before, keys, steps)
        return CStep(
            np.array(physics.batch.qpos), np.array(physics.batch.qvel), view, state, before
        )
    finally:
        physics.close()


OUTLIER = 7  # row t=0, env 7: MuJoCo 3.8 and 3.17 part there (module docstring)


def test_c_mujoco_step_reproduces_the_recorded_physics(golden, c_step):
    qpos = _rows(golden["step.qpos_after"])
    qvel = _rows(golden["step.qvel_after"])
    dq = np.abs(c_step.qpos - qpos).max(axis=1)
    dv = np.abs(c_step.qvel - qvel).max(axis=1)
    others = np.arange(len(dq)) != OUTLIER
    # Elsewhere the only difference is the float32 rounding of the state (ours rounded, the
    # recording not): at most half a float32 ulp of |qvel| <= ~60 rad/s.
    assert dq.max() < 1e-6, dq.max()
    assert dv[others].max() < 4e-6, dv[others].max()
    assert dv[OUTLIER] < 1e-4, dv[OUTLIER]
    sensors = np.abs(c_step.view["sensordata"] - _rows(golden["step.sensordata"])).max(axis=1)
    assert sensors[others].max() == 0.0 and sensors[OUTLIER] < 2e-5


def test_c_mujoco_observation_reward_and_flags_are_the_references(golden, c_step, quiet_task):
    state = c_step.state
    critic = _rows(golden["step.critic"])
    error = np.abs(state.final_obs["critic"] - critic).max(axis=1)
    assert error[OUTLIER] < 1e-5 and np.delete(error, OUTLIER).max() == 0.0, error[OUTLIER]
    np.testing.assert_array_equal(state.final_obs["obs"], state.final_obs["critic"][:, :98])
    raw = jax.jit(jax.vmap(quiet_task.reward_terms))(
        _view(c_step.view),
        jnp.asarray(_rows(golden["step.action"])),
        c_step.before,
    )
    for term in _terms():
        # float32 sums in another order: 1.5e-7 relative (pose, 29 joints)
        np.testing.assert_allclose(
            raw[term], _rows(golden[f"step.reward_raw.{term}"]), rtol=1e-6, atol=1e-7, err_msg=term
        )
        np.testing.assert_allclose(
            state.metrics[f"reward/{term}"],
            _rows(golden[f"step.reward.{term}"]),
            rtol=0,
            atol=1e-6,
            err_msg=term,
        )
    np.testing.assert_allclose(state.reward, _rows(golden["step.reward"]), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(state.terminated, _rows(golden["step.terminated"]))
    np.testing.assert_array_equal(state.truncated, _rows(golden["step.truncated"]))
    np.testing.assert_array_equal(
        state.metrics["reward/penalty_scale"],
        np.repeat(golden["step.curriculum_scale_used"], 8).astype(np.float32),
    )


def test_gait_clock_advances_as_the_references(golden, c_step, quiet_task):
    update = jax.jit(jax.vmap(quiet_task.update_task_state))
    keys = jax.random.split(jax.random.PRNGKey(1), len(c_step.qpos))
    after = update(
        _view(c_step.view), jnp.asarray(_rows(golden["step.action"])), c_step.before, keys
    )
    np.testing.assert_array_equal(after["gait_phase"], _rows(golden["step.gait_phase_after"]))
    np.testing.assert_array_equal(after["last_action"], _rows(golden["step.action"]))


def test_curriculum_scale_over_the_rollout_is_the_references(golden, quiet_task):
    """The batch update after each recorded step (8 envs: window 1)."""
    update = jax.jit(quiet_task.update_batch)
    n = golden["step.terminated"].shape[1]
    carry = {
        "penalty_scale": jnp.full((n,), 0.5, jnp.float32),
        "mean_episode_length": jnp.zeros((n,), jnp.float32),
    }
    for t in range(golden["step.terminated"].shape[0]):
        assert float(carry["penalty_scale"][0]) == golden["step.curriculum_scale_used"][t]
        carry = update(
            carry,
            jnp.asarray(golden["step.terminated"][t]),
            jnp.asarray(golden["step.truncated"][t]),
            jnp.asarray(golden["step.episode_step_before"][t] + 1),
        )
        np.testing.assert_allclose(carry["penalty_scale"], golden["step.curriculum_scale"][t])
        np.testing.assert_allclose(
            carry["mean_episode_length"], golden["step.curriculum_avg_length"][t]
        )


# --------------------------------------------------------------------- MJX, one step
def _mjx_rows(golden) -> np.ndarray:
    """Rows stepped on MJX: every env at t=0 (env 7 is the C outlier) and at t=30, and the
    first 8 of the 9 terminal rows (3 batches of ``g1_mjx.BATCH``)."""
    n = golden["step.action"].shape[1]
    terminal = [t * n + e for t, e in golden["step.reset_rows.t_env"][: g1_mjx.BATCH]]
    return np.asarray([*range(n), *range(30 * n, 31 * n), *terminal])


@pytest.fixture(scope="module")
def mjx_step(golden):
    """The recorded rows stepped by our MJX ``Env`` (the registered task: observation noise on,
    which leaves the critic and the noise-free slices of the observation alone)."""
    env, step = g1_mjx.shared()
    rows = _mjx_rows(golden)
    before = _state_before(golden, env.task)
    outs = []
    for chunk in np.split(rows, len(rows) // g1_mjx.BATCH):
        state = g1_mjx.states(
            env,
            _rows(golden["step.qpos_before"])[chunk],
            _rows(golden["step.qvel_before"])[chunk],
            jax.tree.map(lambda x, c=chunk: x[c], before),
            _rows(golden["step.episode_step_before"])[chunk],
            jax.random.PRNGKey(0),
        )
        outs.append(step(state, jnp.asarray(_rows(golden["step.action"])[chunk])))
    return rows, jax.tree.map(lambda *x: np.concatenate(x), *outs)


def test_mjx_step_follows_the_reference(golden, mjx_step):
    rows, out = mjx_step
    done = out.terminated | out.truncated
    np.testing.assert_array_equal(out.terminated, _rows(golden["step.terminated"])[rows])
    assert done.sum() == 8 and not done[:16].any()
    live = ~done  # where the step did not reset, the physics is the step's
    dq = np.abs(out.physics.qpos - _rows(golden["step.qpos_after"])[rows]).max(axis=1)[live]
    dv = np.abs(out.physics.qvel - _rows(golden["step.qvel_after"])[rows]).max(axis=1)[live]
    critic = _rows(golden["step.critic"])[rows]
    dc = np.abs(out.final_obs["critic"] - critic).max(axis=1)
    dr = np.abs(out.reward - _rows(golden["step.reward"])[rows])
    print(
        f"MJX vs reference, per row: qpos {np.median(dq):.1e} (max {dq.max():.1e}), qvel "
        f"{np.median(dv):.1e} ({dv.max():.1e}), critic {np.median(dc):.1e} ({dc.max():.1e}), "
        f"reward {np.median(dr):.1e} ({dr.max():.1e})"
    )
    # Measured: qpos 6.4e-5, qvel 4.7e-3, critic 2.4e-4, reward 4.1e-6 (worst rows).
    assert dq.max() < 2e-4 and dv.max() < 2e-2, (dq, dv)
    assert dc.max() < 2e-3 and dr.max() < 1e-4, (dc, dr)
    # The noise-free parts of the noisy actor observation (gyro and up vector: noise scale 0;
    # action, command, gait phase) are the critic's.
    obs = out.final_obs["obs"]
    for part in (slice(0, 6), slice(64, 98)):
        np.testing.assert_array_equal(obs[:, part], out.final_obs["critic"][:, part])
    for term in _terms():
        np.testing.assert_allclose(
            out.metrics[f"reward/{term}"],
            _rows(golden[f"step.reward.{term}"])[rows],
            rtol=0,
            atol=1e-4,
            err_msg=term,
        )


# --------------------------------------------------------------------- observation noise
def test_noise_application_reproduces_the_recorded_noisy_observation(golden):
    from unilab_jax.envs.robots.g1 import (
        NOISE_SLOTS,
        apply_obs_noise,
        noise_scales,
        observation_vector,
    )

    config = _owner_config()
    scales = noise_scales(config)
    clean = {s: jnp.asarray(golden[f"noise.clean.{s}"]) for s, _ in NOISE_SLOTS}
    draws = {s: jnp.asarray(golden[f"noise.draw.{s}"], jnp.float32) for s, _ in NOISE_SLOTS}
    noisy = apply_obs_noise(clean, draws, config.noise_level, scales)
    for slot, _ in NOISE_SLOTS:
        np.testing.assert_array_equal(noisy[slot], golden[f"noise.noisy.{slot}"], err_msg=slot)
    critic = golden["noise.critic"]
    np.testing.assert_array_equal(
        observation_vector(noisy, critic[..., 64:98]), golden["noise.obs"]
    )
    np.testing.assert_array_equal(observation_vector(clean, critic[..., 64:98]), critic[..., :98])


def _owner_config():
    from unilab_jax.envs.robots.g1 import G1WalkFlatConfig

    return G1WalkFlatConfig()


def test_owner_noise_is_the_references(meta):
    from unilab_jax.envs.robots.g1 import noise_scales

    owner = meta["env_cfg"]["noise_config_owner"]
    config = _owner_config()
    assert config.noise_level == owner["level"]
    scales = noise_scales(config)
    for slot in scales:
        assert scales[slot] == owner[f"scale_{slot}"], slot


def test_our_noise_draws_are_uniform_on_the_right_slices(golden, c_step):
    """Our own draws (the task's ``observe``, owner noise): ``U(-s, s)`` times the slice's
    observation scaling on the joint slices, none elsewhere, and a clean critic."""
    from unilab_jax.envs.robots.g1 import G1WalkFlat

    task = G1WalkFlat(_owner_config())
    row = jax.tree.map(lambda x: x[:1], c_step.before)
    view = jax.tree.map(lambda x: np.repeat(x[:1], 4096, axis=0), c_step.view)
    state = jax.tree.map(lambda x: jnp.repeat(x, 4096, axis=0), row)
    state["noise_key"] = jax.random.split(jax.random.PRNGKey(3), 4096)
    obs = jax.jit(jax.vmap(task.observe))(_view(view), state)
    noise = np.asarray(obs["obs"] - obs["critic"][:, :98])
    np.testing.assert_array_equal(obs["critic"], np.broadcast_to(obs["critic"][0], (4096, 101)))
    for part, bound in ((slice(0, 6), 0.0), (slice(6, 35), 0.01), (slice(35, 64), 0.1 * 0.05)):
        x = noise[:, part]
        assert np.abs(x).max() <= bound * (1 + 1e-3) + 1e-6, part
        if bound:
            assert np.abs(x).max() > 0.99 * bound, part
            np.testing.assert_allclose(x.mean(), 0.0, atol=0.02 * bound)
            np.testing.assert_allclose(x.var(), bound**2 / 3, rtol=0.03)
    np.testing.assert_array_equal(noise[:, 64:], 0.0)


# --------------------------------------------------------------------- resets
def test_reset_from_the_recorded_draws_is_the_recorded_reset(golden, quiet_task):
    from unilab_jax.envs.robots.g1_reset import (
        actuator_gains,
        commands_from_draw,
        gait_phase_from_draw,
        reset_qpos_qvel,
    )

    config = quiet_task.config
    draw = {i: jnp.asarray(golden[f"reset_rng.{i:02d}"], jnp.float32) for i in range(3, 10)}
    key_qpos = jnp.asarray(golden["model.key_qpos"], jnp.float32)
    nv = quiet_task.model.nv
    qpos, qvel = jax.vmap(lambda xy, yaw, v: reset_qpos_qvel(key_qpos, xy, yaw, v, nv))(
        draw[3], draw[4], draw[5]
    )
    np.testing.assert_allclose(qpos, golden["reset.qpos"], rtol=0, atol=2e-7)
    np.testing.assert_array_equal(qvel, golden["reset.qvel"])
    command = commands_from_draw(draw[6], config.min_command_speed)
    np.testing.assert_array_equal(command, golden["reset.commands"])
    # p + pi: float32 here, float64 then rounded in the reference (one ulp).
    np.testing.assert_allclose(gait_phase_from_draw(draw[7]), golden["reset.gait_phase"], atol=5e-7)
    model = quiet_task.model
    gains = jax.vmap(
        lambda kp, kd: actuator_gains(
            jnp.asarray(model.actuator_gainprm, jnp.float32),
            jnp.asarray(model.actuator_biasprm, jnp.float32),
            kp,
            kd,
        )
    )(draw[8][:, 0], draw[9][:, 0])
    np.testing.assert_allclose(gains["actuator_gainprm"][:, :, 0], golden["reset.kp"], rtol=2e-7)
    np.testing.assert_allclose(-gains["actuator_biasprm"][:, :, 2], golden["reset.kd"], rtol=2e-7)
    np.testing.assert_allclose(-gains["actuator_biasprm"][:, :, 1], golden["reset.kp"], rtol=2e-7)


def test_reset_observation_is_the_references(golden, quiet_task):
    """The recorded reset states through our C MuJoCo reset (``mj_forward`` of the rows) and
    our observation."""
    from unilab_jax.envs.base import observation_groups
    from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, trace_task

    task = quiet_task
    trace = trace_task(task, jax.devices("cpu")[0])
    n = len(golden["reset.qpos"])
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        n,
        trace.template,
        trace.fields,
        name="G1WalkFlat",
        nthread=2,
        model_fields=task.model_fields,
        solver_warmstart=False,
        float32_state=True,
    )
    try:
        gains = _gains(golden["reset.kp"], golden["reset.kd"])
        physics.init(
            None,
            golden["reset.qpos"].astype(np.float64),
            golden["reset.qvel"].astype(np.float64),
            gains,
        )
        view = physics.view()
    finally:
        physics.close()
    sensors = np.abs(view["sensordata"] - golden["reset.sensordata"])
    assert sensors[:, :41].max() < 1e-6  # the contact sensors (41:49) depend on the solver
    like = jax.eval_shape(
        jax.vmap(task.init_task_state), jax.random.split(jax.random.PRNGKey(0), n)
    )
    state = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), like)
    state.update(
        command=jnp.asarray(golden["reset.commands"]),
        gait_phase=jnp.asarray(golden["reset.gait_phase"]),
    )
    obs = jax.jit(jax.vmap(lambda d, s: observation_groups(task, d, s)))(_view(view), state)
    np.testing.assert_allclose(obs["critic"], golden["reset.critic"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(obs["obs"], golden["reset.obs"], rtol=0, atol=1e-6)


def test_our_reset_draws_lie_in_the_references_ranges(quiet_task):
    task = quiet_task
    keys = jax.random.split(jax.random.PRNGKey(5), 4096)
    qpos, qvel = jax.jit(jax.vmap(task.init_qpos_qvel))(keys)
    state = jax.jit(jax.vmap(task.init_task_state))(keys)
    qpos, qvel = np.asarray(qpos), np.asarray(qvel)
    key_qpos = task.model.key_qpos[0]
    _uniform(qpos[:, :2], -0.5, 0.5)
    yaw = 2.0 * np.arctan2(qpos[:, 6], qpos[:, 3])
    _uniform(yaw, -math.pi, math.pi)
    np.testing.assert_allclose(qpos[:, 4:6], 0.0, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(qpos[:, 2], key_qpos[2], rtol=1e-7)
    np.testing.assert_allclose(qpos[:, 7:], np.broadcast_to(key_qpos[7:], (4096, 29)), rtol=1e-7)
    _uniform(qvel[:, :6], -0.5, 0.5)
    np.testing.assert_array_equal(qvel[:, 6:], 0.0)
    command = np.asarray(state["command"])
    speed = np.linalg.norm(command[:, :2], axis=1)
    assert np.all((speed == 0.0) | (speed > 0.2))
    # The zeroed share is the disc |v| <= 0.2 in the 1.6 x 0.8 rectangle: pi 0.04 / 1.28.
    np.testing.assert_allclose(np.mean(speed == 0.0), math.pi * 0.04 / 1.28, atol=0.015)
    moving = speed > 0.0
    _uniform(command[moving, 0], -0.6, 1.0, spread=False)
    _uniform(command[moving, 1], -0.4, 0.4, spread=False)
    _uniform(command[:, 2], -0.8, 0.8)
    phase = np.asarray(state["gait_phase"])
    _uniform(phase[:, 0], 0.0, 2.0 * math.pi)
    np.testing.assert_allclose(phase[:, 1] - phase[:, 0], math.pi, atol=1e-6)
    gains = state["model"]
    kp = np.asarray(gains["actuator_gainprm"][:, :, 0]) / task.model.actuator_gainprm[:, 0]
    kd = np.asarray(gains["actuator_biasprm"][:, :, 2]) / task.model.actuator_biasprm[:, 2]
    for multiplier in (kp, kd):
        np.testing.assert_allclose(multiplier, multiplier[:, :1] * np.ones(29), rtol=1e-6)
        _uniform(multiplier[:, 0], 0.9, 1.1)
    np.testing.assert_allclose(
        -np.asarray(gains["actuator_biasprm"][:, :, 1]),
        np.asarray(gains["actuator_gainprm"][:, :, 0]),
    )
    np.testing.assert_array_equal(state["last_action"], 0.0)


def _uniform(x: np.ndarray, low: float, high: float, spread: bool = True) -> None:
    """Within ``[low, high]`` (float32 rounding allowed) and, with ``spread``, filling it."""
    tol = 1e-6 * max(1.0, abs(low), abs(high))
    assert x.min() >= low - tol and x.max() <= high + tol, (x.min(), x.max())
    if spread:
        width = high - low
        assert x.min() < low + 0.01 * width and x.max() > high - 0.01 * width
        np.testing.assert_allclose(np.mean(x), 0.5 * (low + high), atol=0.03 * width)


# --------------------------------------------------------------------- curriculum
@pytest.mark.parametrize("num_envs", [4096, 8])
def test_curriculum_rule_reproduces_the_recorded_scales(golden, meta, num_envs):
    from unilab_jax.envs.robots.g1_curriculum import curriculum_window, update_penalty_curriculum

    config = _owner_config()
    window = curriculum_window(num_envs, config)
    assert window == meta["curriculum_drive"][f"n{num_envs}"]["window_size"]
    prefix = f"curriculum.n{num_envs}"
    counts = golden[f"{prefix}.counts"].astype(int)
    lengths = golden[f"{prefix}.lengths"].astype(np.float32)
    # One padded row per update: the terminated episodes' lengths, then padding.
    width = counts.max()
    batch = np.zeros((len(counts), width), np.float32)
    ended = np.arange(width) < counts[:, None]
    batch[ended] = lengths

    def update(carry, xs):
        carry = update_penalty_curriculum(*carry, *xs, window, config)
        return carry, carry

    start = (jnp.float32(config.curriculum_initial_scale), jnp.float32(0.0))
    _, (scale, average) = jax.jit(lambda xs: jax.lax.scan(update, start, xs))(
        (jnp.asarray(batch), jnp.asarray(ended))
    )
    print(
        f"curriculum n{num_envs}: |scale - reference| max "
        f"{np.abs(scale - golden[f'{prefix}.scale']).max():.1e}, mean length rel. "
        f"{np.abs(average / golden[f'{prefix}.average_length'] - 1).max():.1e}"
    )
    np.testing.assert_allclose(scale, golden[f"{prefix}.scale"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(average, golden[f"{prefix}.average_length"], rtol=1e-5)
