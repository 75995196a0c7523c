"""Environment speed: env steps/s per task on 1 and 2 devices, and the full training iteration.

1. Per registered task, ``--num-envs`` (default 1024) environments stepped by
   ``jax.jit(jax.vmap(env.step))`` (state donated, one call per control step), with zero and
   with uniformly random actions in [-1, 1]:

   * on 1 device: the plain jitted ``vmap``;
   * on 2 devices: the same body under ``jax.shard_map`` over a 1-D ``"data"`` mesh
     (``in_specs=P("data")``), in a subprocess started with
     ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` and a hard timeout, because on the
     CPU jaxlib 0.10.2 can deadlock there (see ``unilab_jax/cpu_linalg.py``). A timeout is
     reported as such, not as a number.

   Every measurement runs in its own subprocess (one per device count), so the parent never
   hangs and each child starts JAX with its own flags. ``--cpu-cholesky-fix`` installs
   ``unilab_jax.cpu_linalg`` in the children first.

2. The fused training iteration (env step + replay insert + normaliser + updates, all in the
   loop's one jitted step): env steps/s and ms per iteration of ``unilab_jax.trainer.train``
   on PendulumSwingup and CheetahRun with a CPU-sized configuration (``--train-*`` options),
   from the trainer's own history (``sec_per_iter``; the first logged block, which holds the
   iterations before learning starts, is left out).

    python -m bench.envs                 # everything, records bench/RESULTS.md
    python -m bench.envs --skip-train --devices 1 --no-record
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    REPO_ROOT,
    add_common_args,
    markdown_table,
    record_section,
    time_repeated,
)
from unilab_jax.config import with_host_devices  # noqa: E402

_RESULT_TAG = "BENCH_RESULT "


# ----------------------------------------------------------------------------- child side
def _env_worker(args: argparse.Namespace) -> int:
    """Child process: measure every task on ``args.worker_devices`` devices, print JSON."""
    if args.cpu_cholesky_fix:
        from unilab_jax import cpu_linalg as cpu_cholesky_fix

        cpu_cholesky_fix.install()

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
    local = args.num_envs // n_dev
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
        for mode, scale in (("zero", 0.0), ("random", 1.0)):
            holder = {"state": state}
            scale = jnp.float32(scale)

            def run_steps(holder=holder, scale=scale, compiled=compiled):
                s = holder["state"]
                for _ in range(args.steps):
                    s = compiled(s, scale)
                holder["state"] = s
                return s

            timing = time_repeated(run_steps, repeats=args.repeats, warmup=1)
            state = holder["state"]
            finite = bool(jnp.all(jnp.isfinite(state.obs["obs"])))
            sec = timing["median"]
            out = {
                "task": name,
                "devices": n_dev,
                "actions": mode,
                "num_envs": local * n_dev,
                "compile_s": compile_s,
                "ms_per_step": 1e3 * sec / args.steps,
                "ms_min": 1e3 * timing["min"] / args.steps,
                "steps_per_s": args.steps * local * n_dev / sec,
                "spread": (timing["max"] - timing["min"]) / sec,
                "finite": finite,
            }
            print(_RESULT_TAG + json.dumps(out), flush=True)
    return 0


# ----------------------------------------------------------------------------- parent side
def _run_child(args: argparse.Namespace, devices: int) -> tuple[list[dict], dict | None, str]:
    """Run ``_env_worker`` in a subprocess; returns (rows, machine info, status)."""
    env = dict(os.environ)
    flags = with_host_devices(env.get("XLA_FLAGS", ""), devices)
    if flags:
        env["XLA_FLAGS"] = flags
    cmd = [
        sys.executable,
        "-m",
        "bench.envs",
        "--worker-devices",
        str(devices),
        "--num-envs",
        str(args.num_envs),
        "--steps",
        str(args.steps),
        "--repeats",
        str(args.repeats),
        "--tasks",
        *args.tasks,
    ]
    if args.cpu_cholesky_fix:
        cmd.append("--cpu-cholesky-fix")
    rows: list[dict] = []
    info = None
    status = "ok"
    print(f"... {devices} device(s): {' '.join(cmd[1:])} (timeout {args.timeout}s)", flush=True)
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
        f"{r['task']} {r['devices']} dev {r['actions']}: {r['steps_per_s']:.0f} steps/s, "
        f"{r['ms_per_step']:.2f} ms/step, compile {r['compile_s']:.1f}s"
    )


def _train_measure(args: argparse.Namespace, name: str, algo: str) -> dict:
    from unilab_jax.config import TrainConfig
    from unilab_jax.trainer import train

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=1024, help="envs per measurement")
    parser.add_argument("--steps", type=int, default=10, help="control steps per timed call")
    parser.add_argument("--tasks", nargs="+", default=None, help="tasks (default: all)")
    parser.add_argument("--devices", default="1,2", help="device counts to measure, e.g. 1,2")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per subprocess")
    parser.add_argument(
        "--cpu-cholesky-fix",
        action="store_true",
        help="install bench.cpu_cholesky_fix in the env measurements (LAPACK-free Cholesky)",
    )
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
    add_common_args(parser, repeats=3)
    args = parser.parse_args(argv)

    if args.tasks is None:
        from unilab_jax.envs import registered_names

        args.tasks = registered_names()
    if args.worker_devices:
        return _env_worker(args)

    from bench.common import machine_info, machine_lines

    info = machine_info()
    print("\n".join(machine_lines(info)), flush=True)
    sections = []

    if not args.skip_envs:
        rows: list[dict] = []
        statuses = {}
        for devices in (int(d) for d in args.devices.split(",")):
            got, _, status = _run_child(args, devices)
            rows += got
            statuses[devices] = status
            if status != "ok":
                print(f"    {devices} device(s): {status}", flush=True)
        headers = [
            "task",
            "devices",
            "envs",
            "actions",
            "env steps/s",
            "ms / step (min)",
            "compile s",
        ]
        table_rows = [
            [
                r["task"],
                r["devices"],
                r["num_envs"],
                r["actions"],
                f"{r['steps_per_s']:,.0f}",
                f"{r['ms_per_step']:.2f} ({r['ms_min']:.2f})",
                f"{r['compile_s']:.1f}",
            ]
            for r in rows
        ]
        for devices, status in statuses.items():
            done = {r["task"] for r in rows if r["devices"] == devices}
            table_rows += [
                [t, devices, args.num_envs, "-", status, "-", "-"]
                for t in args.tasks
                if t not in done
            ]
        table = markdown_table(headers, table_rows)
        print()
        print(table, flush=True)
        fix = (
            "with `unilab_jax.cpu_linalg` installed"
            if args.cpu_cholesky_fix
            else ("jax's own (LAPACK) CPU lowerings")
        )
        notes = [
            f"`jax.jit(jax.vmap(env.step))` (state donated), one call per control step, "
            f"{args.steps} steps per timed call, median of {args.repeats} calls after one "
            f"warm-up; zero actions, or uniform random actions in [-1, 1]. 2 devices: the same "
            f"body under `jax.shard_map` over a 1-D `data` mesh of 2 forced host devices "
            f"(`XLA_FLAGS=--xla_force_host_platform_device_count=2`; on this 2-core CPU both "
            f"devices share the same cores). Linear algebra: {fix}. Each device count runs in "
            f"its own subprocess with a {args.timeout}s timeout.",
        ]
        spread = max((r["spread"] for r in rows), default=0.0)
        if spread > 0.1:
            notes.append(f"Largest (max - min) / median over the repeats: {spread:.0%}.")
        name = "envs-fix" if args.cpu_cholesky_fix else "envs"
        title = "Env steps/s (`bench/envs.py`)" + (
            ", LAPACK-free Cholesky" if args.cpu_cholesky_fix else ""
        )
        sections.append((name, title, table, notes))

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
            f"`unilab_jax.trainer.train` (1 device) with a CPU-sized configuration: "
            f"{args.train_envs} envs, batch {args.train_batch}, {args.train_updates} updates "
            f"per iteration, replay_buffer_n {args.train_replay_n}, actor/critic widths "
            f"{args.train_actor}/{args.train_critic}, {args.train_iterations} iterations logged "
            f"every {args.train_log_interval}; one iteration = 1 env step of every env + replay "
            f"insert + normaliser update + the updates, fused in the loop's jitted step. "
            f"Figures: median of the trainer's `sec_per_iter` over the logged blocks after the "
            f"first (which includes the iterations before learning starts). 'run wall s' "
            f"includes compilation.",
        ]
        sections.append(("train", "Fused training iteration (`bench/envs.py`)", table, notes))

    if not args.no_record:
        for name, title, table, notes in sections:
            record_section(name, title, table, info=info, notes=notes)
        print("\nrecorded in bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
