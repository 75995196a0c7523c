"""Robot locomotion on this machine: the core's training speed with MJX and with C MuJoCo
collection, side by side (``speed``).

``python -m bench.learning.locomotion speed`` trains G1WalkFlat and Go1JoystickFlat with the same
learner settings (the task's ``locomotion/cpu`` preset, TD3, ``--num-envs`` overridden) three
ways, each in a child process of its own, one after the other in one run: MJX (the fused device
step), C MuJoCo collection with the sync schedule and with the overlapped one
(``TrainConfig.physics="mujoco"``, ``collection="sync"|"overlap"``). It reports the training
env steps/s and gradient updates/s over the blocks after the first (the first holds the
compile and the warm-up before the replay threshold) and the ratio of each C MuJoCo schedule to
MJX. Nothing is evaluated (``eval_envs=0``) and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import (
    add_common_args,
    ensure_repo_on_path,
    markdown_table,
    record_section,
)

ensure_repo_on_path()

#: When this process started its work (the curves' clocks count from launch, compile included).
LAUNCHED = time.time()

TASKS = ("G1WalkFlat", "Go1JoystickFlat")
WAYS = (("mjx", "sync"), ("mujoco", "sync"), ("mujoco", "overlap"))


def _child(spec: dict) -> dict:
    """One timed training run (in this process); returns its figures."""
    from unilab_jax.training.presets import preset_configs
    from unilab_jax.training.trainer import Trainer, train

    config, algo = preset_configs(
        spec["env"], spec.get("algo", "td3"), scale="cpu", train=spec.get("train"),
        algo_settings=spec.get("algo_settings"),
    )  # fmt: skip
    config = config.replace(
        num_envs=spec["num_envs"],
        max_iterations=spec["blocks"] * spec["block"],
        log_interval=spec["block"],
        eval_envs=0,
        save_interval=0,
        learning_starts=0,
        physics=spec["physics"],
        collection=spec["collection"],
    )
    start = time.perf_counter()
    trainer = Trainer(config, algo)
    records: list[dict] = []

    def on_block(record: dict) -> None:
        records.append({**record, "t": time.perf_counter()})

    train(config, trainer=trainer, quiet=True, logger="none", on_block=on_block)
    trainer.close()
    timed = records[1:]
    seconds = timed[-1]["t"] - records[0]["t"]
    iterations = timed[-1]["iteration"] - records[0]["iteration"]
    steps = iterations * config.num_envs * config.env_steps_per_sync
    return {
        **spec,
        "env_steps_per_sec": steps / seconds,
        "updates_per_sec": iterations * config.updates_per_step / seconds,
        "sec_per_iter": seconds / iterations,
        "collect_sec_per_iter": (
            sum(r.get("collect_sec_per_iter", 0.0) for r in timed) / len(timed)
        ),
        "first_block_sec": records[0]["t"] - start,
        "timed_iterations": iterations,
        "batch_size": config.batch_size,
        "updates_per_step": config.updates_per_step,
    }


def _run_child(spec: dict, timeout: int) -> dict:
    env = dict(os.environ)
    if spec["collection"] == "overlap":  # the collector's CPU device apart from the learner's
        flags = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=2".strip()
    cmd = [sys.executable, "-m", "bench.learning.locomotion", "--child", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {**spec, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(lines[-1])


def speed(args: argparse.Namespace) -> None:
    rows, results = [], []
    for env in args.tasks:
        for num_envs in args.num_envs:
            base = None
            for physics, collection in WAYS:
                # MJX is slow on robots here: fewer blocks of fewer iterations.
                slow = physics == "mjx" and env == "G1WalkFlat"
                spec = {
                    "env": env, "num_envs": num_envs, "physics": physics,
                    "collection": collection,
                    "block": args.block // 4 if slow else args.block,
                    "blocks": max(3, args.blocks // 2) if slow else args.blocks,
                }  # fmt: skip
                print(f"running {spec}", flush=True)
                out = _run_child(spec, args.timeout)
                results.append(out)
                if "error" in out:
                    print(f"  failed: {out['error']}", flush=True)
                    rows.append([env, num_envs, f"{physics}/{collection}", "failed", "", "", ""])
                    continue
                if physics == "mjx":
                    base = out["env_steps_per_sec"]
                ratio = f"{out['env_steps_per_sec'] / base:.1f}x" if base else ""
                print(f"  {out['env_steps_per_sec']:.0f} env steps/s", flush=True)
                rows.append([
                    env, num_envs, f"{physics}/{collection}", f"{out['env_steps_per_sec']:,.0f}",
                    f"{out['updates_per_sec']:,.0f}", f"{1000 * out['sec_per_iter']:.1f}",
                    ratio,
                ])  # fmt: skip
    table = markdown_table(
        [
            "task",
            "envs",
            "physics / collection",
            "env steps/s",
            "updates/s",
            "ms / iteration",
            "vs MJX",
        ],  # fmt: skip
        rows,
    )
    print(table)
    if not args.no_record:
        record_section(
            "locomotion-speed",
            "Robot training speed: MJX against C MuJoCo collection "
            "(bench/learning/locomotion.py speed)",
            table,
            notes=[
                "TD3 at the task's locomotion/cpu preset (batch, updates per step, widths), "
                "learning from the first iteration (learning_starts 0), no evaluation; each "
                "row one child process, all rows in this one run. Env steps/s and updates/s "
                "over the blocks after the first (which holds the compile). The overlapped "
                "schedule runs its collector on a second forced host CPU device.",
            ],
        )


def walking_figures(env: str, policies: dict[str, tuple], episodes: int, seed: int) -> dict:
    """Walking, defined from the task's own numbers, for each ``name: (act, agent_state)``:
    one deterministic 1000-step episode in each of ``episodes`` envs on C MuJoCo, commands
    from the task's distribution. Per policy: the share of episodes that reach the time limit,
    the linear-velocity tracking reward per step as a share of its maximum (the reward's
    weight), the mean linear-velocity tracking error |v_xy - cmd_xy| in m/s (recovered from
    the reward, ``w exp(-err^2 / sigma)``), the mean return; plus, for the same episodes, what
    a robot standing perfectly still would score (``exp(-|cmd_xy|^2 / sigma)``)."""
    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.registry import make_task
    from unilab_jax.envs.vec_env import MujocoVecEnv

    task = make_task(env)
    tracking = task.velocity_tracking  # the component, its maximum, sigma, the command's slice
    weight, sigma, cmd = tracking.max_per_step, tracking.sigma, tracking.command

    def per_step(obs, state):
        r = np.maximum(state.info["components"][f"reward/{tracking.component}"] / weight, 1e-30)
        command = obs["obs"][:, cmd]
        return {
            "lin_vel_error": np.sqrt(np.maximum(-sigma * np.log(r), 0.0)),
            "still_tracking": np.exp(-np.sum(command[:, :2] ** 2, axis=1) / sigma),
        }

    out = {}
    vec = MujocoVecEnv(task, env, episodes, seed)
    try:
        for name, (act, state) in policies.items():
            ep = mujoco_episodes(vec, act, state, seed, per_step=per_step)
            parts = ep["components"]
            out[name] = {
                "time_limit_rate": float(np.mean(ep["time_limit"])),
                "tracking_share": float(np.mean(parts[f"reward/{tracking.component}"]) / weight),
                "lin_vel_error": float(np.mean(parts["lin_vel_error"])),
                "mean_return": float(np.mean(ep["returns"])),
                "mean_length": float(np.mean(ep["lengths"])),
                "still_tracking_share": float(np.mean(parts["still_tracking"])),
            }
    finally:
        vec.close()
    return out


def walking_video(policy, path: Path, seed: int = 1, size: tuple[int, int] = (480, 360)) -> int:
    """One deterministic episode of ``policy`` (a ``unilab_jax.policy.load.Policy``) on C MuJoCo
    from the evaluator's first reset of ``seed`` (its command from the task's distribution),
    rendered from the task's first camera into ``path`` (mp4); returns the frames written."""
    from unilab_jax.policy.play import play_policy

    played = play_policy(policy, video=Path(path), width=size[0], height=size[1], seed=seed,
                         physics="mujoco")  # fmt: skip
    return played.frames


def family_video(env: str):
    """The bench's video of ``env``'s task family, ``(policy, path, seed) -> frames``: for
    in-hand rotation the episode of several that turned the object furthest
    (``bench.learning.inhand.turning_video``), else :func:`walking_video`."""
    from unilab_jax.envs.registry import task_family

    if task_family(env) == "inhand":
        from bench.learning.inhand import turning_video

        return turning_video
    return walking_video


def snapshot_policy(env: str, algo: str, agent, state, iteration: int, config: dict):
    """An in-memory agent snapshot of a core run as a ``Policy`` (for :func:`walking_video`)."""
    from unilab_jax.envs import load
    from unilab_jax.policy.load import Policy

    task = load(env, physics="mujoco")
    return Policy(env=env, algo=algo, iteration=iteration, obs_dim=task.obs_size["obs"],
                  action_dim=task.action_size, config=config, checkpoint="", agent=agent,
                  state=state)  # fmt: skip


def best_row(rows: list[dict]) -> dict:
    """The evaluated snapshot that walks best: the highest tracking share times the share of
    episodes reaching the time limit (the later one on a tie)."""
    return max(reversed(rows), key=lambda r: r["tracking_share"] * r["time_limit_rate"])


def family_evaluator(env: str) -> tuple:
    """``(figures, best)`` for ``env``'s task family: ``tracking_figures`` and
    ``best_tracking_row`` for the motion trackers (``bench/learning/tracking.py``),
    ``inhand_figures`` and ``best_inhand_row`` for in-hand rotation (``inhand.py``),
    ``walking_figures`` and ``best_row`` for the walking robots."""
    from unilab_jax.envs.registry import task_family

    if task_family(env) == "tracking":
        from bench.learning.tracking import best_tracking_row, tracking_figures

        return tracking_figures, best_tracking_row
    if task_family(env) == "inhand":
        from bench.learning.inhand import best_inhand_row, inhand_figures

        return inhand_figures, best_inhand_row
    return walking_figures, best_row


def evaluated(agent, act, state) -> tuple:
    """A policy as the evaluators take it: ``(act, state)``, and for a privileged actor
    (HORA-SAC) what it reads from an observation dict (``unilab_jax.algos.agent.observer``;
    the in-hand evaluator takes it)."""
    from unilab_jax.algos.agent import observer

    observe = observer(agent)
    return (act, state) if observe is None else (act, state, observe)


def walk(args: argparse.Namespace) -> None:
    """Walking figures of a run's newest checkpoint beside the untrained policy."""
    import jax

    import unilab_jax

    policy = unilab_jax.load_policy(args.run)
    untrained = policy.agent.init(jax.random.PRNGKey(0))  # the same networks, fresh weights
    act = jax.jit(policy.agent.act)
    figures = walking_figures(policy.env, {
        f"trained (iteration {policy.iteration})": (act, policy.state),
        "untrained (stands)": (act, untrained),
    }, args.episodes, args.seed)  # fmt: skip
    rows = []
    for name, f in figures.items():
        rows.append([name, f"{100 * f['time_limit_rate']:.0f}%", f"{f['tracking_share']:.3f}",
                     f"{f['lin_vel_error']:.3f}", f"{f['mean_return']:.1f}",
                     f"{f['still_tracking_share']:.3f}"])  # fmt: skip
    print(markdown_table(["policy", "reach time limit", "lin. tracking / max",
                          "lin. vel. error (m/s)", "return", "standing still would score"],
                         rows))  # fmt: skip
    print(json.dumps(figures))


def _budget(minutes: float):
    """The training budget: a SIGINT to this process after ``minutes``, which the run takes as
    a stop after its iteration. SIGINT is first given its default handler: a job started in
    the background (``nohup ... &``) inherits it ignored, and the run's own handlers leave an
    ignored SIGINT ignored, so the run would train on past its budget (a facade run did)."""
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(60 * minutes, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.daemon = True
    return timer


def train_run(args: argparse.Namespace) -> None:
    """Train ``--env`` with the core (C MuJoCo collection unless ``--physics mjx``) for
    ``--minutes`` of training, keeping the agent every ``--snapshot-every`` iterations with its
    env steps and wall-clock; afterwards (outside the clock) evaluate every snapshot with its
    family's evaluator (:func:`family_evaluator`) and write the curve to ``--out`` (JSON
    lines)."""

    import jax

    from unilab_jax.training.interrupts import RunStopped
    from unilab_jax.training.presets import preset_configs
    from unilab_jax.training.sinks import BaseSink, LoggerSink, PlainLineSink
    from unilab_jax.training.trainer import Trainer, train

    train_set = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    algo_set = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.algo_set)}
    config, algo = preset_configs(
        args.env, args.algo, "cpu", train=train_set, algo_settings=algo_set
    )
    config = config.replace(eval_envs=0, save_interval=0, physics=args.physics)
    trainer = Trainer(config, algo)
    snapshots: list[dict] = []

    class Snapshots(BaseSink):
        def block(self, record, state):
            if record["iteration"] % args.snapshot_every == 0 or not snapshots:
                snapshots.append(
                    {
                        "iteration": record["iteration"],
                        "env_steps": record["env_steps"],
                        "wall_sec": time.time() - LAUNCHED,
                        "agent": jax.device_get(state.agent),
                    }
                )

    # The budget: a SIGINT to ourselves after --minutes stops the run after its block.
    sinks = [PlainLineSink(), Snapshots()]
    if args.log_dir:  # the run's TensorBoard curves (losses, alpha, reward terms) kept there
        sinks.append(LoggerSink("tensorboard", quiet=True, wandb=None))
    timer = _budget(args.minutes)
    timer.start()
    try:
        train(config, trainer=trainer, sinks=sinks, quiet=True, log_dir=args.log_dir)
    except RunStopped as stop:
        print(f"stopped by the budget at iteration {stop.iteration}", flush=True)
    finally:
        timer.cancel()
    act = jax.jit(trainer.agent.act)
    untrained = trainer.agent.init(jax.random.PRNGKey(0))
    figures, best_of = family_evaluator(args.env)
    rows = [
        {
            "policy": "untrained",
            **figures(
                args.env,
                {"untrained": evaluated(trainer.agent, act, untrained)},
                args.episodes,
                args.seed,
            )["untrained"],
        }
    ]
    for snap in snapshots:
        policy = evaluated(trainer.agent, act, snap["agent"])
        fig = figures(args.env, {"p": policy}, args.episodes, args.seed)
        rows.append({"policy": "trained", **{k: v for k, v in snap.items() if k != "agent"},
                     **fig["p"]})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    settings = {"train": {k: str(v) for k, v in config.__dict__.items()}, "algo": algo}
    if args.video and snapshots:
        best = best_of(rows[1:])
        snap = next(s for s in snapshots if s["iteration"] == best["iteration"])
        policy = snapshot_policy(args.env, args.algo, trainer.agent, snap["agent"],
                                 snap["iteration"], {"train": {}, "algo": algo})  # fmt: skip
        frames = family_video(args.env)(policy, Path(args.video), args.seed)
        print(f"video: {args.video} ({frames} frames, iteration {snap['iteration']})", flush=True)
    trainer.close()
    with open(args.out, "a") as out:
        for row in rows:
            out.write(json.dumps({"env": args.env, "algo": args.algo, "label": args.label,
                                  "path": "jax", "settings": settings, **row}) + "\n")  # fmt: skip


def facade_runner(env_name: str, algo: str, train_set: dict, algo_set: dict) -> tuple:
    """``(runner, config)``: the facade's ``OffPolicyRunner`` (``sim_backend="mujoco"``: a
    collector process on C MuJoCo, the torch learner) at the core's cpu preset for ``env_name``
    and ``algo`` with ``train_set`` / ``algo_set`` over it, the learner built with the core's
    resolved values (value support included): every hyperparameter from the core's config
    (``build_learner``), never a facade class default (the reference's, which differ)."""
    import inspect

    from unilab.algos.torch.offpolicy import OffPolicyRunner
    from unilab.algos.torch.registry import TORCH_ALGOS, build_learner
    from unilab_jax.envs import load
    from unilab_jax.training.presets import preset_configs
    from unilab_jax.training.trainer import resolve_algo_config

    config, settings = preset_configs(
        env_name, algo, "cpu", train=train_set, algo_settings=algo_set
    )
    env = load(env_name, physics="mujoco")
    cfg = resolve_algo_config(algo, env, settings)
    accepted = set(inspect.signature(TORCH_ALGOS[algo].learner_cls).parameters)
    extra = {"num_envs": config.num_envs} if "num_envs" in accepted else {}
    if getattr(cfg, "use_symmetry", False):
        extra["mirror"] = env.mirror
    dims = env.obs_size["obs"], env.obs_size["critic"], env.action_size
    learner = build_learner(algo, cfg, *dims, **extra)
    runner = OffPolicyRunner(
        learner, env_name, algo, num_envs=config.num_envs,
        replay_buffer_n=config.replay_buffer_n, batch_size=config.batch_size,
        learning_starts=config.learning_starts, updates_per_step=config.updates_per_step,
        policy_frequency=config.resolved_policy_frequency, actor_hidden_dim=cfg.actor_hidden_dim,
        seed=config.seed, sim_backend="mujoco", env_cfg_override=config.env_overrides,
    )  # fmt: skip
    return runner, config


def torch_run(args: argparse.Namespace) -> None:
    """The same recipe through the facade's torch path (``OffPolicyRunner``,
    ``sim_backend="mujoco"``: a collector process on C MuJoCo, the torch learner; the
    reference's architecture) for ``--minutes``, saving ``model_<it>.pt`` every
    ``--snapshot-every`` iterations; afterwards every checkpoint is evaluated with
    ``walking_figures`` (wall-clock from the file's time) and written to ``--out``."""
    import tempfile
    from pathlib import Path

    import jax

    import unilab_jax
    from unilab_jax.training.interrupts import RunStopped

    train_set = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    algo_set = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.algo_set)}
    runner, config = facade_runner(args.env, args.algo, train_set, algo_set)
    warmup = -(-config.train_start_rows // config.num_envs)  # chunks before the 1st iteration
    log_dir = Path(tempfile.mkdtemp(prefix="torch_locomotion_"))
    timer = _budget(args.minutes)
    timer.start()
    try:
        runner.learn(10**7, save_interval=args.snapshot_every, log_dir=str(log_dir),
                     logger_type="no_print")  # fmt: skip
    except RunStopped as stop:
        print(f"stopped by the budget at iteration {stop.iteration}", flush=True)
    finally:
        timer.cancel()
        runner.close()
    rows = []
    for ckpt in sorted(log_dir.glob("model_*.pt"), key=lambda q: int(q.stem.split("_")[1])):
        policy = unilab_jax.load_policy(ckpt)
        act = jax.jit(policy.agent.act)
        fig = walking_figures(args.env, {"p": (act, policy.state)}, args.episodes, args.seed)
        it = int(ckpt.stem.split("_")[1])
        rows.append({"policy": "trained", "iteration": it,
                     "env_steps": (it + warmup) * config.num_envs,
                     "wall_sec": ckpt.stat().st_mtime - LAUNCHED, **fig["p"]})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "a") as out:
        for row in rows:
            out.write(json.dumps({"env": args.env, "algo": args.algo, "label": args.label,
                                  "path": "torch", **row}) + "\n")  # fmt: skip


#: Walking, from the task's own numbers (the issue's definition).
WALK_TIME_LIMIT, WALK_TRACKING = 0.95, 0.8


def report(args: argparse.Namespace) -> None:
    """Curves (``bench/figures/locomotion.png``) and a table from the rows ``train`` /
    ``torch`` wrote:
    per run, the first evaluation that walks (at least 95% of the episodes reach the time
    limit and the linear-velocity tracking per step is at least 0.8 of its maximum), its env
    steps and wall-clock from launch, the best and the last figures, and the baselines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [line for path in args.rows for line in Path(path).read_text().splitlines()]
    rows = [json.loads(line) for line in lines if line.strip()]
    runs: dict[tuple, list[dict]] = {}
    baselines: dict[str, dict] = {}
    for row in rows:
        if row["policy"] == "untrained":
            baselines[row["env"]] = row
            continue
        runs.setdefault((row["env"], row.get("path", "jax"), row["label"]), []).append(row)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    table = []
    for (env, path, label), points in sorted(runs.items()):
        points.sort(key=lambda r: r["env_steps"])
        name = f"{env} {path} ({label})"
        for col, x in enumerate(("env_steps", "wall_sec")):
            xs = [r[x] / (1e6 if col == 0 else 60) for r in points]
            axes[0, col].plot(xs, [r["tracking_share"] for r in points], marker="o", label=name)
            axes[1, col].plot(xs, [r["time_limit_rate"] for r in points], marker="o", label=name)
        walks = [r for r in points if r["time_limit_rate"] >= WALK_TIME_LIMIT
                 and r["tracking_share"] >= WALK_TRACKING]  # fmt: skip
        first = walks[0] if walks else None
        best = max(points, key=lambda r: r["tracking_share"] * r["time_limit_rate"])
        last = points[-1]
        base = baselines.get(env, {})
        table.append([
            env, path, label,
            (f"{first['env_steps']:,} / {first['wall_sec'] / 60:.1f} min" if first
             else "not reached"),
            f"{100 * best['time_limit_rate']:.0f}% / {best['tracking_share']:.2f} / "
            f"{best['lin_vel_error']:.2f} m/s (it {best['iteration']})",
            f"{100 * last['time_limit_rate']:.0f}% / {last['tracking_share']:.2f} / "
            f"{last['lin_vel_error']:.2f} m/s ({last['env_steps']:,} steps, "
            f"{last['wall_sec'] / 60:.1f} min)",
            f"{100 * base.get('time_limit_rate', float('nan')):.0f}% / "
            f"{base.get('tracking_share', float('nan')):.2f}; still "
            f"{base.get('still_tracking_share', float('nan')):.2f}",
        ])  # fmt: skip
    for ax, title in zip(axes.flat, ("tracking / max vs env steps (M)",
                                     "tracking / max vs wall-clock from launch (min)",
                                     "share reaching the time limit vs env steps (M)",
                                     "share reaching the time limit vs wall-clock (min)"),
                         strict=True):  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.axhline(WALK_TRACKING if "tracking" in title else WALK_TIME_LIMIT, color="grey",
                   linestyle="--", linewidth=0.8)  # fmt: skip
        ax.grid(alpha=0.3)
    for env, base in baselines.items():
        for col in (0, 1):
            axes[0, col].axhline(base["tracking_share"], color="black", linestyle=":",
                                 linewidth=0.8, label=f"{env} untrained (stands)")  # fmt: skip
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.png, dpi=90)
    text = markdown_table(
        ["task", "path", "recipe", "walks first (env steps / from launch)",
         "best: time limit / tracking / error", "last", "untrained: time limit / tracking"],
        table,
    )  # fmt: skip
    print(text)
    if not args.no_record:
        record_section(
            "locomotion-walk",
            "Robots walking on this CPU (bench/learning/locomotion.py train / torch / report)",
            text + f"\n\n![curves]({Path(args.png).name})",
            notes=[
                "Walking, from the task's own numbers: 64 deterministic 1000-step episodes on C "
                "MuJoCo with commands from the task's distribution (seed 1); at least 95% reach "
                "the time limit and the linear-velocity tracking reward per step is at least "
                "0.8 of its maximum. Error: mean |v_xy - cmd_xy| recovered from that reward. "
                "'still': what standing perfectly still would score against the same commands. "
                "Each point is an agent snapshot of the run evaluated after the run (the clock "
                "excludes the evaluations).",
            ],
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "what",
        nargs="?",
        choices=("speed", "walk", "train", "torch", "report"),
        default="speed",
    )
    parser.add_argument("--rows", nargs="*", default=["bench/results/locomotion.json"],
                        help="report: row files")  # fmt: skip
    parser.add_argument("--png", default="bench/figures/locomotion.png", help="report: the figure")
    parser.add_argument("--env", default="Go1JoystickFlat", help="train: the task")
    parser.add_argument("--algo", default="td3", help="train: the algorithm")
    parser.add_argument("--physics", default="mujoco", help="train: mjx or mujoco")
    parser.add_argument("--minutes", type=float, default=60.0, help="train: training budget")
    parser.add_argument("--snapshot-every", type=int, default=2000, help="train: iterations")
    parser.add_argument("--set", nargs="*", default=[], help="train: TrainConfig k=json")
    parser.add_argument("--algo-set", nargs="*", default=[], help="train: algo k=json")
    parser.add_argument("--label", default="", help="train: a name for the rows")
    parser.add_argument("--out", default="bench/results/locomotion.json", help="train: rows")
    parser.add_argument("--video", help="train: an mp4 of the best-walking snapshot")
    parser.add_argument("--log-dir", help="train: keep the run's TensorBoard files there")
    parser.add_argument("run", nargs="?", help="walk: a run's log dir")
    parser.add_argument("--episodes", type=int, default=64, help="walk: episodes (envs)")
    parser.add_argument("--seed", type=int, default=1, help="walk: seed of the episodes")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1024])
    parser.add_argument("--block", type=int, default=20, help="iterations per block")
    parser.add_argument("--blocks", type=int, default=4, help="blocks per run (first untimed)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    add_common_args(parser, repeats=1)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))), flush=True)
        return
    if args.what == "walk":
        walk(args)
        return
    if args.what == "train":
        train_run(args)
        return
    if args.what == "torch":
        torch_run(args)
        return
    if args.what == "report":
        report(args)
        return
    speed(args)


if __name__ == "__main__":
    main()
