"""Training on the host: ``Trainer`` builds and compiles once, ``train`` runs.

``Trainer`` builds the env, the agent (from ``unilab_jax.algos.registry``), the mesh and the
compiled step for one ``TrainConfig``: a collection (``unilab_jax.collection``, chosen by
``physics``: the fused MJX step, or C MuJoCo threads feeding a chunk-fed learner step) that
gives a block step ``state -> (state, metrics)`` of the same layout, compiled once per block
length (in the background where it can: ``unilab_jax.collection.compiling``).

``train`` sets a run up around it: the run's settings (``unilab_jax.training.run_settings``: the
algorithm config, ``run_config.json``, resume), its sinks (``unilab_jax.training.run_sinks``:
checkpoints, health checks, evaluation, the console panel with TensorBoard/wandb, a user
callback), the log dir's lock, and then the host loop (``unilab_jax.training.host_loop``), which
touches the device once per ``log_interval`` iterations and hands each block's record
(``unilab_jax.training.records``) to the sinks. The host loop itself prints and writes nothing.
"""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from unilab_jax.algos.agent import Agent
from unilab_jax.algos.registry import get_algo
from unilab_jax.algos.symmetry import resolve_mirror
from unilab_jax.collection import make_collection
from unilab_jax.collection.compiling import (
    DEFAULT_COMPILATION_CACHE,
    Background,
    use_compilation_cache,
)
from unilab_jax.collection.step import TrainState, make_mesh
from unilab_jax.config import LOGGERS, ConfigError, TrainConfig
from unilab_jax.distributed import processes
from unilab_jax.envs import cpu_linalg, load
from unilab_jax.errors import CheckpointError, EnvNaNError
from unilab_jax.training.checkpoint import CheckpointWriter
from unilab_jax.training.host_loop import (
    block_length,
    compile_first_block,
    run_blocks,
    stop_on_signal,
)
from unilab_jax.training.interrupts import RunSignal, RunStopped, StopSignals
from unilab_jax.training.records import run_info, run_summary, write_run_summary
from unilab_jax.training.resume import restore_run, resume_source
from unilab_jax.training.run_settings import (
    RUN_CONFIG_FILE,
    check_same_build,
    resolve_algo_config,
    run_config,
    write_run_config,
)
from unilab_jax.training.run_sinks import console_sinks, run_sinks
from unilab_jax.training.rundir import claim_log_dir
from unilab_jax.training.sinks import CallbackSink, Checkpointer, Sink

__all__ = [
    "DEFAULT_COMPILATION_CACHE",
    "RUN_CONFIG_FILE",
    "Checkpointer",
    "EnvNaNError",
    "Trainer",
    "TrainResult",
    "default_log_dir",
    "resolve_algo_config",
    "run_config",
    "train",
    "use_compilation_cache",
]


@dataclass
class TrainResult:
    """What ``train`` returns: the final state and a run summary like the reference's
    ``last_run_summary``, plus the per-log-interval history."""

    state: TrainState
    summary: dict
    history: list[dict] = field(default_factory=list)


class Trainer:
    """Builds env, agent, mesh and the compiled step for one configuration.

    ``algo_config`` is a ``SACConfig``/``TD3Config``, or a dict of overrides applied by
    ``resolve_algo_config`` (None: defaults plus the task's value bounds). The configuration
    is validated here, once, before anything is built or compiled.

    A multi-process ``config`` (``num_processes`` > 1, or a detected SLURM/Open MPI job)
    starts ``jax.distributed`` here, so the Trainer must be built before anything else uses
    JAX (``unilab_jax.distributed.processes``); every process then checks that all train the same
    settings.
    """

    def __init__(self, config: TrainConfig, algo_config: Any = None):
        config.validate()  # before JAX starts (and before a multi-process run connects)
        processes.ensure_initialized(config)
        config.validate(available_devices=len(jax.devices()))
        processes.check_devices(config)
        use_compilation_cache()
        self.config = config
        self.env = load(config.env, config_override=config.env_overrides, physics=config.physics)
        if algo_config is None or isinstance(algo_config, dict):
            algo_config = resolve_algo_config(config.algo, self.env, algo_config)
        algo_config.validate()
        self.algo_config = algo_config
        processes.check_same_settings(run_config(config, algo_config))
        self.obs_dim = self.env.obs_size["obs"]
        self.critic_dim = self.env.obs_size["critic"]
        # The task's mirror map when use_symmetry (refused here for a task without one or an odd
        # batch per device, before anything is compiled).
        use_symmetry = getattr(self.algo_config, "use_symmetry", False)
        mirror = resolve_mirror(use_symmetry, self.env, config.batch_size, config.num_devices)
        self.agent: Agent = get_algo(config.algo).make_agent(
            self.algo_config, self.obs_dim, self.critic_dim, self.env.action_size,
            axis_name="data", mirror=mirror, num_envs=config.num_envs,
        )  # fmt: skip
        # jaxlib 0.10.2's batched LAPACK kernels can deadlock across CPU devices of one
        # process; with more than one device, lower Cholesky / triangular solve without LAPACK.
        cpu_linalg.install_on_cpu()
        self.mesh = make_mesh(config.num_devices)
        self.trace_counter = [0]
        #: How the run collects (``collection.make_collection`` by ``config.physics``): the
        #: fused MJX step, or C MuJoCo threads feeding a chunk-fed learner step.
        self.collection = make_collection(
            config, self.env, self.agent, self.mesh, self.trace_counter
        )
        self._steps: dict[int, Any] = {}
        #: Seconds each step length took to compile (in the background or not).
        self.step_compile_seconds: dict[int, float] = {}

    def close(self) -> None:
        """Release what the trainer holds outside JAX (the C MuJoCo threads); idempotent."""
        self.collection.close()

    def precision(self):
        """``jax.default_matmul_precision(config.matmul_precision)``: every function the
        trainer compiles is traced under it (full float32 unless the config opts out)."""
        return jax.default_matmul_precision(self.config.matmul_precision)

    def init_state(self, seed: int | None = None) -> TrainState:
        seed = self.config.seed if seed is None else seed
        with self.precision():
            return self.collection.init_state(seed)

    def precompile_step(self, num_iterations: int) -> None:
        """Start compiling the ``num_iterations`` step in a background thread and return at once,
        before any state exists (from ``state_shapes``): ``init_state`` (its own compile, the env
        reset) and the evaluator's compile run meanwhile, and ``step_fn`` waits for what is
        left. ``train`` calls it first."""
        if num_iterations not in self._steps:
            self._steps[num_iterations] = Background(
                lambda: self.collection.compile_step(num_iterations, self.precision),
                f"compile-step-{num_iterations}",
            )

    def step_fn(self, state: TrainState, num_iterations: int):
        """The compiled step running ``num_iterations`` iterations (compiled once per length)."""
        step = self._steps.get(num_iterations)
        if step is None:
            start = time.perf_counter()
            step = self.collection.compile_step(num_iterations, self.precision)
            self.step_compile_seconds[num_iterations] = time.perf_counter() - start
        elif isinstance(step, Background):
            background, step = step, step.result()
            self.step_compile_seconds[num_iterations] = background.seconds
        self._steps[num_iterations] = step
        return step

    def precompile_evaluator(self, state: TrainState, num_envs: int) -> None:
        """Start compiling the evaluator of ``num_envs`` envs for ``state``'s layout in a
        background thread and return at once: the training step compiles and runs meanwhile,
        and the first evaluation only waits for what is left. ``train`` calls it."""
        self.collection.precompile_evaluator(state.agent, num_envs, self.precision)

    def evaluate(self, state: TrainState, num_envs: int = 64, seed: int = 0) -> float:
        """Mean return of one deterministic episode in each of ``num_envs`` fresh envs."""
        return self.evaluate_episodes(state, num_envs, seed)[0]

    def evaluate_episodes(
        self, state: TrainState, num_envs: int = 64, seed: int = 0
    ) -> tuple[float, float]:
        """``(mean return, mean length)`` of one deterministic episode in each of ``num_envs``
        fresh envs (compiled once per ``num_envs``; on C MuJoCo with ``physics="mujoco"``)."""
        return self.collection.evaluate_episodes(state.agent, num_envs, seed, self.precision)


def default_log_dir(config: TrainConfig, started: datetime.datetime) -> Path:
    """``logs/<algo>/<env>/<time>_<physics>``: the reference's layout, named by the physics the
    run collects with (``mjx`` or ``mujoco``), under the working directory."""
    name = f"{started:%Y-%m-%d_%H-%M-%S}_{config.physics}"
    return Path("logs") / get_algo(config.algo).log_name / config.env / name


def train(
    config: TrainConfig,
    algo_config: Any = None,
    *,
    log_dir: str | Path | bool | None = None,
    logger: str = "tensorboard",
    quiet: bool = False,
    trainer: Trainer | None = None,
    initial_state: TrainState | None = None,
    resume: str | Path | bool | None = None,
    resume_step: int | None = None,
    checkpointer: Checkpointer | None = None,
    on_block: Callable[[dict], Any] | None = None,
    sinks: Sequence[Sink] | None = None,
    wandb: dict | None = None,
) -> TrainResult:
    """Train ``config`` and return the final state, a summary and the history.

    Every block of ``log_interval`` iterations becomes one record (``unilab_jax.training.sinks``
    documents its fields) handed to the sinks: the checkpoint writer, the health check, the
    evaluation, the console panel with TensorBoard/wandb (or plain lines when stdout is not a
    terminal), and ``on_block(record)`` when given. ``sinks`` replaces the console sinks with
    your own; the checkpoint, health and evaluation sinks still run in front of them.

    ``wandb``: ``wandb.init`` options for ``logger="wandb"`` (``project``, ``entity``,
    ``group``, ``name``, ...); TensorBoard files are written alongside.

    ``log_dir``: the run's folder; None writes nothing; ``True`` makes a new one,
    ``default_log_dir`` (in a multi-process run process 0's clock names it). The run owns it:
    one run at a time (``unilab_jax.training.rundir``: a second one fails at once with
    ``LogDirError``), ``run_config.json`` at the start, TensorBoard/wandb files, orbax
    checkpoints (``checkpoints/``) and ``run_summary.json`` (the summary and ``log_dir``) at
    the end, also when a signal stopped the run (status ``"interrupted (SIGTERM)"``) or it
    diverged (``"diverged"``). An exception that ends a run with a log dir (a signal's stop,
    a divergence, a failed save, a lost process) carries it as its ``log_dir`` attribute.
    SIGINT/SIGTERM stop the run after its current block with a final checkpoint and raise
    ``TrainingInterrupted`` / ``TrainingTerminated`` (``unilab_jax.training.interrupts``).
    ``quiet`` silences the console (tests). ``trainer`` reuses already compiled functions;
    ``initial_state`` continues from a given state.

    ``resume``: continue the run whose log dir (or ``checkpoints/`` folder) it names, from its
    newest checkpoint or ``resume_step``, exactly (``unilab_jax.training.resume``); ``True``
    names ``log_dir`` itself, where the run goes on writing. The settings must build the same
    state (``ResumeError`` names each difference, before anything compiles);
    ``max_iterations`` counts from the start of the run. A fresh run (no ``initial_state``)
    compiles its first block's step in a background thread while init compiles and runs
    (``Trainer.precompile_step``), and the evaluator beside what is left of it.

    ``checkpointer`` replaces the orbax writer (with or without ``log_dir``): its
    ``save(iteration, state)`` is called when ``iteration`` reaches a multiple of
    ``save_interval`` and after the last block (also when ``save_interval`` is 0, as the
    reference always saves its final ``model_<max_iterations>.pt``); the path it returns
    becomes the summary's ``last_checkpoint``. ``close()`` is called when training ends.
    """
    if logger not in LOGGERS:
        raise ConfigError(f"unknown logger {logger!r}; choose one of {', '.join(LOGGERS)}")
    resume = resume_source(resume, resume_step, log_dir, initial_state)
    if trainer is None:
        trainer = Trainer(config, algo_config)
    else:
        check_same_build(config, trainer.config)
    if resume is not None:  # before the log dir exists: a run that cannot go on makes none
        settings = run_config(config, trainer.algo_config)
        initial_state = restore_run(trainer, resume, resume_step, settings)
    if log_dir is True:  # after Trainer: the processes of a run share process 0's clock
        started = processes.broadcast_int(int(time.time()))
        log_dir = default_log_dir(config, datetime.datetime.fromtimestamp(started))
    log_dir = Path(log_dir) if log_dir not in (None, False) else None
    writes = log_dir is not None and processes.is_primary()  # process 0 owns the log dir
    lock = claim_log_dir(log_dir) if writes else None
    try:
        if lock is not None and lock.took_over and not quiet:
            owner = lock.took_over.get("pid")
            note = f"was locked by a run that is gone (pid {owner}); this run takes it over"
            print(f"note: {log_dir} {note}", file=sys.stderr)
        result = _train(config, trainer, log_dir, logger, quiet, initial_state, checkpointer,
                        on_block, sinks, wandb)  # fmt: skip
    except (RunSignal, FloatingPointError, CheckpointError, processes.ProcessLostError) as err:
        err.log_dir = log_dir
        if isinstance(err, RunStopped):
            err.summary["log_dir"] = str(log_dir) if log_dir is not None else None
            if writes:
                write_run_summary(log_dir, err.summary)
        elif isinstance(err, FloatingPointError) and writes:  # EnvNaNError, LearnerDivergedError
            write_run_summary(log_dir, {"status": "diverged", "error": str(err)})
        raise
    else:
        result.summary["log_dir"] = str(log_dir) if log_dir is not None else None
        if writes:
            write_run_summary(log_dir, result.summary)
        return result
    finally:
        if lock is not None:
            lock.release()


def _train(
    config, trainer, log_dir, logger, quiet, initial_state, checkpointer, on_block, sinks, wandb
):
    sinks = console_sinks(logger, quiet, wandb) if sinks is None else list(sinks)
    if on_block is not None:
        sinks.append(CallbackSink(on_block))
    settings = run_config(config, trainer.algo_config)
    if log_dir is not None and processes.is_primary():  # first, so a stopped run has one
        write_run_config(log_dir, settings)
    if checkpointer is None and log_dir is not None and config.save_interval > 0:
        checkpointer = CheckpointWriter(log_dir / "checkpoints", metadata=settings)
    stop = StopSignals()
    # The health checks and evaluations run first, so every other sink sees their fields.
    sinks, saver = run_sinks(trainer, config, sinks, checkpointer, stop)
    if initial_state is None and config.max_iterations > 0:
        # The first block's step compiles in the background while init compiles and runs.
        trainer.precompile_step(block_length(config, 0))
    state = initial_state if initial_state is not None else trainer.init_state()
    if config.eval_envs > 0 and int(state.iteration) < config.max_iterations:
        trainer.precompile_evaluator(state, config.eval_envs)  # beside the step's compile
    run = run_info(trainer, config, log_dir, int(state.iteration), settings)
    start = time.perf_counter()
    try:
        with stop:
            sinks.start(run)
            compile_time = compile_first_block(trainer, config, state, sinks, stop)
            state, history, stopped = run_blocks(trainer, config, state, sinks, stop, start)
            wall = time.perf_counter() - start
            if stopped is not None:
                stop_on_signal(stopped, state, history, saver, sinks, config, wall, compile_time)
            final_eval = None
            if not history and config.eval_envs > 0 and int(state.iteration) > 0:
                # Nothing left to train (a resumed, finished run): still report its policy.
                final_eval = stop.wait(trainer.evaluate, state, config.eval_envs, config.seed + 1)
        summary = run_summary(config, state, history, compile_time, wall, final_eval)
        sinks.finish(summary)
    finally:
        sinks.close()
    return TrainResult(state=state, summary=summary, history=history)
