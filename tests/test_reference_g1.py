"""Golden-file tests: our G1WalkFlat against the reference UniLab's (unilabsim/UniLab @ 9aa57115,
TD3 owner), recorded in ``tests/golden/reference/G1WalkFlat.npz`` (its README names every key),
and our G1WalkRough against its (SAC owner; ``G1WalkRough.npz``: the model with its height
field, the mirror map, a rollout through 50 resets). Over both: the model, the names and the
mirror map, and each recorded rollout replayed with our own state carried through the resets
(``_replay``; bounds and what they measure in :data:`ROLLOUT_BOUNDS`); MJX on the rough floor in
its own test (it has its own contact model there). The rest is G1WalkFlat's.

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
import functools
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

GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "reference"
#: The tasks with a golden file from ``bench/reference/golden_g1.py``; G1WalkRough's holds the
#: model, the mirror map and a rollout through resets (the env code the two share is tested on
#: G1WalkFlat's sections).
TASKS = ("G1WalkFlat", "G1WalkRough")


@functools.cache
def _recorded(name: str) -> tuple[dict[str, np.ndarray], dict]:
    """``name``'s golden arrays and its ``meta_json``."""
    with np.load(GOLDEN_DIR / f"{name}.npz") as z:
        golden = {k: z[k] for k in z.files}
    return golden, json.loads(str(golden["meta_json"]))


@functools.cache
def _rollout_task(name: str):
    """``name`` as its golden rollout ran: observation noise off, and the rollout's episode
    length and termination height (G1WalkRough's rollout shortens both: its recorder says why;
    G1WalkFlat's are the owner's)."""
    from unilab_jax.envs.registry import make_task

    meta = _recorded(name)[1]
    rollout, env = meta["rollout"], meta["env_cfg"]
    return make_task(
        name,
        {
            "noise_level": 0.0,
            "episode_length": rollout.get("max_episode_steps", env["max_episode_steps"]),
            "min_base_height": rollout.get("min_base_height", env["reward"]["min_base_height"]),
        },
    )


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return _recorded("G1WalkFlat")[0]


@pytest.fixture(scope="module")
def meta() -> dict:
    return _recorded("G1WalkFlat")[1]


@pytest.fixture(scope="module")
def quiet_task():
    """The owner's G1WalkFlat with the observation noise off, as the rollout was recorded."""
    return _rollout_task("G1WalkFlat")


@dataclasses.dataclass(frozen=True)
class Recorded:
    name: str
    golden: dict
    meta: dict
    task: object  # the task as the rollout ran (_rollout_task)


@pytest.fixture(scope="module", params=TASKS)
def recorded(request) -> Recorded:
    return Recorded(request.param, *_recorded(request.param), _rollout_task(request.param))


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
def test_model_is_the_reference_model(recorded):
    golden, model = recorded.golden, recorded.task.model
    # G1WalkRough's floor is a height field: its data, sizes and the floor geom's link to it
    assert ("model.hfield_data" in golden) == (recorded.name == "G1WalkRough")
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
    np.testing.assert_array_equal(recorded.task.default_pose, golden["default_angles"])
    pose_weights = np.asarray(recorded.task.config.pose_weights, np.float32)
    np.testing.assert_array_equal(pose_weights, golden["pose_weights"])


def test_names_and_sensor_layout_are_the_references(recorded):
    import mujoco

    model, ref = recorded.task.model, recorded.meta["model"]
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


def test_mirror_is_the_references_left_right_map(recorded):
    mirror, golden = recorded.task.mirror, recorded.golden
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


# --------------------------------------------------------------------- C MuJoCo, the rollout
#: The recorded order of a reset's draws (``rollout_rng``): base x, y; yaw; the free joint's 6
#: velocities; the command; the gait phase; the kp and kd multipliers.
RESET_DRAWS = ("xy", "yaw", "base_qvel", "command", "phase", "kp", "kd")
#: Per task, the bounds of the carried rollout (max abs over every step and env) and, in the
#: comment, what was measured (mujoco 3.17 here, 3.8 there). The state starts 1 float32 ulp
#: off the reference's (our reset computes in float32, its in float64) and the difference grows
#: about e-fold every 5 control steps while an episode lasts (one step from the reference's own
#: states agrees to 1e-6); a reset starts it again from that ulp.
ROLLOUT_BOUNDS = {
    # 60 owner steps, 9 falls: qpos 1.1e-4, qvel 6.4e-3, critic 7.3e-4, reward 2.0e-4
    "G1WalkFlat": dict(qpos=3e-4, qvel=2e-2, critic=2e-3, reward=6e-4),
    # 100 steps of 20-step episodes, 35 terminations and 15 truncations: qpos 6.0e-5, qvel
    # 1.3e-3, critic 1.3e-4, reward 6.7e-6
    "G1WalkRough": dict(qpos=2e-4, qvel=5e-3, critic=5e-4, reward=2e-5),
}


def _reset_draws(golden: dict, meta: dict) -> dict[str, dict[str, np.ndarray]]:
    """The rollout's reset draws by ``rollout_rng`` tag (``"init_state"``, ``"step<t>"``):
    each a :data:`RESET_DRAWS` dict of ``[K, ...]`` arrays for the K envs reset then, in env
    order (the first reset's ``randint`` of staggered steps is set back to 0 by the reference
    and unused)."""
    groups: dict[str, list[np.ndarray]] = {}
    for i, call in enumerate(meta["rollout"]["rng_calls"]):
        if call["tag"] != "construct" and call["fn"] == "uniform":
            groups.setdefault(call["tag"], []).append(golden[f"rollout_rng.{i:04d}"])
    assert all(len(v) == len(RESET_DRAWS) for v in groups.values()), groups.keys()
    return {tag: dict(zip(RESET_DRAWS, v, strict=True)) for tag, v in groups.items()}


def _episodes_from_draws(task, draws: dict[str, np.ndarray], carry: dict) -> tuple:
    """Fresh episodes from recorded draws through the task's reset builders (``g1_reset.py``,
    with our model's keyframe and gains): ``(qpos, qvel, task_state)`` ``[K, ...]``;
    ``carry``: the task state ``[K, ...]`` to start from, which gives every leaf the reference
    does not draw (at an automatic reset ``post_physics``'s carry, already the fresh episode's
    where one ended: its last action, its curriculum); only the drawn leaves are replaced."""
    from unilab_jax.envs.robots.g1_reset import (
        actuator_gains,
        commands_from_draw,
        gait_phase_from_draw,
        reset_qpos_qvel,
    )

    d = {k: jnp.asarray(v, jnp.float32) for k, v in draws.items()}
    model = task.model
    key_qpos = jnp.asarray(model.key_qpos[0], jnp.float32)
    gain = jnp.asarray(model.actuator_gainprm, jnp.float32)
    bias = jnp.asarray(model.actuator_biasprm, jnp.float32)
    qpos, qvel = jax.vmap(lambda xy, yaw, v: reset_qpos_qvel(key_qpos, xy, yaw, v, model.nv))(
        d["xy"], d["yaw"], d["base_qvel"]
    )
    state = {
        **carry,
        "command": commands_from_draw(d["command"], task.config.min_command_speed),
        "gait_phase": gait_phase_from_draw(d["phase"]),
        "model": jax.vmap(lambda kp, kd: actuator_gains(gain, bias, kp, kd))(
            d["kp"][:, 0], d["kd"][:, 0]
        ),
    }
    return qpos, qvel, state


@dataclasses.dataclass
class Replay:
    """Our carried rollout beside the recording: max abs differences ``error[name]`` per step
    and env ``[T, N]`` (``init_*``: per env ``[N]``; ``reset_*``: per automatic reset ``[K]``)
    and our flags and carry ``ours[name]`` ``[T, N, ...]``."""

    error: dict
    ours: dict


def _replay(rec: Recorded) -> Replay:
    """The recorded rollout with our task on our C MuJoCo batch, carrying our own state: the
    first reset and every automatic one built from the recorded draws, then each step's
    recorded action through ``ctrl_from_action``, the physics, ``post_physics`` and the batch
    update (the curriculum), as ``MujocoVecEnv`` runs them."""
    from unilab_jax.envs.base import model_params, observation_groups, post_physics
    from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task

    task, g = rec.task, rec.golden
    steps, n = g["step.action"].shape[:2]
    draws = _reset_draws(g, rec.meta)
    cpu = jax.devices("cpu")[0]
    trace = trace_task(task, cpu)
    observe = jax.jit(jax.vmap(lambda d, s: observation_groups(task, d, s)))
    post = jax.jit(jax.vmap(lambda *a: post_physics(task, *a)[0].replace(physics=None)))
    control = jax.jit(jax.vmap(task.ctrl_from_action))
    batch_update = jax.jit(task.update_batch)

    def params(state: dict) -> dict[str, np.ndarray]:
        return {f: np.asarray(v) for f, v in model_params(state).items()}

    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        n,
        trace.template,
        trace.fields,
        name=rec.name,
        nthread=2,
        model_fields=task.model_fields,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
    )
    keys = jax.random.split(jax.random.PRNGKey(0), n)  # unused: no noise, resets from draws
    error: dict[str, list] = {}
    ours: dict[str, list] = {}

    def diff(name: str, a, b) -> None:
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        error.setdefault(name, []).append(np.abs(a - b).reshape(len(a), -1).max(axis=1))

    try:
        qpos, qvel, state = _episodes_from_draws(
            task, draws["init_state"], jax.jit(jax.vmap(task.init_task_state))(keys)
        )
        physics.init(
            None, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), params(state)
        )
        obs = observe(PhysicsView(physics.view()), state)
        diff("init_qpos", physics.batch.qpos, g["init.qpos"])
        diff("init_qvel", physics.batch.qvel, g["init.qvel"])
        diff("init_critic", obs["critic"], g["init.critic"])
        diff("init_obs", obs["obs"], g["init.obs"])
        step_count = np.zeros(n, np.int32)
        reset_rows = {tuple(r): i for i, r in enumerate(g["step.reset_rows.t_env"])}
        for t in range(steps):
            for name, value in (
                ("episode_step_before", step_count),
                ("commands", state["command"]),
                ("gait_phase_before", state["gait_phase"]),
                ("kp", state["model"]["actuator_gainprm"][:, :, 0]),
                ("kd", -state["model"]["actuator_biasprm"][:, :, 2]),
                ("curriculum_scale_used", state["penalty_scale"][0]),
                ("last_action_before", state["last_action"]),
            ):
                ours.setdefault(name, []).append(np.asarray(value))
            action = jnp.asarray(g["step.action"][t])
            physics.step(np.asarray(control(action, state)))
            view = physics.view()
            out = post(PhysicsView(view), action, state, keys, jnp.asarray(step_count))
            diff("qpos", physics.batch.qpos, g["step.qpos_after"][t])
            diff("qvel", physics.batch.qvel, g["step.qvel_after"][t])
            diff("critic", out.final_obs["critic"], g["step.critic"][t])
            diff("obs", out.final_obs["obs"], g["step.critic"][t][:, :98])
            diff("reward", out.reward, g["step.reward"][t])
            for term in _terms():
                diff(f"reward.{term}", out.metrics[f"reward/{term}"], g[f"step.reward.{term}"][t])
            state = batch_update(
                out.task_state, out.terminated, out.truncated, jnp.asarray(step_count + 1)
            )
            for name, value in (
                ("terminated", out.terminated),
                ("truncated", out.truncated),
                ("gait_phase_after", out.task_state["gait_phase"]),
                ("curriculum_scale", state["penalty_scale"][0]),
                ("curriculum_avg_length", state["mean_episode_length"][0]),
            ):
                ours.setdefault(name, []).append(np.asarray(value))
            done = np.flatnonzero(np.asarray(out.terminated | out.truncated))
            recorded_done = np.flatnonzero(g["step.terminated"][t] | g["step.truncated"][t])
            # Our episodes must end where the reference's did, or there are no draws to follow.
            assert list(done) == list(recorded_done), (t, done, recorded_done)
            if done.size:  # the reset, C MuJoCo's way (MujocoVecEnv._step), from the draws
                carry = jax.tree.map(lambda x, i=done: x[i], state)
                qpos, qvel, fresh = _episodes_from_draws(task, draws[f"step{t}"], carry)
                physics.init(
                    done, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), params(fresh)
                )
                physics.refresh_rows(view, done)
                state = jax.tree.map(lambda x, y, i=done: x.at[i].set(y), state, fresh)
                obs = observe(PhysicsView(view), state)
                k = [reset_rows[(t, e)] for e in done]
                diff("reset_critic", obs["critic"][done], g["step.reset_rows.critic_next"][k])
                diff("reset_obs", obs["obs"][done], g["step.reset_rows.obs_next"][k])
            step_count = np.asarray(out.step_count)
    finally:
        physics.close()
    once = ("init", "reset")  # per reset row, not per step
    error_rows = {
        k: (np.concatenate if k.startswith(once) else np.stack)(v) for k, v in error.items()
    }
    return Replay(error_rows, {k: np.stack(v) for k, v in ours.items()})


@pytest.fixture(scope="module")
def replay(recorded) -> Replay:
    return _replay(recorded)


def test_carried_rollout_through_resets_follows_the_reference(recorded, replay):
    """Every env ends and restarts at least once (G1WalkRough: several times); physics,
    observations and each reward term of our own state stay within the task's bounds."""
    g, error = recorded.golden, replay.error
    ended = g["step.terminated"] | g["step.truncated"]
    assert ended.any(axis=0).all() and len(g["step.reset_rows.t_env"]) == ended.sum()
    worst = {k: float(v.max()) for k, v in error.items()}
    print(recorded.name, {k: f"{v:.1e}" for k, v in worst.items()})
    bounds = ROLLOUT_BOUNDS[recorded.name]
    for name in ("qpos", "qvel", "critic", "obs", "reward"):
        assert worst[name] < bounds.get(name, bounds["critic"]), (name, worst[name])
    for term in _terms():
        assert worst[f"reward.{term}"] < bounds["reward"], (term, worst[f"reward.{term}"])
    # The resets themselves are the recorded draws through our builders: exact up to the
    # reset quaternion's float32 rounding (one ulp; the first reset's qpos, every reset's
    # observation).
    assert worst["init_qpos"] < 1e-7 and worst["init_critic"] < 1e-6 and worst["init_obs"] < 1e-6
    assert worst["init_qvel"] < 1e-6
    assert worst["reset_critic"] < 2e-6 and worst["reset_obs"] < 2e-6


def test_carried_rollout_ends_restarts_and_carries_as_the_reference(recorded, replay):
    """Flags, step counts, commands, gains, gait clock and curriculum of our carried state:
    the reference's, exactly where it computes in float32, to its rounding where in float64."""
    g, ours = recorded.golden, replay.ours
    for name in ("terminated", "truncated", "episode_step_before", "commands"):
        np.testing.assert_array_equal(ours[name], g[f"step.{name}"], err_msg=name)
    # The gait clock: p + pi at a reset is float64 there (one ulp: up to 9.5e-7 at 2 pi + pi);
    # where an episode ended, our carry already holds the next episode's phase (the ended
    # one's advanced phase is in the compared final observation).
    np.testing.assert_allclose(ours["gait_phase_before"], g["step.gait_phase_before"], atol=1e-6)
    live = ~(ours["terminated"] | ours["truncated"])
    np.testing.assert_allclose(
        ours["gait_phase_after"][live], g["step.gait_phase_after"][live], rtol=0, atol=1e-6
    )
    for name in ("kp", "kd"):  # float64 products there
        np.testing.assert_allclose(ours[name], g[f"step.{name}"], rtol=2e-7, err_msg=name)
    np.testing.assert_array_equal(ours["curriculum_scale_used"], g["step.curriculum_scale_used"])
    # The last action our carry holds: the recorded one before, 0 at an episode's first step
    # (an ended episode's action is not carried into the next; the reference zeroes it).
    ended = g["step.terminated"] | g["step.truncated"]
    previous = np.where(ended[:-1, :, None], 0.0, g["step.action"][:-1])
    np.testing.assert_array_equal(ours["last_action_before"][0], 0.0)
    np.testing.assert_array_equal(ours["last_action_before"][1:], previous)
    np.testing.assert_allclose(ours["curriculum_scale"], g["step.curriculum_scale"], rtol=1e-6)
    np.testing.assert_allclose(
        ours["curriculum_avg_length"], g["step.curriculum_avg_length"], rtol=1e-6
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
    # The multipliers the reference recorded are the draws fed in; a reset episode starts at 0.
    np.testing.assert_allclose(draw[8][:, 0], golden["reset.kp_multiplier"], rtol=1e-7)
    np.testing.assert_allclose(draw[9][:, 0], golden["reset.kd_multiplier"], rtol=1e-7)
    assert not golden["reset.episode_step"].any()


#: Recorded keys no test compares, and why (every other key of G1WalkFlat.npz is compared by
#: a test of this file; ``test_reference_g1.py``'s model test reads every ``model.*`` key).
NOT_COMPARED = {
    "noise.action": "the noise rollout's actions: an input of the recording, not an output",
}


def test_the_keys_not_compared_are_recorded_and_named(golden):
    """The list above names keys the golden file holds (a renamed key must be looked at)."""
    assert set(NOT_COMPARED) <= set(golden)


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


# --------------------------------------------------------------------- MJX on the rough floor
def test_mjx_steps_the_rough_floor_near_the_reference():
    """MJX on the height field: one control step from every env's recorded state at t=5 (feet
    on the floor), through our physics step and ``post_physics``, against the reference's C
    MuJoCo. MJX finds the same geoms touching the floor, mostly at the same depth, but its
    height-field colliders return at most 4 contacts per geom (a manifold around the deepest
    prism) where C MuJoCo returns one per penetrating prism, so the feet feel other forces:
    measured, the env barely touching agrees as on the flat floor (qpos 1.5e-6) and the others
    differ by up to 7.8e-3 in the pelvis pose, 8.4e-2 rad in an ankle, 4.3 in a velocity, 0.26
    in the critic observation and 8.3e-3 in the reward (the bounds: 2-3 times that). The reset
    path is not compiled here (G1WalkFlat's test covers it): the floor's fixed contact slots
    (857) make MJX's compile minutes long on a CPU."""
    from unilab_jax.envs.base import Env, model_params, post_physics

    task = _rollout_task("G1WalkRough")
    g = _recorded("G1WalkRough")[0]
    physics = Env(task, "G1WalkRough").physics
    t = 5
    live = ~(g["step.terminated"][t] | g["step.truncated"][t])
    assert live.all()
    like = jax.eval_shape(
        jax.vmap(task.init_task_state), jax.random.split(jax.random.PRNGKey(0), len(live))
    )
    state = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), like)
    kp, kd = g["step.kp"][t], g["step.kd"][t]
    state.update(
        command=jnp.asarray(g["step.commands"][t]),
        gait_phase=jnp.asarray(g["step.gait_phase_before"][t]),
        last_action=jnp.asarray(g["step.action"][t - 1]),
        penalty_scale=jnp.full(len(kp), g["step.curriculum_scale_used"][t], jnp.float32),
        model=jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), _gains(kp, kd)),
    )

    def step(qpos, qvel, action, task_state, key, count):
        data = physics._template.replace(qpos=qpos, qvel=qvel)
        ctrl = task.ctrl_from_action(action, task_state)
        data = physics.step(data, ctrl, model_params(task_state))
        out, _ = post_physics(task, data, action, task_state, key, count)
        return out

    out = jax.jit(jax.vmap(step))(
        jnp.asarray(g["step.qpos_before"][t]),
        jnp.asarray(g["step.qvel_before"][t]),
        jnp.asarray(g["step.action"][t]),
        state,
        jax.random.split(jax.random.PRNGKey(0), len(kp)),
        jnp.asarray(g["step.episode_step_before"][t]),
    )
    error = np.abs(out.physics.qpos - g["step.qpos_after"][t])
    dbase, djoint = error[:, :7].max(), error[:, 7:].max()
    dv = np.abs(out.physics.qvel - g["step.qvel_after"][t]).max()
    dc = np.abs(out.final_obs["critic"] - g["step.critic"][t]).max()
    dr = np.abs(out.reward - g["step.reward"][t]).max()
    print(
        f"MJX on the rough floor: pelvis pose {dbase:.1e}, joints {djoint:.1e}, qvel {dv:.1e}, "
        f"critic {dc:.1e}, reward {dr:.1e}"
    )
    assert np.isfinite(out.physics.qvel).all() and np.isfinite(out.final_obs["critic"]).all()
    assert dbase < 2e-2 and djoint < 0.2 and dv < 10.0, (dbase, djoint, dv)
    assert dc < 0.6 and dr < 2e-2, (dc, dr)
    np.testing.assert_array_equal(out.terminated, g["step.terminated"][t])
