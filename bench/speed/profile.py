"""Where the fused training iteration spends its time: a profiler trace, HLO op counts, FLOPs.

For each size set and algorithm the script builds the trainer's own compiled step (the
``log_interval``-iteration program ``python -m unilab_jax.train`` runs: collection on MJX,
replay insert, the scanned updates), times it without the profiler, then runs one more call
under ``jax.profiler.trace`` and reads the trace back:

* **time by part**: every XLA operation the CPU runtime executed (a trace event with an
  ``hlo_op``) gets its *self* time (its duration minus the operations nested in it, as a
  ``while`` contains its body); each operation is attributed, through the ``op_name`` in the
  HLO module's metadata, to the innermost ``jax.named_scope`` the code gave it: MJX physics,
  the task's reward/observation, the reset draw, exploration, replay insert and sample, the
  normaliser update, the C51 projection, the per-row noise, the rest of the critic and actor
  updates, the target update, and the loop's glue (keys, statistics, metrics).
  Profiling adds a little time per operation, so the parts are shares of the traced call,
  and the timing columns come from the untraced calls;
* **the 10 most expensive operations** with their part and source line;
* **HLO op counts** of the optimised module by opcode (fusions, dots, loops, custom calls,
  gathers/scatters, sorts, random bits, collectives);
* **FLOPs**: XLA's cost analysis of the module. It counts a loop body once, so the script
  scales nothing and reports it as "per loop body"; the learner's own FLOP count and its
  ratio to a matmul measured in the same run are in ``bench/speed/learner.py``.

Size sets:

* ``brax``: Playground's Brax SAC sizes on ``playground/CartpoleBalance`` (our own
  ``CartpoleBalance`` without the adapters extra): 128 envs, batch 512, 8 updates per
  iteration, widths 256/256;
* ``reference``: the reference defaults on ``G1WalkFlat``: 4096 envs, batch 8192, 8 updates,
  SAC 512/768 and TD3 512/1024 (CPU: seconds per iteration).

    python -m bench.speed.profile                           # both size sets, SAC and TD3; records
    python -m bench.speed.profile --sizes brax --algos sac --no-record
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# Cold compiles, and executables whose metadata carries this code's scope names (a cached
# executable keeps the metadata of the code that first compiled it).
os.environ["UNILAB_JAX_COMPILATION_CACHE"] = "0"

import jax  # noqa: E402

from bench.common import (  # noqa: E402
    add_common_args,
    machine_info,
    markdown_table,
    record_section,
    time_repeated,
)
from unilab_jax.config import TrainConfig  # noqa: E402

#: Part of the program by the innermost of these ``jax.named_scope`` names in an operation's
#: ``op_name`` (the loop, ``Env.step``, C51 and the noise helper name their pieces).
PARTS = (
    ("physics", "MJX physics"),
    ("task", "task: reward, obs, termination"),
    ("reset", "reset draw (every step)"),
    ("env_step", "env step (adapter)"),
    ("explore", "policy + exploration"),
    ("replay_insert", "replay insert"),
    ("normalizers", "normaliser update"),
    ("replay_sample", "replay sample"),
    ("c51_projection", "C51 projection"),
    ("row_noise", "per-row keyed noise"),
    ("critic_update", "critic update (rest)"),
    ("actor_update", "actor update (rest)"),
    ("target_update", "target update"),
)
OTHER = "loop glue (keys, stats, metrics)"
#: Opcodes counted in the op-count table.
OPCODES = (
    "fusion",
    "dot",
    "convolution",
    "while",
    "conditional",
    "custom-call",
    "gather",
    "scatter",
    "sort",
    "rng-bit-generator",
    "all-reduce",
    "copy",
)


def size_sets(adapters: bool) -> dict[str, dict]:
    cartpole = "playground/CartpoleBalance" if adapters else "CartpoleBalance"
    widths_256 = {"actor_hidden_dim": 256, "critic_hidden_dim": 256}
    return {
        "brax": {
            "train": dict(
                env=cartpole,
                num_envs=128,
                replay_buffer_n=512,
                batch_size=512,
                updates_per_step=8,
                log_interval=4,
            ),
            "algo": {"sac": widths_256, "td3": widths_256},
        },
        "reference": {
            "train": dict(
                env="G1WalkFlat",
                num_envs=4096,
                replay_buffer_n=16,
                batch_size=8192,
                updates_per_step=8,
                log_interval=1,
            ),
            "algo": {"sac": {}, "td3": {}},
        },
    }


def _adapters_installed() -> bool:
    try:
        import mujoco_playground  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------- HLO
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([\w\-]+)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def hlo_index(text: str) -> dict[str, tuple[str, str]]:
    """``{instruction name: (opcode, op_name)}`` of an optimised HLO module's text."""
    index = {}
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m or line.lstrip().startswith(("HloModule", "ENTRY", "}")):
            continue
        name, opcode = m.groups()
        op_name = _OP_NAME.search(line)
        index[name] = (opcode, op_name.group(1) if op_name else "")
    return index


def part_of(op_name: str) -> str:
    """The part named by the innermost known scope of ``op_name``."""
    names = dict(PARTS)
    # A scope inside a transform reads "jvp(c51_projection)" or "vmap(physics)".
    for token in reversed(re.findall(r"\w+", op_name)):
        if token in names:
            return names[token]
    return OTHER


def op_counts(index: dict) -> dict[str, int]:
    counts = collections.Counter(opcode for opcode, _ in index.values())
    return {op: counts.get(op, 0) for op in OPCODES} | {"instructions": len(index)}


# ----------------------------------------------------------------------------- trace
def _exclusive(by_thread: dict) -> dict[str, float]:
    """Self time (us) per ``hlo_op``: an operation's duration minus the durations of the
    operations nested in it on the same thread (a ``while`` holds its body's operations)."""
    out: dict[str, float] = collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack: list[dict] = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) <= e["ts"]:
                stack.pop()
            dur = e.get("dur", 0.0)
            out[e["args"]["hlo_op"]] += dur
            if stack:  # nested: not the parent's own time
                out[stack[-1]["args"]["hlo_op"]] -= dur
            stack.append(e)
    return out


def traced_self_times(call) -> tuple[dict[str, float], float]:
    """Run ``call()`` once under the profiler; self time per HLO op and the call's seconds."""
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            start = time.perf_counter()
            jax.block_until_ready(call())
            seconds = time.perf_counter() - start
        path = glob.glob(f"{folder}/**/perfetto_trace.json.gz", recursive=True)[0]
        with gzip.open(path) as f:
            data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return _exclusive(_group(events)), seconds


def _group(events: list[dict]) -> dict:
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and (e.get("args") or {}).get("hlo_op"):
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    return by_thread


# ----------------------------------------------------------------------------- measure
def learning_step(algo: str, spec: dict, overrides: dict | None = None):
    """The size set's trainer (algorithm settings ``overrides`` over the set's), its compiled
    ``log_interval``-iteration step, the compile's seconds and ``call()``, which runs one
    block on the state threaded through and returns ``(state, metrics)``; the replay is
    filled past the learning threshold first, so that every later call learns."""
    from unilab_jax.training.trainer import Trainer

    config = TrainConfig(algo=algo, max_iterations=10**6, eval_envs=0, save_interval=0,
                         **spec["train"])  # fmt: skip
    trainer = Trainer(config, {**spec["algo"][algo], **(overrides or {})})
    holder = {"state": trainer.init_state()}
    start = time.perf_counter()
    step = trainer.step_fn(holder["state"], config.log_interval)
    compile_s = time.perf_counter() - start

    def call():
        holder["state"], metrics = step(holder["state"])
        return holder["state"], metrics

    while int(holder["state"].replay.filled) * config.num_envs < config.train_start_rows:
        jax.block_until_ready(call())
    return trainer, step, compile_s, call


def measure(size: str, algo: str, spec: dict, repeats: int) -> dict:
    trainer, step, compile_s, call = learning_step(algo, spec)
    config = trainer.config
    n = config.log_interval
    timing = time_repeated(call, repeats=repeats, warmup=1)
    times, traced_s = traced_self_times(call)
    index = hlo_index(step.as_text())
    by_part: dict[str, float] = collections.Counter()
    for op, us in times.items():
        by_part[part_of(index.get(op, ("", ""))[1])] += us
    total = sum(by_part.values()) or 1.0
    top = []
    for op, us in sorted(times.items(), key=lambda kv: -kv[1])[:10]:
        opcode, op_name = index.get(op, ("?", ""))
        where = "/".join(op_name.split("/")[-3:])
        top.append((op, opcode, part_of(op_name), 100 * us / total, where))
    cost = step.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    sec = timing["median"] / n
    rows_per_iter = config.num_envs * config.env_steps_per_sync
    return {
        "size": size,
        "algo": algo,
        "env": config.env,
        "num_envs": config.num_envs,
        "batch": config.batch_size,
        "updates": config.updates_per_step,
        "widths": "{actor_hidden_dim}/{critic_hidden_dim}".format(**vars(trainer.algo_config)),
        "compile_s": compile_s,
        "ms_per_iter": 1e3 * sec,
        "env_steps_per_s": rows_per_iter / sec,
        "updates_per_s": config.updates_per_step / sec,
        "spread": (timing["max"] - timing["min"]) / timing["median"],
        "traced_overhead": traced_s / timing["median"] - 1.0,
        "parts": {k: 100 * v / total for k, v in sorted(by_part.items(), key=lambda kv: -kv[1])},
        "top": top,
        "ops": op_counts(index),
        "gflop_body": float(cost.get("flops", 0.0)) / 1e9,
    }


def tables(results: list[dict]) -> str:
    out = []
    speed = [
        [r["size"], r["algo"].upper(), r["env"], r["num_envs"], r["batch"], r["updates"],
         r["widths"], f"{r['compile_s']:.1f}", f"{r['ms_per_iter']:.1f}",
         f"{r['env_steps_per_s']:,.0f}", f"{r['updates_per_s']:.1f}",
         f"{100 * r['traced_overhead']:+.0f}%"]
        for r in results
    ]  # fmt: skip
    headers = ["sizes", "algo", "env", "envs", "batch", "updates", "widths", "compile s",
               "ms / iteration", "env steps/s", "updates/s", "traced call vs untraced"]  # fmt: skip
    out.append(markdown_table(headers, speed))
    order = [label for _, label in PARTS] + [OTHER]
    parts = sorted({p for r in results for p in r["parts"]}, key=order.index)
    out.append("\nShare of the traced call's operation time, by part (%):\n")
    out.append(markdown_table(
        ["part", *[f"{r['size']} {r['algo'].upper()}" for r in results]],
        [[p, *[f"{r['parts'].get(p, 0.0):.1f}" for r in results]] for p in parts],
    ))  # fmt: skip
    out.append("\nHLO op counts of the optimised module:\n")
    keys = ["instructions", *OPCODES]
    out.append(markdown_table(
        ["sizes / algo", *keys, "GFLOP (loop bodies once)"],
        [[f"{r['size']} {r['algo'].upper()}", *[r["ops"][k] for k in keys],
          f"{r['gflop_body']:.2f}"] for r in results],
    ))  # fmt: skip
    for r in results:
        out.append(f"\nMost expensive operations, {r['size']} {r['algo'].upper()}:\n")
        out.append(markdown_table(
            ["HLO op", "opcode", "part", "% of op time", "op_name (last 3 scopes)"],
            [[op, code, part, f"{pct:.1f}", where] for op, code, part, pct, where in r["top"]],
        ))  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed.profile", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--sizes", nargs="+", default=["brax", "reference"], choices=["brax", "reference"]
    )
    parser.add_argument("--algos", nargs="+", default=["sac", "td3"], choices=["sac", "td3"])
    add_common_args(parser, repeats=3)
    args = parser.parse_args(argv)
    info = machine_info()
    sets = size_sets(_adapters_installed())
    results = []
    for size in args.sizes:
        for algo in args.algos:
            r = measure(size, algo, sets[size], args.repeats)
            print(json.dumps({k: v for k, v in r.items() if k != "top"}), flush=True)
            results.append(r)
    body = tables(results)
    print(body)
    if not args.no_record:
        notes = [
            "The trainer's compiled step (collection on MJX, replay insert, scanned updates; "
            "evaluation off) after the replay passed the learning threshold; timing: median of "
            "the untraced calls; shares: self time of every XLA operation in one call traced "
            "with `jax.profiler.trace`, attributed by the innermost `jax.named_scope` of its "
            "op_name.",
        ]
        record_section("profile", "Fused iteration profile (`bench/speed/profile.py`)", body,
                       info=info, notes=notes)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
