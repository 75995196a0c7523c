"""``python -m unilab_jax.launch``: one training run over several local processes.

Starts ``--nproc`` processes of ``python -m unilab_jax.train <train options> --num-processes N
--process-id I --coordinator-address 127.0.0.1:<free port>`` (``unilab_jax.distributed``) and
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

    python -m unilab_jax.launch --nproc 2 -- --env PendulumSwingup --num-envs 64

On several machines, start ``python -m unilab_jax.train`` on each with the three process
options yourself (or under SLURM ``srun`` / Open MPI ``mpirun`` without them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["build_parser", "main"]

_OWNED = ("--num-processes", "--process-id", "--coordinator-address")
_POLL = 0.05


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m unilab_jax.launch",
        usage="python -m unilab_jax.launch --nproc N [options] -- <python -m unilab_jax.train "
        "options>",
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
            "bad launcher options. Example: python -m unilab_jax.launch --nproc 2 -- --env "
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _has_option(args: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in args)


def _child_env(base: dict, index: int, args: argparse.Namespace, prefix: str) -> dict:
    env = dict(base)
    k = args.devices_per_process
    if args.platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", ""))
        env["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={k}".strip()
    else:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(args.nproc * k)]
        mine = ids[index * k : (index + 1) * k]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(mine)
    env["PYTHONUNBUFFERED"] = "1"
    env["UNILAB_JAX_LAUNCH"] = prefix
    # The processes on this machine share its cores (C MuJoCo's default thread count).
    env["UNILAB_JAX_LOCAL_PROCESSES"] = str(args.nproc)
    return env


def _describe_exit(code: int) -> tuple[str, int]:
    """``("exited with code 1" | "was killed by SIGKILL", shell-style status)``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}", 128 - code
    return f"exited with code {code}", code


def _tail(path: Path | None, lines: int = 30) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


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
    port = args.port or _free_port()
    address = f"127.0.0.1:{port}"
    prefix = shlex.join([
        "python", "-m", "unilab_jax.launch", "--nproc", str(n), "--devices-per-process", str(k),
        *(["--platform", args.platform] if args.platform != "cpu" else []), "--",
    ])  # fmt: skip
    logs = Path(tempfile.mkdtemp(prefix="unilab-jax-launch-"))
    children: list[subprocess.Popen] = []
    log_paths: list[Path | None] = []
    forwarded: list[int] = []

    def forward(signum, frame):
        forwarded.append(signum)
        for child in children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for i in range(n):
            command = [sys.executable, "-m", "unilab_jax.train", *train_args,
                       "--num-processes", str(n), "--process-id", str(i),
                       "--coordinator-address", address]  # fmt: skip
            path = None if i == 0 else logs / f"process{i}.log"
            children.append(_start(command, _child_env(os.environ, i, args, prefix), path))
            log_paths.append(path)
        pids = ", ".join(f"{i}: pid {c.pid}" for i, c in enumerate(children))
        print(
            f"launch: {n} processes x {k} {args.platform} device(s), coordinator {address} "
            f"({pids}); output of processes 1..{n - 1} in {logs}",
            file=sys.stderr,
            flush=True,
        )
        code = _watch(children, log_paths, forwarded, args.exit_grace)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for child in children:  # never leave one behind (e.g. the launcher itself failing)
            if child.poll() is None:
                _kill(child)
    if code == 0 or forwarded:
        shutil.rmtree(logs, ignore_errors=True)
    return code


def _start(command: list[str], env: dict, log: Path | None) -> subprocess.Popen:
    """One process of the run: its output streamed (``log`` None, process 0) or into ``log``."""
    out = None if log is None else open(log, "wb")  # noqa: SIM115 (closed once started)
    try:
        return subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,  # a terminal's Ctrl+C reaches the launcher only
            preexec_fn=_die_with_parent,
        )
    finally:
        if out is not None:
            out.close()


def _die_with_parent() -> None:
    """In the child, before it runs: on Linux, SIGKILL it when the launcher dies, however the
    launcher dies (so a killed launcher never leaves its processes training on)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # its own session: the whole group
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=10)


def _watch(children, log_paths, forwarded: list[int], exit_grace: float) -> int:
    """Wait for every process; on the first failure kill the rest. Returns the exit status."""
    stopped = {128 + signal.SIGINT, 128 + signal.SIGTERM}
    first_done: tuple[int, float] | None = None
    while True:
        codes = [c.poll() for c in children]
        for i, code in enumerate(codes):
            # 130/143: stopped by a signal (forwarded, or sent to one process: then all stop
            # after the same block and save together); the others follow on their own.
            if code is None or code == 0 or code in stopped:
                continue
            what, status = _describe_exit(code)
            others = [c for c in children if c.poll() is None]
            for child in others:
                _kill(child)
            message = f"error: process {i} of {len(children)} {what}"
            if others:
                message += f"; killed the other {len(others)} process(es) still running"
            tail = _tail(log_paths[i])
            if tail:
                message += f". Its last output ({log_paths[i]}):\n{tail}"
            elif i == 0:
                message += " (its output is above)"
            print(message, file=sys.stderr, flush=True)
            return status
        if all(code is not None for code in codes):
            return max(codes)
        if first_done is None:
            finished = [i for i, code in enumerate(codes) if code is not None]
            if finished:
                first_done = (finished[0], time.monotonic())
        elif time.monotonic() - first_done[1] > exit_grace:
            hung = [i for i, code in enumerate(codes) if code is None]
            for i in hung:
                _kill(children[i])
            print(
                f"error: process(es) {', '.join(map(str, hung))} did not finish within "
                f"{exit_grace:.0f} s of process {first_done[0]}; killed them",
                file=sys.stderr,
                flush=True,
            )
            return 1
        time.sleep(_POLL)


if __name__ == "__main__":
    sys.exit(main())
