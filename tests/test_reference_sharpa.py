"""SharpaInhandRotation against the reference UniLab's golden file.

``tests/golden/reference/SharpaInhandRotation.npz`` was recorded from the real reference
(unilabsim/UniLab at 9aa57115, mujoco-uni 3.8.0) by ``bench/reference/golden_sharpa.py``, which
wraps the reference env's own methods and records every draw it makes: 4 envs (scales 0.8, 0.8,
1.2, 1.2) x 40 steps of recorded actions, every env truncating once (steps 6, 12, 26, 20) and env
0 dropping the object at step 34 (6 resets in all, the first one included; the layout is in
``tests/golden/reference/README.md``). Each test feeds recorded inputs to the functions our task
and backend run and compares with the recorded outputs:

1. the compiled model (``build_sharpa_model``) against ``model.*``, which the reference's
   backend holds for its first model variant (scale 0.8): the object's size, bounding volumes,
   inertia and the inverse weights derived from them are our scale-0.8 fields; and our config
   against the reference's resolved one (``meta_json``);
2. one control step of our C MuJoCo backend (``MujocoBatchPhysics`` with the task's
   post-step ``mj_forward``, float32 state and cold solver) from every recorded state with the
   recorded targets, object force and per-episode model values (``step.pool_*``);
3. the task's pure pieces on the recorded post-step physics: the tactile pipeline (force
   magnitudes from the sensors, clip, smoothing, the latency rule), the action rule, every
   reward term by name, the reward, terminations, truncations, the observation and critic and
   the carried state (targets, tactile state, the next step's object force) through
   ``post_physics``, with the reference's draws fed in (frame noise, tactile latency, the
   random-force refresh mask and normal draws) and the task state before each step made of our
   own reset state with the reference's recorded step values;
4. every reset (``reset.<k>``) built by our ``episode_state`` from its recorded draws (grasp,
   scale, friction multiplier, mass, centre-of-mass offset, gravity, gains, the two frames'
   joint noise): model values, height band, privileged values, observation and critic, and
   the first step's object force;
5. the carried rollout: our task on our C MuJoCo from the recorded first reset with the
   recorded actions, carrying its own state through ``post_physics`` / ``next_episode`` and
   the automatic resets as ``MujocoVecEnv`` applies them; only the reference's draws are fed
   in, in its order (:class:`FedSharpa`).

How the draws are fed: :class:`FedSharpa` is our task with its JAX draws replaced and nothing
else: ``frame`` takes the recorded joint noise, ``draw_tactile_u`` the recorded latency,
``next_object_force`` (``sharpa_randomisation``, during tracing) the recorded refresh mask and
normals through the task's own rule ``object_force_from_draws``, and ``init_episode`` the
recorded grasp, scale and domain-randomisation draws through the task's ``episode_state``.

Measured (MuJoCo 3.17 here against the reference's 3.8; the bounds' comments give each):
everything that does not go through the physics agrees to float32 rounding: the model but for
what MuJoCo 3.17's compiler computes otherwise (:data:`MODEL_TOL`), targets 1 ulp, the object
force 2.8e-8, tactile 2.4e-7, reward terms 1.1e-7, observation and critic 2.4e-7, resets (model
values, height band, privileged values exact or 1 ulp, observations 6e-8), and in the carried
rollout the targets, forces, episode model values, counters, truncations and the reset
observations (:data:`CARRY_RULES`).

OPEN (:data:`PHYSICS_MISMATCH`, strict xfails): our C MuJoCo does not reproduce the reference's
physics step. From the reference's recorded state, ctrl, object force and pool model values one
control step misses the recorded one by 1e-3 (qpos) / 2e-2 to 2.5e-1 (qvel) on every step and
env (max 5.9e-2 / 7.0). Found after this was written (debug runs, not yet a test): plain
mujoco-uni 3.8 stepping our model reproduces the recording (median qvel 2.4e-5; env 0's worst
step 2.9e-4 / 1.5e-2 unexplained), so the difference is MuJoCo 3.17's runtime on this
mesh-cylinder scene. (That debug replay also left the object's ``bvh_aabb`` at scale 1, which
cost the scale-1.2 env 0.36 qvel there; our runtime does not: ``object_scale_fields`` leaves it
to ``mj_setConst``, which in 3.17 recomputes it, and ``tests/test_sharpa.py`` holds the swapped
model to the one MuJoCo compiles at each scale, field for field.) The
carried rollout therefore parts from the first step (qpos 4e-3 after one step, 0.9 after 31;
obs up to 4, the tactile forces), and its ends part at step 31 (an end the reference did not
have), after the 4
truncations and their resets, which match.

Mutants tried (each made the named test fail, then was restored; run on a copy of the tree):
the ``torque`` weight -0.1 -> -0.101 (``test_reward_ends_and_observation_on_the_recorded_
physics``: reward.torque 3.5e-5 against 5e-7; and the config test); the frame history shifted the
wrong way, ``frames[:-1]`` for ``frames[1:]`` (the same test: obs 3.8e-2); the latency rule
ignored, ``last = smooth`` (``test_tactile_pipeline_...``: 2.0); the object force ignored in
``xfrc_applied`` (``test_targets_and_object_force_...``: 1.05 N; and the carried rules); the
force decay ``0.9`` per step instead of ``0.9 ** (0.05 / 0.08)`` (``test_object_force_carried_
to_the_next_step``: 3.8e-2); a reset's first frame replaced by its second
(``test_resets_from_the_recorded_draws``: obs).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.manipulation import sharpa_observation, sharpa_randomisation
from unilab_jax.envs.manipulation.grasp_cache import GraspCaches
from unilab_jax.envs.manipulation.sharpa import SharpaInhandRotation
from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig
from unilab_jax.envs.manipulation.sharpa_model import (
    OBJECT_BODY,
    OBJECT_GEOM,
    build_sharpa_model,
    object_scale_fields,
)
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task
from unilab_jax.envs.pipeline import post_physics, reset_observation, where_done
from unilab_jax.envs.robots.common import model_field

GOLDEN = Path(__file__).resolve().parent / "golden" / "reference" / "SharpaInhandRotation.npz"
N, T = 4, 40
SCALES = (0.8, 1.2)
NUM_HAND = 22
#: The contact sensors come first in the reference's sensordata (it adds frame sensors after
#: them): our model's 30 values.
NSENSOR = 30
TERMS = ("rotate", "obj_linvel", "pose_diff", "torque", "work", "object_pos")

# --------------------------------------------------------------------- bounds (measured)
#: 1. The compiled model: exact (1e-12) but for what MuJoCo 3.17's compiler computes otherwise
#: than the reference's 3.8 (our vendored scene compiled by the reference's mujoco-uni 3.8 gives
#: the recorded values exactly): the hand's mesh geoms' sizes and bounding volumes (measured
#: 8.5e-5 m, 6.1e-5, 2.3e-4), the gains' damping from ``dampratio`` (``actuator_biasprm[:, 2]``:
#: 2.3e-4, 0.087% relative; the replays feed the recorded gains), the inverse weights (2.9e-11);
#: and the ctrl ranges, which the reference's scene writes with other digits (7e-8 rad, the same
#: under 3.8).
MODEL_TOL = {
    "geom_size": 2e-4,
    "geom_rbound": 2e-4,
    "geom_aabb": 5e-4,
    "actuator_biasprm": 5e-4,
    "body_invweight0": 1e-10,
    "dof_invweight0": 1e-10,
    "actuator_ctrlrange": 1e-7,
}
# 2. One C MuJoCo control step (12 substeps) from the recorded float32 state: the bounds a
# MuJoCo version difference would stay within (Go2: qpos 2.6e-6, qvel 2.65e-4). NOT MET here:
# measured qpos 5.9e-2, qvel 7.0 (hand joints 1e-2 to 2.6e-1 on every step, contacts or not),
# contact sensors 25 N (PHYSICS_MISMATCH).
C_QPOS_TOL = 1e-4
C_QVEL_TOL = 1e-2
C_SENSOR_TOL = 1e-2
#: Why the physics tests are expected to fail (strict xfail: they flag the day they pass).
PHYSICS_MISMATCH = (
    "OPEN: one control step of our C MuJoCo from the reference's recorded state, ctrl, object "
    "force and pool model values differs systematically from the recorded step (qpos up to "
    "5.9e-2, qvel 7.0; per step and env 1e-3 / 2e-2 to 2.5e-1), far beyond float32 rounding "
    "(a 1e-7 perturbation of the state moves the step by 1e-6 to 7e-5 in qpos). Not explained "
    "by: mj_setConst or not, solver warm start, float32 substeps, 11/13 substeps, the nominal "
    "or recorded kd, a delayed ctrl, the object force, gravity; plain mujoco-uni 3.8 (the "
    "reference's) stepping our model the same way misses the recording as much (qpos 1.4e-2, "
    "qvel 0.36), so the reference's batched pool steps a model or state this replay does not "
    "reproduce (not recorded: its per-variant compiled model, the pool's own state)"
)
# 3. On the recorded physics: float32 rounding.
OBS_TOL = 1e-6  # measured 2.4e-7 (the tactile values: float32 norms of the sensors)
REWARD_TOL = 5e-7  # measured 1.1e-7 (rotate; the other terms < 1e-8)


# --------------------------------------------------------------------- the recording
@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def meta(golden) -> dict:
    return json.loads(str(golden["meta_json"]))


@dataclasses.dataclass(frozen=True)
class ResetRow:
    """One env of one recorded reset: ``reset.<k>`` row ``j``, env ``env``, run at the end of
    step ``t`` (-1: the first reset, before step 0)."""

    k: int
    j: int
    env: int
    t: int


def _reset_rows(g: dict) -> list[ResetRow]:
    """Every env of every recorded reset, in the reference's order."""
    times = [-1] + [t for t in range(T) for _ in range(int(g["step.n_resets"][t]))]
    assert len(times) == int(g["reset.count"])
    rows = []
    for k, t in enumerate(times):
        ids = g[f"reset.{k}.env_ids"]
        if t >= 0:  # an automatic reset: the envs whose episode ended at step t
            done = g["step.terminated"][t] | g["step.truncated"][t]
            assert ids.tolist() == np.flatnonzero(done).tolist(), (k, t)
        rows += [ResetRow(k, j, int(e), t) for j, e in enumerate(ids)]
    return rows


def _episode_rows(rows: list[ResetRow]) -> np.ndarray:
    """``[T, N]``: the reset row whose episode is running during each step of each env."""
    out = np.zeros((T, N), np.int32)
    for t in range(T):
        for e in range(N):
            out[t, e] = max(r for r, row in enumerate(rows) if row.env == e and row.t < t)
    return out


def _reset_at(rows: list[ResetRow], t: int) -> dict[int, int]:
    """env -> reset row, of the envs reset at the end of step ``t``."""
    return {row.env: r for r, row in enumerate(rows) if row.t == t}


# --------------------------------------------------------------------- our task, fed
class FedSharpa(SharpaInhandRotation):
    """Our task with the reference's draws in place of its JAX draws, nothing else changed
    (module docstring). :meth:`feeding` sets one env's draws while a function of it is traced:
    ``feed`` = ``{"noise": [k, 22]`` (the frames' joint noise ``U(-1, 1)``, in the order the
    task builds frames), ``"latency"`` [5] bool (the next step's tactile latency),
    ``"fresh"`` bool and ``"normal"`` [3] (the next step's random-force refresh and its normal
    draws), ``"scale_id"``, ``"grasp"`` [29], ``"draws"`` (``DR_DRAWS``) of a reset}."""

    _feed: dict | None = None
    _noise: list | None = None

    @contextlib.contextmanager
    def feeding(self, feed: dict):
        original = sharpa_randomisation.next_object_force
        self._feed = feed
        self._noise = [feed["noise"][i] for i in range(feed["noise"].shape[0])]

        def fed_force(key, force, mass, config):
            del key
            return sharpa_randomisation.object_force_from_draws(
                force, mass, feed["fresh"], feed["normal"], config
            )

        sharpa_randomisation.next_object_force = fed_force
        try:
            yield
            assert not self._noise, f"{len(self._noise)} frame noise draws left unused"
        finally:
            sharpa_randomisation.next_object_force = original
            self._feed = self._noise = None

    def frame(self, q, targets, tactile, key):
        del key
        noise = self._noise.pop(0)
        return sharpa_observation.policy_frame(
            q, targets, tactile, noise, self._ctrl_low, self._ctrl_high, self.config
        )

    def draw_tactile_u(self, key):
        del key
        latency = jnp.where(self._feed["latency"], 0.0, 1.0).astype(jnp.float32)
        return jnp.stack([latency, jnp.ones_like(latency)])

    def init_episode(self, key_physics, key_task, carried):
        del key_physics
        feed = self._feed
        scale_id = feed["scale_id"] if carried is None else carried["scale_id"]
        grasp = feed["grasp"]
        _, k_episode = jax.random.split(key_task)
        state = self.episode_state(grasp, jnp.asarray(scale_id, jnp.int32), feed["draws"],
                                   k_episode)  # fmt: skip
        return grasp, jnp.zeros((self.model.nv,), jnp.float32), state


def _config() -> SharpaInhandConfig:
    return SharpaInhandConfig(scale_list=SCALES)


def _caches(g: dict) -> GraspCaches:
    return GraspCaches([g[f"cache.{s:g}"] for s in SCALES], [Path(f"cache.{s:g}") for s in SCALES])


@pytest.fixture(scope="module")
def task(golden) -> FedSharpa:
    return FedSharpa(_config(), grasps=_caches(golden))


@pytest.fixture(scope="module")
def trace(golden):
    plain = SharpaInhandRotation(_config(), grasps=_caches(golden))
    out = trace_task(plain, jax.devices("cpu")[0])
    assert set(out.fields) == {"qpos", "qvel", "sensordata"}, out.fields
    return out


@pytest.fixture(scope="module")
def c_physics(task, trace):
    physics = MujocoBatchPhysics(
        task.model,
        task.n_frames,
        N,
        trace.template,
        trace.fields,
        name="SharpaInhandRotation",
        nthread=1,
        model_fields=task.model_fields,
        solver_warmstart=task.solver_warmstart,
        float32_state=task.float32_state,
        post_step_forward=task.post_step_forward,
    )
    yield physics
    physics.close()


@dataclasses.dataclass
class Compiled:
    """The task's functions, jitted over a batch (each compiled once for the module)."""

    post: object  # (view, action, state, key, steps, feed) -> (state, qpos0, qvel0)
    begin: object  # (feed) -> (qpos, qvel, state): a first reset from recorded draws
    fresh: object  # (view, state, done) -> (obs, state): MujocoVecEnv's reset observation
    ctrl: object
    xfrc: object


@pytest.fixture(scope="module")
def fns(task) -> Compiled:
    key = jax.random.PRNGKey(0)  # every draw is fed: the keys are not read

    def post(view, action, state, k, steps, feed):
        with task.feeding(feed):
            out, (qpos0, qvel0) = post_physics(task, view, action, state, k, steps)
        return out.replace(physics=None), qpos0, qvel0

    def begin(feed):
        with task.feeding(feed):
            return task.init_episode(key, key, None)

    def fresh(view, state, done):
        obs, started = reset_observation(task, view, state)
        return obs, where_done(done, started, state)

    return Compiled(
        post=jax.jit(jax.vmap(post)),
        begin=jax.jit(jax.vmap(begin)),
        fresh=jax.jit(jax.vmap(fresh)),
        ctrl=jax.jit(jax.vmap(task.ctrl_from_action)),
        xfrc=jax.jit(jax.vmap(task.xfrc_applied)),
    )


# --------------------------------------------------------------------- recorded draws
def _row_feed(g: dict, row: ResetRow, nominal_kp: np.ndarray, nominal_kd: np.ndarray) -> dict:
    """A reset row's draws (``FedSharpa``'s feed) and the draws of the step after it."""
    p, j, nxt = f"reset.{row.k}.", row.j, row.t + 1
    return {
        "noise": np.float32(g[p + "frame_noise"][:, j]),  # the reset's two frames
        "latency": g["step.tactile_latency"][nxt, row.env],
        "fresh": g["step.force_mask"][nxt, row.env],
        "normal": np.float32(g["step.force_normal"][nxt, row.env]),
        "scale_id": np.int32(g[p + "scale_ids"][j]),
        "grasp": np.float32(g[p + "grasp"][j]),
        "draws": {
            "friction_scale": np.float32(g[p + "sample_friction_scale"][j, 0]),
            "mass": np.float32(g[p + "sample_object_mass"][j, 0]),
            "com_offset": np.float32(g[p + "sample_object_com_offset"][j]),
            "gravity": np.float32(g[p + "sample_reset_gravity"][j]),
            "kp_scale": np.float32(g[p + "kp"][j]) / nominal_kp,
            "kd_scale": np.float32(g[p + "kd"][j]) / nominal_kd,
        },
    }


def _nominal_gains(task) -> tuple[np.ndarray, np.ndarray]:
    model = task.model
    return (
        np.float32(model.actuator_gainprm[:, 0]),
        -np.float32(model.actuator_biasprm[:, 2]),
    )


@pytest.fixture(scope="module")
def rows(golden) -> list[ResetRow]:
    return _reset_rows(golden)


@pytest.fixture(scope="module")
def row_feeds(golden, task, rows) -> list[dict]:
    kp, kd = _nominal_gains(task)
    return [_row_feed(golden, row, kp, kd) for row in rows]


def _stack(trees: list) -> dict:
    return jax.tree.map(lambda *x: np.stack(x), *trees)


def _step_feed(g: dict, t: int, reset_feeds: dict[int, dict], fill: list[dict]) -> dict:
    """Step ``t``'s feed per env: its frame's noise then, for an env reset at its end, the
    reset's draws (``reset_feeds``: env -> row feed; the others get ``fill[env]``, unused)."""
    out = []
    for e in range(N):
        row = reset_feeds.get(e, fill[e])
        nxt = t + 1 < T
        out.append({
            **row,
            "noise": np.concatenate([np.float32(g["step.frame_noise"][t, e])[None],
                                     row["noise"]]),  # fmt: skip
            "latency": g["step.tactile_latency"][t + 1, e] if nxt else np.zeros(5, bool),
            "fresh": g["step.force_mask"][t + 1, e] if nxt else np.bool_(False),
            "normal": np.float32(g["step.force_normal"][t + 1, e] if nxt else np.zeros(3)),
        })  # fmt: skip
    return _stack(out)


@pytest.fixture(scope="module")
def episodes(fns, row_feeds):
    """Our first state of every recorded episode (all reset rows), from its recorded draws:
    ``(qpos, qvel, task_state)`` ``[rows, ...]``."""
    return jax.device_get(fns.begin(_stack(row_feeds)))


def _host(tree) -> dict:
    return jax.tree.map(np.asarray, tree)


def _view(g: dict, t: int) -> PhysicsView:
    """The physics after step ``t`` as the reference recorded it (float32, as our view)."""
    return PhysicsView({
        "qpos": jnp.asarray(g["step.qpos_after"][t], jnp.float32),
        "qvel": jnp.asarray(g["step.qvel_after"][t], jnp.float32),
        "sensordata": jnp.asarray(g["step.sensor_after"][t][:, :NSENSOR], jnp.float32),
    })  # fmt: skip


def _keys() -> jax.Array:
    return jax.random.split(jax.random.PRNGKey(0), N)


# --------------------------------------------------------------------- 1. model and config
def test_model_equals_the_reference_model(golden, meta) -> None:
    model = build_sharpa_model(_config())
    scaled = object_scale_fields(model, SCALES[0])
    # The reference's backend model is its first variant's (scale 0.8): the object's fields are
    # our scale-0.8 ones, and so are the constants mj_setConst derives from them.
    variant = copy.copy(model)
    for name, value in scaled.items():
        getattr(variant, name)[...] = value
    mujoco.mj_setConst(variant, mujoco.MjData(variant))
    checked = []
    for key in sorted(k for k in golden if k.startswith("model.")):
        name = key[len("model.") :]
        ours = getattr(variant, name)
        tol = MODEL_TOL.get(name, 1e-12)
        np.testing.assert_allclose(ours, golden[key], rtol=0, atol=tol, err_msg=name)
        checked.append(name)
    # The object's rows: exactly the scale-0.8 variant's.
    obj_geom, obj_body = model.geom(OBJECT_GEOM).id, model.body(OBJECT_BODY).id
    for name, row in (("geom_size", obj_geom), ("geom_rbound", obj_geom), ("geom_aabb", obj_geom),
                      ("body_inertia", obj_body)):  # fmt: skip
        np.testing.assert_allclose(getattr(variant, name)[row], golden[f"model.{name}"][row],
                                   rtol=1e-12, atol=0, err_msg=name)  # fmt: skip
    assert len(checked) == 13
    obj = model.geom(OBJECT_GEOM).id
    assert meta["geom_names"][obj] == OBJECT_GEOM
    assert not np.allclose(model.geom_size[obj], golden["model.geom_size"][obj])  # not scale 1
    names = [model.geom(i).name or None for i in range(model.ngeom)]
    assert names == meta["geom_names"]
    sensors = [model.sensor(i).name for i in range(model.nsensor)]
    assert sensors == meta["sensor_names"][: model.nsensor]
    assert model.nsensordata == NSENSOR
    assert model.opt.timestep == pytest.approx(meta["config"]["sim_dt"], rel=1e-12)


def test_config_equals_the_reference_config(meta) -> None:
    cfg, ref = _config(), meta["config"]
    dr, obs = ref["domain_rand"], ref["obs"]
    assert cfg.control_dt == pytest.approx(ref["ctrl_dt"], rel=1e-12)
    assert cfg.episode_length == ref["max_episode_steps"]
    assert cfg.action_scale == pytest.approx(ref["action_scale"], rel=1e-12)
    assert cfg.dof_limits_scale == ref["dof_limits_scale"]
    assert dict(cfg.reward_weights) == ref["reward_scales"]
    assert [n for n, _ in cfg.reward_weights] == meta["reward_terms_in_order"] == list(TERMS)
    assert list(cfg.scale_list) == dr["scale_list"] == meta["scales"]
    pairs = {
        "randomize_gravity_direction": "randomize_gravity_direction",
        "gravity_magnitude": "gravity_direction_magnitude",
        "randomize_pd_gains": "randomize_pd_gains",
        "randomize_friction": "randomize_friction",
        "elastomer_base_friction": "elastomer_base_friction",
        "metal_base_friction": "metal_base_friction",
        "object_base_friction": "object_base_friction",
        "randomize_com": "randomize_com",
        "randomize_mass": "randomize_mass",
        "force_scale": "force_scale",
        "random_force_prob": "random_force_prob_scalar",
        "force_decay": "force_decay",
        "force_decay_interval": "force_decay_interval",
        "joint_noise_scale": "joint_noise_scale",
        "contact_latency": "contact_latency",
        "contact_sensor_noise": "contact_sensor_noise",
    }
    for ours, theirs in pairs.items():
        assert getattr(cfg, ours) == dr[theirs], ours
    ranges = {
        "p_gain_scale": "randomize_p_gain_scale",
        "d_gain_scale": "randomize_d_gain_scale",
        "friction_scale": "randomize_friction_scale",
        "com_offset": "randomize_com",
        "mass": "randomize_mass",
    }
    for ours, theirs in ranges.items():
        assert getattr(cfg, ours) == (dr[f"{theirs}_lower"], dr[f"{theirs}_upper"]), ours
    for name in ("enable_tactile", "binary_contact", "contact_smooth", "contact_threshold",
                 "tactile_force_clip_max"):  # fmt: skip
        assert getattr(cfg, name) == obs[name], name
    assert not obs["enable_contact_pos"] and ref["post_step_forward_sensor"]


# --------------------------------------------------------------------- 2. one C MuJoCo step
def _pool_fields(task, g: dict, meta: dict, t: int) -> dict[str, np.ndarray]:
    """The per-episode model fields in force during step ``t`` from the reference's pool
    values (float64, as recorded; the object's size from the env's scale)."""
    model = task.model
    obj = model.body(OBJECT_BODY).id
    out: dict[str, list] = {f: [] for f in task.model_fields}
    for e in range(N):
        fields = {f: np.array(model_field(model, f), np.float64) for f in task.model_fields}
        fields.update(object_scale_fields(model, SCALES[meta["scale_ids_by_env"][e]]))
        kp, kd = g["step.pool_kp"][t, e], g["step.pool_kd"][t, e]
        fields["actuator_gainprm"][:, 0] = kp
        fields["actuator_biasprm"][:, 1] = -kp
        fields["actuator_biasprm"][:, 2] = -kd
        fields["body_mass"][obj] = g["step.pool_object_mass"][t, e]
        fields["body_ipos"][obj] = g["step.pool_object_ipos"][t, e]
        np.testing.assert_allclose(
            fields["body_inertia"][obj], g["step.pool_object_inertia"][t, e], rtol=1e-12
        )
        fields["geom_friction"] = g["step.pool_geom_friction"][t, e]
        fields["opt.gravity"] = g["step.pool_gravity"][t, e]
        for f in out:
            out[f].append(fields[f])
    return {f: np.stack(v) for f, v in out.items()}


def test_targets_and_object_force_the_physics_is_given(golden, task, fns) -> None:
    """Our action rule from the recorded targets gives the recorded ctrl, and our task's
    ``xfrc_applied`` puts the recorded force on the object's centre of mass and nothing else."""
    g = golden
    obj = task.model.body(OBJECT_BODY).id
    err = dict.fromkeys(("ctrl", "xfrc"), 0.0)
    for t in range(T):
        state = {"targets": jnp.asarray(g["step.targets_before"][t])}
        ctrl = np.asarray(fns.ctrl(jnp.asarray(g["step.action"][t]), state))
        force = {"object_force": jnp.asarray(g["step.xfrc_object"][t], jnp.float32)}
        xfrc = np.asarray(fns.xfrc(force))
        err["ctrl"] = max(err["ctrl"], np.abs(ctrl - g["step.ctrl"][t]).max())
        err["xfrc"] = max(err["xfrc"], np.abs(xfrc[:, obj, :3] - g["step.xfrc_object"][t]).max())
        np.testing.assert_array_equal(np.delete(xfrc, obj, axis=1), 0.0)
        np.testing.assert_array_equal(xfrc[:, obj, 3:], 0.0)
    print("targets and object force:", {k: f"{v:.1e}" for k, v in err.items()})
    assert err["ctrl"] <= 1.2e-7  # 1.2e-7: 1 float32 ulp
    assert err["xfrc"] <= 1e-7  # 2.8e-8: float32 of the reference's float64 force
    assert (np.abs(g["step.xfrc_object"]).max(axis=-1) > 0).mean() > 0.8  # forces held


@pytest.mark.xfail(strict=True, reason=PHYSICS_MISMATCH)
def test_c_mujoco_step_reproduces_the_recorded_physics(golden, meta, task, c_physics, fns):
    g = golden
    err = dict.fromkeys(("ctrl", "xfrc", "qpos", "qvel", "sensors"), 0.0)
    effect = []  # what the object force changes in a step (the object's velocity)
    obj = task.model.body(OBJECT_BODY).id
    for t in range(T):
        action = jnp.asarray(g["step.action"][t])
        ctrl = np.asarray(fns.ctrl(action, {"targets": jnp.asarray(g["step.targets_before"][t])}))
        xfrc = np.asarray(fns.xfrc({"object_force": jnp.asarray(g["step.xfrc_object"][t],
                                                                jnp.float32)}))  # fmt: skip
        err["ctrl"] = max(err["ctrl"], np.abs(ctrl - g["step.ctrl"][t]).max())
        err["xfrc"] = max(err["xfrc"], np.abs(xfrc[:, obj, :3] - g["step.xfrc_object"][t]).max())
        np.testing.assert_array_equal(np.delete(xfrc, obj, axis=1), 0.0)
        fields = _pool_fields(task, g, meta, t)
        before = g["step.qpos_before"][t], g["step.qvel_before"][t]
        c_physics.init(None, *before, fields)
        c_physics.step(ctrl, xfrc)
        qpos, qvel = c_physics.batch.qpos.copy(), c_physics.batch.qvel.copy()
        sensors = c_physics.view()["sensordata"]
        err["qpos"] = max(err["qpos"], np.abs(qpos - g["step.qpos_after"][t]).max())
        err["qvel"] = max(err["qvel"], np.abs(qvel - g["step.qvel_after"][t]).max())
        err["sensors"] = max(
            err["sensors"], np.abs(sensors - g["step.sensor_after"][t][:, :NSENSOR]).max()
        )
        # The same step without the object force: what the force does to the object's velocity.
        c_physics.init(None, *before, fields)
        c_physics.step(ctrl, np.zeros_like(xfrc))
        pushed = np.linalg.norm(g["step.xfrc_object"][t], axis=1) > 0.0
        change = np.abs(c_physics.batch.qvel[:, 22:25] - qvel[:, 22:25]).max(axis=1)
        effect += change[pushed].tolist()
    print("C MuJoCo one step:", {k: f"{v:.2e}" for k, v in err.items()},
          f"the object force's effect on its velocity: min {min(effect):.1e}, median "
          f"{np.median(effect):.1e} ({len(effect)} pushed env steps)")  # fmt: skip
    assert err["ctrl"] <= 2.4e-7 and err["xfrc"] <= 1e-7  # ctrl: 1 float32 ulp (1.2e-7)
    assert err["qpos"] <= C_QPOS_TOL and err["qvel"] <= C_QVEL_TOL
    assert err["sensors"] <= C_SENSOR_TOL
    assert np.median(effect) > 10 * C_QVEL_TOL  # a force ignored: far past the bound


# --------------------------------------------------------------------- 3. on the recorded physics
def _state_before(g: dict, t: int, episodes, episode_rows: np.ndarray, rows) -> dict:
    """Our task state in force when step ``t``'s action was chosen: the env's episode's first
    state (ours, from the recorded reset draws) with what the steps changed since set to the
    recorded values (targets, frames, tactile state and draws, previous object pose, force)."""
    _, _, first = episodes
    state = jax.tree.map(lambda x: x[episode_rows[t]], first)
    frames = g["init.obs"] if t == 0 else g["step.obs_returned"][t - 1]
    prev_pos, prev_quat = [], []
    for e in range(N):
        row = rows[episode_rows[t, e]]
        if row.t == t - 1:  # the episode's first step: the pose of its grasp
            grasp = np.float32(g[f"reset.{row.k}.grasp"][row.j])
            prev_pos.append(grasp[22:25])
            prev_quat.append(grasp[25:29])
        else:
            prev_pos.append(g["step.reward_input.object_pos"][t - 1, e])
            quat = g["step.qpos_after"][t - 1, e, 25:29]
            prev_quat.append(np.float32(quat / np.linalg.norm(quat)))
    latency = np.where(g["step.tactile_latency"][t], 0.0, 1.0).astype(np.float32)
    state.update(
        targets=np.float32(g["step.targets_before"][t]),
        frames=np.float32(frames).reshape(N, 3, -1),
        tactile_force=g["step.tactile_prev_before"][t],
        tactile_last=g["step.tactile_last_before"][t],
        tactile_u=np.stack([latency, np.ones_like(latency)], axis=1),
        prev_object_pos=np.stack(prev_pos),
        prev_object_quat=np.stack(prev_quat),
        object_force=np.float32(g["step.xfrc_object"][t]),
    )
    return state


@pytest.fixture(scope="module")
def on_recorded(golden, fns, episodes, rows, row_feeds):
    """``post_physics`` of every recorded step on the recorded physics: per step ``(state
    before, output, qpos0)``."""
    g = golden
    episode_rows = _episode_rows(rows)
    fill = [row_feeds[r] for r in range(N)]  # reset 0's rows (unused where no reset)
    out = []
    for t in range(T):
        state = _state_before(g, t, episodes, episode_rows, rows)
        feed = _step_feed(g, t, {e: row_feeds[r] for e, r in _reset_at(rows, t).items()}, fill)
        steps = jnp.asarray(g["step.steps_before"][t], jnp.int32)
        action = jnp.asarray(g["step.action"][t])
        after, qpos0, _ = fns.post(_view(g, t), action, state, _keys(), steps, feed)
        out.append((state, _host(after), np.asarray(qpos0)))
    return out


def test_tactile_pipeline_and_action_rule_on_the_recorded_physics(golden, task, on_recorded):
    """The force magnitudes our task reads from the recorded sensors, the clip, the smoothing
    with the last force, the latency rule (6 recorded latency events) and the targets."""
    g = golden
    assert g["step.tactile_latency"].sum() == 6
    read = jax.jit(jax.vmap(task.tactile_force))
    err = dict.fromkeys(("raw", "signal", "last", "force", "targets"), 0.0)
    for t, (_, after, _) in enumerate(on_recorded):
        raw = np.asarray(read(_view(g, t)))
        err["raw"] = max(err["raw"], np.abs(raw - g["step.tactile_raw"][t]).max())
        keep = ~(g["step.terminated"][t] | g["step.truncated"][t])  # the others: a new episode
        frame = after.final_obs["obs"][:, -49:]
        err["signal"] = max(err["signal"], np.abs(frame[:, 44:] - g["step.tactile"][t]).max())
        last = after.task_state["tactile_last"][keep] - g["step.tactile_last_after"][t][keep]
        err["last"] = max(err["last"], np.abs(last).max(initial=0.0))
        clipped = np.clip(g["step.tactile_raw"][t], 0.0, 4.0)
        force = after.task_state["tactile_force"][keep] - clipped[keep]
        err["force"] = max(err["force"], np.abs(force).max(initial=0.0))
        targets = after.task_state["targets"][keep] - g["step.ctrl"][t][keep]
        err["targets"] = max(err["targets"], np.abs(targets).max(initial=0.0))
        # The frame's targets: the recorded ones to float32 rounding of the sum ``prev +
        # action / 24`` (XLA may fuse its multiply-add into the frame's computation; measured
        # 1.5e-8 in 7 of 3520 values, 1 ulp of the operands).
        np.testing.assert_allclose(frame[:, 22:44], g["step.ctrl"][t], rtol=0, atol=1.2e-7)
    print("tactile and targets on the recorded physics:", {k: f"{v:.1e}" for k, v in err.items()})
    assert err["raw"] <= 5e-6  # 1.9e-6: float32 norms of float32 sensors against float64 ones
    # 2.4e-7 each (the raw forces, halved)
    assert err["signal"] <= 1e-6 and err["last"] <= 1e-6 and err["force"] <= 1e-6
    assert err["targets"] <= 1.2e-7  # 1 float32 ulp of the targets (1.2e-7)


def test_reward_ends_and_observation_on_the_recorded_physics(golden, on_recorded):
    g = golden
    err: dict[str, float] = {}

    def check(name: str, ours, ref, atol: float) -> None:
        diff = np.abs(np.asarray(ours, np.float64) - np.asarray(ref, np.float64))
        err[name] = max(err.get(name, 0.0), float(diff.max()))
        assert err[name] <= atol, (name, err[name], atol)

    for t, (_, after, _) in enumerate(on_recorded):
        for name in TERMS:
            check(f"reward.{name}", after.metrics[f"reward/{name}"], g[f"step.reward.{name}"][t],
                  REWARD_TOL)  # fmt: skip
        check("reward", after.reward, g["step.reward"][t], REWARD_TOL)
        check("obs", after.final_obs["obs"], g["step.obs"][t], OBS_TOL)
        check("critic", after.final_obs["critic"], g["step.critic"][t], OBS_TOL)
        np.testing.assert_array_equal(after.terminated, g["step.terminated"][t], err_msg=f"{t}")
        np.testing.assert_array_equal(after.truncated, g["step.truncated"][t], err_msg=f"{t}")
    print("post_physics on the recorded physics:", {k: f"{v:.1e}" for k, v in err.items()})
    assert set(on_recorded[0][1].metrics) == {f"reward/{k}" for k in TERMS}


def test_object_force_carried_to_the_next_step(golden, on_recorded):
    """The force our task carries to the next step from the recorded refresh draws: decayed,
    refreshed (40 times), zero after a reset until refreshed."""
    g = golden
    assert g["step.force_mask"].sum() == 40
    err = 0.0
    for t, (_, after, _) in enumerate(on_recorded[:-1]):
        err = max(
            err, np.abs(after.task_state["object_force"] - g["step.xfrc_object"][t + 1]).max()
        )
    print(f"object force carried: {err:.1e}")
    assert err <= 3e-7  # 9.7e-8: float32 against the reference's float64 force


# --------------------------------------------------------------------- 4. resets
def test_resets_from_the_recorded_draws(golden, task, episodes, rows, row_feeds, fns) -> None:
    """Every recorded reset (9 env rows, the first reset's 4 included) built by our
    ``episode_state`` from its draws: the model values in force after it, the height band, the
    privileged values, the observation and critic, the first step's object force."""
    g = golden
    assert len(rows) == 9
    # The recorded gains are our nominal ones times the reference's split scales (our rule's
    # ranges: U(0.5, 1) or U(1, 2)), so our nominal gains are the reference's defaults.
    for name in ("kp_scale", "kd_scale"):
        scale = np.stack([f["draws"][name] for f in row_feeds])
        assert scale.min() >= 0.5 - 1e-6 and scale.max() <= 2.0 + 1e-6, name
        assert (scale < 1).any() and (scale > 1).any(), name
    qpos, qvel, state = episodes
    fields = state[MODEL_PARAMS_KEY]
    model = task.model
    obj = model.body(OBJECT_BODY).id
    err: dict[str, float] = {}

    def check(name: str, ours, ref, atol: float, rtol: float = 0.0) -> None:
        ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
        err[name] = max(err.get(name, 0.0), float(np.abs(ours - ref).max()))
        np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol, err_msg=name)

    for r, row in enumerate(rows):
        p, j = f"reset.{row.k}.", row.j
        check("qpos", qpos[r], g[p + "grasp"][j], 0.0)
        np.testing.assert_array_equal(qvel[r], 0.0)
        assert int(state["scale_id"][r]) == int(g[p + "scale_ids"][j])
        check("kp", fields["actuator_gainprm"][r, :, 0], g[p + "pool_kp"][j], 0.0, 2e-7)
        check("kd", -fields["actuator_biasprm"][r, :, 2], g[p + "pool_kd"][j], 0.0, 2e-7)
        check("kp_bias", -fields["actuator_biasprm"][r, :, 1], g[p + "pool_kp"][j], 0.0, 2e-7)
        check("task kp", state["kp"][r], g[p + "kp"][j], 0.0, 2e-7)
        check("task kd", state["kd"][r], g[p + "kd"][j], 0.0, 2e-7)
        check("mass", fields["body_mass"][r, obj], g[p + "pool_object_mass"][j], 0.0, 1e-7)
        check("com", fields["body_ipos"][r, obj], g[p + "pool_object_ipos"][j], 1e-9)
        check("inertia", fields["body_inertia"][r, obj], g[p + "pool_object_inertia"][j], 0.0,
              1e-7)  # fmt: skip
        check("gravity", fields["opt.gravity"][r], g[p + "pool_gravity"][j], 0.0, 1e-7)
        check("friction", fields["geom_friction"][r], g[p + "pool_geom_friction"][j], 0.0, 1e-7)
        check("height_band", state["height_band"][r], g[p + "height_band"][j], 1e-7)
        check("privileged", state["privileged"][r][3:], g[p + "critic_info"][j][3:], 0.0)
        force = state["object_force"][r]
        check("object_force", force, g["step.xfrc_object"][row.t + 1, row.env], 1e-7)
        # The other model fields: the nominal model's (the object's size: its scale's).
        scaled = object_scale_fields(model, SCALES[int(g[p + "scale_ids"][j])])
        for f in ("geom_size", "geom_rbound", "geom_aabb"):
            check(f, fields[f][r], scaled[f], 0.0, 1e-7)
        mass = np.delete(fields["body_mass"][r], obj)
        check("body_mass others", mass, np.delete(model.body_mass, obj), 0.0, 1e-7)
    # The observation and critic: MujocoVecEnv's reset path, 4 rows at a time.
    for start in range(0, len(rows), N):
        ids = np.arange(start, min(start + N, len(rows)))
        pad = np.r_[ids, np.full(N - len(ids), ids[0])]
        view = PhysicsView({
            "qpos": jnp.asarray(qpos[pad]),
            "qvel": jnp.asarray(qvel[pad]),
            "sensordata": jnp.zeros((N, NSENSOR), jnp.float32),
        })  # fmt: skip
        obs, _ = fns.fresh(view, jax.tree.map(lambda x, i=pad: x[i], state), jnp.ones(N, bool))
        for i, r in enumerate(ids):
            p, j = f"reset.{rows[r].k}.", rows[r].j
            check("obs", obs["obs"][i], g[p + "obs"][j], 1e-7)
            check("critic", obs["critic"][i], g[p + "critic"][j], 1e-7)
    print("resets from the recorded draws:", {k: f"{v:.1e}" for k, v in err.items()})


# --------------------------------------------------------------------- 5. carried rollout
@dataclasses.dataclass
class Replay:
    """Our carried rollout against the recording: per compared name, the max abs difference
    per step and env ``[T, N]``."""

    error: dict[str, np.ndarray]
    parted: int | None
    """The first step whose ends (terminated | truncated) differ from the recorded ones, where
    the replay stops (there are no recorded draws for a reset the reference did not make);
    None: all 40 steps."""


@pytest.fixture(scope="module")
def carried(golden, task, c_physics, fns, episodes, rows, row_feeds) -> Replay:
    """The recorded rollout replayed by our task on our C MuJoCo batch, carrying its own state
    (``post_physics``: its carry, and ``next_episode`` where an episode ended, as
    ``MujocoVecEnv`` runs them); only the reference's draws are fed in (:class:`FedSharpa`)."""
    g = golden
    obj = task.model.body(OBJECT_BODY).id
    error: dict[str, list] = {}

    def diff(name: str, ours, ref) -> None:
        d = np.abs(np.asarray(ours, np.float64) - np.asarray(ref, np.float64))
        error.setdefault(name, []).append(d.reshape(N, -1).max(axis=1))

    def params(state) -> dict[str, np.ndarray]:
        return {f: np.asarray(v) for f, v in state[MODEL_PARAMS_KEY].items()}

    # The first reset: our episodes from reset 0's draws (rows 0-3, env order).
    qpos0, qvel0, first = episodes
    assert [row.env for row in rows[:N]] == list(range(N)) and rows[N].t >= 0
    state = jax.tree.map(lambda x: jnp.asarray(x[:N]), first)
    c_physics.init(None, np.asarray(qpos0[:N], np.float64), np.asarray(qvel0[:N], np.float64),
                   params(state))  # fmt: skip
    view = c_physics.view()
    obs, state = fns.fresh(PhysicsView(view), state, jnp.ones(N, bool))
    init_err = {k: np.abs(np.asarray(obs[k]) - g[f"init.{k}"]).max() for k in ("obs", "critic")}
    fill = [row_feeds[r] for r in range(N)]
    step_count = g["step.steps_before"][0].astype(np.int32)
    parted = None
    resets_err: list[float] = []  # the reset rows' fresh observations
    for t in range(T):
        diff("qpos_before", c_physics.batch.qpos, g["step.qpos_before"][t])
        diff("qvel_before", c_physics.batch.qvel, g["step.qvel_before"][t])
        diff("steps_before", step_count, g["step.steps_before"][t])
        fields = params(state)
        diff("pool_kp", fields["actuator_gainprm"][..., 0], g["step.pool_kp"][t])
        diff("pool_object_mass", fields["body_mass"][:, obj], g["step.pool_object_mass"][t])
        diff("pool_geom_friction", fields["geom_friction"], g["step.pool_geom_friction"][t])
        diff("pool_gravity", fields["opt.gravity"], g["step.pool_gravity"][t])
        action = jnp.asarray(g["step.action"][t])
        ctrl = np.asarray(fns.ctrl(action, state))
        xfrc = np.asarray(fns.xfrc(state))
        diff("ctrl", ctrl, g["step.ctrl"][t])
        diff("xfrc_object", xfrc[:, obj, :3], g["step.xfrc_object"][t])
        c_physics.step(ctrl, xfrc)
        view = c_physics.view()
        diff("qpos_after", c_physics.batch.qpos, g["step.qpos_after"][t])
        diff("qvel_after", c_physics.batch.qvel, g["step.qvel_after"][t])
        diff("sensors", view["sensordata"], g["step.sensor_after"][t][:, :NSENSOR])
        resets = {e: row_feeds[r] for e, r in _reset_at(rows, t).items()}
        feed = _step_feed(g, t, resets, fill)
        out, qpos0, qvel0 = fns.post(
            PhysicsView(view), action, state, _keys(), jnp.asarray(step_count), feed
        )
        diff("reward", out.reward, g["step.reward"][t])
        for name in TERMS:
            diff(f"reward.{name}", out.metrics[f"reward/{name}"], g[f"step.reward.{name}"][t])
        diff("obs", out.final_obs["obs"], g["step.obs"][t])
        diff("critic", out.final_obs["critic"], g["step.critic"][t])
        diff("tactile", out.final_obs["obs"][:, -5:], g["step.tactile"][t])
        diff("terminated", out.terminated, g["step.terminated"][t])
        diff("truncated", out.truncated, g["step.truncated"][t])
        done = np.asarray(out.terminated | out.truncated)
        if done.tolist() != (g["step.terminated"][t] | g["step.truncated"][t]).tolist():
            parted = t
            break
        returned = {k: np.array(v) for k, v in out.final_obs.items()}
        state = out.task_state
        ids = np.flatnonzero(done)
        if ids.size:  # the reset, MujocoVecEnv's way, of the envs that ended here
            assert sorted(resets) == ids.tolist(), (t, ids, sorted(resets))
            rows_now = _reset_at(rows, t)
            for e in ids:
                assert int(state["scale_id"][e]) == int(row_feeds[rows_now[e]]["scale_id"])
            c_physics.init(ids, np.asarray(qpos0, np.float64)[ids],
                           np.asarray(qvel0, np.float64)[ids],
                           {f: v[ids] for f, v in params(state).items()})  # fmt: skip
            c_physics.refresh_rows(view, ids)
            fresh, state = fns.fresh(PhysicsView(view), state, jnp.asarray(done))
            for k in returned:
                returned[k][ids] = np.asarray(fresh[k])[ids]
            for k in ("obs", "critic"):
                ref = g[f"step.{k}_returned"][t][ids]
                resets_err.append(np.abs(returned[k][ids] - ref).max())
        diff("obs_returned", returned["obs"], g["step.obs_returned"][t])
        diff("critic_returned", returned["critic"], g["step.critic_returned"][t])
        step_count = np.asarray(out.step_count)
    rows_done = len(error.get("obs_returned", []))  # the steps run through (not a parting one)
    replay = Replay({k: np.stack(v[:rows_done]) for k, v in error.items()}, parted)
    replay.error["init_obs"] = np.full((1, N), init_err["obs"])
    replay.error["init_critic"] = np.full((1, N), init_err["critic"])
    replay.error["reset_returned"] = np.full((1, N), max(resets_err))
    return replay


#: What of the carried rollout does not go through the physics: equal to the recording up to
#: float32 rounding over every step run (max abs; measured in the comments).
CARRY_RULES = {
    "ctrl": 2.4e-7,  # 1.2e-7 (1 ulp: the targets follow the actions and resets, not the physics)
    "xfrc_object": 3e-7,  # 1.3e-7 (float32 of the reference's float64 force)
    "pool_kp": 1e-6,  # 0
    "pool_object_mass": 1e-8,  # 3.1e-9
    "pool_geom_friction": 3e-7,  # 1.1e-7
    "pool_gravity": 1e-6,  # 4.0e-7
    "steps_before": 0.0,  # 0
    "truncated": 0.0,  # 0
    "init_obs": 2e-7,  # 6.0e-8
    "init_critic": 2e-7,  # 6.0e-8
    "reset_returned": 2e-7,  # 6.0e-8 (the fresh episodes' observations, after 4 truncations)
}
#: The physics and what reads it, carried (the one-step mismatch, PHYSICS_MISMATCH, grows):
#: bounds of a MuJoCo version difference, NOT MET.
CARRY_PHYSICS = {"qpos_after": 1e-3, "qvel_after": 5e-2, "obs": 5e-2, "critic": 5e-2,
                 "reward": 1e-3}  # fmt: skip


def _carry_report(carried) -> dict[str, float]:
    err = carried.error
    worst = {k: float(v.max()) for k, v in err.items()}
    per_step = {k: v.max(axis=1) for k, v in err.items()}
    print("carried rollout, max abs:", {k: f"{v:.1e}" for k, v in worst.items()})
    for name in ("qpos_after", "qvel_after", "obs", "reward"):
        print(f"carried {name} per step:", " ".join(f"{v:.0e}" for v in per_step[name]))
    print("ends part at step", carried.parted)
    return worst


def test_carried_rollout_follows_the_reference_where_the_physics_does_not_enter(carried):
    """The carried rollout through the recorded resets: the targets, the object force (our
    decay and refresh rule on the recorded draws, zeroed by resets), the episode model values
    after each reset, the episode counters and truncations, the first and every automatic
    reset's observation (the 4 truncations before the ends part, step 31)."""
    worst = _carry_report(carried)
    assert carried.parted is not None and carried.parted >= 27  # after the 4 truncations
    for name, bound in CARRY_RULES.items():
        assert worst[name] <= bound, (name, worst[name], bound)


@pytest.mark.xfail(strict=True, reason=PHYSICS_MISMATCH)
def test_carried_rollout_physics_follows_the_reference(carried):
    worst = _carry_report(carried)
    assert carried.parted is None
    for name, bound in CARRY_PHYSICS.items():
        assert worst[name] <= bound, (name, worst[name], bound)
