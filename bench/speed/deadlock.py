"""Evidence for the forced-host-device LAPACK deadlock and for ``unilab_jax/envs/cpu_linalg.py``.

Three measurements, each in its own subprocess with a hard timeout (a hung child is killed by
its process group and reported, with the CPU it used over its last seconds):

1. Minimal repro: ``jax.jit(jax.shard_map(...))`` over 2 forced host devices of a ``lax.scan``
   of ``jnp.linalg.cholesky`` on ``--chol-batch`` SPD 14x14 matrices per device, with jax's
   LAPACK lowering and with the fix.
2. CheetahRun (nv = 9, MJX Newton solver: ``cho_factor`` / ``cho_solve`` of the mass matrix
   and of the Hessian) stepped under ``shard_map`` on 2 forced host devices, for each of
   ``--per-device`` envs per device, with LAPACK and with the fix: hang or env steps/s.
3. Physics check and 1-device cost on CheetahRun (``--check-envs`` envs, random actions):
   max |qacc difference| of one physics step from the same states, and max |qpos difference|
   after 10 and 100 control steps (50 and 500 physics steps), fix vs LAPACK, next to the same
   differences LAPACK itself shows when qvel is moved by one float32 ulp (the scale of a
   rounding difference in this contact-rich, chaotic system); and env steps/s of both on 1
   device.

    python -m bench.speed.deadlock                  # records bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import REPO_ROOT, markdown_table, record_section  # noqa: E402
from unilab_jax.distributed.processes import with_host_devices  # noqa: E402

_TAG = "BENCH_RESULT "
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# ----------------------------------------------------------------------------- children
def _select_lowering(fix: bool):
    """The fix (``cpu_linalg.install()``) or jax's own LAPACK kernels. The library installs the
    fix by itself in every CPU MJX env and in ``Trainer`` (``cpu_linalg.install_on_cpu``), so a
    LAPACK child switches that automatic install off first. Returns the module."""
    from unilab_jax.envs import cpu_linalg

    if fix:
        cpu_linalg.install()
    else:
        cpu_linalg.install_on_cpu = lambda: None
    return cpu_linalg


def _child_chol(batch: int, fix: bool) -> None:
    _select_lowering(fix)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:2]), ("data",), axis_types=(AxisType.Auto,))

    def body(a):
        def f(c, _):
            lower = jnp.linalg.cholesky(c)
            return c + 1e-3 * lower @ jnp.swapaxes(lower, -1, -2), None

        return jax.lax.scan(f, a, None, length=4)[0]

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data")))
    x = np.random.default_rng(0).standard_normal((2 * batch, 14, 14)).astype(np.float32)
    a = x @ x.transpose(0, 2, 1) + 14 * np.eye(14, dtype=np.float32)
    compiled = fn.lower(a).compile()
    calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', compiled.as_text())))
    print(_TAG + json.dumps({"stage": "compiled", "custom_calls": calls}), flush=True)
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(a))
    sec = time.perf_counter() - start
    print(_TAG + json.dumps({"stage": "done", "sec": sec, "finite": bool(np.isfinite(out).all())}))


def _cheetah_fns(n_dev: int, n_local: int, steps: int):
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh
    from jax.sharding import PartitionSpec as P

    from unilab_jax.envs import load

    env = load("CheetahRun")
    mesh = Mesh(np.array(jax.devices()[:n_dev]), ("data",), axis_types=(AxisType.Auto,))

    def reset(key):
        key = jax.random.fold_in(key, jax.lax.axis_index("data"))
        return jax.vmap(env.reset)(jax.random.split(key, n_local))

    def run(state):
        def one(s):
            u = jax.random.uniform(jax.random.fold_in(s.key, 1), (env.action_size,), minval=-1.0)
            return env.step(s, u)

        def body(s, _):
            return jax.vmap(one)(s), None

        return jax.lax.scan(body, state, None, length=steps)[0]

    def sharded(f, in_specs):
        return jax.jit(
            jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=P("data"), check_vma=False)
        )

    return sharded(reset, P()), sharded(run, P("data"))


def _child_cheetah(n_dev: int, n_local: int, fix: bool, repeats: int) -> None:
    _select_lowering(fix)
    import jax

    steps = 10
    reset, run = _cheetah_fns(n_dev, n_local, steps)
    state = jax.block_until_ready(reset(jax.random.PRNGKey(0)))
    start = time.perf_counter()
    compiled = run.lower(state).compile()
    compile_s = time.perf_counter() - start
    calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', compiled.as_text())))
    msg = {"stage": "compiled", "compile_s": compile_s, "custom_calls": calls}
    print(_TAG + json.dumps(msg), flush=True)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        state = jax.block_until_ready(compiled(state))
        times.append(time.perf_counter() - start)
        print(_TAG + json.dumps({"stage": "call", "sec": times[-1]}), flush=True)
    sec = sorted(times[1:])[len(times[1:]) // 2]
    out = {"stage": "done", "steps_per_s": steps * n_dev * n_local / sec, "compile_s": compile_s}
    print(_TAG + json.dumps(out), flush=True)


def _child_train(n_local: int, fix: bool) -> None:
    """``unilab_jax.training.trainer.train`` on CheetahRun over 2 devices, ``n_local`` envs each."""
    _select_lowering(fix)
    from unilab_jax.config import TrainConfig
    from unilab_jax.training.trainer import train

    config = TrainConfig(
        env="CheetahRun",
        num_envs=2 * n_local,
        num_devices=2,
        batch_size=1024,
        updates_per_step=1,
        replay_buffer_n=8,
        max_iterations=6,
        log_interval=3,
        save_interval=0,
        eval_envs=0,
    )
    print(_TAG + json.dumps({"stage": "start"}), flush=True)
    result = train(config, {"actor_hidden_dim": 64, "critic_hidden_dim": 64}, quiet=True)
    sec = result.history[-1]["sec_per_iter"]
    out = {
        "stage": "done",
        "steps_per_s": config.num_envs / sec,
        "compile_s": result.summary["compile_time_sec"],
    }
    print(_TAG + json.dumps(out), flush=True)


def _child_check(n_envs: int, fix: bool, out_path: str) -> None:
    """1 device: qpos after 10 and 100 control steps; with LAPACK also the same run from a
    qvel moved by one float32 ulp, and single physics steps of both lowerings from the same
    states."""
    cpu_cholesky_fix = _select_lowering(fix)
    import jax
    import numpy as np
    from mujoco import mjx

    steps = 10
    reset, run = _cheetah_fns(1, n_envs, steps)
    state0 = jax.block_until_ready(reset(jax.random.PRNGKey(0)))
    start = time.perf_counter()
    compiled = run.lower(state0).compile()
    compile_s = time.perf_counter() - start
    calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', compiled.as_text())))
    msg = {"stage": "compiled", "compile_s": compile_s, "custom_calls": calls}
    print(_TAG + json.dumps(msg), flush=True)
    results = {}
    starts = {"base": state0}
    if not fix:
        starts["ulp"] = state0.replace(physics=_ulp(state0.physics))
    times = []
    visited = []
    for name, state in starts.items():
        qpos = []
        for _ in range(10):
            t0 = time.perf_counter()
            state = jax.block_until_ready(compiled(state))
            times.append(time.perf_counter() - t0)
            qpos.append(np.asarray(state.physics.qpos))
            if name == "base":
                visited.append(state.physics)
        results[f"{name}_10"] = qpos[0]
        results[f"{name}_100"] = qpos[-1]
    sec = sorted(times[1:])[len(times[1:]) // 2]

    if not fix:
        # One physics step (mjx.step) from the same visited states: LAPACK, LAPACK from qvel
        # one ulp off, and the fix (installed afterwards; install() clears jax's caches).
        from unilab_jax.envs import load

        model = load("CheetahRun").physics.mjx_model
        physics = jax.jit(jax.vmap(lambda d: mjx.step(model, d)))
        qacc_l = np.stack([np.asarray(physics(d).qacc) for d in visited])
        qacc_u = np.stack([np.asarray(physics(_ulp(d)).qacc) for d in visited])
        cpu_cholesky_fix.install()
        physics = jax.jit(jax.vmap(lambda d: mjx.step(model, d)))
        qacc_f = np.stack([np.asarray(physics(d).qacc) for d in visited])
        results.update(qacc_lapack=qacc_l, qacc_ulp=qacc_u, qacc_fix=qacc_f)
    np.savez(out_path, **results)
    out = {"stage": "done", "steps_per_s": steps * n_envs / sec, "compile_s": compile_s}
    print(_TAG + json.dumps(out), flush=True)


def _ulp(data):
    """``data`` with every qvel entry moved by one float32 ulp (relative 2**-23)."""
    return data.replace(qvel=data.qvel * (1.0 + 2.0**-23))


# ----------------------------------------------------------------------------- parent
def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _spawn(child_args: list[str], devices: int, timeout: int) -> dict:
    """Run a child; returns its messages, status and, if it timed out, its recent CPU use."""
    env = dict(os.environ)
    flags = with_host_devices(env.get("XLA_FLAGS", ""), devices)
    if flags:
        env["XLA_FLAGS"] = flags
    cmd = [sys.executable, "-m", "bench.speed.deadlock", "--child", *child_args]
    print(f"... {' '.join(child_args)} on {devices} device(s), timeout {timeout}s", flush=True)
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    samples: list[tuple[float, float]] = []
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < timeout:
        cpu = _cpu_seconds(proc.pid)
        if cpu is not None:
            samples.append((time.monotonic(), cpu))
        time.sleep(1.0)
    status = "ok"
    cpu_pct = None
    if proc.poll() is None:
        window = [s for s in samples if s[0] >= samples[-1][0] - 20.0]
        if len(window) >= 2 and window[-1][0] > window[0][0]:
            cpu_pct = 100 * (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
        os.killpg(proc.pid, 9)  # the child's own session: only what we started
        status = "timeout"
    out, _ = proc.communicate()
    messages = [json.loads(x[len(_TAG) :]) for x in out.splitlines() if x.startswith(_TAG)]
    if status == "ok" and proc.returncode != 0:
        status = f"failed (exit {proc.returncode})"
        print("\n".join(out.splitlines()[-10:]), flush=True)
    result = {"status": status, "messages": messages, "cpu_pct_last_20s": cpu_pct}
    result["elapsed"] = time.monotonic() - start
    print(f"    {status}; {messages[-1] if messages else 'no output'}", flush=True)
    if cpu_pct is not None:
        print(f"    CPU use over its last 20 s: {cpu_pct:.0f}%", flush=True)
    return result


def _describe(result: dict, timeout: int) -> tuple[str, str]:
    """(outcome, custom calls) cells for one child."""
    msgs = result["messages"]
    calls = next((m["custom_calls"] for m in msgs if "custom_calls" in m), None)
    calls_cell = "none" if calls == [] else (", ".join(calls) if calls else "?")
    if result["status"] == "timeout":
        compiled = any(m.get("stage") == "compiled" for m in msgs)
        n_calls = sum(m.get("stage") == "call" for m in msgs)
        cpu = result["cpu_pct_last_20s"]
        started = any(m.get("stage") == "start" for m in msgs)
        where = (
            "after compiling"
            if compiled
            else ("inside `train` (compile or run)" if started else "before compiling")
        )
        cpu_txt = f", {cpu:.0f}% CPU over its last 20 s" if cpu is not None else ""
        return (
            f"**hang**: killed at {timeout}s {where}"
            + (f", {n_calls} call(s) finished" if compiled else "")
            + cpu_txt,
            calls_cell,
        )
    if result["status"] != "ok":
        return result["status"], calls_cell
    done = msgs[-1]
    if "steps_per_s" in done:
        return f"runs: {done['steps_per_s']:,.0f} env steps/s", calls_cell
    return f"runs: {1e3 * done['sec']:.0f} ms", calls_cell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chol-batch", type=int, default=4096, help="14x14 matrices/device")
    parser.add_argument(
        "--per-device", type=int, nargs="+", default=[512, 2048], help="CheetahRun envs/device"
    )
    parser.add_argument("--check-envs", type=int, default=512, help="envs of the 1-device check")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per child")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--train-per-device",
        type=int,
        nargs="*",
        default=[],
        help="also run unilab_jax.training.trainer.train on CheetahRun over 2 devices with these "
        "envs "
        "per device (tiny networks, 6 iterations; 2x --timeout each)",
    )
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        kind, *rest = args.child
        if kind == "chol":
            _child_chol(int(rest[0]), rest[1] == "fix")
        elif kind == "cheetah":
            _child_cheetah(int(rest[0]), int(rest[1]), rest[2] == "fix", args.repeats)
        elif kind == "check":
            _child_check(int(rest[0]), rest[1] == "fix", rest[2])
        elif kind == "train":
            _child_train(int(rest[0]), rest[1] == "fix")
        return 0

    from bench.common import machine_info, machine_lines

    info = machine_info()
    print("\n".join(machine_lines(info)), flush=True)
    rows = []
    for variant in ("lapack", "fix"):
        r = _spawn(["chol", str(args.chol_batch), variant], 2, args.timeout)
        outcome, calls = _describe(r, args.timeout)
        what = f"cholesky scan, {args.chol_batch} x 14x14 per device"
        rows.append([what, 2, variant, calls, outcome])
    for n_local in args.per_device:
        for variant in ("lapack", "fix"):
            r = _spawn(["cheetah", "2", str(n_local), variant], 2, args.timeout)
            outcome, calls = _describe(r, args.timeout)
            rows.append([f"CheetahRun, {n_local} envs per device", 2, variant, calls, outcome])

    for n_local in args.train_per_device:
        for variant in ("lapack", "fix"):
            r = _spawn(["train", str(n_local), variant], 2, 2 * args.timeout)
            outcome, _ = _describe(r, 2 * args.timeout)
            what = f"`trainer.train` CheetahRun, {n_local} envs per device"
            rows.append([what, 2, variant, "-", outcome])

    check_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    paths = {
        v: check_dir / f"bench_deadlock_check_{os.getpid()}_{v}.npz" for v in ("lapack", "fix")
    }
    checks = {}
    for variant, path in paths.items():
        r = _spawn(["check", str(args.check_envs), variant, str(path)], 1, 4 * args.timeout)
        outcome, calls = _describe(r, 4 * args.timeout)
        rows.append([f"CheetahRun, {args.check_envs} envs", 1, variant, calls, outcome])
        checks[variant] = r

    physics_lines = []
    if all(c["status"] == "ok" for c in checks.values()):
        import numpy as np

        ref = np.load(paths["lapack"])
        fix = np.load(paths["fix"])

        def dmax(a, b):
            return f"{np.max(np.abs(a - b)):.2e}"

        def dmed(a, b):
            return f"{np.median(np.abs(a - b)):.2e}"

        def apart(a, b):
            far = np.max(np.abs(a - b), axis=-1) > 1e-3
            return f"{int(far.sum())} / {far.size}"

        qacc_scale = float(np.max(np.abs(ref["qacc_lapack"])))
        q_scale = float(np.max(np.abs(ref["base_100"][:, 1:])))
        table = [
            [
                "fix vs LAPACK",
                dmax(ref["qacc_fix"], ref["qacc_lapack"]),
                dmax(fix["base_10"], ref["base_10"]),
                dmax(fix["base_100"], ref["base_100"]),
                dmed(fix["base_100"], ref["base_100"]),
                apart(fix["base_10"], ref["base_10"]),
                apart(fix["base_100"], ref["base_100"]),
            ],
            [
                "LAPACK from qvel one float32 ulp off vs LAPACK",
                dmax(ref["qacc_ulp"], ref["qacc_lapack"]),
                dmax(ref["ulp_10"], ref["base_10"]),
                dmax(ref["ulp_100"], ref["base_100"]),
                dmed(ref["ulp_100"], ref["base_100"]),
                apart(ref["ulp_10"], ref["base_10"]),
                apart(ref["ulp_100"], ref["base_100"]),
            ],
        ]
        physics_lines = [
            "",
            f"Physics check (1 device, {args.check_envs} CheetahRun envs, random actions). "
            f"One physics step from the same 10 visited states (max |qacc| {qacc_scale:.3g}); "
            f"trajectories: qpos after 10 and 100 control steps (50 and 500 physics steps; max "
            f"|qpos| excluding rootx {q_scale:.2f}). The second row is the size of a float32 "
            f"rounding difference in this contact-rich, chaotic system.",
            "",
            markdown_table(
                [
                    "comparison",
                    "max abs dqacc, 1 physics step",
                    "max abs dqpos, 10 steps",
                    "max abs dqpos, 100 steps",
                    "median abs dqpos, 100 steps",
                    "envs apart (> 1e-3), 10 steps",
                    "envs apart, 100 steps",
                ],
                table,
            ),
        ]
        for path in paths.values():
            path.unlink(missing_ok=True)

    table = markdown_table(
        ["case", "devices", "Cholesky lowering", "custom calls", "outcome"], rows
    )
    body = table + "\n" + "\n".join(physics_lines)
    print()
    print(body, flush=True)
    notes = [
        "Each case runs in its own subprocess; 2 devices = "
        "`XLA_FLAGS=--xla_force_host_platform_device_count=2` (same 2 cores). `lapack`: jax's "
        "own CPU lowering (`lapack_spotrf_ffi` / `lapack_strsm_ffi`); `fix`: "
        "`unilab_jax.envs.cpu_linalg.install()` (unrolled jnp Cholesky for n <= 32, HLO "
        "`triangular_solve`). CheetahRun rows: 10 control steps (50 physics steps) per call "
        "with random actions, median of the calls after the first. A hang is a child killed "
        "at the timeout; its CPU use over the last 20 s is read from /proc.",
    ]
    if not args.no_record:
        record_section(
            "deadlock",
            "Forced-host-device LAPACK deadlock and the LAPACK-free Cholesky "
            "(`bench/speed/deadlock.py`)",
            body,
            info=info,
            notes=notes,
        )
        print("\nrecorded in bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
