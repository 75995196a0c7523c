"""The multi-process job a scheduler started this process in, read from its environment.

SLURM (``srun``) and Open MPI (``mpirun``) describe the job in environment variables, the same
ones ``jax.distributed.initialize()`` reads when it is given no arguments. Reading them needs no
JAX, so the configuration (``TrainConfig.planned_processes``) and the command line know the
run's process count before JAX starts; ``unilab_jax.distributed.processes`` then starts the runtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Cluster", "detected_cluster"]


@dataclass(frozen=True)
class Cluster:
    """A multi-process job JAX detects from its scheduler's environment."""

    name: str  # "slurm" or "ompi", as jax's cluster_detection_method names them
    num_processes: int
    process_id: int


def detected_cluster(environ: dict | None = None) -> Cluster | None:
    """The SLURM step (``srun``) or Open MPI job (``mpirun``) this process runs in, when it has
    more than one process: the environment JAX's own detection reads. None otherwise (a
    single-task batch job trains as one process)."""
    env = os.environ if environ is None else environ
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
             "SLURM_LOCALID")  # fmt: skip
    try:
        if all(name in env for name in slurm) and int(env["SLURM_NTASKS"]) > 1:
            return Cluster("slurm", int(env["SLURM_NTASKS"]), int(env["SLURM_PROCID"]))
        if "OMPI_MCA_orte_hnp_uri" in env and int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
            return Cluster(
                "ompi", int(env["OMPI_COMM_WORLD_SIZE"]), int(env["OMPI_COMM_WORLD_RANK"])
            )
    except (KeyError, ValueError):
        return None
    return None
