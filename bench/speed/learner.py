"""Learner speed: gradient updates/s of the exact update block the fused loop runs.

One learner iteration of ``unilab_jax.collection.step`` is one ``replay_sample`` gather of
``batch_size * updates_per_step`` rows from the replay ring, then a ``lax.scan`` over the
updates: critic (and SAC temperature) every update, actor when ``u % policy_frequency == 0``,
Polyak target every update. This script runs that block, built by the loop's own
``_make_update_block``, under a 1-device ``shard_map`` (as the loop does), on a filled
``ReplayState`` of random transitions, and reports:

* compile time of the block (cold; no persistent cache);
* ms per learner iteration and learner iterations/s (median of ``--repeats`` calls after one
  warm-up call, agent state threaded through and donated as in the loop);
* gradient updates/s = critic updates/s = ``updates_per_step`` x iterations/s;
* the time of the gather alone (jitted ``replay_sample`` of the same rows);
* the FLOPs of one learner iteration and the rate achieved, against a large square float32
  matmul (``--matmul-size``, default 4096) and a matmul of the widest layer's shape (batch x
  critic width x critic width), each timed right after that row's block in the same run.

FLOPs: XLA's cost analysis counts a ``scan`` body once, so the block's own count is one
update's. The script instead compiles ``update_critic``, ``update_actor`` and
``update_target`` one by one (the same functions the block scans, on one batch, under the
same ``shard_map``) and counts an iteration as ``updates x (critic + target) + ceil(updates /
pf) x actor``. The gather does no arithmetic.

Defaults are the reference's: batch 8192, 8 updates per iteration, SAC with policy_frequency 4
and ``SACConfig`` defaults (actor 512, critic 768, 101 atoms), TD3 with policy_frequency 2 and
``TD3Config`` defaults (actor 512, critic 1024, 101 atoms); observation sizes of G1WalkFlat
(obs 98, critic 101, action 29) and CheetahRun (17 / 19 / 6).

    python -m bench.speed.learner                       # all four, records bench/RESULTS.md
    python -m bench.speed.learner --algo sac --task cheetah --batch-size 1024 --no-record
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from bench.common import (  # noqa: E402
    add_common_args,
    machine_info,
    machine_lines,
    markdown_table,
    record_section,
    time_repeated,
)
from unilab_jax.algos.agent import Transition  # noqa: E402
from unilab_jax.algos.flash_sac import make_flash_sac  # noqa: E402
from unilab_jax.algos.hyperparams import FlashSACConfig  # noqa: E402
from unilab_jax.algos.sac import SACConfig, make_sac  # noqa: E402
from unilab_jax.algos.td3 import TD3Config, make_td3  # noqa: E402
from unilab_jax.collection.replay import ReplayState, replay_sample  # noqa: E402
from unilab_jax.collection.step import DATA_AXIS, _make_update_block, make_mesh  # noqa: E402
from unilab_jax.config import TrainConfig  # noqa: E402

#: (obs, critic obs, action) sizes of the tasks measured.
TASK_DIMS = {
    "g1": ("G1WalkFlat", 98, 101, 29),
    "cheetah": ("CheetahRun", 17, 19, 6),
    "go2": ("Go2JoystickFlat", 49, 52, 12),
}
ALGOS = {
    "sac": (SACConfig, make_sac),
    "td3": (TD3Config, make_td3),
    "flash_sac": (FlashSACConfig, make_flash_sac),
}


def random_replay(key, num_envs: int, n_slots: int, obs: int, critic: int, act: int):
    """A full ``ReplayState`` (``[num_envs, n_slots, ...]`` leaves) of random transitions."""
    ks = jax.random.split(key, 6)
    shape = (num_envs, n_slots)
    data = Transition(
        obs=jax.random.normal(ks[0], (*shape, obs)),
        critic=jax.random.normal(ks[1], (*shape, critic)),
        actions=jax.random.uniform(ks[2], (*shape, act), minval=-1.0, maxval=1.0),
        rewards=jax.random.normal(ks[3], shape),
        next_obs=jax.random.normal(ks[4], (*shape, obs)),
        next_critic=jax.random.normal(ks[5], (*shape, critic)),
        terminated=(jax.random.uniform(ks[0], shape) < 0.01).astype(jnp.float32),
        truncated=(jax.random.uniform(ks[1], shape) < 0.001).astype(jnp.float32),
    )
    return ReplayState(data=data, insert_slot=jnp.int32(0), filled=jnp.int32(n_slots))


def measure(
    algo: str,
    task: str,
    batch_size: int,
    updates: int,
    buffer_envs: int,
    buffer_slots: int,
    repeats: int,
    matmul_size: int = 4096,
    widths: tuple[int, int] | None = None,
    settings: dict | None = None,
) -> dict:
    """Compile and time the update block for one algorithm and one set of sizes (``widths``:
    actor and critic hidden widths, else the algorithm's defaults; ``settings``: more fields of
    the algorithm's config)."""
    name, obs, critic, act = TASK_DIMS[task]
    cfg_cls, make = ALGOS[algo]
    sizes = {} if widths is None else dict(actor_hidden_dim=widths[0], critic_hidden_dim=widths[1])
    algo_config = cfg_cls(**sizes, **(settings or {}))
    algo_config.validate()
    agent = make(algo_config, obs, critic, act, axis_name=DATA_AXIS)
    config = TrainConfig(
        env=name,
        algo=algo,
        num_envs=buffer_envs,
        replay_buffer_n=buffer_slots,
        batch_size=batch_size,
        updates_per_step=updates,
        num_devices=1,
    )
    config.validate()
    mesh = make_mesh(1)
    replay_spec = ReplayState(data=P(DATA_AXIS), insert_slot=P(), filled=P())

    replay = jax.jit(random_replay, static_argnums=(1, 2, 3, 4, 5))(
        jax.random.PRNGKey(1), buffer_envs, buffer_slots, obs, critic, act
    )

    def init(key, replay):
        state = agent.init(key)
        # Realistic normaliser statistics (the loop updates them every iteration).
        rows = replay.data.obs[:, :8].reshape(-1, obs)
        crows = replay.data.critic[:, :8].reshape(-1, critic)
        return agent.update_normalizers(state, rows, crows)

    init_fn = jax.jit(
        jax.shard_map(init, mesh=mesh, in_specs=(P(), replay_spec), out_specs=P(), check_vma=False)
    )
    agent_state = jax.block_until_ready(init_fn(jax.random.PRNGKey(0), replay))

    def block(agent_state, replay, key):
        example = SimpleNamespace(agent=agent_state, replay=replay)
        update_block, _ = _make_update_block(config, agent, example)
        return update_block(agent_state, replay, key)

    step = jax.jit(
        jax.shard_map(
            block,
            mesh=mesh,
            in_specs=(P(), replay_spec, P()),
            out_specs=(P(), P()),
            check_vma=False,
        ),
        donate_argnums=0,
    )
    key = jax.random.PRNGKey(2)
    start = time.perf_counter()
    compiled = step.lower(agent_state, replay, key).compile()
    compile_s = time.perf_counter() - start

    holder = {"state": agent_state, "i": 0}
    keys = jax.random.split(key, repeats + 2)

    def one_iteration():
        state, metrics = compiled(holder["state"], replay, keys[holder["i"]])
        holder["state"], holder["i"], holder["metrics"] = state, holder["i"] + 1, metrics
        return state, metrics

    timing = time_repeated(one_iteration, repeats=repeats, warmup=1)
    leaves = jax.tree.leaves(holder["metrics"])
    finite = all(bool(jnp.all(jnp.isfinite(v))) for v in leaves)

    flops = iteration_flops(agent, agent_state, replay, batch_size, updates, mesh, config)
    sec = timing["median"]
    width = algo_config.critic_hidden_dim
    square = matmul_rate(matmul_size, matmul_size, matmul_size, repeats)
    layer = matmul_rate(batch_size, width, width, max(repeats, 5))

    gather = jax.jit(lambda r, k: replay_sample(r, k, batch_size * updates))
    gather_timing = time_repeated(lambda: gather(replay, key), repeats=max(repeats, 5), warmup=1)

    return {
        "algo": algo,
        "task": name,
        "dims": f"{obs}/{critic}/{act}",
        "widths": f"{algo_config.actor_hidden_dim}/{algo_config.critic_hidden_dim}",
        "batch": batch_size,
        "updates": updates,
        "pf": config.resolved_policy_frequency,
        "compile_s": compile_s,
        "ms_per_iter": 1e3 * sec,
        "ms_min": 1e3 * timing["min"],
        "iters_per_s": 1.0 / sec,
        "updates_per_s": updates / sec,
        "gather_ms": 1e3 * gather_timing["median"],
        "spread": (timing["max"] - timing["min"]) / sec,
        "finite": finite,
        "gflop": flops / 1e9,
        "gflops": flops / sec / 1e9,
        "matmul_gflops": square,
        "layer_gflops": layer,
        "layer_shape": f"{batch_size}x{width}x{width}",
    }


def iteration_flops(agent, agent_state, replay, batch_size, updates, mesh, config) -> float:
    """XLA's FLOP count of one learner iteration, from its three updates compiled apart."""
    batch = jax.jit(lambda r, k: replay_sample(r, k, batch_size))(replay, jax.random.PRNGKey(3))
    key = jax.random.PRNGKey(4)

    def count(fn, *args) -> float:
        specs = tuple(P() for _ in args)
        sharded = jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P(), check_vma=False)
        cost = jax.jit(sharded).lower(*args).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        return float(cost["flops"])

    critic = count(agent.update_critic, agent_state, batch, key)
    actor = count(agent.update_actor, agent_state, batch, key)
    target = count(agent.update_target, agent_state)
    actor_updates = -(-updates // config.resolved_policy_frequency)
    return updates * (critic + target) + actor_updates * actor


def matmul_rate(m: int, k: int, n: int, repeats: int) -> float:
    """GFLOP/s of a jitted float32 ``[m, k] @ [k, n]`` (median of ``repeats`` calls)."""
    ka, kb = jax.random.split(jax.random.PRNGKey(5))
    a = jax.random.normal(ka, (m, k), jnp.float32)
    b = jax.random.normal(kb, (k, n), jnp.float32)
    fn = jax.jit(jnp.matmul)
    timing = time_repeated(lambda: fn(a, b), repeats=repeats, warmup=1)
    return 2 * m * k * n / timing["median"] / 1e9


HEADERS = [
    "algo",
    "task (obs/critic/act)",
    "actor/critic width",
    "batch",
    "updates/iter",
    "policy freq",
    "compile s",
    "ms / iteration (min)",
    "learner it/s",
    "grad updates/s",
    "gather ms",
    "GFLOP / iteration",
    "GFLOP/s",
    "% of square matmul",
    "% of layer-shaped matmul",
]


def row(r: dict) -> list:
    return [
        r["algo"].upper(),
        f"{r['task']} ({r['dims']})",
        r["widths"],
        r["batch"],
        r["updates"],
        r["pf"],
        f"{r['compile_s']:.1f}",
        f"{r['ms_per_iter']:.0f} ({r['ms_min']:.0f})",
        f"{r['iters_per_s']:.3g}",
        f"{r['updates_per_s']:.3g}",
        f"{r['gather_ms']:.1f}",
        f"{r['gflop']:.1f}",
        f"{r['gflops']:.0f}",
        f"{100 * r['gflops'] / r['matmul_gflops']:.0f}% of {r['matmul_gflops']:.0f}",
        f"{100 * r['gflops'] / r['layer_gflops']:.0f}% of {r['layer_gflops']:.0f} "
        f"({r['layer_shape']})",
    ]


def _widths(text: str) -> tuple[int, int]:
    actor, _, critic = text.partition("/")
    if not (actor.isdigit() and critic.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: give actor/critic widths, e.g. 128/256")
    return int(actor), int(critic)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The defaults are the recorded table's rows: SAC and TD3 on G1 and CheetahRun.
    parser.add_argument("--algo", choices=[*ALGOS, "all"], help="default: sac and td3")
    parser.add_argument("--task", choices=[*TASK_DIMS, "all"], help="default: g1 and cheetah")
    parser.add_argument("--batch-size", type=int, default=8192, help="rows per update")
    parser.add_argument("--updates", type=int, default=8, help="updates per learner iteration")
    parser.add_argument(
        "--buffer-envs", type=int, default=1024, help="replay ring: envs (rows per slot)"
    )
    parser.add_argument(
        "--buffer-slots",
        type=int,
        default=128,
        help="replay ring: slots per env (the gather draws from envs x slots rows)",
    )
    parser.add_argument(
        "--matmul-size",
        type=int,
        default=4096,
        help="side of the square float32 matmul the learner's FLOP/s is compared with",
    )
    parser.add_argument(
        "--widths",
        type=_widths,
        help="actor/critic hidden widths, e.g. 128/256 (default: each algorithm's own)",
    )
    parser.add_argument(
        "--set",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="an algorithm setting (a field of its config; the value read as JSON), e.g. "
        "--set lr_decay_steps 80000",
    )
    add_common_args(parser, repeats=3)
    args = parser.parse_args(argv)
    settings = {name: json.loads(value) for name, value in args.set}

    algos = {None: ["sac", "td3"], "all": list(ALGOS)}.get(args.algo, [args.algo])
    tasks = {None: ["g1", "cheetah"], "all": list(TASK_DIMS)}.get(args.task, [args.task])
    info = machine_info()
    print("\n".join(machine_lines(info)), flush=True)
    results = []
    for algo in algos:
        for task in tasks:
            print(f"... {algo} {task}: compiling and timing", flush=True)
            r = measure(
                algo,
                task,
                args.batch_size,
                args.updates,
                args.buffer_envs,
                args.buffer_slots,
                args.repeats,
                args.matmul_size,
                args.widths,
                settings,
            )
            results.append(r)
            print("    " + " | ".join(str(c) for c in row(r)), flush=True)
            if not r["finite"]:
                print("    warning: non-finite metrics", flush=True)

    table = markdown_table(HEADERS, [row(r) for r in results])
    print()
    print(table)
    notes = [
        "The update block of `unilab_jax.collection.step` (one gather of batch x updates rows, "
        "then the "
        f"scanned critic / actor-every-pf / target updates) under a 1-device `shard_map`; "
        f"replay ring of {args.buffer_envs} envs x {args.buffer_slots} slots of random "
        f"transitions; median of {args.repeats} calls after one warm-up call; "
        f"grad updates/s counts critic updates (the actor updates every pf-th). Compile time is "
        f"cold (no persistent cache). Gather: the `replay_sample` of the same rows alone.",
        f"FLOPs per iteration: XLA's cost analysis of `update_critic`, `update_actor` and "
        f"`update_target` compiled one by one, as updates x (critic + target) + "
        f"ceil(updates / pf) x actor (the block's own count would see the scan body once). "
        f"Rates against a float32 {args.matmul_size}x{args.matmul_size} matmul and a matmul "
        f"of the widest layer's shape (batch x critic width x critic width), each timed "
        f"(median) right after that row's block, in this run.",
    ]
    if settings:
        notes.append(f"Algorithm settings: {settings}.")
    spread = max(r["spread"] for r in results)
    if spread > 0.1:
        notes.append(f"Largest (max - min) / median over the repeats: {spread:.0%}.")
    if not args.no_record:
        record_section(
            "learner", "Learner updates/s (`bench/speed/learner.py`)", table, info=info, notes=notes
        )
        print("\nrecorded in bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
