"""``unilab-jax launch --nproc N -- <train options>``: one training run over N local processes,
``python -m unilab_jax.train <options> --num-processes N --process-id I --coordinator-address
127.0.0.1:<port>`` each, supervised by ``distributed.local_launch``. On several machines, start
``unilab-jax train`` on each with those three options (or under SLURM / Open MPI without)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from unilab_jax.cli.options import documented, error, parse
from unilab_jax.cli.train import LAUNCH_OPTIONS
from unilab_jax.distributed.local_launch import child_env, free_port, run_processes

__all__ = ["Launch", "main"]


@dataclass(frozen=True)
class Launch:
    """Run one training over N local processes on JAX's distributed runtime: unilab-jax launch
    --nproc N [options] -- <unilab-jax train options>. The launcher adds --num-processes,
    --process-id and --coordinator-address (do not pass them), and --num-devices N*K unless
    given (num_envs and batch_size are split over all devices). Process 0 logs and writes the
    run's files; SIGINT/SIGTERM go to all (they stop after the same block, saved); a failed
    process stops the others. Exit status: 0 all finished, 130/143 SIGINT/SIGTERM, 2 bad
    options, else the failed process's."""

    nproc: int
    """Processes to start (N >= 1)."""
    devices_per_process: int = 1
    """Devices each process owns (K). On CPU: XLA_FLAGS=--xla_force_host_platform_device_count=K
    and JAX_PLATFORMS=cpu in each process; on GPU: K GPUs each through CUDA_VISIBLE_DEVICES."""
    platform: Literal["cpu", "gpu"] = "cpu"
    """Where the processes run: CPU collectives across processes use gloo over TCP; gpu gives
    process i the GPUs i*K .. i*K+K-1 of CUDA_VISIBLE_DEVICES (or of all GPUs)."""
    port: int | None = None
    """The coordinator's port on 127.0.0.1; None: a free one."""
    exit_grace: float = 120.0
    """Seconds the others may take to finish once one has, before they are killed as hung."""


def _has_option(args: list[str], name: str) -> bool:
    return any(arg == name or arg.startswith(f"{name}=") for arg in args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # the launcher's options, the run's
    args = parse(documented(Launch), argv[:cut], prog="unilab-jax launch")
    train_args = argv[cut + 1 :]
    if args.nproc < 1 or args.devices_per_process < 1:
        sys.exit(error("--nproc and --devices-per-process must be at least 1"))
    taken = [name for name in LAUNCH_OPTIONS if _has_option(train_args, name)]
    if taken:
        sys.exit(error(f"{', '.join(taken)}: set by the launcher for each process; remove them"))
    n, k = args.nproc, args.devices_per_process
    if not _has_option(train_args, "--num-devices"):
        train_args += ["--num-devices", str(n * k)]
    address = f"127.0.0.1:{args.port or free_port()}"
    platform = ["--platform", args.platform] if args.platform != "cpu" else []
    prefix = shlex.join(["unilab-jax", "launch", "--nproc", str(n), "--devices-per-process",
                         str(k), *platform, "--"])  # fmt: skip
    own = ["--num-processes", str(n), "--coordinator-address", address]
    train = [sys.executable, "-m", "unilab_jax.train", *train_args, *own]
    commands = [[*train, "--process-id", str(i)] for i in range(n)]
    envs = [child_env(os.environ, i, n, k, args.platform, prefix) for i in range(n)]
    logs = Path(tempfile.mkdtemp(prefix="unilab-jax-launch-"))

    def started(children) -> None:
        pids = ", ".join(f"{i}: pid {c.pid}" for i, c in enumerate(children))
        print(f"launch: {n} processes x {k} {args.platform} device(s), coordinator {address} "
              f"({pids}); output of processes 1..{n - 1} in {logs}", file=sys.stderr)  # fmt: skip

    code, forwarded = run_processes(commands, envs, logs, args.exit_grace, started)
    if code == 0 or forwarded:
        shutil.rmtree(logs, ignore_errors=True)
    return code
