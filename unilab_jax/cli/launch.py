"""``unilab-jax launch --nproc N -- <train options>``: one training run over N local processes,
``python -m unilab_jax.train <options> --num-processes N --process-id I --coordinator-address
127.0.0.1:<port>`` each (``distributed.local_launch.launch``). On several machines, start
``unilab-jax train`` on each with those three options (or under SLURM / Open MPI without)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from unilab_jax.cli.options import documented, error, parse, values
from unilab_jax.distributed.local_launch import launch

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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # the launcher's options, the run's
    args = parse(documented(Launch), argv[:cut], prog="unilab-jax launch")
    try:
        return launch(argv[cut + 1 :], **values(args))
    except ValueError as err:
        return error(str(err))
