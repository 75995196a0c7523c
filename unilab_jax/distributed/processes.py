"""Multi-process training on JAX's own distributed runtime (``jax.distributed``).

One run may span several processes (on one machine or several): each process owns its local
devices, the ``"data"`` mesh spans every process's devices (``jax.devices()`` is global once
the runtime is up), and the same fused step runs over it. The global ``num_envs`` and
``batch_size`` are split over all devices, exactly as over the devices of one process, so 2
processes of 1 device train the same parameters as 1 process of 2 devices for one seed.

Starting one: every process gets ``num_processes``, its own ``process_id`` and the same
``coordinator_address`` (``host:port`` of process 0, which hosts the coordinator);
``unilab-jax launch --nproc N -- <train options>`` does that on one machine. Under
SLURM (``srun``) or Open MPI (``mpirun``) the three may be left unset: JAX reads them from
the scheduler's environment (``jax.distributed.initialize()`` with no arguments).

What this module adds to ``jax.distributed.initialize``:

- it runs before any JAX computation, with CPU collectives across processes (gloo, jaxlib's
  default) and without JAX's preemption service, whose own SIGTERM handler would swallow the
  SIGTERM that stops a run (``unilab_jax.training.interrupts``);
- a process that cannot reach the coordinator, or a coordinator whose peers never come, ends
  after ``coordinator_timeout`` seconds with one clear line (jaxlib itself aborts with a
  C++ stack trace, which cannot be caught from Python);
- a process that dies is noticed by the others: at once by the cross-process collectives
  (a connection reset, turned into ``ProcessLostError``), at the latest after
  ``heartbeat_timeout`` seconds by the coordinator's heartbeats (jaxlib then terminates every
  process, naming the dead one);
- ``check_same_settings``: every process must train the same settings; a difference is named
  (setting and process) instead of a silent hang or a wrong result.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Protocol

from unilab_jax.distributed.cluster import Cluster
from unilab_jax.errors import ConfigError

__all__ = [
    "LAUNCH_FIELDS",
    "ProcessLostError",
    "ProcessSettings",
    "agree_stop",
    "broadcast_int",
    "check_devices",
    "check_same_settings",
    "ensure_initialized",
    "exit_as_one_of_several",
    "is_multiprocess",
    "is_primary",
    "local_device_count",
    "lost_process",
    "peer_failure",
    "request_host_devices",
    "with_host_devices",
]

#: Settings of the launch, not of the training: a rerun (``--config``) or a resume takes none.
LAUNCH_FIELDS = (
    "num_processes",
    "process_id",
    "coordinator_address",
    "coordinator_timeout",
    "heartbeat_timeout",
)


class ProcessLostError(RuntimeError):
    """A collective with the other processes failed: another process has most likely died."""


class ProcessSettings(Protocol):
    """What this module reads of a run's settings: ``unilab_jax.config.TrainConfig`` (above
    this package, which it does not import) is one. The launch settings, the device count over
    all processes, and the C MuJoCo collection (its overlapped schedule wants a CPU device of
    its own)."""

    @property
    def num_devices(self) -> int: ...
    @property
    def num_processes(self) -> int | None: ...
    @property
    def process_id(self) -> int | None: ...
    @property
    def coordinator_address(self) -> str | None: ...
    @property
    def coordinator_timeout(self) -> int: ...
    @property
    def heartbeat_timeout(self) -> int: ...
    @property
    def physics(self) -> str: ...
    @property
    def collection(self) -> str: ...
    def planned_processes(self) -> int: ...
    def cluster(self) -> Cluster | None: ...


def with_host_devices(xla_flags: str, n: int) -> str:
    """``xla_flags`` asking XLA for ``n`` CPU devices (unchanged when ``n <= 1`` or a count is
    already set). It must be in ``XLA_FLAGS`` before JAX creates its CPU client."""
    if n <= 1 or "xla_force_host_platform_device_count" in xla_flags:
        return xla_flags
    return f"{xla_flags} --xla_force_host_platform_device_count={n}".strip()


def local_device_count(config: ProcessSettings) -> int:
    """Devices each process contributes (``num_devices`` is the count over all processes)."""
    return max(1, config.num_devices // config.planned_processes())


def request_host_devices(config: ProcessSettings) -> None:
    """Before JAX creates its CPU client: ``XLA_FLAGS`` asks for this process's devices (and
    one more for C MuJoCo's overlapped collection's own JAX code)."""
    count = local_device_count(config) + (
        config.physics == "mujoco" and config.collection == "overlap"
    )
    os.environ["XLA_FLAGS"] = with_host_devices(os.environ.get("XLA_FLAGS", ""), count)


def is_multiprocess() -> bool:
    """Whether this process is one of several (``jax.distributed`` initialised, more than
    one process). Cheap, and starts no JAX backend when the runtime is not up."""
    if "jax" not in sys.modules:
        return False
    import jax

    return jax.distributed.is_initialized() and jax.process_count() > 1


def is_primary() -> bool:
    """Process 0 of a multi-process run, or the only process: the one that logs and writes."""
    if "jax" not in sys.modules:
        return True
    import jax

    return not jax.distributed.is_initialized() or jax.process_index() == 0


def ensure_initialized(config: ProcessSettings) -> None:
    """Start ``jax.distributed`` for a multi-process ``config`` (no-op for one process, or
    when it is already up and matches). Must run before any JAX computation."""
    import jax

    n = config.planned_processes()
    if jax.distributed.is_initialized():
        if config.num_processes is not None and jax.process_count() != n:
            raise ConfigError(
                f"num_processes {n} but jax.distributed was initialised with "
                f"{jax.process_count()} process(es); pass --num-processes {jax.process_count()}"
            )
        if config.process_id is not None and jax.process_index() != config.process_id:
            raise ConfigError(
                f"process_id {config.process_id} but jax.distributed was initialised as "
                f"process {jax.process_index()}"
            )
        return
    if n <= 1:
        return
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise ConfigError(
            "a multi-process run must start jax.distributed before any JAX computation, but "
            "JAX is already running in this process; build the Trainer (or call "
            "unilab_jax.distributed.processes.ensure_initialized(config)) before anything else "
            "uses JAX"
        )
    if not jax.config.jax_cpu_collectives_implementation:
        # Cross-process collectives on CPU (jaxlib 0.10.2 already defaults to gloo).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    # Its SIGTERM handler (installed by initialize) would swallow the signal that stops a run.
    jax.config.update("jax_enable_preemption_service", False)
    cluster = config.cluster()
    who = (
        f"process {cluster.process_id} of {n} ({cluster.name})"
        if cluster
        else f"process {config.process_id} of {n}"
    )
    done = threading.Event()
    threading.Thread(
        target=_connect_watchdog,
        args=(done, config, who, cluster),
        name="unilab-jax-connect-watchdog",
        daemon=True,
    ).start()
    timeouts = dict(
        # jaxlib aborts the process (uncatchable) when its own timeout passes: the watchdog
        # fires first and says why in one line.
        initialization_timeout=config.coordinator_timeout + 15,
        heartbeat_timeout_seconds=config.heartbeat_timeout,
        # How long a finished process waits for the others at exit (and how long a process
        # blocked on a peer that already exited waits before jaxlib ends it).
        shutdown_timeout_seconds=config.heartbeat_timeout,
    )
    try:
        if cluster is not None:
            jax.distributed.initialize(**timeouts)
        else:
            jax.distributed.initialize(
                config.coordinator_address, config.num_processes, config.process_id, **timeouts
            )
    except (RuntimeError, ValueError, TypeError) as err:
        raise ConfigError(f"{who}: jax.distributed.initialize failed: {err}") from None
    finally:
        done.set()


def _connect_watchdog(
    done: threading.Event, config: ProcessSettings, who: str, cluster: Cluster | None
) -> None:
    """End the process with a clear message when the processes have not all connected within
    ``coordinator_timeout`` seconds (``connect`` releases the GIL, so this thread runs)."""
    if done.wait(config.coordinator_timeout):
        return
    address = config.coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS") or "?"
    reachable = _listening(address)
    if config.process_id == 0 or (cluster is not None and cluster.process_id == 0):
        detail = (
            f"waited {config.coordinator_timeout} s for the other processes to connect to its "
            f"coordinator at {address}; start all {config.planned_processes()} processes with "
            "the same settings, --num-processes, their own --process-id and this "
            "--coordinator-address (unilab-jax launch does so on one machine)"
        )
    elif reachable is False:
        detail = (
            f"nothing answers at the coordinator address {address} after "
            f"{config.coordinator_timeout} s; start process 0 there, or pass process 0's "
            "reachable host:port as --coordinator-address (and check that no firewall blocks "
            "the port)"
        )
    else:
        detail = (
            f"connected to {address} but not all {config.planned_processes()} processes joined "
            f"within {config.coordinator_timeout} s; start every process with the same "
            "--num-processes and a distinct --process-id"
        )
    print(f"error: {who}: {detail}; or raise --coordinator-timeout", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(2)


def _listening(address: str) -> bool | None:
    """Whether something accepts TCP connections at ``host:port`` (None: cannot tell)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False if host else None


def check_devices(config: ProcessSettings) -> None:
    """After start-up: a multi-process mesh spans every device of every process."""
    import jax

    if not is_multiprocess():
        return
    total, local = len(jax.devices()), len(jax.local_devices())
    if config.num_devices != total:
        raise ConfigError(
            f"num_devices {config.num_devices} but the {jax.process_count()} processes have "
            f"{total} device(s) in all ({local} here); a multi-process run uses every device: "
            f"pass --num-devices {total}"
        )


def _gather_bytes(data: bytes) -> list[bytes]:
    """Every process's ``data``, in process order (two small collectives)."""
    import numpy as np
    from jax.experimental import multihost_utils

    lengths = multihost_utils.process_allgather(np.array([len(data)], np.int32))
    longest = int(np.max(lengths))
    padded = np.zeros(max(longest, 1), np.uint8)
    padded[: len(data)] = np.frombuffer(data, np.uint8)
    gathered = np.asarray(multihost_utils.process_allgather(padded))
    return [bytes(row[: int(n)]) for row, n in zip(gathered, np.ravel(lengths), strict=True)]


def check_same_settings(settings: dict) -> None:
    """Every process of the run must train the same settings (``run_config``'s dict): the
    first difference is named with its process. A collective: every process calls it."""
    if not is_multiprocess():
        return
    import jax

    def comparable(value: dict) -> dict:  # how each process was started may differ
        train = {k: v for k, v in value.get("train", {}).items() if k not in LAUNCH_FIELDS}
        return {**value, "train": train}

    mine = json.dumps(comparable(settings), sort_keys=True, default=str).encode()
    everyone = [json.loads(b) for b in _gather_bytes(mine)]
    reference = everyone[0]
    for index, other in enumerate(everyone[1:], start=1):
        if other == reference:
            continue
        changed = []
        for section in sorted(set(reference) | set(other)):
            a, b = reference.get(section) or {}, other.get(section) or {}
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    changed.append(f"{name}: process 0 {a.get(name)!r}, process {index} "
                                   f"{b.get(name)!r}")  # fmt: skip
        raise ConfigError(
            f"process {index} was started with other settings than process 0 "
            f"({'; '.join(changed[:4])}); start every process with the same options "
            f"(this is process {jax.process_index()})"
        )


def broadcast_int(value: int) -> int:
    """Process 0's ``value`` on every process (the value itself for one process)."""
    if not is_multiprocess():
        return value
    import numpy as np
    from jax.experimental import multihost_utils

    # int32 halves: without jax_enable_x64 an int64 would be truncated.
    halves = np.array([value >> 31, value & 0x7FFFFFFF], np.int32)
    high, low = (int(v) for v in multihost_utils.broadcast_one_to_all(halves))
    return (high << 31) | low


def agree_stop(requested: int | None) -> int | None:
    """The stop request every process acts on after a block: a signal received by any
    process stops them all after the same block (they must run the same collectives)."""
    if not is_multiprocess():
        return requested
    import numpy as np
    from jax.experimental import multihost_utils

    everyone = multihost_utils.process_allgather(np.array([requested or 0], np.int32))
    signum = int(np.max(everyone))
    return signum or None


_PEER_FAILURE = re.compile(
    r"gloo|connection|peer|heartbeat|unavailable|coordination|barrier|socket|broken pipe", re.I
)


def peer_failure(err: BaseException) -> bool:
    """Whether ``err`` reads like a cross-process collective that lost its peer."""
    return bool(_PEER_FAILURE.search(str(err)))


def lost_process(err: BaseException) -> ProcessLostError:
    """``err`` (from a step or fetch that talks to the other processes) as a clear error."""
    import jax

    first = str(err).strip().split("\n")[0]
    return ProcessLostError(
        f"process {jax.process_index()}: a collective with the other processes failed "
        f"({type(err).__name__}: {first}); another process has most likely died or been "
        "stopped: see its output"
    )


def exit_as_one_of_several(program: Callable[[], int]) -> int:
    """``program()``'s exit code. In a process of several a failure (an exception, or a code
    other than 0 or a signal's 130/143) ends this process at once, without jax.distributed's
    shutdown barrier (it would wait for peers still busy): the others fail on its closed
    connections."""
    try:
        code = program()
    except BaseException as err:
        if not is_multiprocess():
            raise
        code = getattr(err, "code", None)
        if not isinstance(code, int):
            traceback.print_exception(err)
        hard_exit(code if isinstance(code, int) else 1)
    if is_multiprocess() and code not in (0, 128 + signal.SIGINT, 128 + signal.SIGTERM):
        hard_exit(code)
    return code


def hard_exit(code: int) -> None:
    """End the CLI process now, output flushed, without the interpreter's teardown: a
    multi-process run that failed (jax.distributed's shutdown barrier would wait
    ``heartbeat_timeout`` s for peers that will not come; the closed connections let the other
    processes notice at once), or a run stopped before training began while a compile still
    runs in a background thread."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def launch_prefix() -> str | None:
    """The launcher command that started this process (set by ``unilab-jax launch``)."""
    return os.environ.get("UNILAB_JAX_LAUNCH") or None
