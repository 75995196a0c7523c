"""Record golden data for G1WalkFlat or G1WalkRough from the REAL reference UniLab
(unilabsim/UniLab @ 9aa57115).

Runs ONLY in the reference's own virtual environment (its top-level package is also called
``unilab``; never import this file from our test suite)::

    /work/ref/venv/bin/python bench/reference/golden_g1.py --out tests/golden/reference
    /work/ref/venv/bin/python bench/reference/golden_g1.py --task G1WalkRough \
        --out tests/golden/reference

It builds the env exactly as the reference's training command does (:data:`RECORDINGS`: for
G1WalkFlat ``--algo td3 --task g1_walk_flat --sim mujoco``): Hydra compose of
``conf/offpolicy`` with ``algo=<algo> task=<task file>``, ``BackendAdapter(...)
.build_task_env_cfg_override()``, then ``registry.make(<task>, sim_backend="mujoco", ...)``.
Everything random comes from NumPy's global RNG, seeded here before each construction. Every
``np.random.*`` call the reference makes is logged (in call order) so that resets and
observation noise can be replayed exactly. What it records is the reference's code (its files
are named in ``tests/golden/reference/README.md``, which also documents the file layout).
G1WalkRough's env is G1WalkFlat's on another scene, so its file holds what the scene changes:
the model (height field included), the mirror map and a longer rollout through automatic
resets; noise, the 64-reset section and the curriculum rule are G1WalkFlat's.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REF_COMMIT = "9aa57115"
DEFAULT_REF_ROOT = "/work/ref/UniLab"


@dataclass(frozen=True)
class Recording:
    """What is recorded for one task, and how its env is built."""

    algo: str
    """Hydra ``algo=`` (the task file's owner)."""
    task_file: str
    """Hydra ``task=``."""
    rollout_steps: int
    """Steps of the rollout (``step.*``); long enough that every env resets at least once."""
    flat_sections: bool
    """Also the noise, 64-reset and curriculum sections (the env code both tasks share)."""
    rollout_overrides: tuple[str, ...] = ()
    """Hydra overrides of the rollout's env, beyond the noise off."""


RECORDINGS = {
    "G1WalkFlat": Recording("td3", "td3/g1_walk_flat/mujoco", 60, True),
    # Short episodes that end in resets long before a fall turns chaotic: a 1-ulp difference
    # in a reset state (float32 here, float64 there) grows about e-fold every 5 control steps
    # on the rough floor, so a test carrying its own state stays near the reference only for
    # 20-odd steps. The pelvis below 0.74 m terminates (a dip, on the way to a fall) and 20
    # steps (0.4 s) truncate; both are config fields on both sides.
    "G1WalkRough": Recording(
        "sac",
        "sac/g1_walk_rough/mujoco",
        100,
        False,
        ("reward.min_base_height=0.74", "++env.max_episode_seconds=0.4"),
    ),
}
TASK = "G1WalkFlat"  # set by main() from --task
ROLLOUT_ENVS = 8
ROLLOUT_STEPS = 60  # set by main() from RECORDINGS
NOISE_ENVS = 4
NOISE_STEPS = 5
RESET_ENVS = 64
SEED_ROLLOUT = 1234
SEED_ACTIONS = 4321
SEED_NOISE = 99
SEED_RESETS = 7
SEED_CURRICULUM = 2024


# --------------------------------------------------------------------------- RNG logging
class RngLog:
    """Wraps ``np.random.uniform`` / ``np.random.randint`` and logs every call in order."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.values: list[np.ndarray] = []
        self.tag = ""
        self._orig_uniform = np.random.uniform
        self._orig_randint = np.random.randint

    def __enter__(self) -> RngLog:
        log = self

        def uniform(low=0.0, high=1.0, size=None):
            out = log._orig_uniform(low, high, size)
            log.calls.append(
                {
                    "fn": "uniform",
                    "tag": log.tag,
                    "low": np.asarray(low, dtype=np.float64).tolist(),
                    "high": np.asarray(high, dtype=np.float64).tolist(),
                    "shape": list(np.shape(out)),
                }
            )
            # A copy: a caller may scale the draw in place (the MuJoCo backend's push force).
            log.values.append(np.array(out, dtype=np.float64))
            return out

        def randint(low, high=None, size=None, dtype=int):
            out = log._orig_randint(low, high, size=size, dtype=dtype)
            log.calls.append(
                {
                    "fn": "randint",
                    "tag": log.tag,
                    "low": int(low),
                    "high": None if high is None else int(high),
                    "shape": list(np.shape(out)),
                }
            )
            log.values.append(np.asarray(out, dtype=np.int64))
            return out

        np.random.uniform = uniform
        np.random.randint = randint
        return self

    def __exit__(self, *exc) -> None:
        np.random.uniform = self._orig_uniform
        np.random.randint = self._orig_randint


# --------------------------------------------------------------------------- construction
def compose_override(ref_root: Path, extra: list[str]) -> tuple[dict, object]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from unilab.training import BackendAdapter

    recording = RECORDINGS[TASK]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ref_root / "conf" / "offpolicy"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"algo={recording.algo}", f"task={recording.task_file}", *extra],
        )
    adapter = BackendAdapter(cfg, root_dir=ref_root, algo_name=recording.algo)
    return adapter.build_task_env_cfg_override(), cfg


def make_env(override: dict, num_envs: int):
    from unilab.base import registry

    registry.ensure_registries()
    # The penalty curriculum rescales ``reward_config.scales`` in place; that dict would be the
    # override's own, so every env gets a private deep copy.
    return registry.make(
        TASK, sim_backend="mujoco", env_cfg_override=copy.deepcopy(override), num_envs=num_envs
    )


def name_list(model, objtype, count: int) -> list[str]:
    import mujoco

    return [mujoco.mj_id2name(model, objtype, i) or "" for i in range(count)]


# --------------------------------------------------------------------------- instrumentation
class Probe:
    """Instance-level wrappers around the env's reward / pool step / obs noise."""

    def __init__(self, env) -> None:
        self.env = env
        self.reward_rec: dict | None = None
        self.pool_rec: dict | None = None
        self.noise_rec: list[dict] = []
        be = env._backend
        self._orig_pool_step = be._pool.step
        self._orig_compute_reward = env._compute_reward
        self._orig_obs_noise = env._obs_noise
        be._pool.step = self._pool_step
        env._compute_reward = self._compute_reward
        env._obs_noise = self._obs_noise

    def _pool_step(self, initial_state, **kw):
        state, sensor = self._orig_pool_step(initial_state, **kw)
        self.pool_rec = {
            "state0": np.array(initial_state, dtype=np.float64),
            "control": np.array(kw["control"][:, 0, :], dtype=np.float64),
            "nstep": int(kw["nstep"]),
            "state": np.array(state, dtype=np.float64),
            "sensor": np.array(sensor, dtype=np.float64),
        }
        return state, sensor

    def _compute_reward(self, info, linvel, gyro, gravity, dof_pos, dof_vel):
        env = self.env
        ctx = env._build_reward_context(info, linvel, gyro, gravity, dof_pos, dof_vel)
        scales = dict(env._reward_cfg.scales)
        raw = {}
        for name, scale in scales.items():
            if scale == 0 or name not in env._reward_fns:
                continue
            raw[name] = np.array(env._reward_fns[name](ctx), dtype=np.float32)
        total = self._orig_compute_reward(info, linvel, gyro, gravity, dof_pos, dof_vel)
        self.reward_rec = {
            "raw": raw,
            "scales": scales,
            "total": np.array(total),
            "gait_phase": np.array(info["gait_phase"]),
            "current_actions": np.array(info["current_actions"]),
            "last_actions": np.array(info["last_actions"]),
            "commands": np.array(info["commands"]),
            "steps": np.array(info["steps"]),
            "base_height": np.array(ctx.base_height),
        }
        return total

    def _obs_noise(self, data, scale):
        out = self._orig_obs_noise(data, scale)
        self.noise_rec.append({"data": np.array(data), "scale": float(scale), "out": np.array(out)})
        return out


def pool_gains(env) -> tuple[np.ndarray, np.ndarray]:
    pool = env._backend._pool
    kp = np.stack([pool.get_field(i, "kp") for i in range(env.num_envs)])
    kd = np.stack([pool.get_field(i, "kd") for i in range(env.num_envs)])
    return kp, kd


MODEL_FIELDS = (
    "body_mass",
    "body_ipos",
    "body_iquat",
    "body_inertia",
    "body_pos",
    "body_quat",
    "body_parentid",
    "jnt_range",
    "jnt_type",
    "jnt_qposadr",
    "dof_armature",
    "dof_damping",
    "dof_frictionloss",
    "geom_type",
    "geom_size",
    "geom_pos",
    "geom_quat",
    "geom_friction",
    "geom_contype",
    "geom_conaffinity",
    "geom_condim",
    "geom_priority",
    "geom_bodyid",
    "geom_solref",
    "geom_solimp",
    "geom_margin",
    "actuator_forcerange",
    "actuator_ctrlrange",
    "actuator_ctrllimited",
    "actuator_forcelimited",
    "actuator_trnid",
    "qpos0",
    "site_pos",
    "site_quat",
    "site_bodyid",
    "sensor_type",
    "sensor_objtype",
    "sensor_objid",
    "sensor_adr",
    "sensor_dim",
    "sensor_cutoff",
    "sensor_intprm",
    "exclude_signature",
)
#: Recorded too where the model has a height field (G1WalkRough's floor).
HFIELD_FIELDS = (
    "geom_dataid",
    "hfield_size",
    "hfield_nrow",
    "hfield_ncol",
    "hfield_adr",
    "hfield_data",
)


# --------------------------------------------------------------------------- sections
def record_model(env, out: dict) -> dict:
    import mujoco

    m = env._backend.model
    key_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "stand")
    fields = {
        "opt.timestep": np.array(m.opt.timestep),
        "opt.gravity": np.array(m.opt.gravity),
        "key_qpos": np.array(m.key_qpos[key_id]),
        "key_ctrl": np.array(m.key_ctrl[key_id]),
        "actuator_gainprm": np.array(m.actuator_gainprm[:, :3]),
        "actuator_biasprm": np.array(m.actuator_biasprm[:, :3]),
    }
    for f in MODEL_FIELDS + (HFIELD_FIELDS if m.nhfield else ()):
        fields[f] = np.array(getattr(m, f))
    for k, v in fields.items():
        out[f"model.{k}"] = v
    opt = m.opt
    return {
        "nq": int(m.nq),
        "nv": int(m.nv),
        "nu": int(m.nu),
        "nbody": int(m.nbody),
        "ngeom": int(m.ngeom),
        "nsensordata": int(m.nsensordata),
        "nstate_fullphysics": int(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)),
        "option": {
            "timestep": float(opt.timestep),
            "integrator": int(opt.integrator),
            "solver": int(opt.solver),
            "iterations": int(opt.iterations),
            "ls_iterations": int(opt.ls_iterations),
            "tolerance": float(opt.tolerance),
            "ls_tolerance": float(opt.ls_tolerance),
            "cone": int(opt.cone),
            "jacobian": int(opt.jacobian),
            "impratio": float(opt.impratio),
            "noslip_iterations": int(opt.noslip_iterations),
            "ccd_iterations": int(opt.ccd_iterations),
            "disableflags": int(opt.disableflags),
            "enableflags": int(opt.enableflags),
        },
        "body_names": name_list(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody),
        "geom_names": name_list(m, mujoco.mjtObj.mjOBJ_GEOM, m.ngeom),
        "joint_names": name_list(m, mujoco.mjtObj.mjOBJ_JOINT, m.njnt),
        "actuator_names": name_list(m, mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu),
        "sensor_names": name_list(m, mujoco.mjtObj.mjOBJ_SENSOR, m.nsensor),
        "site_names": name_list(m, mujoco.mjtObj.mjOBJ_SITE, m.nsite),
        "sensor_slices": {
            name_list(m, mujoco.mjtObj.mjOBJ_SENSOR, m.nsensor)[i]: [
                int(m.sensor_adr[i]),
                int(m.sensor_adr[i] + m.sensor_dim[i]),
            ]
            for i in range(m.nsensor)
        },
    }


def make_actions(rng: np.random.Generator, steps: int, n: int) -> np.ndarray:
    """clip(s * N(0, 1), -1, 1) with s = 0.5 for envs 0-3 and 1.5 for envs 4-7 (these fall)."""
    scale = np.where(np.arange(n) < n // 2, 0.5, 1.5)[None, :, None]
    return np.clip(scale * rng.standard_normal((steps, n, 29)), -1.0, 1.0).astype(np.float32)


def record_rollout(override: dict, out: dict) -> dict:
    np.random.seed(SEED_ROLLOUT)
    with RngLog() as rng_log:
        rng_log.tag = "construct"
        env = make_env(override, ROLLOUT_ENVS)
        probe = Probe(env)
        rng_log.tag = "init_state"
        env.init_state()
        n_calls_init = len(rng_log.calls)
        actions = make_actions(np.random.default_rng(SEED_ACTIONS), ROLLOUT_STEPS, ROLLOUT_ENVS)
        be = env._backend
        rec: dict[str, list] = {}
        reset_rows: dict[str, list] = {"t_env": [], "obs": [], "critic": []}
        prev_done = np.zeros(ROLLOUT_ENVS, dtype=bool)

        def push(key, value):
            rec.setdefault(key, []).append(np.array(value))

        state = env.state
        out["init.obs"] = np.array(state.obs["obs"])
        out["init.critic"] = np.array(state.obs["critic"])
        out["init.qpos"] = np.array(be._physics_state[:, 1 : 1 + be.nq])
        out["init.qvel"] = np.array(be._physics_state[:, 1 + be.nq :])
        for t in range(ROLLOUT_STEPS):
            rng_log.tag = f"step{t}"
            kp, kd = pool_gains(env)
            info = state.info
            push("qpos_before", be._physics_state[:, 1 : 1 + be.nq])
            push("qvel_before", be._physics_state[:, 1 + be.nq :])
            push("time_before", be._physics_state[:, 0])
            push("kp", kp)
            push("kd", kd)
            push("commands", info["commands"])
            push("gait_phase_before", info["gait_phase"])
            last_action_before = np.array(info["current_actions"])
            push("episode_step_before", info["steps"].astype(np.int32))
            push("curriculum_scale_used", env._penalty_curriculum.current_scale)
            # The reference keeps a reference to the caller's action array as
            # info["current_actions"] and zeroes its rows in place when it auto-resets an env;
            # pass a copy so that step.action keeps what was actually applied.
            action_buffer = actions[t].copy()
            state = env.step(action_buffer)
            pr, rr = probe.pool_rec, probe.reward_rec
            done_now = state.terminated | state.truncated
            assert np.all(action_buffer[done_now] == 0.0)
            assert np.array_equal(action_buffer[~done_now], actions[t][~done_now])
            push("action", actions[t])
            ctrl = pr["control"].astype(np.float32)
            assert np.array_equal(ctrl.astype(np.float64), pr["control"])
            push("ctrl", ctrl)
            # last_action_before is not stored: it is action[t-1], or zeros at t=0 / after a reset
            expect_last = actions[t - 1].copy() if t else np.zeros_like(actions[0])
            if t:
                expect_last[prev_done] = 0.0
            assert np.array_equal(last_action_before, expect_last)
            push("qpos_after", pr["state"][:, 1 : 1 + be.nq])
            push("qvel_after", pr["state"][:, 1 + be.nq :])
            push("sensordata", pr["sensor"].astype(np.float32))
            push("gait_phase_after", rr["gait_phase"])
            push("base_height", rr["base_height"])
            for name, val in rr["raw"].items():
                push(f"reward_raw.{name}", val)
                contrib = np.float32(val * np.float32(rr["scales"][name]) * env.cfg.ctrl_dt)
                push(f"reward.{name}", contrib)
                push(f"reward_weight.{name}", rr["scales"][name])
            push("reward", state.reward)
            push("terminated", state.terminated)
            push("truncated", state.truncated)
            done = state.terminated | state.truncated
            final = state.final_observation
            obs_final = np.array(state.obs["obs"])
            critic_final = np.array(state.obs["critic"])
            if final is not None and np.any(done):
                obs_final[done] = final["obs"][done]
                critic_final[done] = final["critic"][done]
            # Noise is off here, so the actor obs is the critic's first 98 entries bit for bit;
            # only step.critic is stored (step.obs = step.critic[..., :98]).
            assert np.array_equal(obs_final, critic_final[:, : obs_final.shape[1]])
            push("critic", critic_final)
            # the observation returned after the auto-reset differs only in the reset rows
            for e in np.flatnonzero(done):
                reset_rows["t_env"].append([t, e])
                reset_rows["obs"].append(np.array(state.obs["obs"][e]))
                reset_rows["critic"].append(np.array(state.obs["critic"][e]))
            prev_done = done.copy()
            push("curriculum_scale", env._penalty_curriculum.current_scale)
            push("curriculum_avg_length", env._episode_tracker.average_length)
        for key, vals in rec.items():
            arr = np.stack(vals)
            if key.startswith("qpos_before") or key.startswith("qvel_before"):
                arr = arr.astype(np.float32)  # the backend stores the state in float32: exact
            out[f"step.{key}"] = arr
        out["step.reset_rows.t_env"] = np.array(reset_rows["t_env"], dtype=np.int32)
        out["step.reset_rows.obs_next"] = np.stack(reset_rows["obs"])
        out["step.reset_rows.critic_next"] = np.stack(reset_rows["critic"])
        calls = rng_log.calls
        for i, v in enumerate(rng_log.values):
            out[f"rollout_rng.{i:04d}"] = v
        max_episode_steps = int(env.cfg.max_episode_steps)
        min_base_height = float(env._reward_cfg.min_base_height)
    env.close()
    terminated, truncated = np.stack(rec["terminated"]), np.stack(rec["truncated"])
    return {
        "max_episode_steps": max_episode_steps,
        "min_base_height": min_base_height,
        "seed_numpy_global": SEED_ROLLOUT,
        "seed_actions_default_rng": SEED_ACTIONS,
        "actions": "clip(s*N(0,1),-1,1) float32, default_rng(seed).standard_normal((T,N,29)), "
        "s=0.5 for envs 0-3 and 1.5 for envs 4-7",
        "envs_reset": sorted({int(e) for e in np.nonzero(terminated | truncated)[1]}),
        "num_envs": ROLLOUT_ENVS,
        "num_steps": ROLLOUT_STEPS,
        "noise_level": 0.0,
        "rng_calls": calls,
        "rng_calls_before_first_step": n_calls_init,
        "terminations": [[int(t), int(e)] for t, e in zip(*np.nonzero(terminated), strict=True)],
    }


def record_noise(override_noise: dict, out: dict) -> dict:
    np.random.seed(SEED_NOISE)
    with RngLog() as rng_log:
        rng_log.tag = "construct"
        env = make_env(override_noise, NOISE_ENVS)
        probe = Probe(env)
        rng_log.tag = "init_state"
        env.init_state()
        actions = make_actions(np.random.default_rng(SEED_ACTIONS + 1), NOISE_STEPS, NOISE_ENVS)
        for t in range(NOISE_STEPS):
            rng_log.tag = f"step{t}"
            probe.noise_rec.clear()
            n0 = len(rng_log.values)
            state = env.step(actions[t])
            assert not np.any(state.terminated | state.truncated), "noise rollout must not reset"
            draws = rng_log.values[n0:]
            assert len(draws) == 4 == len(probe.noise_rec)
            names = ("gyro", "gravity", "joint_angle", "joint_vel")
            for name, draw, nr in zip(names, draws, probe.noise_rec, strict=True):
                out.setdefault(f"noise.draw.{name}", []).append(draw)
                out.setdefault(f"noise.clean.{name}", []).append(nr["data"])
                out.setdefault(f"noise.noisy.{name}", []).append(nr["out"])
            out.setdefault("noise.obs", []).append(np.array(state.obs["obs"]))
            out.setdefault("noise.critic", []).append(np.array(state.obs["critic"]))
            out.setdefault("noise.action", []).append(actions[t])
    env.close()
    for key in [k for k in out if k.startswith("noise.")]:
        if isinstance(out[key], list):
            out[key] = np.stack(out[key])
    return {
        "seed_numpy_global": SEED_NOISE,
        "num_envs": NOISE_ENVS,
        "num_steps": NOISE_STEPS,
        "noise_level": 1.0,
        "draw_order_per_step": [
            "gyro (N,3)",
            "gravity (N,3)",
            "joint_angle (N,29)",
            "joint_vel (N,29)",
        ],
        "rng_calls": rng_log.calls,
    }


def record_resets(override: dict, out: dict) -> dict:
    np.random.seed(SEED_RESETS)
    with RngLog() as rng_log:
        rng_log.tag = "construct"
        env = make_env(override, RESET_ENVS)
        rng_log.tag = "init_state"
        env.init_state()
        be = env._backend
        kp, kd = pool_gains(env)
        base_kp = np.array(be.model.actuator_gainprm[:, 0])
        base_kd = -np.array(be.model.actuator_biasprm[:, 2])
        state = env.state
        out["reset.qpos"] = np.array(be._physics_state[:, 1 : 1 + be.nq])
        out["reset.qvel"] = np.array(be._physics_state[:, 1 + be.nq :])
        out["reset.sensordata"] = np.array(be._sensor_data)
        out["reset.commands"] = np.array(state.info["commands"])
        out["reset.gait_phase"] = np.array(state.info["gait_phase"])
        out["reset.kp"] = kp
        out["reset.kd"] = kd
        out["reset.kp_multiplier"] = kp[:, 0] / base_kp[0]
        out["reset.kd_multiplier"] = kd[:, 0] / base_kd[0]
        out["reset.obs"] = np.array(state.obs["obs"])
        out["reset.critic"] = np.array(state.obs["critic"])
        out["reset.episode_step"] = np.array(state.info["steps"]).astype(np.int32)
        for i, v in enumerate(rng_log.values):
            out[f"reset_rng.{i:02d}"] = v
    env.close()
    return {"seed_numpy_global": SEED_RESETS, "num_envs": RESET_ENVS, "rng_calls": rng_log.calls}


def record_curriculum(override: dict, out: dict) -> dict:
    from unilab.base.curriculum import EpisodeLengthTracker, PenaltyCurriculum

    cur = override["curriculum"]
    rng = np.random.default_rng(SEED_CURRICULUM)
    meta = {}
    for num_envs in (4096, 8):
        scales = dict(override["reward_config"]["scales"])

        class _Cfg:
            pass

        dummy = _Cfg()
        dummy.cfg = _Cfg()
        dummy.cfg.reward_config = _Cfg()
        dummy.cfg.reward_config.scales = scales
        tracker = EpisodeLengthTracker(num_envs)
        curriculum = PenaltyCurriculum(
            dummy,
            enabled=True,
            initial_scale=cur["initial_scale"],
            min_scale=cur["min_scale"],
            max_scale=cur["max_scale"],
            level_down_threshold=cur["level_down_threshold"],
            level_up_threshold=cur["level_up_threshold"],
            degree=cur["degree"],
        )
        lengths, counts, avg, scale, pose_w = [], [], [], [], []
        original_pose = float(override["reward_config"]["scales"]["pose"])
        n_updates = 1600
        for u in range(n_updates):
            k = int(rng.integers(1, 9))
            if u < 900:
                batch = rng.integers(600, 1001, size=k)
            elif u < 1300:
                batch = rng.integers(1, 200, size=k)
            else:
                batch = rng.integers(100, 900, size=k)
            tracker.update(batch)
            curriculum.update(tracker.average_length)
            lengths.append(batch)
            counts.append(k)
            avg.append(tracker.average_length)
            scale.append(curriculum.current_scale)
            pose_w.append(scales["pose"])
        assert np.allclose(np.array(pose_w), np.array(scale) * original_pose)
        p = f"curriculum.n{num_envs}"
        out[f"{p}.lengths"] = np.concatenate(lengths).astype(np.int16)
        out[f"{p}.counts"] = np.array(counts, dtype=np.int8)
        out[f"{p}.average_length"] = np.array(avg)
        out[f"{p}.scale"] = np.array(scale)
        meta[f"n{num_envs}"] = {"window_size": tracker.window_size, "updates": n_updates}
    return meta


def record_symmetry(env, out: dict) -> dict:
    aug = env.build_symmetry_augmentation(device="cpu")
    out["symmetry.action_perm"] = aug._joint_map.numpy().astype(np.int32)
    out["symmetry.action_sign"] = aug._sign_mask.numpy().astype(np.float32)
    for group, tr in aug._obs_transforms.items():
        out[f"symmetry.{group}_perm"] = tr.joint_map.numpy().astype(np.int32)
        out[f"symmetry.{group}_sign"] = (tr.flip_mask * tr.joint_sign).numpy().astype(np.float32)
    return {
        "rule": "mirrored[..., i] = x[..., perm[i]] * sign[i] (obs, critic and action alike)",
        "obs_layouts": {k: [list(x) for x in v] for k, v in env.get_symmetry_obs_layouts().items()},
    }


# --------------------------------------------------------------------------- main
def main() -> None:
    global TASK, ROLLOUT_STEPS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (tests/golden/reference)")
    parser.add_argument("--task", choices=sorted(RECORDINGS), default="G1WalkFlat")
    parser.add_argument("--ref-root", default=os.environ.get("UNILAB_REF_ROOT", DEFAULT_REF_ROOT))
    args = parser.parse_args()
    ref_root = Path(args.ref_root)
    TASK, recording = args.task, RECORDINGS[args.task]
    ROLLOUT_STEPS = recording.rollout_steps

    import mujoco

    override, hydra_cfg = compose_override(ref_root, ["env.noise_config.level=0.0"])
    override_rollout, _ = compose_override(
        ref_root, ["env.noise_config.level=0.0", *recording.rollout_overrides]
    )
    override_noise, _ = compose_override(ref_root, [])
    original_scales = dict(override["reward_config"]["scales"])

    out: dict[str, np.ndarray] = {}
    np.random.seed(0)
    env = make_env(override, 1)
    cfg = env.cfg
    model_meta = record_model(env, out)
    sym_meta = record_symmetry(env, out)
    out["default_angles"] = np.array(env.default_angles)
    out["pose_weights"] = np.array(env._pose_weights)
    walk_profile = bool(env._uses_walk_observation_profile())
    initial_scales = dict(env._reward_cfg.scales)
    env.close()

    rollout_meta = record_rollout(override_rollout, out)
    if recording.rollout_overrides:
        rollout_meta["hydra_overrides"] = list(recording.rollout_overrides)
    sections = {}
    if recording.flat_sections:
        sections = {
            "noise": record_noise(override_noise, out),
            "resets": record_resets(override, out),
            "curriculum_drive": record_curriculum(override, out),
        }
    else:
        assert rollout_meta["envs_reset"] == list(range(ROLLOUT_ENVS)), "every env must reset"

    nu = model_meta["nu"]
    actor_layout = [
        ["gyro*0.25", 3],
        ["-upvector", 3],
        ["dof_pos-default", nu],
        ["dof_vel*0.05", nu],
        ["last_action", nu],
        ["command", 3],
        ["gait_phase", 2],
    ]
    meta = {
        "task": TASK,
        "reference": {"repo": "unilabsim/UniLab", "commit": REF_COMMIT, "license": "Apache-2.0"},
        "mujoco_uni_version": mujoco.__version__,
        "numpy_version": np.__version__,
        "python": sys.version.split()[0],
        "construction": f"hydra compose conf/offpolicy [algo={recording.algo}, "
        f"task={recording.task_file}] -> BackendAdapter.build_task_env_cfg_override() -> "
        f"registry.make('{TASK}', sim_backend='mujoco', env_cfg_override=..., num_envs=N); "
        "rollout/resets add hydra override env.noise_config.level=0.0",
        f"{recording.algo}_num_envs_default": int(hydra_cfg.algo.num_envs),
        "env_cfg": {
            "cfg_class": type(cfg).__name__,
            "scene": os.path.relpath(cfg.scene.model_file, ref_root),
            "sim_dt": cfg.sim_dt,
            "ctrl_dt": cfg.ctrl_dt,
            "substeps": cfg.sim_substeps,
            "max_episode_seconds": cfg.max_episode_seconds,
            "max_episode_steps": cfg.max_episode_steps,
            "action_scale": float(cfg.control_config.action_scale),
            "simulate_action_latency": bool(cfg.control_config.simulate_action_latency),
            "gait_phase_init_mode": cfg.gait_phase_init_mode,
            "reset_base_qvel_limit": cfg.reset_base_qvel_limit,
            "commands": vars(cfg.commands),
            "noise_config_owner": override_noise["noise_config"],
            "curriculum": override["curriculum"],
            "domain_rand": vars(cfg.domain_rand),
            "sensor": {
                "local_linvel": cfg.sensor.local_linvel,
                "gyro": cfg.sensor.gyro,
                "upvector": cfg.sensor.upvector,
            },
            "base_name": "pelvis",
            "keyframe": "stand",
            "post_step_forward_sensor": bool(cfg.post_step_forward_sensor),
            "walk_observation_profile": walk_profile,
            "reward": {k: v for k, v in override["reward_config"].items() if k != "scales"},
        },
        "reward_terms": list(original_scales),
        "reward_weights_yaml": original_scales,
        "reward_weights_at_construction": initial_scales,
        "penalty_terms": [k for k, v in original_scales.items() if v < 0],
        "obs_layout": {"obs": actor_layout, "critic": [*actor_layout, ["pelvis_linvel*2", 3]]},
        "model": model_meta,
        "physics_state": "backend keeps [time, qpos, qvel] per env in float32; each control step "
        "feeds it (as float64) to BatchEnvPool.step with initial_warmstart=None, which zeroes "
        "qacc_warmstart; 3 x mj_step with ctrl held; sensordata is the one left by the last "
        "mj_step (computed at the state before the last integration), cast to float32",
        "qacc_warmstart_before": "zero at every control step (not stored)",
        "rollout": rollout_meta,
        **sections,
        "symmetry": sym_meta,
        "regenerate": "/work/ref/venv/bin/python bench/reference/golden_g1.py "
        + ("" if TASK == "G1WalkFlat" else f"--task {TASK} ")
        + "--out tests/golden/reference",
    }
    out["meta_json"] = np.array(json.dumps(meta, default=str))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{TASK}.npz"
    np.savez_compressed(path, **out)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {len(out)} keys)")


if __name__ == "__main__":
    main()
