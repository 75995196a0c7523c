"""Peers: Brax SAC with Playground's preset next to our SAC and TD3, same tasks, same machine.

Each (task, algo, seed) runs in its own subprocess with a hard timeout (``--timeout``):

* ``brax_sac``: ``brax.training.agents.sac.train.train`` with
  ``mujoco_playground.config.dm_control_suite_params.brax_sac_config(task)`` (128 envs, batch
  512, 8 gradient updates per env step, discount 0.99, lr 1e-3, min replay 8192, replay 4M,
  Q-network LayerNorm, observation normalisation, 10 evaluations), on
  ``mujoco_playground.registry.load(task, config_overrides={"impl": "jax"})`` wrapped by
  ``mujoco_playground.wrapper.wrap_for_brax_training`` (as Playground's own training notebook
  does). ``num_resets_per_eval`` is dropped: Brax's SAC does not take it. Brax 0.14.2 calls
  ``jax.device_put_replicated``, which jax 0.10 removed; the child installs a shim
  (``_install_device_put_replicated_shim``), and hands Brax's evaluator host copies of the
  policy parameters (``_host_unpmap``: otherwise its evaluation recompiles on 3 of its first
  4 calls under jax 0.10; the returns are bit-identical either way). Neither touches
  training; only the Brax child installs them.
* ``sac`` / ``td3`` / ``flash_sac``: ``unilab_jax.training.trainer.train`` on ``playground/<task>``
  (our adapter, the same Playground task on MJX ``impl="jax"``) with our preset for the task
  (``--our-preset cpu``, the default: ``dm_control/cpu`` of ``unilab_jax.training.presets``, 128
  envs,
  batch 512, 8 updates per iteration, discount 0.97, widths 256, replay 524,288 rows), which
  has Brax's envs, so both sides evaluate after the same iterations; learning starts after
  Brax's prefill (``min_replay_size / num_envs`` iterations). ``--our-preset none`` runs our
  bare algorithm defaults in Brax's run shape instead (discount 0.99, replay ``min(max_replay_size,
  env steps)`` rows, widths ``--hidden-dim``, 256 by default). The value support follows the
  discount (the adapter declares the DM Control reward bounds). Each child reports the
  settings it ran with (the run record's ``our_config``).

Env construction is identical apart from the wrappers (Playground's ``EpisodeWrapper`` and
auto-reset to the cached first state vs ours: time limit, auto-reset with fresh resets, to
the first state for ``CheetahRun``); the episode length is the task's (1000).

The same env-step budget and evaluation points on both sides. Brax evaluates at env step 0
and after each of ``num_evals - 1`` training epochs of ``E`` iterations, which follow a
prefill of ``P = min_replay_size / num_envs`` iterations; the budget is rounded up so that
``E`` is a multiple of ``--log-interval`` (so ``num_timesteps = (P + (num_evals - 1) E) *
num_envs``, what Brax then runs exactly), and our side runs the same number of iterations
in blocks of ``--log-interval`` and evaluates after exactly the same iterations, at 0
included. Every evaluation on both sides: the deterministic policy (Brax:
``deterministic_eval=True``, its default is a sampled action; ``--brax-stochastic-eval``
keeps the preset's), one full episode (``episode_length`` steps, or until the task ends it)
in each of ``--eval-envs`` fresh envs (default 128, Brax's ``num_eval_envs`` default), mean
return; ours via ``Trainer.evaluate_episodes`` (what the trainer's ``EvalSink`` calls).

Clocks, the same on both sides. ``wall_sec`` of a row: ``time.perf_counter()`` when that
evaluation's result is back (Brax: inside ``progress_fn``; ours: in a sink after the
evaluation) minus ``t0``, taken in the child just before the env is built (Brax:
``registry.load`` then ``sac.train``; ours: ``Trainer(...)``, which loads the env, then
``init_state``, the step-0 evaluation and ``train``, the training step compiling in the
background from before ``init_state``, as ``train`` does). So it includes env construction,
network init, every compile (training step, prefill, evaluation) and every evaluation so far,
this row's included. ``eval_sec``: that evaluation's own time (Brax: its
``eval/epoch_eval_time``; ours: measured around ``evaluate_episodes``; the first one on each
side includes compiling the evaluator); ``train_sec = wall_sec - sum(eval_sec so far)``.
``startup_sec`` (per run): from the parent's ``Popen`` to ``t0``: interpreter start and
imports (jax, brax + Playground, or unilab_jax + Playground) and JAX backend start-up; not in
``wall_sec``. No persistent compilation cache on either side (``UNILAB_JAX_COMPILATION_CACHE=0``,
``JAX_COMPILATION_CACHE_DIR`` unset), so every compile is cold. Physics lowering: both
children call ``unilab_jax.envs.cpu_linalg.install_on_cpu()`` (on one CPU device that keeps jax's
LAPACK kernels; with several it installs the LAPACK-free Cholesky that avoids jaxlib 0.10.2's
deadlock), so both sides run the same MJX lowering; ``--brax-lapack`` leaves Brax on jax's
LAPACK lowering in every case.

Summary per (task, algo), over seeds: env steps/s measured over training (env steps between
the first post-training evaluation and the last, over ``train_sec`` elapsed between them: no
compile, no evaluation), time to the first post-training evaluation, best and final eval
return, and env steps and wall-clock to 50/80/95% of Brax's best return (the mean over Brax
seeds of each seed's best evaluation): the first evaluation at or above it, median over the
seeds that reached it.

    python -m bench.learning.peers                                    # 3 tasks x 3 algos x 3 seeds
    python -m bench.learning.peers --tasks CartpoleBalance --seeds 0 --env-steps 30000 \\
        --log-interval 16 --out /tmp/peers_rows.json --png /tmp/peers.png   # quick check
    python -m bench.learning.peers --record                           # also write bench/RESULTS.md

Rows (JSON, ``--out``): ``{task, algo, seed, env_steps, wall_sec, eval_return, phase,
eval_sec, train_sec}`` with ``phase`` ``"init"`` (the step-0 evaluation) or ``"train"``, plus
one ``runs`` entry per child (status, startup and total seconds, the plan it ran).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    BENCH_DIR,
    FIGURES_DIR,
    REPO_ROOT,
    RESULTS_DIR,
    cpu_model,
    markdown_table,
    record_section,
)

ALGOS = ("brax_sac", "sac", "td3", "flash_sac")
DEFAULT_TASKS = ("CartpoleBalance", "PendulumSwingup", "CheetahRun")
FRACTIONS = (0.5, 0.8, 0.95)
_ROW_TAG = "PEERS_ROW "
_DONE_TAG = "PEERS_DONE "
#: Parent options that change what a child measures; kept with every run record.
_OPTIONS = (
    "eval_envs",
    "our_preset",
    "hidden_dim",
    "brax_stochastic_eval",
    "brax_lapack",
    "brax_raw_unpmap",
    "set",
)
COLOURS = {"brax_sac": "tab:gray", "sac": "tab:blue", "td3": "tab:orange", "flash_sac": "tab:green"}


# ----------------------------------------------------------------------------- the plan
def brax_preset(task: str) -> dict:
    """Playground's Brax SAC preset for ``task`` as a plain dict."""
    from mujoco_playground.config import dm_control_suite_params

    return dm_control_suite_params.brax_sac_config(task).to_dict()


def make_plan(task: str, env_steps: int | None, log_interval: int) -> dict:
    """Budget and evaluation points shared by both sides (see the module docstring)."""
    preset = brax_preset(task)
    num_envs = preset["num_envs"] * preset["action_repeat"]  # env steps per actor step
    if preset["action_repeat"] != 1:
        raise SystemExit(f"{task}: action_repeat {preset['action_repeat']} is not supported")
    budget = preset["num_timesteps"] if env_steps is None else env_steps
    prefill = -(-preset["min_replay_size"] // preset["num_envs"])
    if prefill % log_interval:
        raise SystemExit(
            f"--log-interval {log_interval} must divide Brax's prefill of {prefill} iterations"
        )
    epochs = max(preset["num_evals"] - 1, 1)
    epoch = -(-(budget - prefill * num_envs) // (epochs * num_envs))  # Brax's formula
    if epoch <= 0:
        raise SystemExit(f"--env-steps {budget} leaves no training after the prefill")
    epoch = -(-epoch // log_interval) * log_interval  # whole blocks on our side
    iterations = prefill + epochs * epoch
    return {
        "task": task,
        "num_envs": preset["num_envs"],
        "prefill_iterations": prefill,
        "epoch_iterations": epoch,
        "epochs": epochs,
        "iterations": iterations,
        "num_timesteps": iterations * num_envs,
        "log_interval": log_interval,
        "eval_iterations": [0] + [prefill + k * epoch for k in range(1, epochs + 1)],
        "max_replay_size": min(preset["max_replay_size"], iterations * num_envs),
        "preset": preset,
    }


# ----------------------------------------------------------------------------- child side
def parse_settings(items: list[str]) -> dict:
    """``["key=value", ...]`` (values read as JSON, else kept as text) -> ``{key: value}``."""
    settings = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE, e.g. --set tau=0.05")
        try:
            settings[key] = json.loads(text)
        except json.JSONDecodeError:
            settings[key] = text
    return settings


# Training settings the bench's plan fixes on our side: the run's shape and its evaluation points.
PLAN_TRAIN_KEYS = ("num_envs", "learning_starts", "max_iterations", "log_interval",
                   "save_interval", "eval_envs", "seed")  # fmt: skip


def split_settings(items: list[str]) -> tuple[dict, dict]:
    """``--set`` items -> ``(training settings, algorithm settings)``: a ``TrainConfig`` field
    (e.g. ``updates_per_step``) goes to the run's training config, any other key to the
    algorithm; a key the plan fixes (``PLAN_TRAIN_KEYS``) is an error."""
    from unilab_jax.config import TrainConfig

    train_keys = {f.name for f in dataclasses.fields(TrainConfig)}
    settings = parse_settings(items)
    fixed = sorted(set(settings) & set(PLAN_TRAIN_KEYS))
    if fixed:
        raise SystemExit(
            f"--set {', '.join(fixed)}: fixed by the bench's plan (the run's shape and its "
            "evaluation points); use --env-steps, --log-interval or --seeds instead"
        )
    train = {k: v for k, v in settings.items() if k in train_keys}
    return train, {k: v for k, v in settings.items() if k not in train_keys}


def _emit(tag: str, payload: dict) -> None:
    print(tag + json.dumps(payload), flush=True)


def _prepare_child() -> None:
    """Imports and JAX start-up before ``t0`` on both sides."""
    import jax

    jax.devices()
    from unilab_jax.envs.adapters.base import quiet_import

    with quiet_import():
        import mujoco_playground  # noqa: F401
        from mujoco_playground import registry, wrapper  # noqa: F401


def _install_device_put_replicated_shim() -> None:
    """Brax 0.14.2 (``sac/train.py``'s ``_init_training_state``, ``training/pmap.py``) calls
    ``jax.device_put_replicated(x, devices)``, which jax 0.10 removed. The shim does what it
    did: every leaf stacked once per device on a new leading axis, one slice per device
    (the layout ``jax.pmap`` takes). Only the Brax child installs it; ours never calls it."""
    import jax
    import numpy as np

    if hasattr(jax, "device_put_replicated"):
        return

    def device_put_replicated(x, devices):
        devices = list(devices)
        stacked = jax.tree.map(lambda leaf: np.stack([np.asarray(leaf)] * len(devices)), x)
        # Placed by an identity pmap, so the arrays carry exactly the sharding that Brax's
        # pmapped training steps return: a hand-built mesh (another axis name) would make
        # Brax's jitted evaluator compile a second time after the first epoch.
        return jax.pmap(lambda tree: tree, devices=devices)(stacked)

    jax.device_put_replicated = device_put_replicated


def _host_unpmap(sac_module) -> None:
    """Brax's evaluator is compiled once, as ours is. Under jax 0.10, Brax's ``_unpmap``
    (``x.addressable_shards[0].data.squeeze(0)``) returns arrays that keep the sharding of
    the pmapped array they came from (the shimmed initial state's pmap mesh, then
    ``training_epoch``'s mesh over axis ``"i"``), and the evaluator's donated state then carries
    shardings that change for a few evaluations: measured on CartpoleBalance, its jitted
    ``generate_eval_unroll`` compiled 4 times (about 14 s each on 2 cores) instead of once.
    Handing the evaluator host (numpy) copies of the same values, as ``_unpmap`` did in
    effect on the jax releases Brax 0.14.2 was written for, keeps one cache entry.
    ``--brax-raw-unpmap`` leaves Brax's own ``_unpmap``."""
    import numpy as np

    def host_unpmap(v):
        return sac_module.jax.tree_util.tree_map(
            lambda x: np.asarray(x.addressable_shards[0].data).squeeze(0), v
        )

    sac_module._unpmap = host_unpmap


def _child_brax(args: argparse.Namespace, plan: dict) -> None:
    import functools

    import jax

    _install_device_put_replicated_shim()
    if not args.brax_lapack:
        from unilab_jax.envs import cpu_linalg

        cpu_linalg.install_on_cpu()
    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as sac
    from mujoco_playground import registry, wrapper

    from unilab_jax.envs.adapters.base import quiet_import

    if not args.brax_raw_unpmap:
        _host_unpmap(sac)
    params = dict(plan["preset"])
    params.pop("num_resets_per_eval", None)  # a PPO setting; Brax's SAC has no such argument
    network = params.pop("network_factory")
    params.update(
        num_timesteps=plan["num_timesteps"],
        max_replay_size=plan["max_replay_size"],
        num_eval_envs=args.eval_envs,
        deterministic_eval=not args.brax_stochastic_eval,
        seed=args.seed,
    )
    evals: list[float] = []

    def progress(num_steps, metrics):
        now = time.perf_counter()
        eval_sec = float(metrics.get("eval/epoch_eval_time", 0.0))
        evals.append(eval_sec)
        wall = now - t0
        _emit(_ROW_TAG, {
            "env_steps": int(num_steps), "wall_sec": wall,
            "eval_return": float(metrics["eval/episode_reward"]),
            "phase": "init" if num_steps == 0 else "train",
            "eval_sec": eval_sec, "train_sec": wall - sum(evals),
            "sps_brax": float(metrics["training/sps"]) if "training/sps" in metrics else None,
        })  # fmt: skip

    t0 = time.perf_counter()
    _emit(_ROW_TAG, {"t0": time.time()})
    with quiet_import():
        env = registry.load(args.task, config_overrides={"impl": "jax"})
        eval_env = registry.load(args.task, config_overrides={"impl": "jax"})
    sac.train(
        environment=env,
        eval_env=eval_env,
        wrap_env_fn=wrapper.wrap_for_brax_training,
        network_factory=functools.partial(sac_networks.make_sac_networks, **network),
        progress_fn=progress,
        **params,
    )
    jax.effects_barrier()


class _EvalAt:
    """Our evaluation sink: the deterministic policy after exactly the given iterations."""

    def __init__(self, trainer, iterations, eval_envs, seed, emit):
        self.trainer, self.iterations = trainer, set(iterations)
        self.eval_envs, self.seed, self.emit = eval_envs, seed, emit

    def start(self, run):
        pass

    def status(self, text):
        pass

    def block(self, record, state):
        if record["iteration"] not in self.iterations:
            return None
        start = time.perf_counter()
        mean, length = self.trainer.evaluate_episodes(state, self.eval_envs, self.seed)
        seconds = time.perf_counter() - start
        self.emit(record["env_steps"], mean, seconds, "train")
        return {"eval_return": mean, "eval_length": length, "eval_sec": seconds}

    def finish(self, summary):
        pass

    def close(self):
        pass


def _child_ours(args: argparse.Namespace, plan: dict) -> None:
    from unilab_jax.training.presets import preset_configs
    from unilab_jax.training.trainer import Trainer, train

    preset = plan["preset"]
    # The run's shape and evaluation points are the plan's (Brax's iterations); the rest is
    # our preset for the task (``--our-preset``), or Brax's discount and ``--hidden-dim``
    # widths on our bare algorithm defaults with ``--our-preset none``.
    shape = dict(
        num_envs=plan["num_envs"],
        learning_starts=plan["prefill_iterations"],
        max_iterations=plan["iterations"],
        log_interval=plan["log_interval"],
        save_interval=0,
        eval_envs=0,  # our own sink evaluates, at Brax's iterations (step 0 included)
        seed=args.seed,
    )
    if args.our_preset == "none":
        shape.update(
            replay_buffer_n=-(-plan["max_replay_size"] // plan["num_envs"]),
            batch_size=preset["batch_size"],
            updates_per_step=preset["grad_updates_per_step"],
        )
        algo_overrides = {"gamma": preset["discounting"]}
    else:
        algo_overrides = {}
    if args.hidden_dim is not None:
        algo_overrides.update(actor_hidden_dim=args.hidden_dim, critic_hidden_dim=args.hidden_dim)
    elif args.our_preset == "none":
        algo_overrides.update(actor_hidden_dim=256, critic_hidden_dim=256)
    train_overrides, algo_settings = split_settings(args.set)
    shape.update(train_overrides)
    algo_overrides.update(algo_settings)
    config, algo_config = preset_configs(
        f"playground/{args.task}", args.algo, args.our_preset, shape, algo_overrides
    )
    _emit(_ROW_TAG, {"config": {"batch_size": config.batch_size,
                                "updates_per_step": config.updates_per_step,
                                "replay_rows": config.replay_buffer_n * config.num_envs,
                                **algo_config}})  # fmt: skip
    evals: list[float] = []

    def emit(env_steps, mean, seconds, phase):
        evals.append(seconds)
        wall = time.perf_counter() - t0
        _emit(_ROW_TAG, {
            "env_steps": int(env_steps), "wall_sec": wall, "eval_return": float(mean),
            "phase": phase, "eval_sec": seconds, "train_sec": wall - sum(evals),
        })  # fmt: skip

    t0 = time.perf_counter()
    _emit(_ROW_TAG, {"t0": time.time()})
    trainer = Trainer(config, algo_config)
    # As train() does for a fresh run: the first block's step compiles beside init (and here
    # beside the step-0 evaluation too).
    trainer.precompile_step(min(config.log_interval, config.max_iterations))
    state = trainer.init_state()
    start = time.perf_counter()
    mean, _ = trainer.evaluate_episodes(state, args.eval_envs, args.seed + 1)
    emit(0, mean, time.perf_counter() - start, "init")
    sink = _EvalAt(trainer, plan["eval_iterations"][1:], args.eval_envs, args.seed + 1, emit)
    train(config, trainer=trainer, initial_state=state, sinks=[sink], quiet=True)


def child_main(args: argparse.Namespace) -> int:
    plan = json.loads(args.plan)
    _prepare_child()
    if args.algo == "brax_sac":
        _child_brax(args, plan)
    else:
        _child_ours(args, plan)
    _emit(_DONE_TAG, {"ok": True})
    return 0


# ----------------------------------------------------------------------------- parent side
def child_env() -> dict:
    env = dict(os.environ)
    env["UNILAB_JAX_COMPILATION_CACHE"] = "0"  # cold compiles on both sides
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(args: argparse.Namespace, plan: dict, algo: str, seed: int) -> tuple[dict, list]:
    """One (task, algo, seed) in a subprocess; returns (run record, rows)."""
    cmd = [
        sys.executable, "-m", "bench.learning.peers", "--child", "--task", plan["task"],
        "--algo", algo, "--seed", str(seed), "--eval-envs", str(args.eval_envs),
        "--our-preset", args.our_preset, "--plan", json.dumps(plan),
    ]  # fmt: skip
    if args.hidden_dim is not None:
        cmd += ["--hidden-dim", str(args.hidden_dim)]
    for item in args.set:
        cmd += ["--set", item]
    if args.brax_stochastic_eval:
        cmd.append("--brax-stochastic-eval")
    if args.brax_lapack:
        cmd.append("--brax-lapack")
    if args.brax_raw_unpmap:
        cmd.append("--brax-raw-unpmap")
    label = f"{plan['task']} {algo} seed {seed}"
    print(f"... {label}: {plan['num_timesteps']:,} env steps (timeout {args.timeout}s)",
          flush=True)  # fmt: skip
    rows: list[dict] = []
    tail: list[str] = []
    meta = {"t0": None, "done": False, "config": None}
    spawned = time.time()
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip

    def reader():
        for line in proc.stdout:
            if line.startswith(_ROW_TAG):
                payload = json.loads(line[len(_ROW_TAG) :])
                if "t0" in payload:
                    meta["t0"] = payload["t0"]
                    continue
                if "config" in payload:
                    meta["config"] = payload["config"]
                    continue
                row = {"task": plan["task"], "algo": algo, "seed": seed, **payload}
                rows.append(row)
                print(f"    {label}: {row['env_steps']:>10,} env steps  {row['wall_sec']:8.1f}s"
                      f"  eval {row['eval_return']:8.2f}", flush=True)  # fmt: skip
            elif line.startswith(_DONE_TAG):
                meta["done"] = True
            else:
                tail.append(line.rstrip())
                del tail[:-30]

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        proc.wait(timeout=args.timeout)
        status = "ok" if proc.returncode == 0 and meta["done"] else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: only what we started
        proc.wait()
        status = f"timeout after {args.timeout}s"
    thread.join(timeout=10)
    total = time.time() - spawned
    if status != "ok":
        print(f"    {label}: {status}\n      " + "\n      ".join(tail[-15:]), flush=True)
    run = {
        "task": plan["task"], "algo": algo, "seed": seed, "status": status,
        "startup_sec": None if meta["t0"] is None else meta["t0"] - spawned,
        "total_sec": total, "plan": {k: v for k, v in plan.items() if k != "preset"},
        "options": {k: getattr(args, k) for k in _OPTIONS}, "our_config": meta["config"],
        "cpu": cpu_model(),
    }  # fmt: skip
    return run, rows


# ----------------------------------------------------------------------------- summary
def _median(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(values) if values else None


def _fmt(value, spec=".0f", unit=""):
    return "–" if value is None else f"{value:{spec}}{unit}"


def _curves(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault((r["task"], r["algo"], r["seed"]), []).append(r)
    for curve in out.values():
        curve.sort(key=lambda r: r["env_steps"])
    return out


def brax_targets(rows: list[dict]) -> dict[str, float]:
    """Per task: the mean over Brax seeds of each seed's best post-training evaluation."""
    return {
        task: statistics.mean(seeds.values())
        for (task, algo), seeds in _best_evals(rows).items()
        if algo == "brax_sac"
    }


def summarise(rows: list[dict], runs: list[dict]) -> tuple[list[str], list[list]]:
    curves = _curves(rows)
    targets = brax_targets(rows)
    headers = ["task", "algo", "seeds ok", "env steps", "env steps/s (train)", "start-up s",
               "first eval s", "wall s", "best eval", "final eval",
               *(f"to {int(f * 100)}% of Brax best (steps / s)" for f in FRACTIONS)]  # fmt: skip
    table = []
    for task in dict.fromkeys(r["task"] for r in runs):
        for algo in ALGOS:
            sel = [r for r in runs if r["task"] == task and r["algo"] == algo]
            if not sel:
                continue
            seeds = [r["seed"] for r in sel]
            cs = [curves[(task, algo, s)] for s in seeds if (task, algo, s) in curves]
            # The step-0 evaluation (untrained policy) is plotted, never a best or a target.
            cs = [[p for p in c if p["env_steps"] > 0] for c in cs]
            cs = [c for c in cs if c]
            sps, first, best, final, wall = [], [], [], [], []
            for c in cs:
                best.append(max(p["eval_return"] for p in c))
                final.append(c[-1]["eval_return"])
                wall.append(c[-1]["wall_sec"])
                first.append(c[0]["wall_sec"])
                if len(c) >= 2 and c[-1]["train_sec"] > c[0]["train_sec"]:
                    sps.append((c[-1]["env_steps"] - c[0]["env_steps"])
                               / (c[-1]["train_sec"] - c[0]["train_sec"]))  # fmt: skip
            cells = []
            for frac in FRACTIONS:
                if task not in targets:
                    cells.append("no Brax run")
                    continue
                goal = frac * targets[task]
                hits = [next((p for p in c if p["eval_return"] >= goal), None) for c in cs]
                hits = [h for h in hits if h is not None]
                if not hits:
                    cells.append(f"never (0/{len(sel)})")
                    continue
                steps = _median([h["env_steps"] for h in hits])
                secs = _median([h["wall_sec"] for h in hits])
                cells.append(f"{steps:,.0f} / {secs:.0f} s ({len(hits)}/{len(sel)})")
            ok = sum(r["status"] == "ok" for r in sel)
            steps_done = max((c[-1]["env_steps"] for c in cs), default=0)
            stat = (f"{statistics.mean(best):.1f} ± {statistics.pstdev(best):.1f}"
                    if best else "–")  # fmt: skip
            table.append([
                task, algo, f"{ok}/{len(sel)}", f"{steps_done:,}", _fmt(_median(sps), ",.0f"),
                _fmt(_median([r["startup_sec"] for r in sel]), ".1f"),
                _fmt(_median(first), ".0f"), _fmt(_median(wall), ".0f"), stat,
                _fmt(statistics.mean(final) if final else None, ".1f"), *cells,
            ])  # fmt: skip
    return headers, table


def _best_evals(rows: list[dict]) -> dict[tuple[str, str], dict[int, float]]:
    """(task, algo) -> seed -> its best post-training evaluation."""
    out: dict = {}
    for (task, algo, seed), curve in _curves(rows).items():
        trained = [r["eval_return"] for r in curve if r["env_steps"] > 0]
        if trained:
            out.setdefault((task, algo), {})[seed] = max(trained)
    return out


def aggregate(rows: list[dict]) -> str:
    """The statistics of the seeds (``unilab_jax/analysis/stats.py``): per task and algorithm the
    mean best evaluation with its 95% bootstrap interval against Brax's mean; over tasks the IQM
    of the best evaluations normalised by Brax's mean best, with 95% stratified bootstrap
    intervals."""
    from unilab_jax.analysis.stats import mean_interval, stratified_interval

    best = _best_evals(rows)
    targets = brax_targets(rows)
    tasks = [t for t in dict.fromkeys(r["task"] for r in rows) if t in targets]
    lines = [
        "| task | algo | seeds | best eval: mean [95% CI] | Brax mean best | mean >= Brax | "
        "CI low > Brax |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        for algo in ALGOS:
            seeds = best.get((task, algo), {})
            if not seeds:
                continue
            mean, low, high = mean_interval(list(seeds.values()))
            verdict = ("–", "–") if algo == "brax_sac" else (
                "yes" if mean >= targets[task] else "no",
                "yes" if low > targets[task] else "no",
            )  # fmt: skip
            lines.append(f"| {task} | {algo} | {len(seeds)} | {mean:.1f} [{low:.1f}, {high:.1f}] "
                         f"| {targets[task]:.1f} | {verdict[0]} | {verdict[1]} |")  # fmt: skip
    lines += ["", "| algo | runs (tasks x seeds) | IQM of best eval / Brax mean best [95% CI] "
              "| vs Brax's IQM |", "|---|---|---|---|"]  # fmt: skip
    iqms = {}
    for algo in ALGOS:
        scores = {t: [v / targets[t] for v in best.get((t, algo), {}).values()] for t in tasks}
        scores = {t: v for t, v in scores.items() if v}
        if not scores:
            continue
        iqms[algo] = stratified_interval(scores)
    for algo, (point, low, high) in iqms.items():
        runs = sum(len(best.get((t, algo), {})) for t in tasks)
        ratio = point / iqms["brax_sac"][0] if "brax_sac" in iqms else float("nan")
        lines.append(f"| {algo} | {runs} | {point:.2f} [{low:.2f}, {high:.2f}] | {ratio:.2f}x |")
    return "\n".join(lines)


def plot(rows: list[dict], targets: dict[str, float], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = _curves(rows)
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(len(tasks), 2, figsize=(12, 3.8 * len(tasks)), squeeze=False)
    for i, task in enumerate(tasks):
        for j, key in enumerate(("env_steps", "wall_sec")):
            ax = axes[i][j]
            for algo in ALGOS:
                keys = sorted(k for k in curves if k[0] == task and k[1] == algo)
                _plot_seeds(ax, [curves[k] for k in keys], key, algo)
            if task in targets:
                for frac in FRACTIONS:
                    ax.axhline(frac * targets[task], color="k", lw=0.6, ls=":", alpha=0.6)
            ax.set_xlabel("env steps" if key == "env_steps" else
                          "wall-clock s (compile and evaluations included)")  # fmt: skip
            ax.set_ylabel("deterministic eval return")
            ax.set_title(f"{task}")
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        "Brax SAC (Playground preset) vs ours: mean over seeds, 95% bootstrap band; "
        "dotted: 50/80/95% of Brax's best"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _plot_seeds(ax, curves: list[list[dict]], key: str, algo: str) -> None:
    """One algorithm's seeds on one task: thin lines per seed, the mean and its 95% bootstrap
    band over the evaluation points every seed has (x: the mean over seeds)."""
    import numpy as np

    from unilab_jax.analysis.stats import pointwise_band

    if not curves:
        return
    for c in curves:
        ax.plot([p[key] for p in c], [p["eval_return"] for p in c], color=COLOURS[algo],
                alpha=0.25, lw=0.8)  # fmt: skip
    points = min(len(c) for c in curves)
    x = np.mean([[p[key] for p in c[:points]] for c in curves], axis=0)
    mean, low, high = pointwise_band([[p["eval_return"] for p in c[:points]] for c in curves])
    n = len(curves)
    ax.plot(x, mean, color=COLOURS[algo], lw=1.8, marker=".",
            label=f"{algo} ({n} seed{'s' * (n > 1)})")  # fmt: skip
    if n > 1:
        ax.fill_between(x, low, high, color=COLOURS[algo], alpha=0.2, lw=0)


def merge_rows(files: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(runs, rows)`` of several ``--out`` files; a (task, algo, seed) run in a later file
    replaces an earlier one's run and rows."""
    runs: dict = {}
    rows: dict = {}
    for data in files:
        for run in data["runs"]:
            key = (run["task"], run["algo"], run["seed"])
            runs[key] = run
            rows[key] = [r for r in data["rows"] if (r["task"], r["algo"], r["seed"]) == key]
    return list(runs.values()), [r for key in runs for r in rows[key]]


def _check_our_preset(parser: argparse.ArgumentParser, plans: list[dict], scale: str) -> None:
    """Before any child starts: our preset must have Brax's env count (the two sides evaluate
    after the same iterations)."""
    from unilab_jax.training.presets import get_preset

    for plan in plans:
        preset = get_preset(f"playground/{plan['task']}", scale)
        envs = (preset.train if preset else {}).get("num_envs")
        if envs != plan["num_envs"]:
            parser.error(
                f"--our-preset {scale}: {plan['task']}'s preset has {envs} envs, Brax's "
                f"{plan['num_envs']}; both sides must evaluate after the same iterations, "
                "so use --our-preset cpu (Brax's sizes) or none"
            )


def _run_machines(runs: list[dict]) -> str:
    """Which CPUs the runs ran on, as each recorded it (rows merged with ``--from-json`` may
    come from several machines; the CPU line above is the one that wrote the table)."""
    counts: dict[str, int] = {}
    for run in runs:
        cpu = run.get("cpu") or "not recorded (runs before 2026-12-05)"
        counts[cpu] = counts.get(cpu, 0) + 1
    listed = "; ".join(f"{cpu}: {n} run{'s' * (n != 1)}" for cpu, n in counts.items())
    return (
        f"- The runs' CPUs: {listed}. Wall-clock and env steps/s compare only between runs "
        "on the same CPU."
    )


def _our_settings(runs: list[dict]) -> str:
    """What our side ran with, per algorithm, from the children's own reports."""
    parts = []
    for algo in ALGOS[1:]:
        config = next((r.get("our_config") for r in runs if r["algo"] == algo
                       and r.get("our_config")), None)  # fmt: skip
        if config:
            shown = ", ".join(f"{k} {v}" for k, v in config.items())
            parts.append(f"{algo}: {shown}")
    return "; ".join(parts) or "settings not reported"


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                        help="comma-separated Playground DM Control task names")  # fmt: skip
    parser.add_argument("--algos", default=",".join(ALGOS), help="of brax_sac, sac, td3, flash_sac")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--env-steps", type=int, default=None,
                        help="env steps per run (default: Playground's num_timesteps per task); "
                        "rounded up to whole evaluation epochs of whole blocks")  # fmt: skip
    parser.add_argument("--log-interval", type=int, default=64,
                        help="our block length in iterations; must divide Brax's prefill (64 "
                        "iterations); Brax's epoch is rounded up to a multiple of it")  # fmt: skip
    parser.add_argument("--eval-envs", type=int, default=128)
    parser.add_argument(
        "--our-preset",
        choices=("cpu", "gpu", "none"),
        default="cpu",
        help="our side's settings: our preset for the task at this scale (default cpu), or "
        "none: our bare algorithm defaults with Brax's batch, updates, replay and discount",
    )
    parser.add_argument("--hidden-dim", type=int, default=None,
                        help="our actor/critic width (default: the preset's; 256 with "
                        "--our-preset none)")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one of our settings (repeatable; the value is read as JSON, "
                        "e.g. --set tau=0.05): an algorithm setting, or a training one such as "
                        "updates_per_step or batch_size (not the plan's shape), over the "
                        "preset's; the children report what they ran with")  # fmt: skip
    parser.add_argument(
        "--brax-stochastic-eval",
        action="store_true",
        help="evaluate Brax with sampled actions (the preset's default)",
    )
    parser.add_argument(
        "--brax-lapack",
        action="store_true",
        help="leave the Brax child on jax's LAPACK Cholesky lowering",
    )
    parser.add_argument(
        "--brax-raw-unpmap",
        action="store_true",
        help="keep Brax's _unpmap (its evaluator then recompiles a few times)",
    )
    parser.add_argument("--timeout", type=int, default=12 * 3600, help="seconds per child")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "peers.json")
    parser.add_argument("--png", type=Path, default=FIGURES_DIR / "peers.png")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the table and the PNG into bench/RESULTS.md (section Peers)",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="summarise (and plot/record) earlier --out files, run nothing; several files "
        "merge (sessions that each ran some seeds; a (task, algo, seed) in a later file wins)",
    )
    # child-only
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--algo", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    split_settings(args.set)  # a malformed --set fails here, before any child starts

    if args.from_json is not None:
        runs, rows = merge_rows([json.loads(p.read_text()) for p in args.from_json])
    else:
        algos = [a for a in args.algos.split(",") if a]
        bad = sorted(set(algos) - set(ALGOS))
        if bad:
            parser.error(f"unknown algos {bad}; choose from {', '.join(ALGOS)}")
        seeds = [int(s) for s in args.seeds.split(",") if s]
        tasks = [t for t in args.tasks.split(",") if t]
        # One results file for the family: a new run replaces the file's run of the same (task,
        # algo, seed) and keeps the others, so the table is always drawn from ``--out`` alone.
        kept = json.loads(args.out.read_text()) if args.out.exists() else {"runs": [], "rows": []}
        runs, rows = [], []
        plans = [make_plan(task, args.env_steps, args.log_interval) for task in tasks]
        if args.our_preset != "none" and set(algos) - {"brax_sac"}:
            _check_our_preset(parser, plans, args.our_preset)
        for plan in plans:
            for seed in seeds:
                for algo in algos:
                    run, run_rows = run_child(args, plan, algo, seed)
                    runs.append(run)
                    rows.extend(run_rows)
                    all_runs, all_rows = merge_rows([kept, {"runs": runs, "rows": rows}])
                    args.out.write_text(json.dumps({"runs": all_runs, "rows": all_rows}, indent=1))
    headers, table = summarise(rows, runs)
    body = markdown_table(headers, table) + "\n\n" + aggregate(rows)
    print(body)
    targets = brax_targets(rows)
    if rows:
        plot(rows, targets, args.png)
        sources = ", ".join(map(str, args.from_json)) if args.from_json else args.out
        print(f"rows: {sources}; plot: {args.png}")
    if args.record:
        rel = os.path.relpath(args.png, BENCH_DIR)
        budget = sorted({(r["task"], r["plan"]["num_timesteps"]) for r in runs})
        options = runs[0].get("options", {k: getattr(args, k) for k in _OPTIONS})
        record_section(
            "peers",
            "Peers: Brax SAC (Playground preset) vs our SAC / TD3",
            body + f"\n\n![peers curves]({rel})",
            notes=[
                "- Env steps per task: "
                + ", ".join(f"{t} {n:,}" for t, n in budget)
                + (
                    " (Playground's own budgets: "
                    + ", ".join(f"{t} {brax_preset(t)['num_timesteps']:,}" for t, _ in budget)
                    + ")"
                    if any(n < brax_preset(t)["num_timesteps"] for t, n in budget)
                    else ""
                )
                + f"; seeds {sorted({r['seed'] for r in runs})}.",
                _run_machines(runs),
                "- Each (task, algo, seed) in its own subprocess. Brax: `sac.train` with "
                "`brax_sac_config(task)` (num_resets_per_eval dropped), Playground's "
                "`wrap_for_brax_training`, deterministic evaluation unless "
                f"`brax_stochastic_eval` (options: {options}). Ours: "
                "`unilab_jax.training.trainer.train` on `playground/<task>` with 128 envs and "
                "learning "
                "after Brax's 8192-step prefill; " + _our_settings(runs) + ".",
                f"- Evaluation on both sides after the same iterations (step 0 included): the "
                f"deterministic policy, one full episode in each of {options['eval_envs']} fresh "
                "envs. Wall-clock from just before the env is built in the child, compile and "
                "evaluations included; start-up (interpreter + imports) apart; no persistent "
                "compilation cache. env steps/s: between the first post-training evaluation "
                "and the last, evaluations excluded. Targets: 50/80/95% of the mean over Brax "
                "seeds of each seed's best evaluation; cells give the median env steps / "
                "wall-clock of the first evaluation at or above it (seeds that reached it).",
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
