"""Environment speed: env steps/s per task on 1 and 2 devices, and the full training iteration.

1. Per task and per ``--num-envs`` (default 1024; several sizes allowed), environments stepped
   by ``jax.jit(jax.vmap(env.step))`` (state donated, one call per control step), with zero
   and/or uniformly random actions in [-1, 1] (``--actions``):

   * on 1 device: the plain jitted ``vmap``;
   * on 2 devices: the same body under ``jax.shard_map`` over a 1-D ``"data"`` mesh
     (``in_specs=P("data")``), in a subprocess started with
     ``XLA_FLAGS=--xla_force_host_platform_device_count=2``;
   * ``--mujoco-threads N`` (optional): the same tasks on ``sim_backend="mujoco"``
     (``unilab_jax.envs.make``: C MuJoCo on N threads, the task's observation / reward code
     jitted on the CPU device), stepped through the numpy ``VecEnv.step``.

   Every measurement runs in its own subprocess (one per backend, device count and size) with
   a hard timeout, so the parent never hangs and each child starts JAX with its own flags; a
   timeout is reported as such, not as a number. MJX envs on the CPU lower Cholesky as the
   library does (``unilab_jax/envs/cpu_linalg.py``: jax's LAPACK kernels on 1 device, the
   LAPACK-free lowering with 2).

2. The fused training iteration (env step + replay insert + normaliser + updates, all in the
   loop's one jitted step): env steps/s and ms per iteration of
   ``unilab_jax.training.trainer.train``
   on PendulumSwingup and CheetahRun with a CPU-sized configuration (``--train-*`` options),
   from the trainer's own history (``sec_per_iter``; the first logged block, which holds the
   iterations before learning starts, is left out).

    python -m bench.speed.envs                 # everything, records bench/RESULTS.md
    python -m bench.speed.envs --skip-train --devices 1 --no-record
    python -m bench.speed.envs --robots        # the robot tasks at 1024 and 4096 envs (section
                                         # "robots"): mjx on 1 and 2 devices, mujoco on 2 threads
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    REPO_ROOT,
    add_common_args,
    markdown_table,
    record_section,
    time_repeated,
)
from unilab_jax.distributed.processes import with_host_devices  # noqa: E402

_RESULT_TAG = "BENCH_RESULT "


# ----------------------------------------------------------------------------- child side
def _env_worker(args: argparse.Namespace) -> int:
    """Child process: measure every task on ``args.worker_devices`` devices, print JSON."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh
    from jax.sharding import PartitionSpec as P

    from bench.common import machine_info
    from unilab_jax.envs import load

    n_dev = args.worker_devices
    if len(jax.devices()) < n_dev:
        raise SystemExit(f"need {n_dev} devices, JAX sees {jax.devices()}")
    mesh = Mesh(np.array(jax.devices()[:n_dev]), ("data",), axis_types=(AxisType.Auto,))
    num_envs = args.num_envs[0]
    local = num_envs // n_dev
    print(_RESULT_TAG + json.dumps({"info": machine_info()}), flush=True)

    for name in args.tasks:
        env = load(name)

        def reset(key, env=env):
            key = jax.random.fold_in(key, jax.lax.axis_index("data"))
            return jax.vmap(env.reset)(jax.random.split(key, local))

        def step(state, scale, env=env):
            def one(s):
                # Per-env random actions from a key derived from the env's own key (which the
                # step splits every call); scale 0 gives exactly zero actions.
                u = jax.random.uniform(
                    jax.random.fold_in(s.key, 1), (env.action_size,), minval=-1.0, maxval=1.0
                )
                return env.step(s, scale * u)

            return jax.vmap(one)(state)

        if n_dev == 1:
            reset_fn = jax.jit(
                lambda key, env=env: jax.vmap(env.reset)(jax.random.split(key, local))
            )
            step_fn = jax.jit(step, donate_argnums=0)
        else:
            reset_fn = jax.jit(
                jax.shard_map(reset, mesh=mesh, in_specs=P(), out_specs=P("data"), check_vma=False)
            )
            step_fn = jax.jit(
                jax.shard_map(
                    step,
                    mesh=mesh,
                    in_specs=(P("data"), P()),
                    out_specs=P("data"),
                    check_vma=False,
                ),
                donate_argnums=0,
            )
        state = jax.block_until_ready(reset_fn(jax.random.PRNGKey(0)))
        scale0 = jnp.float32(0.0)
        start = time.perf_counter()
        compiled = step_fn.lower(state, scale0).compile()
        compile_s = time.perf_counter() - start
        for mode in args.actions:
            holder = {"state": state}
            scale = jnp.float32(1.0 if mode == "random" else 0.0)

            def run_steps(holder=holder, scale=scale, compiled=compiled):
                s = holder["state"]
                for _ in range(args.steps):
                    s = compiled(s, scale)
                holder["state"] = s
                return s

            timing = time_repeated(run_steps, repeats=args.repeats, warmup=1)
            state = holder["state"]
            finite = bool(jnp.all(jnp.isfinite(state.obs["obs"])))
            _print_row(args, name, f"mjx, {n_dev} dev", mode, local * n_dev, compile_s, timing)
            if not finite:
                print(f"    {name}: non-finite observations after the timed steps", flush=True)
    return 0


def _mujoco_worker(args: argparse.Namespace) -> int:
    """Child process: the tasks on ``sim_backend="mujoco"`` with ``args.worker_mujoco``
    threads, stepped through the numpy ``VecEnv.step``; prints JSON rows."""
    import numpy as np

    from bench.common import machine_info
    from unilab_jax.envs import make

    threads = args.worker_mujoco
    num_envs = args.num_envs[0]
    print(_RESULT_TAG + json.dumps({"info": machine_info()}), flush=True)
    for name in args.tasks:
        start = time.perf_counter()
        env = make(name, num_envs, "mujoco", nthread=threads)
        env.init_state()
        rng = np.random.default_rng(0)
        shape = (num_envs, *env.action_space.shape)
        env.step(np.zeros(shape, np.float32))  # compiles the task's jitted obs / reward code
        compile_s = time.perf_counter() - start
        for mode in args.actions:

            def run_steps(env=env, mode=mode, rng=rng, shape=shape):
                for _ in range(args.steps):
                    if mode == "random":
                        actions = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
                    else:
                        actions = np.zeros(shape, np.float32)
                    env.step(actions)

            timing = time_repeated(run_steps, repeats=args.repeats, warmup=1)
            _print_row(args, name, f"mujoco, {threads} threads", mode, num_envs, compile_s, timing)
        env.close()
    return 0


def _print_row(args, name, backend, mode, num_envs, compile_s, timing) -> None:
    sec = timing["median"]
    out = {
        "task": name,
        "backend": backend,
        "actions": mode,
        "num_envs": num_envs,
        "compile_s": compile_s,
        "ms_per_step": 1e3 * sec / args.steps,
        "ms_min": 1e3 * timing["min"] / args.steps,
        "steps_per_s": args.steps * num_envs / sec,
        "spread": (timing["max"] - timing["min"]) / sec,
    }
    print(_RESULT_TAG + json.dumps(out), flush=True)


# ----------------------------------------------------------------------------- parent side
def _run_child(
    args: argparse.Namespace, num_envs: int, devices: int = 1, mujoco_threads: int = 0
) -> tuple[list[dict], dict | None, str]:
    """Run ``_env_worker`` (MJX on ``devices``) or ``_mujoco_worker`` (C MuJoCo on
    ``mujoco_threads``) for ``num_envs`` envs in a subprocess; returns (rows, info, status)."""
    env = dict(os.environ)
    flags = with_host_devices(env.get("XLA_FLAGS", ""), devices)
    if flags:
        env["XLA_FLAGS"] = flags
    cmd = [
        sys.executable,
        "-m",
        "bench.speed.envs",
        *(
            ("--worker-mujoco", str(mujoco_threads))
            if mujoco_threads
            else ("--worker-devices", str(devices))
        ),
        "--num-envs",
        str(num_envs),
        "--steps",
        str(args.steps),
        "--repeats",
        str(args.repeats),
        "--actions",
        *args.actions,
        "--tasks",
        *args.tasks,
    ]
    rows: list[dict] = []
    info = None
    status = "ok"
    print(f"... {' '.join(cmd[1:])} (timeout {args.timeout}s)", flush=True)
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the child's own session: only what we started
        out, _ = proc.communicate()
        status = f"timeout after {args.timeout}s"
    for line in out.splitlines():
        if line.startswith(_RESULT_TAG):
            payload = json.loads(line[len(_RESULT_TAG) :])
            if "info" in payload:
                info = payload["info"]
            else:
                rows.append(payload)
                print(f"    {_fmt_env_row(payload)}", flush=True)
    if status == "ok" and proc.returncode != 0:
        status = f"failed (exit {proc.returncode})"
        tail = "\n".join(out.splitlines()[-15:])
        print(tail, flush=True)
    return rows, info, status


def _fmt_env_row(r: dict) -> str:
    return (
        f"{r['task']} {r['num_envs']} envs {r['backend']} {r['actions']}: "
        f"{r['steps_per_s']:.0f} steps/s, {r['ms_per_step']:.2f} ms/step, "
        f"compile {r['compile_s']:.1f}s"
    )


def _train_measure(args: argparse.Namespace, name: str, algo: str) -> dict:
    from unilab_jax.config import TrainConfig
    from unilab_jax.training.trainer import train

    config = TrainConfig(
        env=name,
        algo=algo,
        num_envs=args.train_envs,
        batch_size=args.train_batch,
        updates_per_step=args.train_updates,
        replay_buffer_n=args.train_replay_n,
        max_iterations=args.train_iterations,
        log_interval=args.train_log_interval,
        save_interval=0,
        eval_envs=0,
    )
    widths = {"actor_hidden_dim": args.train_actor, "critic_hidden_dim": args.train_critic}
    start = time.perf_counter()
    result = train(config, widths, quiet=True)
    wall = time.perf_counter() - start
    blocks = [h["sec_per_iter"] for h in result.history[1:]] or [
        h["sec_per_iter"] for h in result.history
    ]
    sec = statistics.median(blocks)
    return {
        "task": name,
        "algo": algo,
        "sec_per_iter": sec,
        "sec_min": min(blocks),
        "steps_per_s": config.num_envs * config.env_steps_per_sync / sec,
        "updates_per_s": config.updates_per_step / sec,
        "compile_s": result.summary["compile_time_sec"],
        "wall_s": wall,
        "spread": (max(blocks) - min(blocks)) / sec,
    }


ROBOT_ENV_COUNTS = (1024, 4096)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--num-envs", type=int, nargs="+", default=None, help="env counts (default 1024)"
    )
    parser.add_argument("--steps", type=int, default=10, help="control steps per timed call")
    parser.add_argument("--tasks", nargs="+", default=None, help="tasks (default: all)")
    parser.add_argument("--devices", default="1,2", help="MJX device counts, e.g. 1,2 ('' none)")
    parser.add_argument(
        "--mujoco-threads",
        type=int,
        default=0,
        help="also measure sim_backend='mujoco' on this many C MuJoCo threads (0: skip)",
    )
    parser.add_argument(
        "--actions",
        nargs="+",
        choices=("zero", "random"),
        default=["zero", "random"],
        help="action modes to time",
    )
    parser.add_argument(
        "--robots",
        action="store_true",
        help="the robot tasks at 1024 and 4096 envs, random actions, mjx on 1 and 2 devices "
        "and mujoco on 2 threads, 3 steps x 2 repeats, no training part; recorded as the "
        "'robots' section",
    )
    parser.add_argument("--timeout", type=int, default=240, help="seconds per subprocess")
    parser.add_argument("--skip-envs", action="store_true", help="only the training part")
    parser.add_argument("--skip-train", action="store_true", help="only the env-step part")
    parser.add_argument("--train-tasks", nargs="+", default=["PendulumSwingup", "CheetahRun"])
    parser.add_argument("--train-algos", nargs="+", default=["sac", "td3"])
    parser.add_argument("--train-envs", type=int, default=256)
    parser.add_argument("--train-batch", type=int, default=1024)
    parser.add_argument("--train-updates", type=int, default=2)
    parser.add_argument("--train-replay-n", type=int, default=64)
    parser.add_argument("--train-actor", type=int, default=128, help="actor hidden width")
    parser.add_argument("--train-critic", type=int, default=256, help="critic hidden width")
    parser.add_argument("--train-iterations", type=int, default=120)
    parser.add_argument("--train-log-interval", type=int, default=20)
    parser.add_argument("--worker-devices", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--worker-mujoco", type=int, default=0, help=argparse.SUPPRESS)
    add_common_args(parser, repeats=3)
    args = parser.parse_args(argv)

    if args.robots:  # its own defaults; options given on the command line still win
        from unilab_jax.envs.robots import ROBOT_TASKS

        parser.set_defaults(
            tasks=list(ROBOT_TASKS),
            num_envs=list(ROBOT_ENV_COUNTS),
            actions=["random"],
            mujoco_threads=2,
            skip_train=True,
            steps=3,
            repeats=2,
            timeout=900,
        )
        args = parser.parse_args(argv)
    args.num_envs = args.num_envs or [1024]
    if args.tasks is None:
        from unilab_jax.envs import registered_names
        from unilab_jax.envs.robots import ROBOT_TASKS

        args.tasks = [t for t in registered_names() if t not in ROBOT_TASKS]
    if args.worker_devices:
        return _env_worker(args)
    if args.worker_mujoco:
        return _mujoco_worker(args)

    from bench.common import machine_info, machine_lines

    info = machine_info()
    print("\n".join(machine_lines(info)), flush=True)
    sections = []

    if not args.skip_envs:
        rows: list[dict] = []
        failed: list[tuple[str, int, str, str]] = []
        runs = [(n, int(d), 0) for n in args.num_envs for d in args.devices.split(",") if d]
        if args.mujoco_threads:
            runs += [(n, 1, args.mujoco_threads) for n in args.num_envs]
        for num_envs, devices, threads in runs:
            got, _, status = _run_child(args, num_envs, devices, threads)
            rows += got
            if status != "ok":
                backend = f"mujoco, {threads} threads" if threads else f"mjx, {devices} dev"
                print(f"    {num_envs} envs {backend}: {status}", flush=True)
                done = {r["task"] for r in got}
                failed += [(t, num_envs, backend, status) for t in args.tasks if t not in done]
        headers = [
            "task",
            "envs",
            "backend",
            "actions",
            "env steps/s",
            "ms / step (min)",
            "compile s",
        ]
        rows.sort(key=lambda r: (r["task"], r["num_envs"], r["backend"], r["actions"]))
        table_rows = [
            [
                r["task"],
                r["num_envs"],
                r["backend"],
                r["actions"],
                f"{r['steps_per_s']:,.0f}",
                f"{r['ms_per_step']:.2f} ({r['ms_min']:.2f})",
                f"{r['compile_s']:.1f}",
            ]
            for r in rows
        ]
        table_rows += [[t, n, b, "-", st, "-", "-"] for t, n, b, st in failed]
        table = markdown_table(headers, table_rows)
        print()
        print(table, flush=True)
        notes = [
            f"MJX: `jax.jit(jax.vmap(env.step))` (state donated), one call per control step, "
            f"{args.steps} steps per timed call, median of {args.repeats} calls after one "
            f"warm-up; actions: {' and '.join(args.actions)} (random: uniform in [-1, 1]). "
            f"2 devices: the same body under `jax.shard_map` over a 1-D `data` mesh of 2 forced "
            f"host devices (`XLA_FLAGS=--xla_force_host_platform_device_count=2`; on this CPU "
            f"both devices share the same cores). Linear algebra as in the library "
            f"(`unilab_jax/envs/cpu_linalg.py`): LAPACK on 1 device, the LAPACK-free Cholesky on "
            f"2. "
            f"Each "
            f"backend, device count and size runs in its own subprocess with a "
            f"{args.timeout}s timeout.",
        ]
        if args.mujoco_threads:
            notes.append(
                f"mujoco: `unilab_jax.envs.make(task, n, 'mujoco', nthread="
                f"{args.mujoco_threads})`, C MuJoCo (float64) on {args.mujoco_threads} threads "
                f"plus the task's jitted observation / reward code on the CPU device, stepped "
                f"through the numpy `VecEnv.step` (numpy actions in, numpy observations out); "
                f"'compile s' is building the env plus its first step."
            )
        spread = max((r["spread"] for r in rows), default=0.0)
        if spread > 0.1:
            notes.append(f"Largest (max - min) / median over the repeats: {spread:.0%}.")
        if args.robots:
            sections.append(
                (
                    "robots",
                    "Robot tasks: env steps/s (`bench/speed/envs.py --robots`)",
                    table,
                    notes,
                )
            )
        else:
            sections.append(("envs", "Env steps/s (`bench/speed/envs.py`)", table, notes))

    if not args.skip_train:
        results = []
        for task in args.train_tasks:
            for algo in args.train_algos:
                print(f"... train {algo} {task}", flush=True)
                r = _train_measure(args, task, algo)
                results.append(r)
                print(
                    f"    {r['steps_per_s']:.0f} env steps/s, {1e3 * r['sec_per_iter']:.1f} "
                    f"ms/iteration, compile {r['compile_s']:.1f}s",
                    flush=True,
                )
        headers = [
            "task",
            "algo",
            "env steps/s",
            "ms / iteration (min)",
            "grad updates/s",
            "compile s",
            "run wall s",
        ]
        table = markdown_table(
            headers,
            [
                [
                    r["task"],
                    r["algo"].upper(),
                    f"{r['steps_per_s']:,.0f}",
                    f"{1e3 * r['sec_per_iter']:.1f} ({1e3 * r['sec_min']:.1f})",
                    f"{r['updates_per_s']:.1f}",
                    f"{r['compile_s']:.1f}",
                    f"{r['wall_s']:.0f}",
                ]
                for r in results
            ],
        )
        print()
        print(table, flush=True)
        notes = [
            f"`unilab_jax.training.trainer.train` (1 device) with a CPU-sized configuration: "
            f"{args.train_envs} envs, batch {args.train_batch}, {args.train_updates} updates "
            f"per iteration, replay_buffer_n {args.train_replay_n}, actor/critic widths "
            f"{args.train_actor}/{args.train_critic}, {args.train_iterations} iterations logged "
            f"every {args.train_log_interval}; one iteration = 1 env step of every env + replay "
            f"insert + normaliser update + the updates, fused in the loop's jitted step. "
            f"Figures: median of the trainer's `sec_per_iter` over the logged blocks after the "
            f"first (which includes the iterations before learning starts). 'run wall s' "
            f"includes compilation.",
        ]
        sections.append(("train", "Fused training iteration (`bench/speed/envs.py`)", table, notes))

    if not args.no_record:
        for name, title, table, notes in sections:
            record_section(name, title, table, info=info, notes=notes)
        print("\nrecorded in bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
