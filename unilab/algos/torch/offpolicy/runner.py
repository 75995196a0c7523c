"""Unified runner for off-policy RL algorithms (SAC, TD3).

`OffPolicyRunner` translates its documented keywords once into the core's
`unilab_jax.config.TrainConfig` (`settings.train_config`: one validation, one start threshold
`train_start_rows`), then `learn` dispatches on `sim_backend`:

- `"mujoco"`: the reference's A path (§1.6), the torch loop of `torch_loop.TorchLoop`. A
  spawned collector steps C MuJoCo on CPU threads with a CPU copy of the actor and writes into
  the shared-memory `ReplayBuffer`; this process waits for data, samples
  `batch_size * updates_per_step` rows once per iteration, runs the update schedule
  (`common.updates.run_updates`: `updates_per_step` critic updates, actor every
  `policy_frequency`-th, target every one), publishes the actor through `SharedWeightSync` and
  logs. `MultiGPUOffPolicyRunner` runs the same loop on several learner ranks,
  `DoubleBufferOffPolicyRunner` with another batch source.
- `"mjx"`: the JAX core trains (`jax_backend.learn_with_jax`) the same `TrainConfig`, starting
  from the given torch learner's hyperparameters and weights and writing the trained weights
  back into it. Nothing torch-side is set up for it (no collector actor, no torch seeding, no
  env built here: the core checks the learner's sizes against the task it builds).

`runner.config` is that `TrainConfig`. It asks for no deterministic evaluation (`eval_envs=0`:
the summary panel says "not run (eval_envs=0)"); on `"mjx"`, `runner.config =
runner.config.replace(eval_envs=64)` before `learn` makes the core evaluate the deterministic
policy (every `eval_interval` iterations and after the last) and `last_run_summary` relays its
figures (`eval_mean_return`, ...); the torch path runs none. Either way every
`model_<iteration>.pt` records the run's hyperparameters, sizes and task
(`checkpoints.checkpoint_meta`), so `unilab_jax.load_policy(log_dir)` rebuilds its deterministic
policy and `unilab-jax evaluate LOG_DIR` (or `play`, or the export) runs it.

The algorithm-specific pieces (learner class, collector actor, converters, exploration) come
from the torch registry `unilab.algos.torch.registry`, the shared facts (display name,
hyperparameter dataclass) from the core's `unilab_jax.algos.registry`.

Iteration semantics (a deliberate, tested difference between the two paths). With
`sync_collection` each torch iteration consumes exactly one chunk of `env_steps_per_sync`
vectorised env steps (the collector leads by at most one chunk); without it the collector runs
freely. Learning starts once the buffer holds `train_start_rows = max(batch_size,
learning_starts * num_envs)` rows. On the torch path chunks collected before that are warm-up
and do not count as iterations: `max_iterations` counts trained iterations
(`test_close_is_idempotent_and_runner_can_learn_again`: 2 iterations after a warm-up chunk).
The JAX core counts every chunk, warm-up included, so its `max_iterations` counts collected
chunks and its first iterations may train nothing (`test_offpolicy_jax_backend`: 20 iterations,
17 of them learning). With `batch_size <= num_envs * env_steps_per_sync` and `learning_starts=0`
the two agree. Both are kept: the torch path matches the reference runner, the JAX core its
fused scan of fixed length.

`algo_type` takes our names (`"sac"`, `"td3"`, `"flash_sac"`, `"hora_sac"`) and the
reference's (`"flashsac"`); `runner.algo_type` is ours. HORA-SAC (`unilab.algos.torch.hora`,
the reference's `runtime_impl: hora_sac`) runs with `algo_type="hora_sac"` (what its runtime's
`algo_type` says) or `algo_type="sac"` with a `HoraSACLearner` (the runner takes the learner's
algorithm): the collector then gives the actor the privileged values too, and `"mjx"` trains
the core's `"hora_sac"`. A learner of another registered algorithm than `algo_type`'s is
refused.

Observation normalisation follows the learner: a learner built with `obs_normalization=True`
gets its statistics from the rows collected since the previous iteration
(`learner.update_normalizers`), and the collector normalises its policy input with the same
statistics. Asking the runner for `obs_normalization=True` with a learner that has no
normaliser is an error.

Deliberate deviations from the reference (quirks), each checked by a test:

- A collector exception stops `learn` within about a second with `CollectorError` carrying the
  collector's traceback, in sync and async mode alike (the reference swallowed the message and,
  in async mode, stopped watching the collector once learning started).
- `learn` always tears down its collector and shared memory (`finally`), and `close()` (also
  idempotent) closes the logger first so an interrupted live display gives the cursor back.
- The trace file is written also when `learn` fails or is interrupted.
- `max_iterations=0` trains nothing and writes no checkpoint (the reference wrote
  `model_0.pt`); the final checkpoint is not rewritten when a periodic save already wrote it.
- Observation statistics really reach the collector for SAC as well (the reference flag was a
  no-op for SAC), with the learner's epsilon.
- `learner.update_count` is the learner's own counter of critic updates; the runner does not
  add one per iteration.
- SIGTERM (a cluster's preemption) and SIGINT (Ctrl+C) stop `learn` safely on both backends
  (the reference died on SIGTERM with its collector and shared memory left to the resource
  tracker, and lost everything since the last periodic save on Ctrl+C). The first signal lets
  the running iteration (torch) or block (mjx) finish, saves `model_<iteration>.pt`, stops the
  collector and frees the shared memory, restores the terminal, writes one line to stderr
  ("SIGTERM: stopped after iteration N; saved checkpoint PATH. To resume, ...") and raises
  `unilab_jax.training.interrupts.RunStopped` with `last_run_summary` set (status
  `"interrupted (SIGTERM)"`): `TrainingTerminated` is a `SystemExit(143)`, so an uncaught one
  ends a script with status 143; `TrainingInterrupted` is a `KeyboardInterrupt` (CPython gives
  status 130 only to a plain one: a script wanting it exits with `error.exit_code`). A second
  signal raises `ImmediateStop` at once, still releasing the collector, the ranks and the
  shared memory (`torch_loop`, `ranks`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.offpolicy import settings
from unilab.algos.torch.offpolicy.run_state import RunState, stop_line
from unilab.algos.torch.offpolicy.settings import SIM_BACKENDS
from unilab.algos.torch.offpolicy.torch_loop import RUN_IPC_ATTRIBUTES, TorchLoop
from unilab.algos.torch.registry import (
    actor_kwargs_from_learner,
    build_actor,
    get_torch_algo,
    spec_of_learner,
)
from unilab_jax.training.facade import ImmediateStop, RunStopped

__all__ = ["SIM_BACKENDS", "OffPolicyRunner"]


class OffPolicyRunner(TorchLoop):
    """Unified runner for SAC and TD3."""

    def __init__(
        self,
        learner: Any,
        env_name: str,
        algo_type: str,
        num_envs: int = 4096,
        replay_buffer_n: int = 1024,
        batch_size: int = 8192,
        learning_starts: int = 0,
        updates_per_step: int = 8,
        policy_frequency: int = 4,
        sync_collection: bool = True,
        env_steps_per_sync: int = 1,
        device: str | None = None,
        actor_hidden_dim: int = 512,
        use_layer_norm: bool = True,
        obs_normalization: bool = False,
        sim_backend: str = "mujoco",
        env_cfg_override: dict | None = None,
        actor_kwargs: dict | None = None,
        seed: int | None = None,
        trace_enabled: bool = False,
        trace_output_dir: str | None = None,
        trace_thread_time: bool = False,
        trace_cuda_events: bool = True,
    ) -> None:
        super().__init__(collector_device="cpu")
        # An unknown algo_type fails first, with the known ones; the reference's spelling
        # ("flashsac") becomes our name ("flash_sac"), which the core and checkpoints use.
        algo_type = _learner_algo(learner, get_torch_algo(algo_type).name)
        if sim_backend not in SIM_BACKENDS:
            raise ValueError(
                f"unknown sim_backend {sim_backend!r}; supported: "
                f"{', '.join(map(repr, SIM_BACKENDS))}"
            )
        # The JAX core splits envs and batch over its devices; the torch ranks split the batch.
        devices = self.world_size if sim_backend == "mjx" else 1
        self.config = settings.train_config(
            algo_type, env_name, num_envs=num_envs, replay_buffer_n=replay_buffer_n,
            batch_size=batch_size, learning_starts=learning_starts,
            updates_per_step=updates_per_step, policy_frequency=policy_frequency,
            env_steps_per_sync=env_steps_per_sync, seed=seed, env_cfg_override=env_cfg_override,
            num_devices=devices, physics=sim_backend,  # SIM_BACKENDS are physics names
        )  # fmt: skip
        self.learner, self.env_name, self.algo_type = learner, env_name, algo_type
        self.num_envs, self.replay_buffer_n, self.batch_size = num_envs, replay_buffer_n, batch_size
        self.learning_starts = self.config.learning_starts
        self.updates_per_step, self.policy_frequency = updates_per_step, policy_frequency
        self.sync_collection, self.env_steps_per_sync = sync_collection, env_steps_per_sync
        self.actor_hidden_dim, self.use_layer_norm = actor_hidden_dim, use_layer_norm
        self.sim_backend, self.env_cfg_override, self.seed = sim_backend, env_cfg_override, seed
        self.trace_enabled, self.trace_output_dir = trace_enabled, trace_output_dir
        self.trace_thread_time, self.trace_cuda_events = trace_thread_time, trace_cuda_events
        self.last_run_summary: dict[str, Any] | None = None

        learner_device = torch.device(getattr(learner, "device", "cpu"))
        self.device = torch.device(device) if device is not None else learner_device
        if self.device != learner_device:
            raise ValueError(
                f"device {self.device} differs from the learner's device {learner_device}; "
                "build the learner on that device or leave device=None"
            )
        self.obs_normalization = isinstance(
            getattr(learner, "obs_normalizer", None), EmpiricalNormalization
        )
        if obs_normalization and not self.obs_normalization:
            raise ValueError(
                "obs_normalization=True but the learner has no observation normaliser; build "
                "the learner with obs_normalization=True"
            )
        self.actor_kwargs = dict(actor_kwargs) if actor_kwargs is not None else None
        if sim_backend == "mujoco":
            self._set_up_torch_path()

    def _set_up_torch_path(self) -> None:
        """Seed torch, read the task's sizes, check the learner and the collector's actor."""
        settings.apply_training_seed(self.seed)
        dims = settings.env_dims(self.env_name, self.env_cfg_override)
        self.obs_dim, self.action_dim, self.critic_dim = dims
        settings.check_learner_dims(self.learner, self.env_name, dims)
        settings.check_task_mirror(
            self.learner, self.env_name, self.env_cfg_override, self.batch_size
        )
        if self.actor_kwargs is None:
            self.actor_kwargs = actor_kwargs_from_learner(self.learner)
        candidate = build_actor(
            self.algo_type, self.obs_dim, self.action_dim, self.actor_hidden_dim,
            self.use_layer_norm, "cpu", 1, **self.actor_kwargs,
        )  # fmt: skip
        problem = settings.actor_layout_mismatch(self.learner.actor, candidate)
        if problem:
            raise ValueError(
                f"the collector's actor (actor_hidden_dim={self.actor_hidden_dim}, "
                f"use_layer_norm={self.use_layer_norm}) cannot receive the learner's weights: "
                f"{problem}; pass the actor_hidden_dim / use_layer_norm the learner was built with"
            )

    # -- public API ----------------------------------------------------------------------------

    def learn(
        self,
        max_iterations: int = 1500,
        save_interval: int = 50,
        log_dir: str = "logs",
        logger_type: str = "tensorboard",
    ) -> None:
        """Unified training loop for off-policy algorithms."""
        if max_iterations < 0:
            raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        if self.sim_backend == "mjx":
            self._learn_jax(max_iterations, save_interval, log_dir, logger_type)
        elif max_iterations == 0:
            self.last_run_summary = RunState(None, Path(log_dir)).summary(0.0, self.world_size)
            self.last_run_summary["status"] = "completed"
        else:
            self._learn_torch(max_iterations, save_interval, log_dir, logger_type)

    def close(self) -> None:
        """Close the run's sinks (the logger restores the terminal), stop the collector, free
        shared memory."""
        sinks, self._sinks, self._saver = self._sinks, None, None
        try:
            if sinks is not None:
                sinks.close()
        finally:
            super().close()
            # Drop the run's IPC handles: their named semaphores are unlinked once unreferenced.
            for name in RUN_IPC_ATTRIBUTES:
                setattr(self, name, None)

    # -- mjx: the JAX core -----------------------------------------------------------------------

    def _learn_jax(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> None:
        from unilab.algos.torch.offpolicy.jax_backend import draw_seed, learn_with_jax

        config = self.config.replace(max_iterations=max_iterations, save_interval=save_interval)
        if self.seed is None:
            config = config.replace(seed=draw_seed())
        self.last_run_summary = None
        try:
            self.last_run_summary = learn_with_jax(
                self.learner, config, log_dir=log_dir, logger_type=logger_type
            )
        except RunStopped as stop:  # the core saved, restored the terminal and stopped
            self.last_run_summary = stop.summary
            print(f"\n{stop_line(stop, log_dir, self.last_run_summary)}", file=sys.stderr)
            stop.told = True  # an uncaught stop ends the program without repeating it
            raise
        except ImmediateStop as stop:
            print(f"\n{stop_line(stop, log_dir, self.last_run_summary)}", file=sys.stderr)
            stop.told = True
            raise

    def _algo_name(self) -> str:
        return get_torch_algo(self.algo_type).core.display_name


def _learner_algo(learner: Any, algo_type: str) -> str:
    """The algorithm the runner trains: ``algo_type``, or the learner's own when it is a
    variant of it (``algo_type="sac"`` with a ``HoraSACLearner``, as the reference's script
    passes a custom runtime's learner: HORA-SAC). A registered learner of another algorithm
    is refused (``ValueError``); a learner of no registered algorithm is taken as it is."""
    spec, own = get_torch_algo(algo_type), spec_of_learner(learner)
    if own is None or own.name == spec.name:
        return spec.name
    if issubclass(own.learner_cls, spec.learner_cls):
        return own.name
    raise ValueError(
        f"algo_type {algo_type!r} trains a {spec.learner_cls.__name__}, got a "
        f"{type(learner).__name__} ({own.name!r}); pass algo_type={own.name!r}"
    )
