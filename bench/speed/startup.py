"""Start-up: where the time from launch to the first training iteration and to the first
evaluations goes, ours next to Brax SAC's, cold and with a warm compilation cache.

Each measurement is a fresh interpreter (``subprocess``), so imports and JAX's start-up count.
Our child (the task at our CPU preset) times, in order, with ``time.perf_counter``: ``imports``
(``import unilab_jax.training.trainer``: jax, flax, optax, MuJoCo and MJX, orbax, rich); ``build``
(``Trainer(config)``: the env's MJCF and MJX model, the agent, the mesh); ``init``
(``init_state()``: parameters, env reset, replay, one compiled call); ``step compile`` (the
``log_interval``-iteration training step: what is left of its compile); ``first block``
(running it once); ``first eval`` (the first deterministic evaluation: what is left of its
compile, then the run); ``eval run`` (a second one, compiled). ``launch`` is the parent's
``Popen`` to the child's first line (interpreter start). Three orders, one row each: as
``train()`` runs (the step compiles in a background thread from ``MjxCollection.state_shapes()``
while init compiles and runs, then the evaluator compiles beside what is left of it); the
step compiled after init with the evaluator beside it (what ``train()`` did before it
compiled the step beside init); and everything in turn (the evaluator compiled at its first
call).

Brax's side is ``bench/learning/peers.py``'s Brax child (Playground's preset, prefill plus one
epoch of 64 iterations, the same number of eval envs, deterministic evaluation): from launch to its
step-0 evaluation and to its first evaluation after training began (which includes compiling
its training step). Both sides lower Cholesky the same way (``unilab_jax.envs.cpu_linalg``).

"cold": no persistent compilation cache; "warm": a child reusing the cache another one filled
(our default cache lives in ``~/.cache/unilab_jax/xla``; here a temporary folder).

    python -m bench.speed.startup                       # playground/CartpoleBalance, ours + Brax
    python -m bench.speed.startup --env CartpoleBalance --no-brax --no-record
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_T0 = time.perf_counter()

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_TAG = "STARTUP "


def _emit(payload: dict) -> None:
    print(_TAG + json.dumps(payload), flush=True)


def _child_ours(args: argparse.Namespace) -> None:
    marks = {"start": _T0}

    def mark(name: str) -> None:
        marks[name] = time.perf_counter()

    import jax

    from unilab_jax.training.presets import preset_configs
    from unilab_jax.training.trainer import Trainer

    mark("imports")
    config, algo = preset_configs(args.env, args.algo, "cpu", train={"eval_envs": args.eval_envs})
    trainer = Trainer(config, algo)
    mark("build")
    if args.order == "train":  # as train() does: the step compiles beside init
        trainer.precompile_step(config.log_interval)
    state = jax.block_until_ready(trainer.init_state())
    mark("init")
    if args.order != "serial":  # the evaluator compiles beside (what is left of) the step
        trainer.precompile_evaluator(state, config.eval_envs)
    step = trainer.step_fn(state, config.log_interval)
    mark("step compile")
    state, metrics = step(state)
    jax.block_until_ready(metrics)
    mark("first block")
    trainer.evaluate_episodes(state, config.eval_envs, config.seed + 1)
    mark("first eval")
    trainer.evaluate_episodes(state, config.eval_envs, config.seed + 2)
    mark("eval run")
    names = list(marks)
    _emit({names[i]: marks[names[i]] - marks[names[i - 1]] for i in range(1, len(names))})


PHASES = ["imports", "build", "init", "step compile", "first block", "first eval", "eval run"]
ORDERS = ("train", "after", "serial")


def run_ours(args: argparse.Namespace, cache: str | None, order: str = "train") -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["UNILAB_JAX_COMPILATION_CACHE"] = cache or "0"
    command = [sys.executable, "-m", "bench.speed.startup", "--child", "--env", args.env, "--algo",
               args.algo, "--eval-envs", str(args.eval_envs), "--order", order]  # fmt: skip
    launched = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout,
                          cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    total = time.perf_counter() - launched
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_TAG)]
    if proc.returncode or not lines:
        raise SystemExit(f"our child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(lines[-1][len(_TAG) :])
    out["launch"] = total - sum(out[p] for p in PHASES)
    return out


def run_brax(args: argparse.Namespace) -> dict:
    """Brax SAC through ``bench.learning.peers``'s child: prefill plus one 64-iteration epoch, two
    evaluations (at env step 0 and after the epoch)."""
    from bench import peers

    task = args.env.removeprefix("playground/")
    plan = peers.make_plan(task, None, 64)
    prefill, epoch = plan["prefill_iterations"], 64
    plan.update(epochs=1, epoch_iterations=epoch, iterations=prefill + epoch,
                num_timesteps=(prefill + epoch) * plan["num_envs"],
                eval_iterations=[0, prefill + epoch])  # fmt: skip
    plan["max_replay_size"] = plan["num_timesteps"]
    plan["preset"]["num_evals"] = 2
    # Every option of bench.learning.peers that its child command reads (our side's are unused
    # here).
    options = argparse.Namespace(eval_envs=args.eval_envs, hidden_dim=256, timeout=args.timeout,
                                 our_preset="cpu", brax_stochastic_eval=False, brax_lapack=False,
                                 brax_raw_unpmap=False)  # fmt: skip
    run, rows = peers.run_child(options, plan, "brax_sac", 0)
    if run["status"] != "ok" or len(rows) < 2:
        raise SystemExit(f"the Brax child failed: {run['status']}")
    launch = run["startup_sec"]
    return {
        "launch": launch,
        "to step-0 eval": launch + rows[0]["wall_sec"],
        "to first training eval": launch + rows[1]["wall_sec"],
        "first training eval env steps": rows[1]["env_steps"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed.startup", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--env", default="playground/CartpoleBalance")
    parser.add_argument("--algo", default="sac", choices=["sac", "td3"])
    parser.add_argument("--eval-envs", type=int, default=128)
    parser.add_argument("--brax", action=argparse.BooleanOptionalAction, default=True,
                        help="also time Brax SAC on the same Playground task")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--order", default="train", choices=ORDERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child_ours(args)
        return 0

    from bench.common import machine_info, markdown_table, record_section

    info = machine_info()
    runs = {"ours, cold, everything in turn (eval compiled at its first call)":
                run_ours(args, None, "serial"),
            "ours, cold, step after init, eval beside the step": run_ours(args, None, "after"),
            "ours, cold (as train() runs: step beside init, then eval beside the step)":
                run_ours(args, None)}  # fmt: skip
    with tempfile.TemporaryDirectory() as cache:
        run_ours(args, cache)  # fills the cache
        runs["ours, warm cache"] = run_ours(args, cache)
    rows = []
    for name, r in runs.items():
        first_it = r["launch"] + sum(r[p] for p in PHASES[:5])
        rows.append([name, f"{r['launch']:.1f}", *[f"{r[p]:.1f}" for p in PHASES],
                     f"{first_it:.1f}", f"{first_it + r['first eval']:.1f}"])  # fmt: skip
    brax = None
    if args.brax and args.env.startswith("playground/"):
        brax = run_brax(args)
        rows.append(["Brax SAC, cold", f"{brax['launch']:.1f}", *[""] * len(PHASES), "",
                     f"{brax['to first training eval']:.1f} (its step-0 eval at "
                     f"{brax['to step-0 eval']:.1f})"])  # fmt: skip
    headers = ["run", "launch s", *[f"{p} s" for p in PHASES], "to first iteration s",
               "to first eval after training began s"]  # fmt: skip
    body = markdown_table(headers, rows)
    print(json.dumps({**runs, "brax": brax}, indent=1))
    print(body)
    if not args.no_record:
        method = " ".join(__doc__.split("\n\n")[1].split())
        notes = [f"`{args.env}`, {args.algo.upper()} at our CPU preset "
                 "(`unilab_jax.training.presets`), "
                 f"{args.eval_envs} eval envs. {method}"]  # fmt: skip
        record_section("startup", "Start-up time (`bench/speed/startup.py`)", body, info=info,
                       notes=notes)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
