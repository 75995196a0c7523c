"""Record golden data of the REFERENCE UniLab ``Go2JoystickFlat`` task (MuJoCo backend).

Runs only in the reference's own virtual environment (GitHub ``unilabsim/UniLab`` at commit
``9aa57115`` with ``mujoco-uni`` 3.8.0), never in this project's venv and never from the test
suite::

    /work/ref/venv/bin/python bench/reference/golden_go2.py --out tests/golden/reference

The env is built through the reference's own construction path: Hydra composes
``conf/offpolicy/config.yaml`` with ``algo=flashsac task=flashsac/go2_joystick_flat/mujoco`` (the
off-policy Go2 owner on MuJoCo), ``BackendAdapter.build_task_env_cfg_override`` turns the
``reward``/``env`` sections into the env-config override, and ``registry.make`` builds the env.
All randomness of the reference env comes from numpy's global RNG, seeded with
``np.random.seed`` right before ``registry.make``. A few recording hooks wrap (never change)
backend and env methods to read values that the reference computes but does not return. The
layout of the written ``Go2JoystickFlat.npz`` is documented in
``tests/golden/reference/README.md`` and in its ``meta_json`` entry.
"""

from __future__ import annotations

import argparse
import copy
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REF_ROOT = Path("/work/ref/UniLab")
REF_COMMIT = "9aa57115"
TASK = "Go2JoystickFlat"
OVERRIDES = ["algo=flashsac", "task=flashsac/go2_joystick_flat/mujoco"]
SEED_MAIN = 0
SEED_NOISE = 1
SEED_RESETS = 2
SEED_PUSH = 3
ACTION_SEED = 1234
N_MAIN = 8
T_MAIN = 60
N_NOISE = 8
T_NOISE = 10
N_RESETS = 64
N_PUSH = 8
T_PUSH = 9
PUSH_INTERVAL_SHORT = 4
TRUNCATE_ENV = 5  # main rollout: this env's episode counter is preset so it truncates
TRUNCATE_AT_STEP = 30  # ... at this 0-based rollout step
FALL_ENVS = (6, 7)  # main rollout: these envs get large actions so that they fall over
# The carried rollout (carry.*): replayed by the tests with their own state through automatic
# resets. Every env's episode counter is preset so that it truncates at its step of
# CARRY_TRUNCATE_AT (the fall envs may terminate first); pushes every PUSH_INTERVAL_CARRY steps.
SEED_CARRY = 4
ACTION_SEED_CARRY = 4321
N_CARRY = 8
T_CARRY = 40
PUSH_INTERVAL_CARRY = 7
CARRY_TRUNCATE_AT = (4, 8, 12, 16, 20, 24, 28, 32)
MODEL_FIELDS = (
    "body_mass",
    "body_ipos",
    "body_iquat",
    "body_inertia",
    "body_pos",
    "body_quat",
    "jnt_range",
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
    "geom_margin",
    "geom_solref",
    "geom_solimp",
    "actuator_forcerange",
    "actuator_ctrlrange",
    "actuator_ctrllimited",
    "actuator_trnid",
    "qpos0",
    "body_invweight0",
    "dof_invweight0",
)
OBS_LAYOUT = [
    ["gyro", 3],
    ["neg_upvector", 3],
    ["joint_pos_minus_default", 12],
    ["joint_vel", 12],
    ["last_action", 12],
    ["command", 3],
    ["feet_phase", 4],
]
CRITIC_LAYOUT = [*OBS_LAYOUT, ["local_linvel", 3]]
NOISE_SLICES = ["gyro", "upvector", "joint_pos_minus_default", "joint_vel", "local_linvel"]
FEET = ["FL", "FR", "RL", "RR"]


def _compose_override(extra: dict[str, Any] | None) -> dict[str, Any]:
    """The env-config override the reference's training entry point builds, plus ``extra``."""
    from hydra import compose, initialize_config_dir
    from unilab.training.backend_adapter import BackendAdapter

    with initialize_config_dir(config_dir=str(REF_ROOT / "conf" / "offpolicy"), version_base=None):
        cfg = compose(config_name="config", overrides=OVERRIDES)
    override = BackendAdapter(cfg, root_dir=REF_ROOT).build_task_env_cfg_override()
    override = copy.deepcopy(override)
    for key, value in (extra or {}).items():
        override.setdefault(key, {}).update(value)
    return override


class Recorder:
    """Builds one reference env and wraps a few of its methods to record what they compute."""

    def __init__(self, num_envs: int, seed: int, extra: dict[str, Any] | None = None):
        from unilab.base import registry

        registry.ensure_registries()
        self.override = _compose_override(extra)
        np.random.seed(seed)
        self.env = registry.make(
            TASK, sim_backend="mujoco", env_cfg_override=self.override, num_envs=num_envs
        )
        self.n = num_envs
        self.backend = self.env._backend
        self.model = self.backend.model
        self.step_log: dict[str, Any] = {}
        self.reset_log: list[dict[str, Any]] = []
        self.noise_calls: list[dict[str, Any]] = []
        self.reward_raw: dict[str, np.ndarray] = {}
        self._wrap()

    # -- hooks -----------------------------------------------------------------------------
    def _wrap(self) -> None:
        backend, env = self.backend, self.env
        orig_step = backend.step

        def step(ctrl: np.ndarray, nsteps: int = 1) -> Any:
            b = self.backend
            log = self.step_log
            log["state_before"] = np.asarray(b._physics_state, dtype=np.float64).copy()
            log["ctrl"] = np.asarray(ctrl).copy()
            log["nsubsteps"] = nsteps
            log["xfrc_base"] = b._pending_xfrc_applied[:, b._push_body_force_slice].copy()
            log["push"] = bool(np.any(b._pending_xfrc_applied))
            log.update(self.dr_in_force())
            out = orig_step(ctrl, nsteps)
            log["state_after"] = np.asarray(b._physics_state, dtype=np.float64).copy()
            log["sensor_after"] = np.asarray(b._sensor_data).copy()
            return out

        backend.step = step

        orig_reset = env.reset

        def reset(env_indices: np.ndarray) -> Any:
            rng_state = np.random.get_state()
            obs, info = orig_reset(env_indices)
            self.reset_log.append(
                {
                    "env_ids": np.asarray(env_indices).copy(),
                    "rng_state": rng_state,
                    "obs": {k: np.asarray(v).copy() for k, v in obs.items()},
                    "commands": np.asarray(info["commands"]).copy(),
                    "state_after": np.asarray(self.backend._physics_state[env_indices], np.float64),
                    **{f"dr_{k}": v[env_indices] for k, v in self.dr_in_force().items()},
                }
            )
            return obs, info

        env.reset = reset

        orig_set_state = backend.set_state

        def set_state(env_indices, qpos, qvel, randomization=None):
            rec = {"qpos": np.asarray(qpos).copy(), "qvel": np.asarray(qvel).copy()}
            if randomization is not None:
                for name in ("base_mass_delta", "base_com_offset", "gravity", "kp", "kd"):
                    val = getattr(randomization, name)
                    rec[f"payload_{name}"] = None if val is None else np.asarray(val).copy()
            out = orig_set_state(env_indices, qpos, qvel, randomization=randomization)
            self._set_state_records.append(rec)
            return out

        self._set_state_records: list[dict[str, Any]] = []
        backend.set_state = set_state

        orig_noise = env._obs_noise

        def obs_noise(data: np.ndarray, scale: float) -> np.ndarray:
            rng_state = np.random.get_state()
            out = orig_noise(data, scale)
            if float(env.cfg.noise_config.level) > 0.0:
                replay = np.random.RandomState()
                replay.set_state(rng_state)
                raw = replay.uniform(-1.0, 1.0, data.shape)
                self.noise_calls.append(
                    {
                        "clean": np.asarray(data).copy(),
                        "raw": raw,
                        "scale": scale,
                        "out": out.copy(),
                    }
                )
            return out

        env._obs_noise = obs_noise

        for name, fn in list(env._reward_fns.items()):

            def wrapped(ctx: Any, _fn: Any = fn, _name: str = name) -> np.ndarray:
                out = _fn(ctx)
                self.reward_raw[_name] = np.asarray(out).copy()
                return out

            env._reward_fns[name] = wrapped

    def dr_in_force(self) -> dict[str, np.ndarray]:
        """Per-env model values held by the batched pool (kp, kd, base mass, COM, gravity)."""
        pool, base = self.backend._pool, self.backend._base_body_id
        if pool is None:
            return {}
        rows = []
        for i in range(self.n):
            rows.append(
                (
                    pool.get_field(i, "kp"),
                    pool.get_field(i, "kd"),
                    pool.get_field(i, "body_mass")[base],
                    pool.get_field(i, "body_ipos").reshape(-1, 3)[base],
                    pool.get_field(i, "gravity"),
                )
            )
        kp, kd, mass, com, grav = (np.stack(c) for c in zip(*rows, strict=True))
        return {"kp": kp, "kd": kd, "base_mass": mass, "com": com, "gravity": grav}

    # -- sensors -------------------------------------------------------------------------
    def sensors(self, sensor_data: np.ndarray) -> dict[str, np.ndarray]:
        m = self.model
        import mujoco

        def get(name: str) -> np.ndarray:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, name)
            adr, dim = int(m.sensor_adr[sid]), int(m.sensor_dim[sid])
            return sensor_data[:, adr : adr + dim]

        return {
            "gyro": get("gyro"),
            "local_linvel": get("local_linvel"),
            "upvector": get("upvector"),
            "feet_pos": np.stack([get(f"{f}_pos") for f in FEET], axis=1),
            "feet_contact_found": np.concatenate([get(f"{f}_foot_contact") for f in FEET], axis=1),
        }


def _stack(rows: list[dict[str, Any]], key: str, dtype: Any = None) -> np.ndarray:
    arr = np.stack([np.asarray(r[key]) for r in rows])
    return arr if dtype is None else arr.astype(dtype)


def _true_obs(state: Any) -> tuple[np.ndarray, np.ndarray]:
    """Observation of the step before any auto-reset (final observation for done envs)."""
    obs = state.obs["obs"].copy()
    critic = state.obs["critic"].copy()
    if state.final_observation is not None:
        done = state.info["_final_observation"]
        obs[done] = state.final_observation["obs"][done]
        critic[done] = state.final_observation["critic"][done]
    return obs, critic


def _rollout(
    rec: Recorder,
    actions: np.ndarray,
    prefix: str,
    out: dict[str, np.ndarray],
    *,
    preset_steps: dict[int, int] | None = None,
    on_step: Any = None,
) -> dict[str, Any]:
    env = rec.env
    nq = rec.model.nq
    state = env.init_state()
    init_resets = len(rec.reset_log)
    init_obs = state.obs["obs"].copy()
    init_critic = state.obs["critic"].copy()
    for idx, steps in (preset_steps or {}).items():
        state.info["steps"][idx] = steps
    rows: list[dict[str, Any]] = []
    noise_per_step: list[list[dict[str, Any]]] = []
    scales = env._reward_cfg.scales
    for t in range(actions.shape[0]):
        if on_step is not None:
            on_step(t)
        row: dict[str, Any] = {
            "commands": state.info["commands"].copy(),
            "last_action_before": state.info["current_actions"].copy(),
            "steps_before": state.info["steps"].copy(),
            "step_counter_before": env.step_counter,
        }
        rec.reward_raw.clear()
        n_calls = len(rec.noise_calls)
        n_resets = len(rec.reset_log)
        # A copy: the reference keeps a reference to the action array in info["current_actions"]
        # and its auto-reset writes zeros into the reset rows of that array.
        state = env.step(actions[t].copy())
        log = rec.step_log
        row.update(
            {
                "action": actions[t],
                "ctrl": log["ctrl"],
                "push": log["push"],
                "xfrc_base": log["xfrc_base"],
                "kp": log["kp"],
                "kd": log["kd"],
                "base_mass": log["base_mass"],
                "com": log["com"],
                "gravity": log["gravity"],
                "qpos_before": log["state_before"][:, 1 : 1 + nq],
                "qvel_before": log["state_before"][:, 1 + nq :],
                "time_before": log["state_before"][:, 0],
                "qpos_after": log["state_after"][:, 1 : 1 + nq],
                "qvel_after": log["state_after"][:, 1 + nq :],
                "phase": env.phase.copy(),
                "feet_phase": env.feet_phase.copy(),
                "reward": state.reward.copy(),
                "terminated": state.terminated.copy(),
                "truncated": state.truncated.copy(),
                "steps_after": state.info["steps"].copy(),
                "obs_returned": state.obs["obs"].copy(),
                "critic_returned": state.obs["critic"].copy(),
                "reset_mask": (state.terminated | state.truncated).copy(),
            }
        )
        row["obs"], row["critic"] = _true_obs(state)
        for k, v in rec.sensors(log["sensor_after"]).items():
            row[f"sensor.{k}"] = v
        total = np.zeros(rec.n, dtype=np.float32)
        for name, scale in scales.items():
            raw = rec.reward_raw[name]
            row[f"reward_raw.{name}"] = raw
            row[f"reward.{name}"] = (raw * scale) * env.cfg.ctrl_dt
            total += raw * scale
        row["reward_sum_before_dt"] = total
        rows.append(row)
        noise_per_step.append(rec.noise_calls[n_calls:])
        row["n_resets_in_step"] = len(rec.reset_log) - n_resets

    dtypes = {
        "action": np.float32,
        "ctrl": np.float32,
        "obs": np.float32,
        "critic": np.float32,
        "obs_returned": np.float32,
        "critic_returned": np.float32,
        "reward": np.float32,
        "commands": np.float32,
        "last_action_before": np.float32,
        "phase": np.float32,
        "feet_phase": np.float32,
    }
    skip = {"step_counter_before", "n_resets_in_step"}
    for key in rows[0]:
        if key in skip:
            continue
        arr = _stack(rows, key, dtypes.get(key))
        if arr.dtype == np.float64 and key.startswith(("reward", "sensor")):
            arr = arr.astype(np.float32)
        out[f"{prefix}.{key}"] = arr
    out[f"{prefix}.step_counter_before"] = np.array([r["step_counter_before"] for r in rows])
    out[f"{prefix}.init_obs"] = init_obs
    out[f"{prefix}.init_critic"] = init_critic
    return {"init_resets": init_resets, "noise_per_step": noise_per_step, "rows": rows}


def _reset_raw_draws(rng_state: Any, n: int) -> dict[str, np.ndarray]:
    """Replay the global-RNG draws of one reset call of ``n`` envs (order per the spec)."""
    r = np.random.RandomState()
    r.set_state(rng_state)
    d = {}
    d["xy_offset"] = r.uniform(-0.5, 0.5, (n, 2))
    d["yaw"] = r.uniform(-np.pi, np.pi, (n,))
    d["base_qvel"] = r.uniform(-0.5, 0.5, size=(n, 6))
    d["commands"] = r.uniform(
        low=np.array([-0.6, -0.4, -0.8], np.float32),
        high=np.array([1.0, 0.4, 0.8], np.float32),
        size=(n, 3),
    )
    d["base_mass_delta"] = r.uniform(-1.5, 1.5, size=(n,))
    d["com_offset_x"] = r.uniform(-0.05, 0.05, size=(n,))
    d["gravity"] = r.uniform(
        low=np.array([0.0, 0.0, -9.81]), high=np.array([0.0, 0.0, -9.81]), size=(n, 3)
    )
    d["kp_multiplier"] = r.uniform(0.9, 1.1, (n, 1))[:, 0]
    d["kd_multiplier"] = r.uniform(0.9, 1.1, (n, 1))[:, 0]
    return d


def _record_resets(out: dict[str, np.ndarray]) -> dict[str, Any]:
    rec = Recorder(N_RESETS, SEED_RESETS, {"noise_config": {"level": 0.0}})
    rec.env.init_state()
    assert len(rec.reset_log) == 1 and len(rec._set_state_records) == 1
    r, s = rec.reset_log[0], rec._set_state_records[0]
    n = len(r["env_ids"])
    raw = _reset_raw_draws(r["rng_state"], n)
    # Self-check of the draw order: replayed draws reproduce what the reference reset to.
    qpos = s["qpos"]
    assert np.allclose(qpos[:, :2], np.float32(raw["xy_offset"]), atol=1e-6)
    assert np.allclose(s["qvel"][:, :6], np.float32(raw["base_qvel"]))
    assert np.allclose(r["commands"], np.float32(raw["commands"]))
    assert np.allclose(s["payload_base_mass_delta"], raw["base_mass_delta"])
    assert np.allclose(s["payload_kp"][:, 0], 35.0 * raw["kp_multiplier"])
    assert np.allclose(s["payload_kd"][:, 0], 0.5 * raw["kd_multiplier"])
    nq = rec.model.nq
    out["resets.env_ids"] = r["env_ids"]
    out["resets.qpos"] = np.asarray(qpos, np.float64)
    out["resets.qvel"] = np.asarray(s["qvel"], np.float64)
    out["resets.qpos_stored"] = r["state_after"][:, 1 : 1 + nq]
    out["resets.qvel_stored"] = r["state_after"][:, 1 + nq :]
    out["resets.commands"] = r["commands"]
    for k in ("base_mass_delta", "base_com_offset", "gravity", "kp", "kd"):
        out[f"resets.payload.{k}"] = s[f"payload_{k}"]
    for k in ("kp", "kd", "base_mass", "com", "gravity"):
        out[f"resets.in_force.{k}"] = r[f"dr_{k}"]
    for k, v in raw.items():
        out[f"resets.raw.{k}"] = v
    out["resets.obs"] = r["obs"]["obs"]
    out["resets.critic"] = r["obs"]["critic"]
    sens = rec.sensors(np.asarray(rec.backend._sensor_data))
    for k, v in sens.items():
        out[f"resets.sensor.{k}"] = v.astype(np.float32)
    return {"n": n}


def _record_noise(out: dict[str, np.ndarray]) -> dict[str, Any]:
    rec = Recorder(N_NOISE, SEED_NOISE)
    rng = np.random.default_rng(ACTION_SEED + 1)
    actions = np.clip(0.5 * rng.standard_normal((T_NOISE, N_NOISE, 12)), -1, 1).astype(np.float32)
    res = _rollout(rec, actions, "noise", out)
    assert res["init_resets"] == 1
    init_calls = rec.noise_calls[:5]
    for j, name in enumerate(NOISE_SLICES):
        out[f"noise.init_raw.{name}"] = init_calls[j]["raw"]
        out[f"noise.init_clean.{name}"] = init_calls[j]["clean"]
    for t, calls in enumerate(res["noise_per_step"]):
        assert len(calls) == 5, f"unexpected reset in the noise rollout at step {t}"
    for j, name in enumerate(NOISE_SLICES):
        out[f"noise.raw.{name}"] = np.stack([c[j]["raw"] for c in res["noise_per_step"]])
        out[f"noise.clean.{name}"] = np.stack([c[j]["clean"] for c in res["noise_per_step"]])
        out[f"noise.scale.{name}"] = np.float64(res["noise_per_step"][0][j]["scale"])
    # Clean (noise-free) observation of each step, assembled from the clean inputs.
    clean_obs = []
    for t, calls in enumerate(res["noise_per_step"]):
        c = {name: calls[j]["clean"] for j, name in enumerate(NOISE_SLICES)}
        row = res["rows"][t]
        obs = np.concatenate(
            [
                c["gyro"],
                -c["upvector"],
                c["joint_pos_minus_default"],
                c["joint_vel"],
                row["action"],
                row["commands"],
                row["feet_phase"],
                c["local_linvel"],
            ],
            axis=1,
            dtype=np.float32,
        )
        clean_obs.append(obs)
    clean = np.stack(clean_obs)
    out["noise.obs_clean"] = clean[..., :49]
    keep = {"action", "commands", "feet_phase", "obs", "critic", "obs_clean", "init_obs"}
    for key in [k for k in out if k.startswith("noise.")]:
        sub = key.split(".", 1)[1]
        if sub not in keep and not sub.startswith(("raw.", "clean.", "scale.", "init_")):
            del out[key]
    return {"T": T_NOISE, "N": N_NOISE}


def _record_push(out: dict[str, np.ndarray]) -> dict[str, Any]:
    rec = Recorder(
        N_PUSH,
        SEED_PUSH,
        {"noise_config": {"level": 0.0}, "domain_rand": {"push_interval": PUSH_INTERVAL_SHORT}},
    )
    actions = np.zeros((T_PUSH, N_PUSH, 12), np.float32)
    _rollout(rec, actions, "push", out)
    keep = {
        "push",
        "xfrc_base",
        "qpos_before",
        "qvel_before",
        "time_before",
        "qpos_after",
        "qvel_after",
        "ctrl",
        "kp",
        "kd",
        "base_mass",
        "com",
        "gravity",
        "step_counter_before",
        "terminated",
        "truncated",
    }
    for key in [k for k in out if k.startswith("push.")]:
        if key.split(".", 1)[1] not in keep:
            del out[key]
    return {"T": T_PUSH, "N": N_PUSH, "push_interval": PUSH_INTERVAL_SHORT}


def _record_carry(out: dict[str, np.ndarray]) -> dict[str, Any]:
    """A rollout through automatic resets (every env at least once) with pushes, and every
    ``np.random`` call the reference makes in it (``carry_rng.<i>`` in call order, described in
    the meta's ``carry_rollout.rng_calls``), so that a test can replay it carrying its own
    state: the initial reset, every automatic reset and every push force from those draws."""
    from golden_g1 import RngLog  # bench/reference/golden_g1.py: np.random.uniform/randint

    np.random.seed(SEED_CARRY)
    with RngLog() as rng_log:
        rng_log.tag = "construct"
        rec = Recorder(
            N_CARRY,
            SEED_CARRY,
            {
                "noise_config": {"level": 0.0},
                "domain_rand": {"push_interval": PUSH_INTERVAL_CARRY},
            },
        )
        rng_log.tag = "init_state"
        max_steps = rec.env.cfg.max_episode_steps
        preset = {e: max_steps - (t + 1) for e, t in enumerate(CARRY_TRUNCATE_AT)}

        def on_step(t: int) -> None:
            rng_log.tag = f"step{t}"

        actions = _recorded_actions(ACTION_SEED_CARRY, T_CARRY, N_CARRY)
        res = _rollout(rec, actions, "carry", out, preset_steps=preset, on_step=on_step)
    assert res["init_resets"] == 1
    ended = out["carry.terminated"] | out["carry.truncated"]
    assert ended.any(axis=0).all(), "an env did not reset in the carried rollout"
    assert out["carry.push"].sum() >= 4, "too few pushes in the carried rollout"
    init = rec._set_state_records[0]
    out["carry.init.qpos"] = init["qpos"].astype(np.float64)
    out["carry.init.qvel"] = init["qvel"].astype(np.float64)
    out["carry.init.commands"] = rec.reset_log[0]["commands"]
    out["carry.episode_steps_preset"] = np.array([preset[e] for e in range(N_CARRY)], np.int64)
    t_env = np.argwhere(ended)
    out["carry.reset_rows.t_env"] = t_env.astype(np.int32)
    out["carry.reset_rows.obs_next"] = out["carry.obs_returned"][ended]
    out["carry.reset_rows.critic_next"] = out["carry.critic_returned"][ended]
    for i, v in enumerate(rng_log.values):
        out[f"carry_rng.{i:04d}"] = v
    # Self-check of the logged draws: each automatic reset's draws reproduce its state.
    auto = rec.reset_log[1:]
    assert len(auto) == len(np.unique(t_env[:, 0]))
    return {
        "num_envs": N_CARRY,
        "steps": T_CARRY,
        "seed": SEED_CARRY,
        "action_seed": ACTION_SEED_CARRY,
        "actions": "clip(0.5*N(0,1),-1,1) float32 from default_rng(action_seed); envs "
        f"{list(FALL_ENVS)} get +-1 bang-bang patterns (sign flips every 6 steps) to fall",
        "noise_level": 0.0,
        "push_interval": PUSH_INTERVAL_CARRY,
        "truncate_at": list(CARRY_TRUNCATE_AT),
        "episode_steps_preset": [preset[e] for e in range(N_CARRY)],
        "rng_calls": rng_log.calls,
        "terminations": [[int(t), int(e)] for t, e in np.argwhere(out["carry.terminated"])],
        "truncations": [[int(t), int(e)] for t, e in np.argwhere(out["carry.truncated"])],
        "pushed_steps": np.flatnonzero(out["carry.push"]).tolist(),
        "resets_per_env": ended.sum(axis=0).tolist(),
    }


def _recorded_actions(seed: int, steps: int, envs: int) -> np.ndarray:
    """A rollout's actions ``[steps, envs, 12]``: clip(0.5 N(0, 1), -1, 1) from ``seed``, and
    for :data:`FALL_ENVS` large alternating actions (a bang-bang roll on all legs, the sign
    flipping every 6 steps) so the robot tips over."""
    rng = np.random.default_rng(seed)
    a = np.clip(0.5 * rng.standard_normal((steps, envs, 12)), -1.0, 1.0)
    for i in FALL_ENVS:
        sign = np.where((np.arange(steps) // 6) % 2 == 0, 1.0, -1.0)[:, None]
        pattern = np.array([1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1], np.float64)
        if i == FALL_ENVS[1]:
            pattern = np.array([1, 1, -1, 1, 1, -1, 1, 1, -1, 1, 1, -1], np.float64)
        a[:, i, :] = sign * pattern[None, :]
    return a.astype(np.float32)


def main() -> None:
    import mujoco

    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/golden/reference")
    args = parser.parse_args()

    out: dict[str, np.ndarray] = {}
    rec = Recorder(N_MAIN, SEED_MAIN, {"noise_config": {"level": 0.0}})
    env, m = rec.env, rec.model
    for f in MODEL_FIELDS:
        out[f"model.{f}"] = np.asarray(getattr(m, f)).copy()
    out["model.opt.timestep"] = np.float64(m.opt.timestep)
    out["model.opt.gravity"] = np.asarray(m.opt.gravity).copy()
    out["model.actuator_gainprm"] = np.asarray(m.actuator_gainprm[:, :3]).copy()
    out["model.actuator_biasprm"] = np.asarray(m.actuator_biasprm[:, :3]).copy()
    key_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    out["model.key_qpos"] = np.asarray(m.key_qpos[key_id]).copy()
    out["model.default_angles"] = np.asarray(env.default_angles).copy()

    actions = _recorded_actions(ACTION_SEED, T_MAIN, N_MAIN)
    steps_preset = env.cfg.max_episode_steps - (TRUNCATE_AT_STEP + 1)
    res = _rollout(rec, actions, "step", out, preset_steps={TRUNCATE_ENV: steps_preset})
    term = out["step.terminated"]
    trunc = out["step.truncated"]
    assert term.any(), "no env terminated in the main rollout"
    assert trunc[TRUNCATE_AT_STEP, TRUNCATE_ENV], "the preset env did not truncate"
    # Resets inside the main rollout (after the initial one): state the env was reset to.
    auto = rec.reset_log[res["init_resets"] :]
    sets = rec._set_state_records[res["init_resets"] :]
    reset_rows = []
    reset_steps = np.nonzero(out["step.reset_mask"].any(axis=1))[0]
    assert len(auto) == len(reset_steps)
    for t, r, s in zip(reset_steps, auto, sets, strict=True):
        for j, e in enumerate(r["env_ids"]):
            reset_rows.append(
                (
                    t,
                    e,
                    s["qpos"][j],
                    s["qvel"][j],
                    r["commands"][j],
                    s["payload_kp"][j, 0],
                    s["payload_kd"][j, 0],
                    s["payload_base_mass_delta"][j],
                    s["payload_base_com_offset"][j, 0],
                    out["step.critic_returned"][t, e],
                )
            )
            assert np.array_equal(out["step.critic_returned"][t, e], r["obs"]["critic"][j])
    cols = list(zip(*reset_rows, strict=True))
    names = [
        "step",
        "env",
        "qpos",
        "qvel",
        "commands",
        "kp",
        "kd",
        "base_mass_delta",
        "com_x",
        "critic_returned",
    ]
    for name, col in zip(names, cols, strict=True):
        out[f"step.autoreset.{name}"] = np.asarray(col)
    # Returned (post-reset) observations differ from step.obs/critic only in the reset rows.
    notdone = ~out["step.reset_mask"]
    assert np.array_equal(out["step.critic_returned"][notdone], out["step.critic"][notdone])
    del out["step.obs_returned"], out["step.critic_returned"]
    init = rec.reset_log[0]
    out["step.init.qpos"] = rec._set_state_records[0]["qpos"].astype(np.float64)
    out["step.init.qvel"] = rec._set_state_records[0]["qvel"].astype(np.float64)
    out["step.init.commands"] = init["commands"]
    out["step.episode_steps_preset"] = np.array([TRUNCATE_ENV, steps_preset])

    noise_meta = _record_noise(out)
    reset_meta = _record_resets(out)
    push_meta = _record_push(out)
    carry_meta = _record_carry(out)

    cfg = env.cfg
    dr = cfg.domain_rand
    names_of = lambda t, n: [mujoco.mj_id2name(m, t, i) or "" for i in range(n)]  # noqa: E731
    meta = {
        "reference": "github unilabsim/UniLab",
        "reference_commit": REF_COMMIT,
        "mujoco_uni_version": mujoco.__version__,
        "numpy_version": np.__version__,
        "task": TASK,
        "hydra_overrides": OVERRIDES,
        "env_cfg_override": rec.override,
        "env_cfg": {
            "sim_dt": cfg.sim_dt,
            "ctrl_dt": cfg.ctrl_dt,
            "substeps": cfg.sim_substeps,
            "max_episode_steps": cfg.max_episode_steps,
            "action_scale": cfg.control_config.action_scale,
            "Kp": cfg.control_config.Kp,
            "Kd": cfg.control_config.Kd,
            "simulate_action_latency": cfg.control_config.simulate_action_latency,
            "noise_config_owner": {
                "level": 1.0,
                "scale_joint_angle": cfg.noise_config.scale_joint_angle,
                "scale_joint_vel": cfg.noise_config.scale_joint_vel,
                "scale_gyro": cfg.noise_config.scale_gyro,
                "scale_gravity": cfg.noise_config.scale_gravity,
                "scale_linvel": cfg.noise_config.scale_linvel,
            },
            "commands": {
                "vel_limit": cfg.commands.vel_limit,
                "resampling_time": cfg.commands.resampling_time,
                "heading_command": cfg.commands.heading_command,
                "rel_standing_envs": cfg.commands.rel_standing_envs,
            },
            "domain_rand": {
                k: getattr(dr, k)
                for k in (
                    "randomize_base_mass",
                    "added_mass_range",
                    "randomize_body_mass",
                    "random_com",
                    "com_offset_x",
                    "randomize_gravity",
                    "gravity_range",
                    "randomize_ground_friction",
                    "randomize_dof_armature",
                    "push_robots",
                    "push_interval",
                    "max_force",
                    "push_body_name",
                    "randomize_kp",
                    "kp_multiplier_range",
                    "randomize_kd",
                    "kd_multiplier_range",
                )
            },
            "reward_scales": dict(cfg.reward_config.scales),
            "tracking_sigma": cfg.reward_config.tracking_sigma,
            "base_height_target": cfg.reward_config.base_height_target,
            "gait_frequency": env.gait_frequency,
            "post_step_forward_sensor": cfg.post_step_forward_sensor,
        },
        "reward_terms_in_order": [[k, v] for k, v in cfg.reward_config.scales.items()],
        "obs_layout": OBS_LAYOUT,
        "critic_layout": CRITIC_LAYOUT,
        "noise_slices_in_call_order": NOISE_SLICES,
        "sensor_names": names_of(mujoco.mjtObj.mjOBJ_SENSOR, m.nsensor),
        "actuator_names": names_of(mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu),
        "joint_names": names_of(mujoco.mjtObj.mjOBJ_JOINT, m.njnt),
        "body_names": names_of(mujoco.mjtObj.mjOBJ_BODY, m.nbody),
        "geom_names": names_of(mujoco.mjtObj.mjOBJ_GEOM, m.ngeom),
        "feet_order": FEET,
        "main_rollout": {
            "num_envs": N_MAIN,
            "steps": T_MAIN,
            "seed": SEED_MAIN,
            "action_seed": ACTION_SEED,
            "actions": "clip(0.5*N(0,1),-1,1) float32 from default_rng(action_seed); envs "
            f"{list(FALL_ENVS)} get +-1 bang-bang patterns (sign flips every 6 steps) to fall",
            "noise_level": 0.0,
            "truncation": f"env {TRUNCATE_ENV} episode counter preset to {steps_preset} after "
            f"init_state, so it truncates at step {TRUNCATE_AT_STEP}",
            "push": "push_interval 750 with the global step counter starting at 0: step 0 is "
            "pushed (step.push, step.xfrc_base)",
        },
        "noise_rollout": {**noise_meta, "seed": SEED_NOISE, "action_seed": ACTION_SEED + 1},
        "resets": {**reset_meta, "seed": SEED_RESETS},
        "push_rollout": {**push_meta, "seed": SEED_PUSH, "actions": "zeros"},
        "carry_rollout": carry_meta,
        "qacc_warmstart_available": False,
        "qacc_warmstart_note": "mujoco-uni BatchEnvPool.step is called without initial_warmstart: "
        "every control step starts from qacc_warmstart = 0 (checked: pool.step == 2x mj_step "
        "from a fresh MjData, bitwise)",
        "physics_state_dtype": "float32: the backend stores time/qpos/qvel in float32 between "
        "control steps; *_before/*_after are those float32 values widened to float64",
        "qpos_after_note": "physics state right after the 2 substeps of the step (push force, "
        "if any, applied during both), before any auto-reset",
        "obs_note": "step.obs/step.critic = observation of the step before auto-reset (true "
        "final observation for done envs); step.obs_returned/critic_returned = what env.step "
        "returned (reset observation for done envs)",
        "regenerate": "/work/ref/venv/bin/python bench/reference/golden_go2.py --out "
        "tests/golden/reference",
    }
    out["meta_json"] = np.array(json.dumps(meta, indent=1, default=_json_default))
    path = Path(args.out) / f"{TASK}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {len(out)} arrays)")
    print("terminated (step, env):", [tuple(x) for x in np.argwhere(term)])
    print("truncated (step, env):", [tuple(x) for x in np.argwhere(trunc)])


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


if __name__ == "__main__":
    main()
