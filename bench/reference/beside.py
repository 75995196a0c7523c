"""Beside the real UniLab: the reference, our core and our facade's torch path on one of the
reference's tasks, on this CPU, in one invocation.

::

    python -m bench.reference.venv --checkout CHECKOUT --venv REF_VENV     # once (venv.py)
    python -m bench.reference --task G1WalkFlat --checkout CHECKOUT --venv REF_VENV
    python -m bench.reference --task Go2JoystickFlat --checkout CHECKOUT --venv REF_VENV
    python -m bench.reference report                                       # table + curves

Every run is a child process of its own, one after another, so each has the CPU to itself.

* **speed**: throughput at matched learner work (:data:`RECIPES`' ``speed``: the same algorithm,
  env count, batch, updates per iteration and widths, the sync schedule): the reference
  (``unilab.cli.train_main`` in its venv, C MuJoCo through ``mujoco-uni``'s batched pool),
  our core (``unilab_jax.training.trainer`` with C MuJoCo collection) and our facade's torch path
  (``OffPolicyRunner``, ``sim_backend="mujoco"``). Env steps/s and updates/s over the logged
  points after the first, the same way for all three: the reference and the facade from their
  TensorBoard files (``axis/env_steps_total`` and its wall time), the core from its blocks.
* **learn**: each side at its best CPU recipe, for a fixed budget of wall-clock: the reference
  at its own task config with the sizes its authors give for a CPU (``ref_cpu``), checkpoints
  every ``--ref-save-interval`` iterations; our core at our preset, ``--seeds`` seeds; our
  facade at our preset. Afterwards (outside every clock) each checkpoint is evaluated by one
  evaluator on our task, which is the reference's (held to it by the golden files in
  ``tests/golden/reference``): ``bench.learning.locomotion.walking_figures``, 64 deterministic
  episodes on C MuJoCo under the task's randomisation and noise. A checkpoint *walks* when at
  least 95% of the episodes reach the time limit and the linear-velocity tracking reward per
  step is at least 0.8 of its maximum; a motion tracker's checkpoint *tracks* when at least
  90% of deterministic episodes from the clip's first frame reach its end with a mean body
  error under 10 cm (``bench.learning.tracking``; the reference trains on the same clip,
  converted into its format), or, where no side tracks it within its budget, when it reaches
  the reference's best checkpoint: as many episodes to the clip's end, as long from frame 0,
  a body error no larger; in-hand rotation has no absolute goal: a checkpoint *reaches*
  the reference when it turns the object at least as fast about the task's axis and keeps it
  to the time limit at least as often as the reference's best checkpoint does
  (``bench.learning.inhand``; both sides start from the same grasp caches, ours, in the
  reference's format). The reference's ``model_<it>.pt`` are read by our
  facade's learner of the same algorithm, built with the reference run's recorded settings.
  ``--ref-runs DIR,...`` evaluates reference runs trained before (their ``*_mujoco`` run
  directories) instead of training new ones: the seed is the one the run recorded, and its
  wall-clock counts from the start time in the directory's name.

Rows go to ``bench/results/reference.json`` (one file for the family: a new run of a task and
side replaces the old), curves against env steps and wall-clock to
``bench/figures/reference_<task>.png``, the table to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    FIGURES_DIR,
    RESULTS_DIR,
    add_common_args,
    ensure_repo_on_path,
    markdown_table,
    record_section,
)
from bench.reference.venv import COMMIT, python_of

ensure_repo_on_path()

ROWS = RESULTS_DIR / "reference.json"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One task's runs: the reference's task and algorithm names, the matched learner settings
    for the speed part (in the reference's Hydra keys; ours are mapped by :func:`our_settings`),
    the reference's CPU recipe for learning, and our algorithm."""

    ref_task: str
    ref_algo: str
    our_algo: str
    speed: dict
    ref_cpu: dict
    speed_algo: tuple[str, str] | None = None
    """(the reference's, ours) for the speed part when it differs from learning's."""
    motion_clip: str | None = None
    """A tracking task's clip (``holosoma:NAME`` or a path), converted into the reference's
    format for its run (``+env.motion_file``); ours loads the same clip."""
    ref_profile: str | None = None
    """The reference's task owner variant (its CLI's ``--profile``: ``hora`` for
    ``task/sac/sharpa_inhand/mujoco_hora.yaml``)."""
    grasp_caches: str | None = None
    """A task that starts from grasp caches (our task's name): both sides read its default
    ones (the reference's format, made by ``unilab-jax sharpa-grasps``; the reference through
    ``env.grasp_cache_path``)."""

    def for_speed(self) -> Recipe:
        """This recipe with the speed part's algorithms."""
        if self.speed_algo is None:
            return self
        return dataclasses.replace(self, ref_algo=self.speed_algo[0], our_algo=self.speed_algo[1])


def cpu_preset_sizes(env: str, algo_name: str = "sac") -> dict:
    """The run sizes of ``env``'s CPU preset (``unilab_jax.training.presets``) for
    ``algo_name``, as the reference's Hydra ``algo.*`` keys: one place for them, read by both
    sides' runs."""
    from unilab_jax.training.presets import preset_configs

    config, algo = preset_configs(env, algo_name, "cpu")
    return dict(
        num_envs=config.num_envs,
        batch_size=config.batch_size,
        updates_per_step=config.updates_per_step,
        actor_hidden_dim=algo["actor_hidden_dim"],
        critic_hidden_dim=algo["critic_hidden_dim"],
    )


RECIPES = {
    # G1: the reference's SAC owner (task/sac/g1_walk_flat/mujoco.yaml: symmetry augmentation,
    # alpha_init 0.001), at the sizes its authors give for a CPU (spec/reference_unilab.md: 256
    # envs, batch 512, 4 updates per iteration, widths 128/256); the rest is the owner's. TD3's
    # owner has no symmetry, and without it G1 falls (bench/RESULTS.md, the CPU recipe notes).
    # The speed part matches the learner work of TD3 (the sizes above, the first one measured).
    "G1WalkFlat": Recipe(
        ref_task="g1_walk_flat",
        ref_algo="sac",
        our_algo="sac",
        speed_algo=("td3", "td3"),
        speed=dict(
            num_envs=256,
            batch_size=512,
            updates_per_step=4,
            actor_hidden_dim=128,
            critic_hidden_dim=256,
        ),  # fmt: skip
        ref_cpu=dict(
            num_envs=256,
            batch_size=512,
            updates_per_step=4,
            actor_hidden_dim=128,
            critic_hidden_dim=256,
        ),  # fmt: skip
    ),
    # Motion tracking: the reference's SAC owner (discount 0.99, 501 atoms, policy frequency 2,
    # alpha 0.1, ...) at our tracking/cpu sizes on both sides (256 envs, batch 1024, 4 updates,
    # widths 256/512), on holosoma's box-lifting clip.
    "G1MotionTrackingSAC": Recipe(
        ref_task="g1_motion_tracking",
        ref_algo="sac",
        our_algo="sac",
        speed=cpu_preset_sizes("G1MotionTrackingSAC"),
        ref_cpu=cpu_preset_sizes("G1MotionTrackingSAC"),
        motion_clip="holosoma:sub3_largebox_003_mj",
    ),
    # Go2's only MuJoCo owner is flashsac's (1024 envs, batch 2048, 2 updates, widths 128/256).
    # Scaled to this CPU as for G1: a quarter of the envs and of the batch. Ours learns with SAC
    # at our preset (it walked Go2 by 0.5M env steps); speed matches FlashSAC's learner work.
    "Go2JoystickFlat": Recipe(
        ref_task="go2_joystick_flat",
        ref_algo="flashsac",
        our_algo="sac",
        speed_algo=("flashsac", "flash_sac"),
        speed=dict(
            num_envs=256,
            batch_size=512,
            updates_per_step=2,
            actor_hidden_dim=128,
            critic_hidden_dim=256,
        ),  # fmt: skip
        ref_cpu=dict(num_envs=256, batch_size=512),
    ),
}


# G1 on rough ground: G1WalkFlat's SAC owner on the height field (its task file differs only in
# the task's name), so the same sizes; the reference has no TD3 owner for it, so speed is
# measured with SAC.
RECIPES["G1WalkRough"] = dataclasses.replace(
    RECIPES["G1WalkFlat"], ref_task="g1_walk_rough", speed_algo=None
)


# The tracker's profiles: their own SAC owners (sac/g1_wbt_obs, g1_flip_tracking,
# g1_wall_flip_tracking) at our tracking/cpu sizes on both sides, on the same clip. No flip clip
# can be fetched here: the flips' envs run on the box-lifting clip, so their rows are speed
# (physics and learner work), not learning to flip.
for _task, _ref_task in (
    ("G1WBTObs", "g1_wbt_obs"),
    ("G1FlipTrackingSAC", "g1_flip_tracking"),
    ("G1WallFlipTrackingSAC", "g1_wall_flip_tracking"),
):
    RECIPES[_task] = dataclasses.replace(
        RECIPES["G1MotionTrackingSAC"],
        ref_task=_ref_task,
        speed=cpu_preset_sizes(_task),
        ref_cpu=cpu_preset_sizes(_task),
    )


# In-hand rotation: the reference's HORA-SAC owner (task/sac/sharpa_inhand/mujoco_hora.yaml:
# discount 0.97, learning rates 4.5e-4, 101 atoms, policy frequency 2, 2 env steps per sync, ...)
# at a quarter of its envs and batch, 4 updates, its widths (512/768): its CPU recipe here, and
# the speed part's matched sizes, from the same grasp caches (ours, made here). Our core learns
# at its own inhand/cpu preset.
_INHAND_REFERENCE_CPU = dict(
    num_envs=256, batch_size=512, updates_per_step=4, actor_hidden_dim=512, critic_hidden_dim=768
)
RECIPES["SharpaInhandRotation"] = Recipe(
    ref_task="sharpa_inhand",
    ref_algo="sac",
    ref_profile="hora",
    our_algo="hora_sac",
    speed=_INHAND_REFERENCE_CPU,
    ref_cpu=_INHAND_REFERENCE_CPU,
    grasp_caches="SharpaInhandRotation",
)


def grasp_cache_path(task: str, check: bool = False) -> str:
    """Our task's grasp-cache prefix (its default ``grasp_cache_path``); with ``check``, the
    caches are loaded first: a missing one stops the bench with the command that makes it."""
    from unilab_jax.envs.manipulation.grasp_cache import load_grasp_caches
    from unilab_jax.envs.registry import default_config

    config = default_config(task)
    if check:
        load_grasp_caches(config.grasp_cache_path, config.scale_list)  # raises, naming it
    return str(Path(config.grasp_cache_path).expanduser())


def our_settings(recipe: Recipe, settings: dict) -> tuple[dict, dict]:
    """The reference's Hydra ``algo.*`` keys as our ``(TrainConfig, algorithm)`` settings."""
    train_keys = {"num_envs", "batch_size", "updates_per_step", "learning_starts"}
    train = {k: v for k, v in settings.items() if k in train_keys}
    algo = {k: v for k, v in settings.items() if k not in train_keys}
    return train, algo


# ----------------------------------------------------------------------------- the reference
def reference_command(
    args: argparse.Namespace, recipe: Recipe, settings: dict, iterations: int, log_root: Path,
    seed: int, save_interval: int,
) -> list[str]:  # fmt: skip
    """The reference's own training entry point with Hydra overrides (sync collection); a
    tracking task's clip is converted into ``log_root`` for it."""
    overrides = [f"algo.{k}={v}" for k, v in settings.items()]
    if recipe.motion_clip is not None:
        from unilab_jax.envs.motion import convert_motion_file
        from unilab_jax.envs.robots.g1_model import build_g1_model

        clip = log_root / "clip.npz"
        convert_motion_file(recipe.motion_clip, clip, build_g1_model())
        overrides.append(f"+env.motion_file={clip}")
    if recipe.grasp_caches:  # ours, in its format (checked in main before any run)
        overrides.append(f"env.grasp_cache_path={grasp_cache_path(recipe.grasp_caches)}")
    profile = ["--profile", recipe.ref_profile] if recipe.ref_profile else []
    return [
        str(python_of(args.venv)), "-c",
        "import sys; from unilab.cli import train_main; sys.exit(train_main())",
        "--algo", recipe.ref_algo, "--task", recipe.ref_task, "--sim", "mujoco", *profile,
        *overrides, f"algo.max_iterations={iterations}", f"algo.seed={seed}",
        f"algo.save_interval={save_interval}", f"training.log_root={log_root}",
        "training.no_play=true", "training.export_onnx=false", "training.use_amp=false",
    ]  # fmt: skip


def run_reference(
    args: argparse.Namespace, recipe: Recipe, settings: dict, *, iterations: int,
    minutes: float | None, seed: int, save_interval: int,
) -> Path:  # fmt: skip
    """Train the reference (stopped with SIGINT after ``minutes`` when given); its log dir."""
    log_root = Path(tempfile.mkdtemp(prefix="reference_"))
    cmd = reference_command(args, recipe, settings, iterations, log_root, seed, save_interval)
    print("reference:", " ".join(cmd[3:]), flush=True)
    with open(log_root / "stdout.txt", "w") as out:
        # Its CLI trains in a child process of its own: the budget's signal goes to the group.
        # SIGINT is reset to Python's default there: a shell's background job (nohup ... &)
        # starts with SIGINT ignored, which every child inherits, and the reference would then
        # train on past its budget.
        proc = subprocess.Popen(
            cmd, cwd=args.checkout, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_default_sigint,
        )  # fmt: skip
        try:
            proc.wait(timeout=None if minutes is None else 60 * minutes)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # it stops where it is (it has no handler)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    runs = sorted(log_root.glob("**/*_mujoco"))
    if not runs:
        tail = (log_root / "stdout.txt").read_text().splitlines()[-20:]
        raise RuntimeError("the reference wrote no run; its output ends:\n" + "\n".join(tail))
    return runs[-1]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tensorboard_rates(log_dir: Path, updates_per_step: int) -> dict:
    """Env steps/s and updates/s between the first and the last logged point (the reference's
    and our facade's loggers write ``axis/env_steps_total`` and ``axis/iteration``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    steps = events.Scalars("axis/env_steps_total")
    its = events.Scalars("axis/iteration")
    if len(steps) < 3:
        raise RuntimeError(f"{log_dir}: fewer than 3 logged points")
    seconds = steps[-1].wall_time - steps[1].wall_time
    return {
        "env_steps_per_sec": (steps[-1].value - steps[1].value) / seconds,
        "updates_per_sec": (its[-1].value - its[1].value) * updates_per_step / seconds,
        "timed_env_steps": steps[-1].value - steps[1].value,
    }


OUR_TORCH_NAME = {"flashsac": "flash_sac"}
"""The reference's algorithm names that our facade spells differently."""


def reference_policy(task: str, recorded: dict, checkpoint: Path, scratch: Path):
    """The reference's ``model_<it>.pt`` as our ``Policy``: our facade's learner of the same
    algorithm, built with the settings the reference run recorded (``recorded``: its
    ``run_config.json``'s ``config.algo``; ``runtime_impl: hora_sac`` is HORA-SAC), loads its
    state dict (a FlashSAC or HORA-SAC one converted by its ``reference_names``) and is saved
    again with our metadata."""
    import torch

    import unilab_jax
    from unilab.algos.torch.offpolicy.checkpoints import checkpoint_meta, save_model
    from unilab.algos.torch.registry import TORCH_ALGOS
    from unilab_jax.config import TrainConfig
    from unilab_jax.envs import load

    params = {**{k: v for k, v in recorded.items() if k not in ("algo_params", "actor")},
              **recorded.get("algo_params", {}), **(recorded.get("actor") or {})}  # fmt: skip
    algo = OUR_TORCH_NAME.get(recorded["algo"], recorded["algo"])  # the run's, not our recipe's
    if recorded.get("runtime_impl") == "hora_sac":  # its SAC owner's HORA runtime
        algo = "hora_sac"
    env = load(task, physics="mujoco")  # the sizes (a C MuJoCo-only task too)
    cls = TORCH_ALGOS[algo].learner_cls
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "device"}
    kwargs = {k: v for k, v in params.items() if k in accepted}
    if kwargs.get("use_symmetry"):  # the task's mirror map in place of the reference's contract
        kwargs["mirror"] = env.mirror
    if algo in ("sac", "hora_sac") and "obs_normalization" in accepted:
        kwargs["obs_normalization"] = False  # its FastSAC has no normaliser (its flag a no-op)
    dims = dict(obs_dim=env.obs_size["obs"], action_dim=env.action_size,
                critic_obs_dim=env.obs_size["critic"])  # fmt: skip
    if algo == "hora_sac":  # keyword-only, as the reference's HoraSACLearner
        learner = cls(**{**kwargs, **dims})
    else:
        learner = cls(dims["obs_dim"], dims["action_dim"], dims["critic_obs_dim"], **kwargs)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if algo == "flash_sac" and recorded.get("obs_normalization"):
        raise RuntimeError(f"{checkpoint}: a FlashSAC run with obs_normalization on")
    learner.load_state_dict(saved)  # FlashSAC's and HORA-SAC's: their reference_names convert
    iteration = int(checkpoint.stem.split("_")[1])
    meta = checkpoint_meta(learner, TrainConfig(env=task, algo=algo), "mujoco")
    path = scratch / checkpoint.name
    save_model(learner, path, {**meta, "iteration": iteration})
    return unilab_jax.load_policy(path)


# ----------------------------------------------------------------------------- our two sides
def _facade_speed_child(spec: dict) -> dict:
    """Our facade's torch path for ``iterations`` at the matched settings (in this process)."""
    from bench.learning.locomotion import facade_runner

    runner, config = facade_runner(spec["env"], spec["algo"], spec["train"], spec["algo_set"])
    log_dir = Path(tempfile.mkdtemp(prefix="facade_speed_"))
    try:
        # TensorBoard: the rates come from its axis/env_steps_total, as the reference's do.
        runner.learn(spec["iterations"], save_interval=0, log_dir=str(log_dir),
                     logger_type="tensorboard")  # fmt: skip
    finally:
        runner.close()
    return tensorboard_rates(log_dir, config.updates_per_step)


def _physics_speed_child(spec: dict) -> dict:
    """The task's C MuJoCo env alone (ours, which the golden files hold to the reference's),
    stepped with zero actions at the recipe's env count on every core: what the physics, with
    its observations, rewards and resets, costs every side before any learner work."""
    import numpy as np

    from unilab_jax.envs import make

    env = make(spec["env"], spec["num_envs"], "mujoco", nthread=os.cpu_count() or 1)
    try:
        env.init_state()
        actions = np.zeros((spec["num_envs"], *env.action_space.shape), np.float32)
        env.step(actions)  # compiles the task's jitted observation and reward code
        start = time.perf_counter()
        for _ in range(spec["iterations"]):
            env.step(actions)
        seconds = time.perf_counter() - start
    finally:
        env.close()
    per_iteration = seconds / spec["iterations"]
    return {"env_steps_per_sec": spec["num_envs"] / per_iteration, "updates_per_sec": 0.0,
            "ms_per_iteration": 1e3 * per_iteration}  # fmt: skip


def _child(what: str, spec: dict, timeout: float) -> dict:
    """Run ``what`` (``core``, ``facade`` or ``physics``) with ``spec`` in a child process;
    its figures."""
    if what == "core":
        cmd = [sys.executable, "-m", "bench.learning.locomotion", "--child", json.dumps(spec)]
    else:
        cmd = [sys.executable, "-m", "bench.reference.beside", f"--{what}-child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{what} child failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return json.loads(lines[-1])


# ----------------------------------------------------------------------------- the parts
def speed(args: argparse.Namespace, task: str) -> list[dict]:
    recipe = RECIPES[task].for_speed()
    settings = {**recipe.speed, "learning_starts": 4}
    train, algo_set = our_settings(recipe, settings)
    rows = []
    log_dir = run_reference(args, recipe, settings, iterations=args.speed_iterations,
                            minutes=None, seed=1, save_interval=10**9)  # fmt: skip
    rows.append({"side": "reference", **tensorboard_rates(log_dir, settings["updates_per_step"])})
    block = max(1, args.speed_iterations // 5)
    core = _child("core", {"env": task, "algo": recipe.our_algo, "num_envs": train["num_envs"],
                           "physics": "mujoco", "collection": "sync", "block": block,
                           "blocks": 5, "train": train, "algo_settings": algo_set},
                  args.timeout)  # fmt: skip
    rows.append({"side": "core", **core})
    facade = _child("facade", {"env": task, "algo": recipe.our_algo, "train": train,
                               "algo_set": algo_set, "iterations": args.speed_iterations},
                    args.timeout)  # fmt: skip
    rows.append({"side": "facade", **facade})
    physics = _child("physics", {"env": task, "num_envs": train["num_envs"],
                                 "iterations": args.speed_iterations}, args.timeout)  # fmt: skip
    rows.append({"side": "physics alone", **physics})
    return [{"task": task, "part": "speed", "settings": settings, **r} for r in rows]


def learn(args: argparse.Namespace, task: str) -> list[dict]:
    recipe = RECIPES[task]
    rows = []
    # Our core, --seeds seeds, and our facade: bench.learning.locomotion's runs append their
    # evaluated curves to a scratch file read back here.
    scratch = Path(tempfile.mkdtemp(prefix="beside_"))
    videos = scratch if args.no_record else FIGURES_DIR  # --no-record leaves the figures alone
    for seed in args.seeds:
        cmd = [sys.executable, "-m", "bench.learning.locomotion", "train", "--env", task,
               "--algo", recipe.our_algo, "--minutes", str(args.our_minutes),
               "--snapshot-every", str(args.our_snapshot_every), "--set", f"seed={seed}",
               "--out", str(scratch / "ours.json"), "--label", f"core seed {seed}"]  # fmt: skip
        if seed == 0:  # seed 0's best-walking snapshot on video; other seeds leave it alone
            cmd += ["--video", str(video_path(task, "core", videos))]
        if args.our_log_dir:  # its TensorBoard curves, beside the reference's own
            cmd += ["--log-dir", str(Path(args.our_log_dir) / f"{task}_core_seed{seed}")]
        subprocess.run(cmd, check=True)
    if args.facade_minutes > 0:
        cmd = [sys.executable, "-m", "bench.learning.locomotion", "torch", "--env", task,
               "--algo", recipe.our_algo, "--minutes", str(args.facade_minutes),
               "--snapshot-every", str(args.our_snapshot_every),
               "--out", str(scratch / "ours.json"), "--label", "facade"]  # fmt: skip
        subprocess.run(cmd, check=True)
    if (scratch / "ours.json").exists():
        for line in (scratch / "ours.json").read_text().splitlines():
            row = json.loads(line)
            row.pop("settings", None)
            side = "facade" if row.get("path") == "torch" else "core"
            seed = int(row["label"].split()[-1]) if side == "core" else 0
            rows.append({"side": side, "seed": seed, **row})
    # The reference, one seed per --ref-seeds, at its CPU recipe (or runs trained before).
    for seed in args.ref_seeds:
        started = time.time()
        log_dir = run_reference(args, recipe, recipe.ref_cpu, iterations=10**7,
                                minutes=args.ref_minutes, seed=seed,
                                save_interval=args.ref_save_interval)  # fmt: skip
        video = video_path(task, "reference", videos) if seed == args.ref_seeds[0] else None
        rows += evaluate_reference_run(args, task, log_dir, started, scratch, video)
    for i, log_dir in enumerate(args.ref_runs):
        started = time.mktime(time.strptime(log_dir.name[:19], "%Y-%m-%d_%H-%M-%S"))
        video = video_path(task, "reference", videos) if i == 0 and not args.ref_seeds else None
        rows += evaluate_reference_run(args, task, log_dir, started, scratch, video)
    return [{"task": task, "part": "learn", **r} for r in rows]


def evaluate_reference_run(
    args: argparse.Namespace, task: str, log_dir: Path, started: float, scratch: Path,
    video: Path | None,
) -> list[dict]:  # fmt: skip
    """Rows of every checkpoint of one reference run saved within ``--ref-minutes`` of
    ``started`` (evaluated on our task; the seed and sizes the run recorded); with ``video``,
    its best-walking one on video into ``video``."""
    import jax

    from bench.learning.locomotion import evaluated, family_evaluator, family_video

    figures, best_row = family_evaluator(task)
    run_config = json.loads((log_dir / "run_config.json").read_text())["config"]
    recorded = run_config["algo"]
    num_envs, seed = int(recorded["num_envs"]), int(recorded["seed"])
    # Each iteration collects env_steps_per_sync steps of every env (SharpaInhandRotation's
    # HORA owner: 2; its axis/env_steps_total counts them so).
    per_iteration = num_envs * int(run_config.get("training", {}).get("env_steps_per_sync", 1))
    ckpts = sorted(log_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    rows = []
    for ckpt in ckpts:
        if ckpt.stat().st_mtime - started > 60 * args.ref_minutes:  # past the budget
            continue
        try:
            policy = reference_policy(task, recorded, ckpt, scratch)
        except (RuntimeError, EOFError) as err:  # one cut short by the budget's stop
            print(f"skipped {ckpt.name}: {err}", flush=True)
            continue
        act = jax.jit(policy.agent.act)
        fig = figures(task, {"p": evaluated(policy.agent, act, policy.state)}, args.episodes,
                      1)["p"]  # fmt: skip
        it = int(ckpt.stem.split("_")[1])
        rows.append({"side": "reference", "seed": seed, "iteration": it,
                     "env_steps": it * per_iteration,
                     "wall_sec": ckpt.stat().st_mtime - started,
                     **fig})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    if rows and video:  # its best-walking checkpoint, on video
        best = best_row(rows)
        best_ckpt = log_dir / f"model_{best['iteration']}.pt"
        policy = reference_policy(task, recorded, best_ckpt, scratch)
        family_video(task)(policy, video, 1)
    return rows


def video_path(task: str, side: str, folder: Path = FIGURES_DIR) -> Path:
    """Where a side's walking video of ``task`` goes (beside the task's figure)."""
    return folder / f"reference_{task}_{side}.mp4"


# ----------------------------------------------------------------------------- results
def _run_key(row: dict) -> tuple:
    return row["task"], row["part"], row["side"], row.get("seed", 0)


def merge_rows(new: list[dict], write: bool = True) -> list[dict]:
    """The family's one file: ``new`` replaces the old rows of the same run (task, part, side,
    seed), so the sides and seeds of a task can be run one invocation at a time; written back
    with ``write`` (not under ``--no-record``)."""
    old = json.loads(ROWS.read_text()) if ROWS.exists() else []
    replaced = {_run_key(r) for r in new}
    rows = [r for r in old if _run_key(r) not in replaced] + new
    if write:
        ROWS.write_text(json.dumps(rows, indent=1))
    return rows


WALK_TIME_LIMIT, WALK_TRACKING = 0.95, 0.8


def walks(row: dict) -> bool:
    return row["time_limit_rate"] >= WALK_TIME_LIMIT and row["tracking_share"] >= WALK_TRACKING


def reaches_goal(row: dict, target: dict | None = None) -> bool:
    """The task's goal: walking; for a motion tracker, tracking the clip
    (``bench.learning.tracking.tracks``) or, where no side does within its budget, reaching
    ``target`` (the reference's best checkpoint, on every tracking figure:
    ``bench.learning.tracking.reaches``); for in-hand rotation, which has no absolute goal,
    reaching ``target`` (``bench.learning.inhand.reaches``)."""
    from bench.learning import inhand, tracking

    if "turned_rad" in row:
        return target is not None and inhand.reaches(row, target)
    if "clip_end_rate" in row:
        return tracking.tracks(row) or (target is not None and tracking.reaches(row, target))
    return walks(row)


def reference_target(task: str, rows: list[dict]) -> dict | None:
    """The reference's best evaluated checkpoint (every seed, by its family's ranking:
    ``bench.learning.locomotion.family_evaluator``) of a task whose goal is relative to it
    (in-hand rotation, and motion tracking where no side tracks the clip); None for the
    walkers, or where the reference has no learning rows."""
    from bench.learning.locomotion import family_evaluator
    from unilab_jax.envs.registry import task_family

    if task_family(task) not in ("tracking", "inhand"):
        return None
    ref = [r for r in rows if r["task"] == task and r["part"] == "learn"
           and r["side"] == "reference" and r.get("policy") != "untrained"]  # fmt: skip
    return family_evaluator(task)[1](ref) if ref else None


def end_of_curve(row: dict) -> str:
    """A row's figures: time-limit share / tracking share, clip-end share / body error, or
    share keeping the object / rotation rate."""
    if "clip_end_rate" in row:
        return f"{100 * row['clip_end_rate']:.0f}% / {100 * row['body_error_m']:.1f} cm"
    if "turned_rad" in row:
        return f"{100 * row['time_limit_rate']:.0f}% / {row['rotation_rate']:.2f} rad/s"
    return f"{100 * row['time_limit_rate']:.0f}% / {row['tracking_share']:.2f}"


def report(rows: list[dict], record: bool) -> str:
    """The speed table, the learning table (first walking checkpoint per run, or where the
    curve ends), and one figure per task."""
    speed_rows, learn_rows = [], []
    for task in RECIPES:
        speeds = {r["side"]: r for r in rows if r["task"] == task and r["part"] == "speed"}
        ref = speeds.get("reference", {}).get("env_steps_per_sec")
        for side in ("reference", "core", "facade", "physics alone"):
            r = speeds.get(side)
            if r is None:
                continue
            ratio = f"{r['env_steps_per_sec'] / ref:.2f}x" if ref else ""
            speed_rows.append([task, side, f"{r['env_steps_per_sec']:,.0f}",
                               f"{r['updates_per_sec']:,.0f}", ratio])  # fmt: skip
        runs: dict[tuple, list[dict]] = {}
        for r in rows:
            if r["task"] == task and r["part"] == "learn" and r.get("policy") != "untrained":
                runs.setdefault((r["side"], r.get("seed", 0)), []).append(r)
        target = reference_target(task, rows)
        for (side, seed), curve in sorted(runs.items()):
            curve.sort(key=lambda r: r["env_steps"])
            first = next((r for r in curve if reaches_goal(r, target)), None)
            last = curve[-1]
            learn_rows.append([
                task, side, seed,
                f"{first['wall_sec'] / 60:.1f} min, {first['env_steps'] / 1e6:.2f}M" if first
                else "not within budget",
                f"{end_of_curve(last)} at {last['wall_sec'] / 60:.0f} min, "
                f"{last['env_steps'] / 1e6:.2f}M",
            ])  # fmt: skip
        if record:
            plot(task, rows)
    body = (
        markdown_table(["task", "side", "env steps/s", "updates/s", "vs reference"], speed_rows)
        + "\n\n"
        + markdown_table(
            [
                "task",
                "side",
                "seed",
                "first checkpoint at the goal (walks / tracks or the reference's best / the "
                "reference's best)",
                "end of curve (time limit / tracking, clip end / body error, or keeps / rotation)",
            ],
            learn_rows,
        )  # fmt: skip
        + "".join(
            f"\n\n![{t}](figures/reference_{t}.png)"
            for t in RECIPES
            if (FIGURES_DIR / f"reference_{t}.png").exists()
        )  # fmt: skip
    )
    print(body)
    if record:
        record_section(
            "reference",
            f"Beside the real UniLab ({COMMIT}): its tasks, the reference, our core and facade",
            body,
            notes=[
                "Speed: matched learner work (RECIPES' speed settings), sync collection, "
                "C MuJoCo on every side; env steps/s and updates/s between the first and last "
                "logged points. 'physics alone': the task's C MuJoCo env with zero actions and "
                "no learner, at the same env count on every core, the physics every side pays "
                "(its 'vs reference' is the most any side could reach with a free learner). "
                "Learning: each side at its CPU recipe for a fixed wall-clock "
                "budget; every checkpoint evaluated after the runs by one evaluator "
                "(bench.learning.locomotion.walking_figures: 64 deterministic episodes on C "
                "MuJoCo under the task's randomisation and noise); walking = at least 95% of "
                "episodes reach the time limit and linear-velocity tracking per step at least "
                "0.8 of its maximum. Rows: bench/results/reference.json.",
            ],
        )
    return body


def plot(task: str, rows: list[dict]) -> None:
    """The task's two goal figures (walking: tracking share and time-limit share; motion
    tracking: body error and clip-end share) against env steps and wall-clock, a line a run."""
    curves = {}
    for r in rows:
        if r["task"] == task and r["part"] == "learn" and r.get("policy") != "untrained":
            curves.setdefault((r["side"], r.get("seed", 0)), []).append(r)
    if not curves:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.learning.tracking import TRACK_BODY_ERROR, TRACK_CLIP_END

    # (key, axis label, goal line) of each row: walking, or clip tracking (where the clip's
    # end is far off, how long episodes from its first frame last shows how far it gets).
    first_row = next(iter(curves.values()))[0]
    target = reference_target(task, rows) or {}
    if "clip_end_rate" in first_row:
        rows_shown = [
            ("body_error_m", "body error (m)", TRACK_BODY_ERROR),
            ("mean_length", "episode length from frame 0", _clip_steps(task)),
            ("clip_end_rate", "episodes to the clip's end", TRACK_CLIP_END),
        ]
    elif "turned_rad" in first_row:  # goal lines: the reference's best checkpoint
        rows_shown = [
            ("turned_rad", "turned per episode (rad)", target.get("turned_rad")),
            ("rotation_rate", "rotation rate (rad/s)", target.get("rotation_rate")),
            ("time_limit_rate", "episodes keeping the object", target.get("time_limit_rate")),
        ]
    else:
        rows_shown = [
            ("tracking_share", "lin. vel. tracking / max", WALK_TRACKING),
            ("time_limit_rate", "episodes to the time limit", WALK_TIME_LIMIT),
        ]
    n = len(rows_shown)
    fig, axes = plt.subplots(n, 2, figsize=(11, 3.5 * n), sharey="row")
    colours = {"reference": "tab:red", "core": "tab:blue", "facade": "tab:green"}
    for (side, seed), curve in sorted(curves.items()):
        curve.sort(key=lambda r: r["env_steps"])
        style = dict(color=colours[side], ls=("-", "--", "-.", ":")[seed % 4], alpha=0.8)
        for col, x in enumerate(("env_steps", "wall_sec")):
            xs = [r[x] / (1e6 if col == 0 else 60) for r in curve]
            for row, (key, _, _) in enumerate(rows_shown):
                label = f"{side} seed {seed}" if row == 0 else None
                axes[row, col].plot(xs, [r[key] for r in curve], label=label, **style)
    for col, name in enumerate(("env steps (M)", "wall-clock (min)")):
        axes[n - 1, col].set_xlabel(name)
        for row, (_, _, goal) in enumerate(rows_shown):
            if goal is not None:
                axes[row, col].axhline(goal, color="grey", ls=":")
    for row, (_, label, _) in enumerate(rows_shown):
        axes[row, 0].set_ylabel(label)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{task}: the reference UniLab ({COMMIT}) and ours, on one CPU")
    fig.tight_layout()
    fig.savefig(FIGURES_DIR / f"reference_{task}.png", dpi=90)
    plt.close(fig)


def _clip_steps(task: str) -> int:
    """Control steps from the default clip's first frame to its last (an episode that tracks
    it whole lasts this long)."""
    from unilab_jax.envs.registry import make_task

    return int(make_task(task).num_frames) - 1


def _paths(text: str) -> list[Path]:
    return [Path(x) for x in text.split(",") if x.strip()]


def _seeds(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", choices=("run", "report"), default="run")
    parser.add_argument("--task", choices=sorted(RECIPES), help="run: the task")
    parser.add_argument("--checkout", type=Path, help="the reference's checkout")
    parser.add_argument("--venv", type=Path, help="its venv (python -m bench.reference.venv)")
    parser.add_argument("--parts", default="speed,learn", help="speed, learn or both")
    parser.add_argument("--speed-iterations", type=int, default=300)
    parser.add_argument("--ref-minutes", type=float, default=60.0)
    parser.add_argument("--ref-seeds", type=_seeds, default=[1], help="'' for none")
    parser.add_argument("--ref-save-interval", type=int, default=500)
    parser.add_argument("--ref-runs", type=_paths, default=[], help="evaluate these runs' dirs")
    parser.add_argument("--our-minutes", type=float, default=45.0)
    parser.add_argument("--facade-minutes", type=float, default=45.0)
    parser.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="ours; '' for none")
    parser.add_argument("--our-snapshot-every", type=int, default=1000)
    parser.add_argument("--our-log-dir", help="keep our core runs' TensorBoard files there")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--facade-child", help=argparse.SUPPRESS)
    parser.add_argument("--physics-child", help=argparse.SUPPRESS)
    add_common_args(parser, repeats=1)
    args = parser.parse_args(argv)
    if args.facade_child:
        print(json.dumps(_facade_speed_child(json.loads(args.facade_child))), flush=True)
        return 0
    if args.physics_child:
        print(json.dumps(_physics_speed_child(json.loads(args.physics_child))), flush=True)
        return 0
    if args.what == "report":
        report(json.loads(ROWS.read_text()) if ROWS.exists() else [], not args.no_record)
        return 0
    if args.task is None or args.checkout is None or args.venv is None:
        parser.error("run needs --task, --checkout and --venv")
    if RECIPES[args.task].grasp_caches:  # stops here, naming the command, if one is missing
        grasp_cache_path(RECIPES[args.task].grasp_caches, check=True)
    parts = set(args.parts.split(","))
    new = []
    if "speed" in parts:
        new += speed(args, args.task)
        if not args.no_record:  # kept should the learning part fail
            merge_rows(new)
    if "learn" in parts:
        new += learn(args, args.task)
    rows = merge_rows(new, write=not args.no_record)
    report(rows, not args.no_record)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
