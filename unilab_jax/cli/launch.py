"""``unilab-jax launch``: one training run over several local processes.

Starts ``--nproc`` processes of ``python -m unilab_jax.train <train options> --num-processes N
--process-id I --coordinator-address 127.0.0.1:<free port>`` (``unilab_jax.distributed.processes``)
and
watches them:

- process 0's output is streamed (it logs; the console panel shows on a terminal); the
  others are quiet, their output goes to a temporary file shown when they fail;
- SIGINT (Ctrl+C) and SIGTERM are forwarded to every process: all stop after the same block
  with one final checkpoint, as a single-process run does; a second one stops them at once;
- when a process exits with an error (or is killed), the others are killed within moments
  (their collectives cannot complete without it; checkpoints are atomic, so the newest one
  written stays intact) and the launcher exits with that process's code, naming it;
- when the launcher itself is killed, its processes are killed too (Linux).

Example (this machine's CPU, 2 processes of 1 device each)::

    unilab-jax launch --nproc 2 -- --env PendulumSwingup --num-envs 64

On several machines, start ``python -m unilab_jax.train`` on each with the three process
options yourself (or under SLURM ``srun`` / Open MPI ``mpirun`` without them).

This module builds the processes' commands and environments; the supervision itself is
``unilab_jax.distributed.local_launch.run_processes``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from unilab_jax.distributed.local_launch import child_env, free_port, run_processes

__all__ = ["build_parser", "main"]

_OWNED = ("--num-processes", "--process-id", "--coordinator-address")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-jax launch",
        usage="unilab-jax launch --nproc N [options] -- <python -m unilab_jax.train options>",
        description=(
            "Run one training over N local processes on JAX's distributed runtime. Everything "
            "after '--' goes to python -m unilab_jax.train (see its --help); the launcher adds "
            "--num-processes, --process-id and --coordinator-address (do not pass them), and "
            "--num-devices N*K unless given (it counts the devices of all processes). num_envs "
            "and batch_size are global: split over all N*K devices. Process 0 logs and writes "
            "the run's files; SIGINT/SIGTERM are forwarded to all processes (they stop after "
            "the same block with a final checkpoint); when a process fails, the others are "
            "killed and the launcher exits with its code."
        ),
        epilog=(
            "exit status: 0 when every process finished; 130/143 when stopped by SIGINT/SIGTERM; "
            "otherwise the failing process's code (128+signal when it was killed by one); 2 for "
            "bad launcher options. Example: unilab-jax launch --nproc 2 -- --env "
            "PendulumSwingup --num-envs 64 --max-iterations 100"
        ),
    )
    parser.add_argument("--nproc", type=int, required=True, metavar="N",
                        help="processes to start (N >= 1)")  # fmt: skip
    parser.add_argument(
        "--devices-per-process",
        type=int,
        default=1,
        metavar="K",
        help="devices each process owns (default: 1). On CPU: XLA_FLAGS="
        "--xla_force_host_platform_device_count=K (replacing a count already set) and "
        "JAX_PLATFORMS=cpu in each process; on GPU: K GPUs each through CUDA_VISIBLE_DEVICES",
    )
    parser.add_argument(
        "--platform",
        choices=("cpu", "gpu"),
        default="cpu",
        help="where the processes run (default: cpu). CPU collectives across processes use "
        "gloo over TCP; gpu gives process i the GPUs i*K .. i*K+K-1 of CUDA_VISIBLE_DEVICES "
        "(or of all GPUs)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="coordinator port on 127.0.0.1 (default: a free one)",
    )
    parser.add_argument(
        "--exit-grace",
        type=float,
        default=120.0,
        metavar="SEC",
        help="once a process has finished, how long the others may take to finish too before "
        "they are killed as hung (default: 120)",
    )
    return parser


def _has_option(args: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, train_args = argv, []
    if "--" in argv:  # the launcher's options, then the trainer's
        cut = argv.index("--")
        own, train_args = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(own)
    if args.nproc < 1 or args.devices_per_process < 1:
        parser.error("--nproc and --devices-per-process must be at least 1")
    taken = [name for name in _OWNED if _has_option(train_args, name)]
    if taken:
        parser.error(f"{', '.join(taken)}: set by the launcher for each process; remove them")
    n, k = args.nproc, args.devices_per_process
    if not _has_option(train_args, "--num-devices"):
        train_args += ["--num-devices", str(n * k)]
    address = f"127.0.0.1:{args.port or free_port()}"
    prefix = shlex.join([
        "unilab-jax", "launch", "--nproc", str(n), "--devices-per-process", str(k),
        *(["--platform", args.platform] if args.platform != "cpu" else []), "--",
    ])  # fmt: skip
    commands = [[sys.executable, "-m", "unilab_jax.train", *train_args, "--num-processes",
                 str(n), "--process-id", str(i), "--coordinator-address", address]
                for i in range(n)]  # fmt: skip
    envs = [child_env(os.environ, i, n, k, args.platform, prefix) for i in range(n)]
    logs = Path(tempfile.mkdtemp(prefix="unilab-jax-launch-"))

    def started(children) -> None:
        pids = ", ".join(f"{i}: pid {c.pid}" for i, c in enumerate(children))
        print(
            f"launch: {n} processes x {k} {args.platform} device(s), coordinator {address} "
            f"({pids}); output of processes 1..{n - 1} in {logs}",
            file=sys.stderr,
            flush=True,
        )

    code, forwarded = run_processes(commands, envs, logs, args.exit_grace, started)
    if code == 0 or forwarded:
        shutil.rmtree(logs, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
