"""Several local processes of one training run, supervised: each started in its own session
(a terminal's Ctrl+C reaches the supervisor only) and killed when the supervisor dies (Linux);
SIGINT and SIGTERM forwarded to all; the first failure kills the rest; a process still running
``exit_grace`` seconds after another finished is killed as hung. ``launch`` starts one
training run this way (``unilab-jax launch``); ``run_processes`` any commands.
"""

from __future__ import annotations

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
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["LAUNCH_OPTIONS", "child_env", "describe_exit", "free_port", "launch", "run_processes"]

_POLL = 0.05
#: The options ``launch`` sets for each process of a training run.
LAUNCH_OPTIONS = ("--num-processes", "--process-id", "--coordinator-address")


def launch(
    train_args: list[str], *, nproc: int, devices_per_process: int = 1, platform: str = "cpu",
    port: int | None = None, exit_grace: float = 120.0,
) -> int:  # fmt: skip
    """One training run (``python -m unilab_jax.train *train_args``) over ``nproc`` local
    processes of ``devices_per_process`` devices each, supervised by :func:`run_processes`;
    ``--num-devices`` is their total unless given. Returns the exit status; bad options raise
    ``ValueError`` before anything starts."""
    if nproc < 1 or devices_per_process < 1:
        raise ValueError("--nproc and --devices-per-process must be at least 1")
    taken = [name for name in LAUNCH_OPTIONS if _has_option(train_args, name)]
    if taken:
        raise ValueError(f"{', '.join(taken)}: set by the launcher for each process; remove them")
    n, k = nproc, devices_per_process
    if not _has_option(train_args, "--num-devices"):
        train_args = [*train_args, "--num-devices", str(n * k)]
    address = f"127.0.0.1:{port or free_port()}"
    shown = ["--platform", platform] if platform != "cpu" else []
    prefix = shlex.join(["unilab-jax", "launch", "--nproc", str(n), "--devices-per-process",
                         str(k), *shown, "--"])  # fmt: skip
    own = ["--num-processes", str(n), "--coordinator-address", address]
    train = [sys.executable, "-m", "unilab_jax.train", *train_args, *own]
    commands = [[*train, "--process-id", str(i)] for i in range(n)]
    envs = [child_env(os.environ, i, n, k, platform, prefix) for i in range(n)]
    logs = Path(tempfile.mkdtemp(prefix="unilab-jax-launch-"))

    def started(children) -> None:
        pids = ", ".join(f"{i}: pid {c.pid}" for i, c in enumerate(children))
        print(f"launch: {n} processes x {k} {platform} device(s), coordinator {address} "
              f"({pids}); output of processes 1..{n - 1} in {logs}", file=sys.stderr)  # fmt: skip

    code, forwarded = run_processes(commands, envs, logs, exit_grace, started)
    if code == 0 or forwarded:
        shutil.rmtree(logs, ignore_errors=True)
    return code


def _has_option(args: list[str], name: str) -> bool:
    return any(arg == name or arg.startswith(f"{name}=") for arg in args)


def run_processes(
    commands: Sequence[list[str]],
    envs: Sequence[dict],
    logs: Path,
    exit_grace: float,
    started: Callable[[list[subprocess.Popen]], None] | None = None,
) -> tuple[int, bool]:
    """Run ``commands`` (process i with ``envs[i]``) until all end; process 0's output is
    streamed, the others' goes to ``logs/process<i>.log`` (shown when one fails).
    ``started(children)`` is called once all run. Returns (the exit status, whether a signal
    was forwarded); no process is left running, whatever happens."""
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
        for i, (command, env) in enumerate(zip(commands, envs, strict=True)):
            path = None if i == 0 else logs / f"process{i}.log"
            children.append(_start(command, env, path))
            log_paths.append(path)
        if started is not None:
            started(children)
        code = _watch(children, log_paths, exit_grace)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for child in children:  # never leave one behind (e.g. the supervisor itself failing)
            if child.poll() is None:
                _kill(child)
    return code, bool(forwarded)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(
    base: dict, index: int, nproc: int, devices_per_process: int, platform: str, prefix: str
) -> dict:
    """Process ``index``'s environment: its share of the devices (forced host devices on the
    CPU, ``CUDA_VISIBLE_DEVICES`` on GPUs), unbuffered output, the launch command ``prefix``
    (for the resume line) and the number of processes sharing this machine's cores."""
    env = dict(base)
    k = devices_per_process
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", ""))
        env["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={k}".strip()
    else:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(nproc * k)]
        mine = ids[index * k : (index + 1) * k]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(mine)
    env["PYTHONUNBUFFERED"] = "1"
    env["UNILAB_JAX_LAUNCH"] = prefix
    # The processes on this machine share its cores (C MuJoCo's default thread count).
    env["UNILAB_JAX_LOCAL_PROCESSES"] = str(nproc)
    return env


def describe_exit(code: int) -> tuple[str, int]:
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


def _watch(children, log_paths, exit_grace: float) -> int:
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
            what, status = describe_exit(code)
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
