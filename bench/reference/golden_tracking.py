"""Record golden data for the G1 motion trackers (G1MotionTrackingSAC, G1FlipTrackingSAC,
G1WallFlipTrackingSAC) from the REAL reference UniLab (unilabsim/UniLab @ 9aa57115), as a
rollout through automatic resets.

Runs ONLY in the reference's own virtual environment (its top-level package is also called
``unilab``; never import this file from our test suite), from the repository root::

    REF_VENV/bin/python bench/reference/golden_tracking.py --clip CLIP.npz \
        --task G1MotionTrackingSAC --out tests/golden/reference

``CLIP.npz`` is holosoma's ``sub3_largebox_003_mj.npz`` in the reference's format (converted
by body name: ``unilab-jax convert-motion``, or the reference's own
``scripts/motion/remap_fullbody_npz.py``; both give the same arrays). The env is built as
``--algo sac --task <hydra task> --sim mujoco`` builds it (hydra compose of ``conf/offpolicy``
with ``algo=sac task=<TASKS[task].hydra>`` plus ``+env.motion_file=CLIP``,
``BackendAdapter(...).build_task_env_cfg_override()``, ``registry.make``), with the task's own
observation noise (none for the flips). A task whose recording names ``frames`` tracks that cut
of the clip (written beside the output as ``<task>_clip.npz`` while recording, then removed):
the flips' episodes end only at a fall or the clip's end (the wall flip's only at its end), so
a short clip ends every episode soon. Recorded actions ``clip(s N(0, 1), -1, 1)`` drive ``N``
envs for ``T`` steps; the scales make every env end at least once (falls and the clip's end),
so the rollout runs through automatic resets. Every ``np.random.uniform`` / ``randint`` /
``random`` call and every ``np.random.choice`` of the frame sampler is logged in order with a
tag, so our test replays observation noise, reset frames and reset noise from the reference's
own draws. The compiled model's arrays (``golden_g1.record_model``) and the env's resolved
config (``meta.env_cfg``) are recorded too. The file layout is in
``tests/golden/reference/README.md``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Run as a script: its folder is first on the path, the reference's ``unilab`` second.
from golden_g1 import DEFAULT_REF_ROOT, REF_COMMIT, RngLog, record_model

ENVS = 6
SEED = 2468
SEED_ACTIONS = 1357
#: Per-env action scales: the small ones track for a while, the large ones fall quickly.
ACTION_SCALES = (0.8, 0.8, 1.0, 1.0, 1.2, 1.2)


@dataclass(frozen=True)
class Recording:
    """How one task is recorded."""

    hydra: str
    """The reference's Hydra task (its SAC owner)."""
    steps: int = 120
    """Control steps recorded."""
    frames: tuple[int, int] | None = None
    """Track the clip's frames ``[start, stop)`` only (None: the whole clip)."""
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """... moved by this in the world (m; with ``frames`` only)."""
    action_scales: tuple[float, ...] = ACTION_SCALES


#: Our task name -> how it is recorded.
TASKS = {
    "G1MotionTrackingSAC": Recording("sac/g1_motion_tracking/mujoco"),
    "G1FlipTrackingSAC": Recording(
        "sac/g1_flip_tracking/mujoco", steps=100, frames=(0, 40), action_scales=(3.0,) * ENVS
    ),
    # Past its second push (every 200 steps from step 0).
    "G1WBTObs": Recording("sac/g1_wbt_obs/mujoco", steps=210),
    # Moved 0.2 m towards the wall, so the robot touches it.
    "G1WallFlipTrackingSAC": Recording(
        "sac/g1_wall_flip_tracking/mujoco",
        steps=100,
        frames=(0, 40),
        shift=(0.0, 0.2, 0.0),
        action_scales=(3.0,) * ENVS,
    ),
}


def compose_override(ref_root: Path, task: str, clip: Path) -> dict:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from unilab.training import BackendAdapter

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ref_root / "conf" / "offpolicy"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "algo=sac",
                f"task={TASKS[task].hydra}",
                f"+env.motion_file={clip}",
            ],
        )
    return BackendAdapter(cfg, root_dir=ref_root, algo_name="sac").build_task_env_cfg_override()


class SamplerLog:
    """Wraps the frame sampler's ``np.random.choice`` (adaptive: bins, with the probabilities)
    and ``np.random.random`` (mixed: the start-or-uniform coin) and logs them."""

    def __init__(self, log: RngLog) -> None:
        self.log = log
        self._orig = np.random.choice
        self._orig_random = np.random.random

    def __enter__(self) -> SamplerLog:
        log = self.log

        def choice(a, size=None, replace=True, p=None):
            out = self._orig(a, size=size, replace=replace, p=p)
            log.calls.append({"fn": "choice", "tag": log.tag, "shape": list(np.shape(out))})
            log.values.append(np.asarray(out, dtype=np.int64))
            log.calls.append({"fn": "choice_p", "tag": log.tag, "shape": list(np.shape(p))})
            log.values.append(np.asarray(p, dtype=np.float64))
            return out

        def random(size=None):
            out = self._orig_random(size)
            log.calls.append({"fn": "random", "tag": log.tag, "shape": list(np.shape(out))})
            log.values.append(np.asarray(out, dtype=np.float64))
            return out

        np.random.choice = choice
        np.random.random = random
        return self

    def __exit__(self, *exc) -> None:
        np.random.choice = self._orig
        np.random.random = self._orig_random


def cut_clip(clip: Path, recording: Recording, path: Path) -> Path:
    """Write the clip's frames ``[start, stop)`` (every per-frame array), its bodies moved by
    ``recording.shift``, to ``path``."""
    start, stop = recording.frames
    with np.load(clip) as data:
        arrays = {k: data[k] if k == "fps" else data[k][start:stop] for k in data.files}
    shift = np.asarray(recording.shift, arrays["body_pos_w"].dtype)
    arrays["body_pos_w"][:, 1:] += shift  # the bodies; row 0 is the world
    np.savez(path, **arrays)
    return path


def record(task: str, override: dict, out: dict) -> dict:
    from unilab.base import registry

    registry.ensure_registries()
    recording = TASKS[task]
    steps = recording.steps
    np.random.seed(SEED)
    rng = np.random.default_rng(SEED_ACTIONS)
    scales = np.asarray(recording.action_scales, np.float32)[None, :, None]
    actions = np.clip(scales * rng.standard_normal((steps, ENVS, 29)), -1, 1).astype(np.float32)
    with RngLog() as log, SamplerLog(log):
        log.tag = "construct"
        env = registry.make(
            task, sim_backend="mujoco", env_cfg_override=copy.deepcopy(override), num_envs=ENVS
        )
        be = env._backend
        model_meta = record_model(env, out)
        env_cfg = json.loads(json.dumps(dataclasses.asdict(env.cfg), default=str))
        sampler = env.motion_sampler
        loader = env.motion_loader  # the clip as the env loaded it (the 14 tracked bodies)
        for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w",
                    "body_ang_vel_w"):  # fmt: skip
            out[f"clip.{key}"] = np.array(getattr(loader, key))
        out["clip.body_ids"] = np.array(env.body_ids)
        out["joint_range"] = np.array(env._joint_range)
        out["default_angles"] = np.array(env.default_angles)
        raw_terms: dict[str, np.ndarray] = {}
        original_fns = dict(env._active_reward_fns)

        def probe(name):
            def fn(info):
                value = original_fns[name](info)
                raw_terms[name] = np.array(value, dtype=np.float32)
                return value

            return fn

        env._active_reward_fns = {name: probe(name) for name in original_fns}
        scales = env.cfg.reward_config.scales
        terms = [n for n, w in scales.items() if w != 0 and n in original_fns]
        pool_rec: dict = {}
        orig_pool_step = be._pool.step
        nu, nbody = be.model.nu, be.model.nbody

        def pool_step(initial_state, **kw):
            state, sensor = orig_pool_step(initial_state, **kw)
            control = np.array(kw["control"][:, 0, :])
            # With a push pending the controls carry xfrc_applied [nbody * 6] after the ctrl.
            xfrc = np.zeros((control.shape[0], nbody, 6))
            if control.shape[1] > nu:
                xfrc = control[:, nu:].reshape(-1, nbody, 6)
            pool_rec.update(control=control[:, :nu], xfrc=xfrc, state=np.array(state))
            return state, sensor

        be._pool.step = pool_step
        # Every reset's domain randomisation as the pool receives it (the model fields).
        dr: dict[str, list] = {"t": []}
        orig_pool_reset = be._pool.reset

        def pool_reset(*args, **kw):
            randomization = kw.get("randomization") or {}
            for key, value in randomization.items():
                dr.setdefault(key, []).append(np.array(value, np.float64))
            dr["t"].append(np.full(len(kw["env_ids"]), log.tag, dtype="<U16"))
            dr.setdefault("env_ids", []).append(np.array(kw["env_ids"]))
            return orig_pool_reset(*args, **kw)

        be._pool.reset = pool_reset
        dr_cfg = env.cfg.domain_rand
        foot_ids = getattr(env._dr_manager._provider, "_foot_geom_ids", None)
        if foot_ids is not None:
            out["dr.foot_geom_ids"] = np.asarray(foot_ids)
            out["dr.foot_geom_names"] = np.asarray([be.get_geom_names()[i] for i in foot_ids])
        out["dr.base_body_mass"] = np.array(be._base_body_mass)
        out["dr.base_body_ipos"] = np.array(be._base_body_ipos)
        out["dr.base_geom_friction"] = be.get_geom_friction()
        kp, kd = be.get_actuator_gains()
        out["dr.nominal_kp"], out["dr.nominal_kd"] = kp, kd
        out["dr.push_body_id"] = np.asarray(be._push_body_id)
        out["model.opt.timestep"] = np.asarray(be.model.opt.timestep)
        log.tag = "init_state"
        state = env.init_state()
        n_calls_init = len(log.calls)
        out["init.obs"] = np.array(state.obs["obs"])
        out["init.critic"] = np.array(state.obs["critic"])
        out["init.qpos"] = np.array(be._physics_state[:, 1 : 1 + be.nq], np.float32)
        out["init.qvel"] = np.array(be._physics_state[:, 1 + be.nq :], np.float32)
        out["init.frame"] = sampler.current_frames.copy()
        rec: dict[str, list] = {}
        resets: dict[str, list] = {"t_env": [], "obs": [], "critic": [], "qpos": [], "qvel": []}
        rng_count = []

        def push(key, value):
            rec.setdefault(key, []).append(np.array(value))

        for t in range(steps):
            log.tag = f"step{t}"
            push("qpos_before", be._physics_state[:, 1 : 1 + be.nq].astype(np.float32))
            push("qvel_before", be._physics_state[:, 1 + be.nq :].astype(np.float32))
            push("frame_before", sampler.current_frames)
            push("bin_failed_before", sampler.bin_failed_count)
            raw_terms.clear()
            state = env.step(actions[t].copy())
            push("ctrl", pool_rec["control"].astype(np.float32))
            push("xfrc", pool_rec["xfrc"])
            push("step_counter_before", np.asarray(env.step_counter - 1))
            push("qpos_after", pool_rec["state"][:, 1 : 1 + be.nq])
            push("qvel_after", pool_rec["state"][:, 1 + be.nq :])
            for name in terms:
                push(f"reward_raw.{name}", raw_terms[name])
            push("reward", state.reward)
            push("terminated", state.terminated)
            push("truncated", state.truncated)
            done = state.terminated | state.truncated
            obs, critic = np.array(state.obs["obs"]), np.array(state.obs["critic"])
            if np.any(done):
                obs[done] = state.final_observation["obs"][done]
                critic[done] = state.final_observation["critic"][done]
            push("obs", obs)
            push("critic", critic)
            push("frame_after", sampler.current_frames)
            push("bin_failed_after", sampler.bin_failed_count)
            for e in np.flatnonzero(done):
                resets["t_env"].append([t, e])
                resets["obs"].append(np.array(state.obs["obs"][e]))
                resets["critic"].append(np.array(state.obs["critic"][e]))
                resets["qpos"].append(np.array(be._physics_state[e, 1 : 1 + be.nq], np.float32))
                resets["qvel"].append(np.array(be._physics_state[e, 1 + be.nq :], np.float32))
            rng_count.append(len(log.calls))
        env.close()
        for key, values in rec.items():
            out[f"step.{key}"] = np.stack(values)
        out["step.action"] = actions
        for key, values in resets.items():
            out[f"reset.{key}"] = np.stack(values)
        for i, value in enumerate(log.values):
            out[f"rng.{i:04d}"] = value
        for key, values in dr.items():
            if values:
                out[f"dr.reset.{key}"] = np.concatenate(values)
    ended = np.unique(out["reset.t_env"][:, 1])
    if len(ended) != ENVS:
        raise SystemExit(f"only envs {ended.tolist()} reset: lengthen the rollout")
    return {
        "num_envs": ENVS,
        "num_steps": steps,
        "seed_numpy_global": SEED,
        "seed_actions_default_rng": SEED_ACTIONS,
        "action_scales": list(recording.action_scales),
        "clip_frames": None if recording.frames is None else list(recording.frames),
        "clip_shift": list(recording.shift),
        "model": model_meta,
        "env_cfg": env_cfg,
        "sim_substeps": int(env.cfg.sim_substeps),
        "max_episode_steps": int(env.cfg.max_episode_steps),
        "rng_calls": log.calls,
        "rng_calls_before_first_step": n_calls_init,
        "rng_calls_after_step": rng_count,
        "reward_terms": terms,
        "reward_weights": {n: float(scales[n]) for n in terms},
        "domain_rand": json.loads(json.dumps(vars(dr_cfg), default=str)),
        "noise_config": json.loads(json.dumps(vars(env.cfg.noise_config), default=str)),
        "sensor": {k: getattr(env.cfg.sensor, k) for k in ("local_linvel", "gyro", "upvector")},
        "sim_dt": float(env.cfg.sim_dt),
        "post_step_forward_sensor": bool(getattr(env.cfg, "post_step_forward_sensor", False)),
        "action_latency": bool(env.cfg.control_config.simulate_action_latency),
        "anchor_pos_z_threshold": float(env.cfg.anchor_pos_z_threshold),
        "ee_body_pos_z_threshold": float(env.cfg.ee_body_pos_z_threshold),
        "anchor_ori_threshold": float(env.cfg.anchor_ori_threshold),
        "obs_sizes": dict(env.obs_groups_spec),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (tests/golden/reference)")
    parser.add_argument("--clip", required=True, type=Path, help="the converted clip (.npz)")
    parser.add_argument("--ref-root", default=DEFAULT_REF_ROOT, type=Path)
    parser.add_argument("--task", default="G1MotionTrackingSAC", choices=sorted(TASKS))
    args = parser.parse_args()
    import mujoco

    clip = args.clip.resolve()
    frames = TASKS[args.task].frames
    if frames is not None:
        clip = cut_clip(clip, TASKS[args.task], Path(args.out).resolve() / f"{args.task}_clip.npz")
    try:
        override = compose_override(args.ref_root, args.task, clip)
        out: dict[str, np.ndarray] = {}
        rollout = record(args.task, override, out)
    finally:
        if frames is not None:
            clip.unlink()
    cfg = override
    meta = {
        "task": args.task,
        "reference": {"repo": "unilabsim/UniLab", "commit": REF_COMMIT, "license": "Apache-2.0"},
        "mujoco_uni_version": mujoco.__version__,
        "numpy_version": np.__version__,
        "python": sys.version.split()[0],
        "clip": args.clip.name,
        "env_cfg_override": json.loads(json.dumps(cfg, default=str)),
        "rollout": rollout,
        "regenerate": "REF_VENV/bin/python bench/reference/golden_tracking.py --clip CLIP.npz "
        f"--task {args.task} --out tests/golden/reference",
    }
    out["meta_json"] = np.array(json.dumps(meta))
    path = Path(args.out) / f"{args.task}.npz"
    np.savez_compressed(path, **out)
    print(f"wrote {path}: {len(out)} arrays, resets {len(out['reset.t_env'])}")


if __name__ == "__main__":
    main()
