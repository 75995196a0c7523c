"""Unified runner for off-policy RL algorithms (SAC, TD3).

`OffPolicyRunner.learn` dispatches on `sim_backend`:

- `"mujoco"`: the reference's A path (§1.6). A spawned collector steps C MuJoCo on CPU threads
  with a CPU copy of the actor and writes into the shared-memory `ReplayBuffer`; this process
  waits for data, samples `batch_size * updates_per_step` rows once per iteration, runs
  `updates_per_step` critic updates (actor every `policy_frequency`-th, target every one),
  publishes the actor through `SharedWeightSync` and logs.
- `"mjx"`: the JAX core trains (`jax_backend.learn_with_jax`), starting from the given torch
  learner's hyperparameters and weights and writing the trained weights back into it.

Iteration semantics. With `sync_collection` each iteration consumes exactly one chunk of
`env_steps_per_sync` vectorised env steps (the collector leads by at most one chunk); without
it the collector runs freely. Learning starts once the buffer holds
`max(batch_size, learning_starts * num_envs)` rows; chunks collected before that do not count
as iterations (the JAX core counts them; with `batch_size <= num_envs * env_steps_per_sync`
and `learning_starts=0` the two agree).

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
"""

from __future__ import annotations

import queue
import random
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab.algos.torch.common.actor_factory import (
    ACTOR_ALGOS,
    actor_kwargs_from_learner,
    actor_layout_mismatch,
    build_actor,
)
from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.offpolicy.worker import off_policy_collector_fn
from unilab.ipc import ReplayBuffer, SharedObsNormStats, SharedWeightSync
from unilab.ipc.async_runner import AsyncRunner, drain_queue, interrupt_guard
from unilab.logging.trace_event import TraceRecorder, maybe_span
from unilab_jax.logging import OffPolicyLogger

__all__ = ["SIM_BACKENDS", "OffPolicyRunner", "compute_train_start_threshold"]

#: Physics backends `OffPolicyRunner` accepts.
SIM_BACKENDS = ("mujoco", "mjx")
TRACE_FILE = "perfetto_offpolicy_timeline.json"
_WAIT_POLL_S = 1.0  # sync mode: how often a waiting learner checks the collector
_ASYNC_POLL_S = 0.1
_RUN_IPC_ATTRIBUTES = (
    "replay_buffer",
    "weight_sync",
    "metrics_queue",
    "collection_ready_queue",
    "trainer_done_queue",
    "obs_stats",
)


def compute_train_start_threshold(batch_size: int, learning_starts: int, num_envs: int) -> int:
    """Rows the buffer must hold before the first update (reference issue #303)."""
    return max(batch_size, max(learning_starts, 0) * num_envs)


def apply_training_seed(seed: int | None) -> None:
    """Seed Python, numpy and torch (no-op for None)."""
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def get_env_dims(env_name: str, env_cfg_override: dict | None = None) -> tuple[int, int, int]:
    """`(obs_dim, action_dim, critic_dim)` of a registered task; critic falls back to obs."""
    from unilab_jax.envs import load

    env = load(env_name, sim_backend="mjx", config_override=env_cfg_override)
    obs_dim = int(env.obs_size["obs"])
    return obs_dim, int(env.action_size), int(env.obs_size.get("critic", obs_dim))


class OffPolicyRunner(AsyncRunner):
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
        if algo_type not in ACTOR_ALGOS:
            raise ValueError(
                f"unknown algo_type {algo_type!r}; supported: {', '.join(map(repr, ACTOR_ALGOS))}"
            )
        if sim_backend not in SIM_BACKENDS:
            raise ValueError(
                f"unknown sim_backend {sim_backend!r}; supported: "
                f"{', '.join(map(repr, SIM_BACKENDS))}"
            )
        for name, value in (
            ("num_envs", num_envs),
            ("replay_buffer_n", replay_buffer_n),
            ("batch_size", batch_size),
            ("updates_per_step", updates_per_step),
            ("policy_frequency", policy_frequency),
            ("env_steps_per_sync", env_steps_per_sync),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.learner = learner
        self.env_name = env_name
        self.algo_type = algo_type
        self.num_envs = num_envs
        self.replay_buffer_n = replay_buffer_n
        self.batch_size = batch_size
        self.learning_starts = max(int(learning_starts), 0)
        self.updates_per_step = updates_per_step
        self.policy_frequency = policy_frequency
        self.sync_collection = sync_collection
        self.env_steps_per_sync = env_steps_per_sync
        self.actor_hidden_dim = actor_hidden_dim
        self.use_layer_norm = use_layer_norm
        self.sim_backend = sim_backend
        self.env_cfg_override = env_cfg_override
        self.seed = seed
        self.trace_enabled = trace_enabled
        self.trace_output_dir = trace_output_dir
        self.trace_thread_time = trace_thread_time
        self.trace_cuda_events = trace_cuda_events
        self.last_run_summary: dict[str, Any] | None = None
        self._active_logger: OffPolicyLogger | None = None

        learner_device = torch.device(getattr(learner, "device", "cpu"))
        self.device = torch.device(device) if device is not None else learner_device
        if self.device != learner_device:
            raise ValueError(
                f"device {self.device} differs from the learner's device {learner_device}; "
                "build the learner on that device or leave device=None"
            )
        capacity = replay_buffer_n * num_envs
        self.train_start_threshold = compute_train_start_threshold(
            batch_size, self.learning_starts, num_envs
        )
        if self.train_start_threshold > capacity:
            raise ValueError(
                f"learning needs {self.train_start_threshold} rows (max(batch_size, "
                f"learning_starts * num_envs)) but the replay buffer holds replay_buffer_n "
                f"{replay_buffer_n} x num_envs {num_envs} = {capacity}; raise replay_buffer_n "
                "or lower batch_size / learning_starts"
            )
        apply_training_seed(seed)
        self.obs_dim, self.action_dim, self.critic_dim = get_env_dims(env_name, env_cfg_override)
        self._check_learner_dims()
        self.obs_normalization = isinstance(
            getattr(learner, "obs_normalizer", None), EmpiricalNormalization
        )
        if obs_normalization and not self.obs_normalization:
            raise ValueError(
                "obs_normalization=True but the learner has no observation normaliser; build "
                "the learner with obs_normalization=True"
            )
        self.actor_kwargs = (
            dict(actor_kwargs) if actor_kwargs is not None else actor_kwargs_from_learner(learner)
        )
        self._check_collector_actor()

    # -- validation ----------------------------------------------------------------------------

    def _check_learner_dims(self) -> None:
        learner = self.learner
        expected = {
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "critic_obs_dim": self.critic_dim,
        }
        for name, env_value in expected.items():
            value = getattr(learner, name, env_value)
            if value != env_value:
                raise ValueError(
                    f"the learner's {name} is {value} but {self.env_name} has {env_value}; "
                    f"build the learner with {name}={env_value}"
                )

    def _check_collector_actor(self) -> None:
        """The collector's actor (built from the runner's settings) must fit the learner's."""
        candidate = build_actor(
            self.algo_type, self.obs_dim, self.action_dim, self.actor_hidden_dim,
            self.use_layer_norm, "cpu", 1, **self.actor_kwargs,
        )  # fmt: skip
        problem = actor_layout_mismatch(self.learner.actor, candidate)
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
            self._learn_jax(max_iterations, save_interval, log_dir, logger_type, num_devices=1)
            return
        if max_iterations == 0:
            self.last_run_summary = self._summary(_RunState(None, Path(log_dir)), 0.0)
            self.last_run_summary["status"] = "completed"
            return
        self._learn_torch(max_iterations, save_interval, log_dir, logger_type)

    def close(self) -> None:
        """Close the logger (restores the terminal), stop the collector, free shared memory."""
        logger, self._active_logger = self._active_logger, None
        try:
            if logger is not None:
                logger.close()
        finally:
            super().close()
            # Drop the run's IPC handles: their named semaphores are unlinked once unreferenced.
            for name in _RUN_IPC_ATTRIBUTES:
                setattr(self, name, None)

    # -- mjx: the JAX core -----------------------------------------------------------------------

    def _learn_jax(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str,
        num_devices: int,
    ) -> None:  # fmt: skip
        from unilab.algos.torch.offpolicy.jax_backend import learn_with_jax

        self.last_run_summary = learn_with_jax(
            self.learner,
            self.algo_type,
            env_name=self.env_name,
            num_envs=self.num_envs,
            replay_buffer_n=self.replay_buffer_n,
            batch_size=self.batch_size,
            learning_starts=self.learning_starts,
            updates_per_step=self.updates_per_step,
            policy_frequency=self.policy_frequency,
            env_steps_per_sync=self.env_steps_per_sync,
            seed=self.seed,
            env_cfg_override=self.env_cfg_override,
            max_iterations=max_iterations,
            save_interval=save_interval,
            log_dir=log_dir,
            logger_type=logger_type,
            num_devices=num_devices,
        )

    # -- mujoco: the torch path (A path) ---------------------------------------------------------

    def _algo_name(self) -> str:
        return "Fast" + self.algo_type.upper()

    def _make_recorder(self, log_dir: str) -> TraceRecorder | None:
        if not self.trace_enabled:
            return None
        out = Path(self.trace_output_dir or log_dir) / TRACE_FILE
        return TraceRecorder("offpolicy_learner", out, thread_time=self.trace_thread_time)

    def _setup_ipc(self, recorder: TraceRecorder | None) -> None:
        """Replay ring, weight block, queues and statistics channel of one run."""
        self._prepare_run()
        self.replay_buffer = self._register_resource(
            ReplayBuffer(
                self.replay_buffer_n, self.num_envs, self.obs_dim, self.action_dim,
                self.critic_dim, self.device, recorder,
            )
        )  # fmt: skip
        actor_state = self.learner.actor.state_dict()
        self.weight_sync = self._register_resource(SharedWeightSync(actor_state, recorder))
        self.metrics_queue = self._new_queue(maxsize=100)
        self.collection_ready_queue = self._new_queue(maxsize=1) if self.sync_collection else None
        self.trainer_done_queue = self._new_queue(maxsize=1) if self.sync_collection else None
        if self.trainer_done_queue is not None:
            self.trainer_done_queue.put(True)  # the collector may collect the first chunk
        self.obs_stats = (
            self._register_resource(SharedObsNormStats()) if self.obs_normalization else None
        )
        self._replay_read_ptr = 0

    def _collector_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `off_policy_collector_fn` (after `stop_event`)."""
        return {
            "env_name": self.env_name,
            "num_envs": self.num_envs,
            "replay_buffer": self.replay_buffer,
            "weight_sync_name": self.weight_sync.name,
            "weight_param_shapes": {
                k: tuple(v.shape) for k, v in self.learner.actor.state_dict().items()
            },
            "algo_type": self.algo_type,
            "actor_hidden_dim": self.actor_hidden_dim,
            "use_layer_norm": self.use_layer_norm,
            "learning_starts": self.learning_starts,
            "metrics_queue": self.metrics_queue,
            "weight_sync_lock": self.weight_sync._lock,
            "sync_collection": self.sync_collection,
            "collection_ready_queue": self.collection_ready_queue,
            "trainer_done_queue": self.trainer_done_queue,
            "env_steps_per_sync": self.env_steps_per_sync,
            "obs_normalization": self.obs_normalization,
            "shared_obs_normalizer_stats": self.obs_stats,
            "sim_backend": self.sim_backend,
            "env_cfg_override": self.env_cfg_override,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "actor_kwargs": self.actor_kwargs,
            "seed": None if self.seed is None else self.seed + 1,
            "trace_enabled": self.trace_enabled,
            "trace_thread_time": self.trace_thread_time,
        }

    def _make_logger(self, max_iterations: int, log_dir: str, logger_type: str) -> OffPolicyLogger:
        logger = OffPolicyLogger(
            algo_name=self._algo_name(),
            max_iterations=max_iterations,
            num_envs=self.num_envs,
            env_name=self.env_name,
            obs_dim=self.obs_dim,
            action_dim=self.action_dim,
            log_dir=log_dir,
            log_backend=logger_type,
        )
        self._active_logger = logger
        logger.set_collection_sync(self.sync_collection, self.env_steps_per_sync)
        return logger

    def _learn_torch(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> None:
        recorder = self._make_recorder(log_dir)
        self.last_run_summary = None
        run = _RunState(recorder=recorder, log_dir=Path(log_dir))
        start = time.perf_counter()
        try:
            self._setup_ipc(recorder)
            self._start_collector(off_policy_collector_fn, self._collector_kwargs())
            logger = self._make_logger(max_iterations, log_dir, logger_type)
            logger.start()
            with (
                interrupt_guard() as interrupt,
                maybe_span(recorder, "learner/training_e2e", cat="learner"),
            ):
                for iteration in range(1, max_iterations + 1):
                    interrupt.check()  # a Ctrl+C that a finaliser swallowed still stops the run
                    self._iteration(iteration, run, logger)
                    self._maybe_save(iteration, save_interval, max_iterations, run, logger)
            run.status = "completed"
            logger.finish(extra_summary=self._summary_line(run))
        except BaseException:
            run.status = "failed"
            raise
        finally:
            if recorder is not None:
                run.trace_path = str(recorder.write())
            self.last_run_summary = self._summary(run, time.perf_counter() - start)
            self.close()

    # -- one iteration ---------------------------------------------------------------------------

    def _iteration(self, iteration: int, run: _RunState, logger: OffPolicyLogger) -> None:
        """Wait for data, train on one sampled batch, publish the actor, log."""
        wait_time = self._wait_phase(iteration, run, logger)
        t1 = time.perf_counter()
        metrics = self._train(iteration, run.recorder)
        train_time = time.perf_counter() - t1
        weight_sync_time = self._publish(run)
        run.completed = iteration
        run.total_env_steps = int(self.replay_buffer.ptr.item())
        self._log_iteration(
            iteration, run, logger, metrics, train_time, wait_time, weight_sync_time
        )

    def _wait_phase(self, iteration: int, run: _RunState, logger: OffPolicyLogger) -> float:
        """Wait for this iteration's data, take the collector's metrics, feed the normaliser;
        returns the wait in seconds."""
        t0 = time.perf_counter()
        with maybe_span(run.recorder, "learner/wait_for_data", cat="learner", iteration=iteration):
            self._wait_for_data(run, logger)
        wait_time = time.perf_counter() - t0
        self._drain_metrics(run, logger)
        self._feed_normalizer()
        return wait_time

    def _publish(self, run: _RunState) -> float:
        """Statistics and actor weights to the collector, then release it; returns seconds."""
        t0 = time.perf_counter()
        if self.obs_stats is not None:
            normalizer = self.learner.obs_normalizer
            self.obs_stats.put(normalizer.mean, normalizer.std)
        with maybe_span(run.recorder, "learner/weight_sync_write", cat="learner"):
            self.weight_sync.write_weights(self.learner.actor.state_dict())
        weight_sync_time = time.perf_counter() - t0
        if run.recorder is not None:
            run.recorder.counter("replay_size", len(self.replay_buffer), cat="learner")
        self._release_collector()
        return weight_sync_time

    def _release_collector(self) -> None:
        """Sync mode: let the collector produce the next chunk."""
        if self.trainer_done_queue is not None:
            self._put_done()

    def _put_done(self) -> None:
        """Hand the collector a release token; a dead collector never takes the previous one,
        so a blocking put would hang the learner: wait in slices and check the collector."""
        while True:
            try:
                self.trainer_done_queue.put(True, timeout=_WAIT_POLL_S)
                return
            except queue.Full:
                pass  # raise outside the handler: a chained `Full` would keep the queue alive
            self.check_collector()

    def _log_iteration(
        self, iteration: int, run: _RunState, logger: OffPolicyLogger, metrics: dict,
        train_time: float, wait_time: float, weight_sync_time: float, h2d_time: float = 0.0,
    ) -> None:  # fmt: skip
        snaps = run.reward_snapshots
        logger.log_step(
            iteration,
            metrics=metrics,
            reward=float(np.mean(snaps)) if snaps else None,
            reward_metrics={"mean_ep100": snaps[-1]} if snaps else None,
            reward_components=run.reward_components,
            train_time=train_time,
            wait_time=wait_time,
            learner_incremental_h2d_time=h2d_time,
            weight_sync_time=weight_sync_time,
            extra_info={"throughput_steps": self.num_envs * self.env_steps_per_sync},
        )

    def _wait_for_data(self, run: _RunState, logger: OffPolicyLogger) -> None:
        """Block until this iteration may train (sync: one new chunk past the threshold)."""
        while True:
            self.check_collector()
            if self.sync_collection:
                try:
                    self.collection_ready_queue.get(timeout=_WAIT_POLL_S)
                except queue.Empty:
                    continue
                self._drain_metrics(run, logger)
                if len(self.replay_buffer) >= self.train_start_threshold:
                    return
                logger.log_buffer_fill(len(self.replay_buffer), self.train_start_threshold)
                self._put_done()  # warm-up chunk: collect the next one
            else:
                if len(self.replay_buffer) >= self.train_start_threshold:
                    return
                self._drain_metrics(run, logger)
                logger.log_buffer_fill(len(self.replay_buffer), self.train_start_threshold)
                time.sleep(_ASYNC_POLL_S)

    def _drain_metrics(self, run: _RunState, logger: OffPolicyLogger) -> None:
        for message in drain_queue(self.metrics_queue):
            if "trace_events" in message and run.recorder is not None:
                run.recorder.extend(message["trace_events"])
            if "mean_ep_reward" in message:
                run.reward_snapshots.append(message["mean_ep_reward"])
            if "mean_ep_length" in message:
                run.mean_ep_length = message["mean_ep_length"]
                logger.update_ep_length(message["mean_ep_length"])
            if message.get("reward_components"):
                run.reward_components = message["reward_components"]
            if "collector_timing_ms" in message:
                logger.update_collector_timing(message["collector_timing_ms"])
            if "timeout_rate" in message:
                logger.update_done_rates(message["timeout_rate"], message["terminated_rate"])
            if "total_steps" in message:
                logger.log_collector(
                    message["total_steps"],
                    message["buffer_size"],
                    message.get("mean_ep_reward", 0.0),
                )

    def _feed_normalizer(self) -> None:
        """Merge the observations collected since the last iteration into the statistics."""
        if not self.obs_normalization:
            return
        rows, self._replay_read_ptr = self.replay_buffer.rows_since(self._replay_read_ptr)
        if rows.shape[0] == 0:
            return
        columns = self.replay_buffer.split_columns(rows.to(self.device))
        self.learner.update_normalizers(columns["obs"], columns.get("critic"))

    def _sample_batch(self, iteration: int, rec: TraceRecorder | None) -> dict[str, torch.Tensor]:
        """All `updates_per_step` batches of this iteration, sampled at once (A path)."""
        total = self._local_batch_size() * self.updates_per_step
        with maybe_span(rec, "learner/replay_sample", cat="learner", total_batch=total):
            return self.replay_buffer.sample(total)

    def _local_batch_size(self) -> int:
        """Rows of one update in this process (the whole batch on one learner)."""
        return self.batch_size

    def _train(self, iteration: int, rec: TraceRecorder | None) -> dict[str, float]:
        """Sample once, then `updates_per_step` updates on consecutive slices; mean metrics."""
        batch = self._sample_batch(iteration, rec)
        b = self._local_batch_size()
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for u in range(self.updates_per_step):
            part = {k: v[u * b : (u + 1) * b] for k, v in batch.items()}
            with maybe_span(rec, "learner/update_critic", cat="learner", update_idx=u):
                step_metrics = self.learner.update_critic(part)
            if u % self.policy_frequency == 0:
                with maybe_span(rec, "learner/update_actor", cat="learner", update_idx=u):
                    step_metrics.update(self.learner.update_actor(part))
            with maybe_span(rec, "learner/soft_update_target", cat="learner", update_idx=u):
                self.learner.soft_update_target()
            for k, v in step_metrics.items():
                sums[k] = sums.get(k, 0.0) + v
                counts[k] = counts.get(k, 0) + 1
        return {k: sums[k] / counts[k] for k in sums}

    # -- checkpoints and summary -----------------------------------------------------------------

    def _save(self, iteration: int, run: _RunState, logger: OffPolicyLogger) -> None:
        path = run.log_dir / f"model_{iteration}.pt"
        torch.save(self.learner.get_state_dict(), path)
        run.last_checkpoint = str(path)
        run.last_saved_iteration = iteration
        logger.log_save(str(path))

    def _maybe_save(
        self, iteration: int, save_interval: int, max_iterations: int, run: _RunState,
        logger: OffPolicyLogger,
    ) -> None:  # fmt: skip
        periodic = save_interval > 0 and iteration % save_interval == 0
        if periodic or iteration == max_iterations:
            self._save(iteration, run, logger)

    @staticmethod
    def _summary_line(run: _RunState) -> str:
        reward = f"{run.reward_snapshots[-1]:.3f}" if run.reward_snapshots else "n/a"
        return f"  Final mean episode return: {reward}"

    def _summary(self, run: _RunState, wall: float) -> dict[str, Any]:
        snaps = list(run.reward_snapshots)
        return {
            "status": run.status,
            "completed_iterations": run.completed,
            "total_env_steps": run.total_env_steps,
            "final_mean_reward": snaps[-1] if snaps else None,
            "best_mean_reward": max(snaps) if snaps else None,
            "mean_episode_length": run.mean_ep_length,
            "last_checkpoint": run.last_checkpoint,
            "trace_path": run.trace_path,
            "training_wall_time_sec": wall,
            "backend": "mujoco",
        }


class _RunState:
    """Host-side bookkeeping of one `learn` call."""

    def __init__(self, recorder: TraceRecorder | None, log_dir: Path) -> None:
        self.recorder = recorder
        self.log_dir = log_dir
        self.status = "running"
        self.completed = 0
        self.total_env_steps = 0
        self.reward_snapshots: deque[float] = deque(maxlen=100)
        self.reward_components: dict[str, float] = {}
        self.mean_ep_length: float | None = None
        self.last_checkpoint: str | None = None
        self.last_saved_iteration: int | None = None
        self.trace_path: str | None = None
