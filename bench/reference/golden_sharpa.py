"""Record golden data of the REFERENCE UniLab ``SharpaInhandRotation`` task (MuJoCo backend).

Runs only in the reference's own virtual environment (GitHub ``unilabsim/UniLab`` at commit
``9aa57115`` with ``mujoco-uni`` 3.8.0), never in this project's venv and never from the test
suite::

    /work/ref/venv/bin/python bench/reference/golden_sharpa.py \\
        --grasp-cache SCRATCH/sharpa_grasp_linspace --out tests/golden/reference

The task needs grasp caches (``<prefix>_<scale>.npy``, ``--scales``, default 0.8 and 1.2), which
the reference downloads at run time. Make small ones with the reference's own grasp-collection
env first (about 40 s per scale for 32 grasps with 8 envs on a 2-core CPU), e.g. per scale::

    cd /work/ref/UniLab && /work/ref/venv/bin/python scripts/train_rsl_rl.py \\
        task=sharpa_inhand_grasp/mujoco env.domain_rand.scale_list=[0.8] \\
        env.grasp_cache_path=SCRATCH/sharpa_grasp_linspace ++env.grasp_collection_target=32 \\
        algo.num_envs=8 training.no_play=true

The rows of both caches are stored in the output (``cache.<scale>``), so the replays need no
file of the reference's.

The env is built through the reference's own construction path: Hydra composes
``conf/offpolicy/config.yaml`` with ``algo=sac task=sac/sharpa_inhand/mujoco_hora`` (the HORA-SAC
owner), ``BackendAdapter.build_task_env_cfg_override`` turns its ``reward``/``env`` sections into
the env-config override (plus the cache path and the scales here), and ``registry.make`` builds
the env. All its randomness comes from numpy's global RNG, seeded right before
``registry.make``. Recording hooks wrap (never change) the env's, its randomisation provider's
and the backend's methods to read what the reference computes but does not return:

* every reset (``reset.<k>.*``): the env ids, their scale ids, the grasp rows drawn, the
  friction multiplier, mass, centre-of-mass offset, gravity, kp and kd drawn, the two reset
  frames' joint noise, the reset observation and critic, and the per-env model values the pool
  holds after it (kp, kd, object mass and centre of mass, gravity, geom friction);
* every step (``step.*``, ``[T, N, ...]``): the action, ctrl (the targets), the object force
  held over the step (and the random-force draws: the refresh mask and the normal draws), the
  physics state before and after (float32 widened), the contact sensors after, the tactile
  pipeline (raw force magnitudes, the latency mask, the signal, the kept last signal), the
  joint noise of the step's frame, every reward term by name (``reward.<name>``, weighted and
  times the control step, from the reference's own ``_compute_reward`` run with one weight at
  a time), the reward, terminated / truncated, the observation and critic before any automatic
  reset and the ones returned.

The layout of the written ``SharpaInhandRotation.npz`` is in its ``meta_json`` entry.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import numpy as np

REF_ROOT = Path("/work/ref/UniLab")
REF_COMMIT = "9aa57115"
TASK = "SharpaInhandRotation"
OVERRIDES = ["algo=sac", "task=sac/sharpa_inhand/mujoco_hora"]
SEED = 0
ACTION_SEED = 1234
N_ENVS = 4
T_STEPS = 40
# Every env's episode counter is preset so that it truncates at this 0-based rollout step (so
# every env resets at least once, at a different step; the golden-rollout rule); the object
# drops in some episodes too (terminations).
TRUNCATE_AT = {0: 6, 1: 12, 2: 26, 3: 20}
DROP_ENV = 2  # this env gets +-1 bang-bang actions so that it drops the object
TACTILE = 5
NUM_HAND = 22


def _compose_override(cache_prefix: str, scales: list[float]) -> dict[str, Any]:
    """The env-config override the reference's training entry point builds, with the grasp
    caches and scales of this recording."""
    from hydra import compose, initialize_config_dir
    from unilab.training.backend_adapter import BackendAdapter

    with initialize_config_dir(config_dir=str(REF_ROOT / "conf" / "offpolicy"), version_base=None):
        cfg = compose(config_name="config", overrides=OVERRIDES)
    override = copy.deepcopy(BackendAdapter(cfg, root_dir=REF_ROOT).build_task_env_cfg_override())
    override["grasp_cache_path"] = cache_prefix
    override.setdefault("domain_rand", {})["scale_list"] = list(scales)
    return override


def _replay(rng_state: Any) -> np.random.RandomState:
    r = np.random.RandomState()
    r.set_state(rng_state)
    return r


class Recorder:
    """Builds one reference env and wraps a few of its methods to record what they compute."""

    def __init__(self, cache_prefix: str, scales: list[float], num_envs: int, seed: int):
        from unilab.base import registry

        registry.ensure_registries()
        self.override = _compose_override(cache_prefix, scales)
        np.random.seed(seed)
        self.env = registry.make(
            TASK, sim_backend="mujoco", env_cfg_override=self.override, num_envs=num_envs
        )
        self.n = num_envs
        self.backend = self.env._backend
        self.model = self.backend.model
        self.provider = self.env._dr_manager._provider
        self.step_log: dict[str, Any] = {}
        self.reset_log: list[dict[str, Any]] = []
        self.frame_noise: list[np.ndarray] = []
        self._wrap()

    # -- hooks -----------------------------------------------------------------------------
    def _wrap(self) -> None:
        from unilab.envs.manipulation.sharpa_inhand import rotation

        env, backend, provider = self.env, self.backend, self.provider

        orig_step = backend.step

        def step(ctrl: np.ndarray, nsteps: int = 1) -> Any:
            b, log = self.backend, self.step_log
            log["state_before"] = np.asarray(b._physics_state, np.float64).copy()
            log["ctrl"] = np.asarray(ctrl).copy()
            log["nsubsteps"] = nsteps
            log["xfrc"] = b._pending_xfrc_applied.reshape(self.n, -1, 6).copy()
            log.update(self.dr_in_force())
            out = orig_step(ctrl, nsteps)
            log["state_after"] = np.asarray(b._physics_state, np.float64).copy()
            log["sensor_after"] = np.asarray(b._sensor_data, np.float64).copy()
            return out

        backend.step = step

        orig_interval = provider.build_interval_randomization_plan

        def interval(env_: Any, step_counter: int) -> Any:
            rng_state = np.random.get_state()
            force_before = env_._random_object_force.copy()
            plan = orig_interval(env_, step_counter)
            r = _replay(rng_state)
            mask = r.rand(self.n) < float(env_.cfg.domain_rand.random_force_prob_scalar)
            normal = np.zeros((self.n, 3))
            if np.any(mask):
                normal[mask] = r.randn(int(mask.sum()), 3)
            self.step_log["force_before"] = force_before
            self.step_log["force_mask"] = mask
            self.step_log["force_normal"] = normal
            self.step_log["object_force"] = env_._random_object_force.copy()
            return plan

        provider.build_interval_randomization_plan = interval

        orig_tactile = env._compute_tactile_observation

        def tactile() -> np.ndarray:
            raw = env._read_tactile_force().copy()
            prev = env._prev_tactile_force.copy()
            last = env.last_contacts.copy()
            rng_state = np.random.get_state()
            out = orig_tactile()
            r = _replay(rng_state)
            latency = r.rand(self.n, TACTILE) < env.cfg.domain_rand.contact_latency
            self.step_log.update(
                tactile_raw=raw,
                tactile_prev_before=prev,
                tactile_last_before=last,
                tactile_latency=latency,
                tactile=np.asarray(out).copy(),
                tactile_last_after=env.last_contacts.copy(),
            )
            return out

        env._compute_tactile_observation = tactile

        orig_frame = env._build_policy_frame

        def frame(dof_pos, targets, tactile, contact_pos):  # noqa: ANN001, ANN202
            rng_state = np.random.get_state()
            out = orig_frame(dof_pos, targets, tactile, contact_pos)
            if float(env.cfg.domain_rand.joint_noise_scale) > 0.0:
                noise = _replay(rng_state).uniform(-1.0, 1.0, size=np.shape(dof_pos))
                self.frame_noise.append(noise)
            return out

        env._build_policy_frame = frame

        orig_reward = env._compute_reward

        def reward(info, **kwargs):  # noqa: ANN001, ANN202
            scales = env._reward_cfg.scales
            terms = {}
            try:
                for name in list(scales):
                    env._reward_cfg.scales = {name: scales[name]}
                    terms[name] = np.asarray(orig_reward(info, **kwargs)).copy()
            finally:
                env._reward_cfg.scales = scales
            self.step_log["reward_terms"] = terms
            self.step_log["reward_inputs"] = {k: np.asarray(v).copy() for k, v in kwargs.items()}
            return orig_reward(info, **kwargs)

        env._compute_reward = reward

        drawn: dict[str, Any] = {}
        for name in (
            "_sample_friction_scale",
            "_sample_object_mass",
            "_sample_object_com_offset",
            "_sample_reset_gravity",
        ):
            orig = getattr(env, name)

            def sampled(batch: int, _orig: Any = orig, _name: str = name) -> Any:
                out = _orig(batch)
                drawn[_name] = None if out is None else np.asarray(out).copy()
                return out

            setattr(env, name, sampled)
        orig_gains = provider._sample_reset_pd_gains

        def gains(env_: Any, num_reset: int, *, dtype: Any) -> Any:
            kp, kd = orig_gains(env_, num_reset, dtype=dtype)
            drawn["kp"], drawn["kd"] = np.asarray(kp).copy(), np.asarray(kd).copy()
            return kp, kd

        provider._sample_reset_pd_gains = gains
        orig_sample = rotation.sample_scale_grasp_caches

        def sample(caches: Any, scale_ids: np.ndarray) -> np.ndarray:
            out = orig_sample(caches, scale_ids)
            drawn["scale_ids"] = np.asarray(scale_ids).copy()
            drawn["grasp"] = np.asarray(out).copy()
            return out

        rotation.sample_scale_grasp_caches = sample

        orig_reset = env.reset

        def reset(env_indices: np.ndarray) -> Any:
            drawn.clear()
            n_noise = len(self.frame_noise)
            obs, info = orig_reset(env_indices)
            noise = self.frame_noise[n_noise:]
            self.reset_log.append(
                {
                    "env_ids": np.asarray(env_indices).copy(),
                    "obs": np.asarray(obs["obs"]).copy(),
                    "critic": np.asarray(obs["critic"]).copy(),
                    "frame_noise": np.stack(noise) if noise else np.zeros((0,)),
                    "critic_info": np.asarray(info["critic_info"]).copy(),
                    "height_band": np.stack(
                        [info["reset_height_lower"], info["reset_height_upper"]], axis=1
                    ),
                    **{k.lstrip("_"): v for k, v in drawn.items()},
                    **{f"pool_{k}": v[env_indices] for k, v in self.dr_in_force().items()},
                }
            )
            del self.frame_noise[n_noise:]
            return obs, info

        env.reset = reset

    def dr_in_force(self) -> dict[str, np.ndarray]:
        """Per-env model values the batched pool holds (kp, kd, object mass and centre of mass,
        gravity, geom friction)."""
        pool = self.backend._pool
        if pool is None:
            return {}
        body = int(self.env._object_body_id)
        rows = [
            (
                pool.get_field(i, "kp"),
                pool.get_field(i, "kd"),
                pool.get_field(i, "body_mass")[body],
                pool.get_field(i, "body_ipos").reshape(-1, 3)[body],
                pool.get_field(i, "body_inertia").reshape(-1, 3)[body],
                pool.get_field(i, "gravity"),
                pool.get_field(i, "geom_friction").reshape(-1, 3),
            )
            for i in range(self.n)
        ]
        kp, kd, mass, com, inertia, grav, friction = (np.stack(c) for c in zip(*rows, strict=True))
        return {
            "kp": kp,
            "kd": kd,
            "object_mass": mass,
            "object_ipos": com,
            "object_inertia": inertia,
            "gravity": grav,
            "geom_friction": friction,
        }


def _actions(rng: np.random.Generator) -> np.ndarray:
    actions = np.clip(0.5 * rng.standard_normal((T_STEPS, N_ENVS, NUM_HAND)), -1, 1)
    signs = np.where((np.arange(T_STEPS) // 4) % 2 == 0, 1.0, -1.0)
    actions[:, DROP_ENV, :] = signs[:, None]
    return actions.astype(np.float32)


def _rollout(rec: Recorder, actions: np.ndarray, out: dict[str, np.ndarray]) -> None:
    env, nq = rec.env, rec.model.nq
    state = env.init_state()
    out["init.obs"] = state.obs["obs"].copy()
    out["init.critic"] = state.obs["critic"].copy()
    out["init.steps"] = state.info["steps"].copy()
    for env_id, at in TRUNCATE_AT.items():
        state.info["steps"][env_id] = env.cfg.max_episode_steps - at - 1
    rows: list[dict[str, Any]] = []
    for t in range(actions.shape[0]):
        row: dict[str, Any] = {
            "steps_before": state.info["steps"].copy(),
            "targets_before": state.info["prev_targets"].copy(),
        }
        n_noise = len(rec.frame_noise)
        n_resets = len(rec.reset_log)
        state = env.step(actions[t].copy())
        log = rec.step_log
        done = state.terminated | state.truncated
        row.update(
            action=actions[t],
            ctrl=log["ctrl"],
            xfrc_object=log["xfrc"][:, int(env._object_body_id), :3],
            object_force=log["object_force"],
            force_before=log["force_before"],
            force_mask=log["force_mask"],
            force_normal=log["force_normal"],
            qpos_before=log["state_before"][:, 1 : 1 + nq],
            qvel_before=log["state_before"][:, 1 + nq :],
            qpos_after=log["state_after"][:, 1 : 1 + nq],
            qvel_after=log["state_after"][:, 1 + nq :],
            sensor_after=log["sensor_after"],
            frame_noise=rec.frame_noise[n_noise],  # the step's frame (reset frames: reset.*)
            reward=state.reward.copy(),
            terminated=state.terminated.copy(),
            truncated=state.truncated.copy(),
            obs_returned=state.obs["obs"].copy(),
            critic_returned=state.obs["critic"].copy(),
            reset_mask=done.copy(),
            n_resets=len(rec.reset_log) - n_resets,
            **{k: log[k] for k in log if k.startswith("tactile")},
            **{f"pool_{k}": log[k] for k in rec.dr_in_force()},
        )
        for name, value in log["reward_terms"].items():
            row[f"reward.{name}"] = value
        for name, value in log["reward_inputs"].items():
            row[f"reward_input.{name}"] = value
        obs, critic = state.obs["obs"].copy(), state.obs["critic"].copy()
        if state.final_observation is not None:
            obs[done] = state.final_observation["obs"][done]
            critic[done] = state.final_observation["critic"][done]
        row["obs"], row["critic"] = obs, critic
        rows.append(row)
    for key in rows[0]:
        out[f"step.{key}"] = np.stack([np.asarray(r[key]) for r in rows])
    for k, rec_reset in enumerate(rec.reset_log):
        for key, value in rec_reset.items():
            if value is not None:
                out[f"reset.{k}.{key}"] = np.asarray(value)
    out["reset.count"] = np.array(len(rec.reset_log))


def main() -> None:
    import mujoco

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grasp-cache", required=True, help="cache prefix: <prefix>_<scale>.npy")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.8, 1.2])
    parser.add_argument("--out", default="tests/golden/reference")
    args = parser.parse_args()

    rec = Recorder(args.grasp_cache, args.scales, N_ENVS, SEED)
    out: dict[str, np.ndarray] = {}
    for scale in args.scales:
        from unilab.envs.manipulation.sharpa_inhand.base import resolve_grasp_cache_file

        path = resolve_grasp_cache_file(args.grasp_cache, scale)
        out[f"cache.{scale:g}"] = np.load(path).astype(np.float32)
    _rollout(rec, _actions(np.random.default_rng(ACTION_SEED)), out)

    m, cfg = rec.model, rec.env.cfg
    for name in (
        "body_mass",
        "body_ipos",
        "body_inertia",
        "geom_size",
        "geom_rbound",
        "geom_aabb",
        "geom_friction",
        "actuator_gainprm",
        "actuator_biasprm",
        "actuator_ctrlrange",
        "dof_invweight0",
        "body_invweight0",
        "qpos0",
    ):
        out[f"model.{name}"] = np.asarray(getattr(m, name)).copy()
    meta = {
        "task": TASK,
        "reference": f"GitHub unilabsim/UniLab at {REF_COMMIT}, mujoco-uni 3.8.0",
        "overrides": OVERRIDES,
        "scales": args.scales,
        "scale_ids_by_env": np.asarray(rec.env.scale_ids).tolist(),
        "seed": SEED,
        "action_seed": ACTION_SEED,
        "num_envs": N_ENVS,
        "steps": T_STEPS,
        "actions": f"clip(0.5 N(0,1), -1, 1) float32; env {DROP_ENV} +-1 flipping every 4 steps",
        "truncation": "episode counters preset so that env k truncates at step "
        f"TRUNCATE_AT[k]: {TRUNCATE_AT}",
        "config": {
            "sim_dt": cfg.sim_dt,
            "ctrl_dt": cfg.ctrl_dt,
            "max_episode_steps": cfg.max_episode_steps,
            "action_scale": cfg.control_config.action_scale,
            "dof_limits_scale": cfg.control_config.dof_limits_scale,
            "reward_scales": dict(rec.env._reward_cfg.scales),
            "domain_rand": {k: v for k, v in vars(cfg.domain_rand).items()},
            "obs": {k: v for k, v in vars(cfg.obs).items()},
            "post_step_forward_sensor": cfg.post_step_forward_sensor,
        },
        "reward_terms_in_order": list(rec.env._reward_cfg.scales),
        "model_variants_note": "model.* are the base model's; the pool's per-env values after "
        "each reset are reset.<k>.pool_* and per step step.pool_*",
        "geom_names": [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) for i in range(m.ngeom)],
        "sensor_names": [
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, i) for i in range(m.nsensor)
        ],
        "physics_state_dtype": "float32 between control steps (widened to float64 here)",
        "regenerate": "/work/ref/venv/bin/python bench/reference/golden_sharpa.py --grasp-cache "
        "PREFIX --out tests/golden/reference",
    }
    out["meta_json"] = np.array(json.dumps(meta, indent=1, default=_json_default))
    path = Path(args.out) / f"{TASK}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {len(out)} arrays)")
    print("terminated (step, env):", [tuple(x) for x in np.argwhere(out["step.terminated"])])
    print("truncated (step, env):", [tuple(x) for x in np.argwhere(out["step.truncated"])])


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


if __name__ == "__main__":
    main()
