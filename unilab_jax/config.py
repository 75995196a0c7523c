"""Training configuration: the loop's sizes and schedule, validated before anything compiles.

Defaults follow UniLab's reference ``OffPolicyRunner``:
4096 envs, ``replay_buffer_n`` 1024, batch 8192, 8 updates per env step, one env step per
learner iteration. ``policy_frequency`` defaults per algorithm (SAC 4, TD3 2, from
``unilab_jax.algos.registry``), as in the reference configs.

``TrainConfig.physics`` picks what the core collects with: MJX inside the fused device step
(the default), or C MuJoCo on CPU threads feeding the same replay and update block
(``unilab_jax.collection.mujoco``). It is not the facade's ``sim_backend``, which picks which
trainer
runs (``"mujoco"`` there is the torch path).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from unilab_jax.algos.registry import get_algo
from unilab_jax.distributed.cluster import Cluster, detected_cluster
from unilab_jax.errors import ConfigError

__all__ = [
    "COLLECTIONS",
    "LOGGERS",
    "MATMUL_PRECISIONS",
    "PHYSICS",
    "ConfigError",
    "TrainConfig",
]

LOGGERS = ("tensorboard", "wandb", "none")
#: ``TrainConfig.physics`` values.
PHYSICS = ("mjx", "mujoco")
#: ``TrainConfig.collection`` values (C MuJoCo physics).
COLLECTIONS = ("sync", "overlap")
#: ``TrainConfig.matmul_precision`` values (``jax.default_matmul_precision``'s names).
MATMUL_PRECISIONS = ("highest", "high", "default")


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how the fused loop is shaped."""

    env: str = "PendulumSwingup"
    """Registered task name (see ``unilab_jax.envs.registered_names()``)."""
    algo: str = "sac"
    """``"sac"`` (FastSAC), ``"td3"`` (FastTD3), ``"flash_sac"`` (FlashSAC) or ``"hora_sac"``
    (HORA-SAC: FastSAC whose actor also reads the task's privileged critic values)."""
    num_envs: int = 4096
    """Parallel environments, over all devices."""
    replay_buffer_n: int = 1024
    """Env steps kept per env; the buffer holds ``replay_buffer_n * num_envs`` rows."""
    batch_size: int = 8192
    """Global batch of one gradient update (split evenly over devices)."""
    learning_starts: int = 0
    """Learning starts once ``max(batch_size, learning_starts * num_envs)`` rows are stored."""
    updates_per_step: int = 8
    """Gradient updates per learner iteration (critic every update)."""
    policy_frequency: int | None = None
    """Actor update when ``u % policy_frequency == 0``; None: 4 for SAC, 2 for TD3."""
    env_steps_per_sync: int = 1
    """Vectorised env steps collected per learner iteration."""
    max_iterations: int = 1500
    """Learner iterations to run."""
    log_interval: int = 10
    """Iterations scanned on device per host call; the host logs once per call."""
    save_interval: int = 500
    """Checkpoint every this many iterations (rounded up to a log interval); 0 disables."""
    num_devices: int = 1
    """Devices of the ``"data"`` mesh axis; envs, replay and batch are split over them. In a
    multi-process run: the devices of all processes together (every one of them)."""
    eval_envs: int = 64
    """Fresh envs of each deterministic evaluation (one full episode each); 0: no evaluation."""
    eval_interval: int | None = None
    """Iterations between evaluations (rounded up to a log interval), plus one after the last
    iteration; None: about 10 per run; 0: only the final one."""
    seed: int = 0
    """PRNG seed for parameters, envs, exploration and sampling."""
    env_overrides: dict | None = field(default=None, hash=False)
    """Overrides of the task's config fields."""
    num_processes: int | None = None
    """Processes of a multi-process run (jax.distributed), each owning its local devices;
    None: one, or what JAX detects under SLURM (srun) or Open MPI (mpirun) when process_id and
    coordinator_address are unset too (1: train alone even there). ``unilab-jax
    launch`` sets all three."""
    process_id: int | None = None
    """This process's index in a multi-process run, 0 .. num_processes - 1; process 0 hosts
    the coordinator, logs and writes the run's files."""
    coordinator_address: str | None = None
    """host:port of process 0's coordinator, the same for every process of the run."""
    coordinator_timeout: int = 60
    """Seconds a multi-process run waits at start for all processes to connect."""
    heartbeat_timeout: int = 60
    """Seconds after which a silent process of a multi-process run counts as dead and the
    others are stopped (a dead local process is usually noticed at once)."""
    matmul_precision: str = "highest"
    """Matrix-multiply precision of everything the trainer compiles (learner, physics,
    evaluation): "highest" (full float32), "high" or "default" (faster on GPUs and TPUs:
    TF32 or bfloat16 passes, which peers found can break MJX training); no effect on CPU."""
    physics: str = "mjx"
    """What the envs are stepped with: "mjx" (MJX inside the fused device step; any JAX
    device, and the only choice for playground/ and brax/ envs) or "mujoco" (C MuJoCo on CPU
    threads, the same task code; chunks of transitions move into the device replay; much
    faster for robots on a CPU)."""
    collection: str = "sync"
    """With "mujoco" physics: "sync" (collect env_steps_per_sync steps, then update;
    deterministic, MJX's schedule) or "overlap" (the next chunk is collected while the learner
    updates, with an actor one iteration old; needs a CPU device apart from the learner's,
    which the CLI provides on a CPU)."""
    physics_threads: int | None = None
    """C MuJoCo threads with "mujoco" physics; None: the CPU cores this process may use."""

    @property
    def resolved_policy_frequency(self) -> int:
        if self.policy_frequency is not None:
            return self.policy_frequency
        return get_algo(self.algo).default_policy_frequency

    @property
    def resolved_eval_interval(self) -> int:
        """Iterations between evaluations, a multiple of ``log_interval`` (0: final only)."""
        interval = self.max_iterations // 10 if self.eval_interval is None else self.eval_interval
        if interval <= 0 or self.eval_envs <= 0:
            return 0
        return -(-interval // self.log_interval) * self.log_interval

    @property
    def capacity(self) -> int:
        return self.replay_buffer_n * self.num_envs

    @property
    def train_start_rows(self) -> int:
        """Rows that must be stored before the first update (the reference's threshold)."""
        return max(self.batch_size, self.learning_starts * self.num_envs)

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def validate(self, available_devices: int | None = None) -> None:
        """Raise ``ConfigError`` for sizes that cannot work. Cheap: runs before compiling."""
        get_algo(self.algo)  # an unknown name fails with the list of known ones
        positive = (
            "num_envs",
            "replay_buffer_n",
            "batch_size",
            "updates_per_step",
            "env_steps_per_sync",
            "log_interval",
            "num_devices",
            "coordinator_timeout",
            "heartbeat_timeout",
        )
        if self.policy_frequency is not None:
            positive += ("policy_frequency",)
        for name in positive:
            value = getattr(self, name)
            # bool is an int in Python; True is not a size.
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.eval_interval is not None and (
            isinstance(self.eval_interval, bool) or not isinstance(self.eval_interval, int)
        ):
            raise ConfigError(f"eval_interval must be an integer, got {self.eval_interval!r}")
        for name in ("max_iterations", "learning_starts", "save_interval", "eval_envs"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.eval_interval is not None and self.eval_interval < 0:
            raise ConfigError(f"eval_interval must be >= 0, got {self.eval_interval}")
        if self.batch_size > self.capacity:
            raise ConfigError(
                f"batch_size {self.batch_size} is larger than the replay buffer "
                f"(replay_buffer_n {self.replay_buffer_n} x num_envs {self.num_envs} = "
                f"{self.capacity} rows); raise replay_buffer_n or num_envs, or lower batch_size"
            )
        if self.train_start_rows > self.capacity:
            raise ConfigError(
                f"learning_starts {self.learning_starts} x num_envs {self.num_envs} rows can never "
                f"be stored in a buffer of {self.capacity} rows; lower learning_starts to at most "
                f"replay_buffer_n ({self.replay_buffer_n}), or raise replay_buffer_n"
            )
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise ConfigError(
                f"matmul_precision {self.matmul_precision!r} is not one of "
                f"{', '.join(MATMUL_PRECISIONS)}"
            )
        self._validate_physics()
        self._validate_processes()
        devices = f"num_devices {self.num_devices}" + self._over_processes()
        if self.num_envs % self.num_devices:
            raise ConfigError(
                f"num_envs {self.num_envs} is not divisible by {devices}; "
                f"use a multiple of {self.num_devices} envs"
            )
        if self.batch_size % self.num_devices:
            raise ConfigError(
                f"batch_size {self.batch_size} is not divisible by {devices}; "
                f"use a multiple of {self.num_devices}"
            )
        if available_devices is not None and self.num_devices > available_devices:
            raise ConfigError(
                f"num_devices {self.num_devices} but JAX sees only {available_devices} device(s); "
                "on a CPU, set XLA_FLAGS=--xla_force_host_platform_device_count="
                f"{self.num_devices} before starting Python"
            )

    def _validate_physics(self) -> None:
        """``physics`` / ``collection`` / ``physics_threads``: known values, a registered task
        for C MuJoCo, and the combinations that exist."""
        if self.physics not in PHYSICS:
            raise ConfigError(f"physics {self.physics!r} is not one of {', '.join(PHYSICS)}")
        if self.collection not in COLLECTIONS:
            raise ConfigError(
                f"collection {self.collection!r} is not one of {', '.join(COLLECTIONS)}"
            )
        threads = self.physics_threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads <= 0):  # fmt: skip
            raise ConfigError(f"physics_threads must be a positive integer, got {threads!r}")
        if self.physics == "mjx":
            from unilab_jax.envs.registry import mjx_refusal  # the task's class, not built

            refusal = mjx_refusal(self.env)
            if refusal is not None:
                raise ConfigError(refusal)
            if self.collection != "sync":
                raise ConfigError(
                    f"collection {self.collection!r} needs physics 'mujoco' (MJX collects inside "
                    "the fused device step); add --physics mujoco or drop --collection"
                )
            return
        if self.env.startswith(("playground/", "brax/")):
            raise ConfigError(
                f"{self.env} is a JAX environment and runs on MJX only (physics 'mjx'); C MuJoCo "
                "(physics 'mujoco') steps the registered tasks (python -m unilab_jax.train "
                "--list-envs)"
            )
        if self.planned_processes() > 1 and self.collection == "overlap":
            raise ConfigError(
                "collection 'overlap' runs in one process (its learner devices may be several: "
                "--num-devices); use collection 'sync' for a multi-process run"
            )

    def _over_processes(self) -> str:
        n = self.planned_processes()
        return f" (the devices of all {n} processes)" if n > 1 else ""

    def cluster(self) -> Cluster | None:
        """The scheduler's job (SLURM, Open MPI) when the three launch settings are left to it
        (``num_processes``, ``process_id`` and ``coordinator_address`` all unset)."""
        if (self.num_processes, self.process_id, self.coordinator_address) != (None,) * 3:
            return None
        return detected_cluster()

    def planned_processes(self) -> int:
        """How many processes the run will have (known before JAX starts)."""
        if self.num_processes is not None:
            return self.num_processes
        cluster = self.cluster()
        return cluster.num_processes if cluster else 1

    def _validate_processes(self) -> None:
        """The multi-process settings (``unilab_jax.distributed.processes``), checked before JAX
        starts."""
        n, pid, address = self.num_processes, self.process_id, self.coordinator_address
        for name, value in (("num_processes", n), ("process_id", pid)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if n is not None and n <= 0:
            raise ConfigError(f"num_processes must be a positive integer, got {n}")
        if pid is not None and n is None:
            raise ConfigError(f"process_id {pid} given without num_processes; pass both")
        if pid is not None and not 0 <= pid < n:
            raise ConfigError(
                f"process_id {pid} is out of range for num_processes {n}; use 0 .. {n - 1}"
            )
        if address is not None:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"coordinator_address {address!r} is not host:port (e.g. 10.0.0.1:1234)"
                )
        if n is not None and n > 1 and (pid is None or address is None):
            raise ConfigError(
                f"num_processes {n} needs --process-id and --coordinator-address for every "
                f"process (or start them all with unilab-jax launch --nproc {n})"
            )
        processes = self.planned_processes()
        if self.num_devices % processes:
            raise ConfigError(
                f"num_devices {self.num_devices} (the devices of all processes) is not "
                f"divisible by the {processes} processes; each process contributes the same "
                "number of devices"
            )
