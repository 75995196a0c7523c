"""Scaling: env steps/s and gradient updates/s against the number of devices and processes, at
a fixed global batch.

Every configuration is one real training run in its own subprocesses: ``python -m
unilab_jax.train --num-devices K`` for one process of K devices, ``unilab-jax launch
--nproc P --devices-per-process K`` for P processes on JAX's distributed runtime (CPU
collectives over gloo). ``num_envs``, ``batch_size`` and the updates per iteration are global
and the same in every row; envs, replay and batch are split over all devices. The figure of a
run is the median of its last blocks' steps/s (process 0's plain progress lines, compile and
the first block left out); updates/s = steps/s / num_envs x updates per iteration.

On a CPU the devices are forced host devices (``--xla_force_host_platform_device_count``):
they all share the machine's cores, so a CPU table measures what sharding, collectives and
process coordination cost, not a speed-up; on a machine with several GPUs the same script
measures the real curve (``--platform gpu``).

    python -m bench.speed.scaling                                   # 1, 2, 4 devices; 2 processes
    python -m bench.speed.scaling --configs 1x1 1x2 2x1 --no-record
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    BENCH_DIR,
    FIGURES_DIR,
    REPO_ROOT,
    machine_info,
    markdown_table,
    record_section,
)

_BLOCK = re.compile(r"^it (\d+)/(\d+) \| env steps [\d,]+ \| ([\d,]+) steps/s")


def train_args(args: argparse.Namespace, log_dir: Path) -> list[str]:
    return [
        "--env", args.env, "--algo", args.algo, "--num-envs", str(args.num_envs),
        "--batch-size", str(args.batch_size), "--updates-per-step", str(args.updates),
        "--replay-buffer-n", str(args.replay_n), "--max-iterations", str(args.iterations),
        "--log-interval", str(args.log_interval), "--learning-starts", "0", "--eval-envs", "0",
        "--save-interval", "0", "--actor-hidden-dim", str(args.width),
        "--critic-hidden-dim", str(args.width), "--logger", "none", "--log-dir", str(log_dir),
    ]  # fmt: skip


def run_config(args: argparse.Namespace, processes: int, devices: int) -> dict:
    """One training run of ``processes`` x ``devices``; its steady-state figures."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", UNILAB_JAX_COMPILATION_CACHE="0")
    env.pop("XLA_FLAGS", None)
    with tempfile.TemporaryDirectory() as folder:
        common = train_args(args, Path(folder) / "run")
        total = processes * devices
        if processes == 1:
            cmd = [sys.executable, "-m", "unilab_jax.train", *common, "--num-devices", str(total)]
        else:
            cmd = [sys.executable, "-m", "unilab_jax.cli", "launch", "--nproc", str(processes),
                   "--devices-per-process", str(devices), "--platform", args.platform, "--",
                   *common]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=args.timeout)  # fmt: skip
        wall = time.perf_counter() - start
    rates = [int(m.group(3).replace(",", "")) for line in proc.stdout.splitlines()
             if (m := _BLOCK.match(line))]  # fmt: skip
    if proc.returncode or len(rates) < 2:
        raise SystemExit(
            f"{processes}x{devices} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    steady = statistics.median(rates[1:])  # the first block pays for warm-up
    return {
        "processes": processes,
        "devices_per_process": devices,
        "devices": total,
        "env_steps_per_s": steady,
        "updates_per_s": steady / args.num_envs * args.updates,
        "wall_s": wall,
        "blocks": rates,
    }


def plot(results: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for processes in sorted({r["processes"] for r in results}):
        rows = sorted(
            (r for r in results if r["processes"] == processes), key=lambda r: r["devices"]
        )
        ax.plot([r["devices"] for r in rows], [r["env_steps_per_s"] for r in rows], "o-",
                label=f"{processes} process{'es' if processes > 1 else ''}")  # fmt: skip
    ax.set_xlabel("devices (all processes)")
    ax.set_ylabel("env steps/s (steady state)")
    ax.set_xticks(sorted({r["devices"] for r in results}))
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed.scaling", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--configs", nargs="+", default=["1x1", "1x2", "1x4", "2x1", "2x2"],
                        help="PROCESSESxDEVICES-PER-PROCESS list")  # fmt: skip
    parser.add_argument("--platform", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--env", default="CheetahRun")
    parser.add_argument("--algo", default="sac", choices=["sac", "td3"])
    parser.add_argument("--num-envs", type=int, default=256, help="global envs (default: 256)")
    parser.add_argument("--batch-size", type=int, default=2048, help="global batch (2048)")
    parser.add_argument("--updates", type=int, default=4, help="updates per iteration (4)")
    parser.add_argument("--replay-n", type=int, default=64, help="replay rows per env (64)")
    parser.add_argument("--width", type=int, default=256, help="actor and critic width (256)")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--log-interval", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    parser.add_argument("--png", type=Path, default=FIGURES_DIR / "scaling.png")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    configs = []
    for text in args.configs:
        processes, _, devices = text.partition("x")
        if not (processes.isdigit() and devices.isdigit()) or "0" in (processes, devices):
            parser.error(f"--configs: {text!r} is not PROCESSESxDEVICES, e.g. 2x1")
        configs.append((int(processes), int(devices)))
    for processes, devices in configs:
        if args.num_envs % (processes * devices) or args.batch_size % (processes * devices):
            parser.error(f"{processes}x{devices}: --num-envs and --batch-size must divide by "
                         f"{processes * devices} devices")  # fmt: skip
    info = machine_info()
    results = []
    for processes, devices in configs:
        print(f"... {processes} process(es) x {devices} device(s)", flush=True)
        r = run_config(args, processes, devices)
        print(f"    {r['env_steps_per_s']:,.0f} env steps/s, {r['updates_per_s']:.1f} updates/s "
              f"(blocks {r['blocks']}, {r['wall_s']:.0f}s)", flush=True)  # fmt: skip
        results.append(r)
    base = next((r["env_steps_per_s"] for r in results if r["devices"] == 1), None)
    rows = [
        [r["processes"], r["devices_per_process"], r["devices"], f"{r['env_steps_per_s']:,.0f}",
         f"{r['updates_per_s']:.1f}", f"{r['env_steps_per_s'] / base:.2f}" if base else "",
         f"{r['wall_s']:.0f}"]
        for r in results
    ]  # fmt: skip
    headers = ["processes", "devices / process", "devices", "env steps/s", "updates/s",
               "vs 1 device", "run wall s (compile included)"]  # fmt: skip
    body = markdown_table(headers, rows)
    print(body)
    kind = "forced host devices sharing the CPU's cores" if args.platform == "cpu" else "GPUs"
    title = (f"{args.env} {args.algo.upper()}, {args.num_envs} envs, batch {args.batch_size}, "
             f"{args.updates} updates ({kind})")  # fmt: skip
    if not args.no_record:
        plot(results, args.png, title)
        notes = [
            f"{title}; widths {args.width}; {args.iterations} iterations in blocks of "
            f"{args.log_interval}; the median of the blocks after the first. "
            + " ".join(__doc__.split("\n\n")[1].split())
            + (" " + " ".join(__doc__.split("\n\n")[2].split()) if args.platform == "cpu" else ""),
            "",
            f"![scaling]({args.png.relative_to(BENCH_DIR)})",
        ]
        title = "Scaling over devices and processes (`bench/speed/scaling.py`)"
        record_section("scaling", title, body, info=info, notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
