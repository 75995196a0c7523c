"""The torch path's one training loop (`sim_backend="mujoco"`), shared by every runner.

`TorchLoop` is the base of `OffPolicyRunner`; it is parametrised by two things only:

- `world_size`: 1 runs the loop in this process; N > 1 (`MultiGPUOffPolicyRunner`) runs the
  same loop in N spawned learner ranks (`ranks.learn_on_ranks`), where rank 0 waits for data
  and tells the others to go on or stop, the normaliser statistics are broadcast from rank 0,
  gradients are all-reduced inside the learners, and rank 0 alone publishes, logs and saves.
- a batch source (`batch_sources.BatchSource`): where an iteration's `updates_per_step`
  batches come from. `RingBatches` (the A path) samples them from the shared replay ring;
  `double_buffer_runner.DoubleBufferBatches` (the B path) takes the batch the collector packed
  and the H2D thread prefetched, and releases the collector before training.

One iteration: wait for this iteration's data (sync: one new chunk, past the start threshold
`TrainConfig.train_start_rows`), take the collector's metrics, feed the normaliser (and the
reward statistics of a learner that keeps them, `learner.observe_rewards`), let the
batch source prepare, run the update schedule (`common.updates.run_updates`), publish the
actor (and statistics) through `SharedWeightSync`, release the collector, then hand the
iteration's record (`RunState.record`, the core's block layout) to the core's sinks
(``unilab_jax.training.sinks``), as the JAX loop does: `CheckpointSink` saves every `save_interval`
iterations and after the last one (`checkpoints.TorchCheckpointer`: each `model_<N>.pt` records
the run's hyperparameters, `checkpoints.checkpoint_meta`), `HealthSink` warns of a value
support that clips the targets, `LoggerSink` draws the panel and writes the scalars. After the last
iteration (or a signal's stop) rank 0 stops the collector first and then counts the env steps
it collected: the one number the summary's `total_env_steps` and the panel's "Total env steps"
report (`_end_collection`).

SIGINT and SIGTERM (`_learn_torch`, with the core's `unilab_jax.training.interrupts` through
`unilab_jax.training.interrupts.StopSignals`): the first one is a request. The running iteration
finishes; the next one checks for it where it waits for its data (sync mode polls the
collector every second, so a waiting run stops within about a second; the double buffer's
wait checks every 0.5 s), abandons itself before training, saves `model_<N>.pt` of the last
finished iteration N (unless a periodic save just wrote it), sets `last_run_summary` (status
`"interrupted (SIGTERM)"`, `last_checkpoint`), then stops the collector, frees the shared
memory and restores the terminal (`close()`), writes one line to stderr (where the checkpoint
is, how to resume it) and raises `RunStopped` (`TrainingTerminated`, a `SystemExit(143)`, or
`TrainingInterrupted`, a `KeyboardInterrupt`). A second signal raises `ImmediateStop` at once,
wherever the run is; the same cleanup still runs, with further signals deferred. With several
ranks the parent forwards the request to rank 0 (`ranks`).
"""

from __future__ import annotations

import contextlib
import functools
import queue
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from unilab.algos.torch.common.updates import run_updates
from unilab.algos.torch.offpolicy import ranks
from unilab.algos.torch.offpolicy.batch_sources import BatchSource, RingBatches
from unilab.algos.torch.offpolicy.collector_actor import actor_input_statistics
from unilab.algos.torch.offpolicy.run_state import RunState, late_stop, open_sinks, stop_line
from unilab.algos.torch.offpolicy.worker import collector_kwargs, off_policy_collector_fn
from unilab.ipc import ReplayBuffer, SharedObsNormStats, SharedWeightSync
from unilab.ipc.async_runner import AsyncRunner
from unilab.logging.trace_event import TraceRecorder, maybe_span
from unilab_jax.training.facade import (
    CheckpointSink,
    ImmediateStop,
    OffPolicyLogger,
    RunStopped,
    SinkChain,
    StopRequested,
    StopSignals,
    run_stopped,
    signal_name,
    stop_requested,
)

__all__ = ["RUN_IPC_ATTRIBUTES", "TRACE_FILE", "BatchSource", "RingBatches", "TorchLoop"]

TRACE_FILE = "perfetto_offpolicy_timeline.json"
_WAIT_POLL_S = 1.0  # sync mode: how often a waiting learner checks the collector
_ASYNC_POLL_S = 0.1
_COLLECTOR_EXIT_S = 10.0  # several ranks: how long rank 0 waits for the stopped collector
#: The IPC handles of one run, dropped by `close()` (named semaphores unlink once unreferenced).
RUN_IPC_ATTRIBUTES = (
    "replay_buffer",
    "weight_sync",
    "metrics_queue",
    "collection_ready_queue",
    "trainer_done_queue",
    "obs_stats",
)


class TorchLoop(AsyncRunner):
    """The torch path's loop (see the module docstring); `OffPolicyRunner` sets the settings
    it reads (`learner`, sizes, `config.train_start_rows`, trace and sync options)."""

    world_size = 1
    _batches: BatchSource = RingBatches()
    #: The run's signal handling while `learn` runs in this process (None in a learner rank).
    _interrupts: StopSignals | None = None
    #: Several ranks: the parent's stop request (a shared int, the signal number; 0: none).
    _rank_stop: Any = None
    #: Rank 0 while a run reports: its sinks (`run_state.open_sinks`) and their checkpoint sink.
    _sinks: SinkChain | None = None
    _saver: CheckpointSink | None = None

    def _learn_torch(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> None:
        """Train; on a signal stop as the module docstring says (`RunStopped` after a final
        checkpoint, `ImmediateStop` on a second signal), always releasing the collector, the
        ranks and the shared memory first, then telling stderr in one line."""
        self.last_run_summary = None
        ended: BaseException | None = None
        late: RunStopped | None = None
        with StopSignals(self._forward_stop_request, own_handlers_win=True) as guard:
            self._interrupts = guard
            try:
                if self.world_size > 1:
                    ranks.learn_on_ranks(self, max_iterations, save_interval, log_dir, logger_type)
                else:
                    self._learn_here(max_iterations, save_interval, log_dir, logger_type)
            except BaseException as error:
                ended = error
                raise
            finally:
                with guard.deferred():  # cleanup must finish, whatever signal comes now
                    self._interrupts = None
                    ranks.stop_ranks(self)
                    self.close()
                    if ended is None and guard.requested is not None:
                        ended = late = late_stop(guard.requested, self.last_run_summary)
                    if isinstance(ended, (RunStopped, ImmediateStop)):
                        line = stop_line(ended, log_dir, self.last_run_summary)
                        print(f"\n{line}", file=sys.stderr, flush=True)
                        ended.told = True  # an uncaught stop ends the program quietly
                # No frame -> exception -> traceback -> frame cycle: it would keep the runner
                # (and the semaphores of a batch source's queues) alive until a gc pass.
                ended = None
        if late is not None:  # a signal after the last iteration: the run is complete
            try:
                raise late
            finally:
                late = None

    def _learn_here(
        self, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> None:
        """A single learner: collector, shared memory and the loop in this process."""
        run = RunState(self._make_recorder(log_dir), Path(log_dir))
        with self._recording(run):
            self._open_run(run.recorder, max_iterations)
            self._start_collector(off_policy_collector_fn, collector_kwargs(self))
            self._run_loop(run, max_iterations, save_interval, log_dir, logger_type)

    def _forward_stop_request(self, signum: int) -> None:
        """Signal handler hook (first signal): several ranks learn of it through `_rank_stop`."""
        if self._rank_stop is not None:
            self._rank_stop.value = signum

    def _check_stop(self) -> None:
        """Raise `StopRequested` (or a swallowed `ImmediateStop`) if a signal asked the run to
        stop: where the loop may abandon an iteration that has not trained yet."""
        if self._interrupts is not None:
            self._interrupts.check()
        if self._rank_stop is not None and self._rank_stop.value:
            raise stop_requested(self._rank_stop.value)

    def _check_waiting(self) -> None:
        """The check of a wait outside the ranks' collective hand-over (`ranks.wait_on_lead`):
        the collector, and (one learner only) a stop request."""
        self.check_collector()
        if self.world_size == 1:
            self._check_stop()

    def _run_rank(
        self, rank: int, max_iterations: int, save_interval: int, log_dir: str, logger_type: str
    ) -> dict[str, Any] | None:
        """One learner rank (`world_size > 1`); rank 0 records, logs and returns the summary."""
        lead = rank == 0
        recorder = self._make_recorder(log_dir) if lead else None
        if recorder is not None:
            self.weight_sync.recorder = recorder
        run = RunState(recorder, Path(log_dir), lead=lead)
        try:
            with self._recording(run):
                self._run_loop(run, max_iterations, save_interval, log_dir, logger_type)
        finally:
            self.close()  # the logger only: the parent owns the collector and shared memory
        return self.last_run_summary if lead else None

    @contextlib.contextmanager
    def _recording(self, run: RunState) -> Iterator[None]:
        """Mark the run failed on any exception; always write the trace and (rank 0) the
        summary."""
        start = time.perf_counter()
        stopped: RunStopped | None = None
        try:
            yield
        except RunStopped as error:  # `_stop_on_signal` set the status
            stopped = error
            raise
        except ImmediateStop as error:
            run.status = f"interrupted (second {signal_name(error.signum)})"
            raise
        except BaseException:
            run.status = "failed"
            raise
        finally:
            if run.recorder is not None:
                run.trace_path = str(run.recorder.write())
            if run.lead:
                wall = time.perf_counter() - start
                self.last_run_summary = run.summary(wall, self.world_size)
                if stopped is not None:
                    stopped.summary = self.last_run_summary
            stopped = None  # no reference cycle through the traceback (see `_learn_torch`)

    def _run_loop(
        self, run: RunState, max_iterations: int, save_interval: int, log_dir: str,
        logger_type: str,
    ) -> None:  # fmt: skip
        logger = None
        stats = getattr(self.learner, "reward_stats", None)
        if stats is not None:  # each env's carried return, for this run's envs
            stats.resize(self.num_envs)
        if run.lead:
            run.config = self.config.replace(
                max_iterations=max_iterations, save_interval=save_interval
            )
            self._sinks, self._saver, logger = open_sinks(self, run, log_dir, logger_type)
        with maybe_span(run.recorder, "learner/training_e2e", cat="learner"):
            try:
                for iteration in range(1, max_iterations + 1):
                    # A stop request is checked where each iteration waits for its data
                    # (`_wait_for_data`, rank 0 only), before it trains.
                    self._iteration(iteration, run, logger)
            except StopRequested as request:
                self._stop_on_signal(request.signum, run, logger)
        self._end_collection(run, logger)
        run.status = "completed"
        if self._sinks is not None:
            self._sinks.finish(run.summary(time.perf_counter() - run.started, self.world_size))

    def _end_collection(self, run: RunState, logger: OffPolicyLogger | None) -> None:
        """Rank 0, once the last iteration is done (or a signal stopped the run): stop the
        collector, take its last messages and count the env steps it collected, which the
        summary's ``total_env_steps`` and the panel's "Total env steps" then both report.

        Until it stops, the collector keeps stepping (sync mode: the chunk the last release
        let it collect; async: freely) and reports its count only every few steps, so any
        count read earlier is short of what the run collected. With several ranks the parent
        owns the collector: rank 0 sets its stop event and waits for it to exit (its pipe
        closes)."""
        if logger is None:
            return
        self._stop_collector()  # one learner: joins it; a rank: only sets the stop event
        deadline = time.monotonic() + _COLLECTOR_EXIT_S
        while self.world_size > 1 and self._poll_collector() and time.monotonic() < deadline:
            time.sleep(0.05)
        run.take_metrics(self.metrics_queue, logger)
        run.total_env_steps = int(self.replay_buffer.ptr.item())
        logger.log_collector(run.total_env_steps, len(self.replay_buffer))

    def _stop_on_signal(self, signum: int, run: RunState, logger: OffPolicyLogger | None) -> None:
        """The end of a run stopped by SIGINT/SIGTERM (rank 0): save the last finished
        iteration (unless its checkpoint is already written) and raise `RunStopped` (its
        summary is set by `_recording`)."""
        name = signal_name(signum)
        run.status = f"interrupted ({name})"
        self._end_collection(run, logger)
        done, checkpoint = run.completed, None
        path = run.log_dir / f"model_{done}.pt"
        if done == 0:
            saved = "nothing to save (no iteration had finished)"
        else:
            if run.last_checkpoint != str(path):  # not just saved on the schedule
                self._sinks.status(f"{name}: saving a checkpoint at iteration {done}...")
                run.last_checkpoint = self._saver.save_final(done, self.learner)
                if logger is not None:
                    logger.log_save(run.last_checkpoint)
            checkpoint, saved = run.last_checkpoint, f"saved checkpoint {path}"
        raise run_stopped(signum, done, checkpoint, {}, saved) from None

    # -- one run's resources -------------------------------------------------------------------

    def _make_recorder(self, log_dir: str) -> TraceRecorder | None:
        if not self.trace_enabled:
            return None
        out = Path(self.trace_output_dir or log_dir) / TRACE_FILE
        return TraceRecorder("offpolicy_learner", out, thread_time=self.trace_thread_time)

    def _open_run(self, recorder: TraceRecorder | None, max_iterations: int) -> None:
        """Replay ring, weight block, queues, statistics channel and the batch source's
        resources of one run."""
        self._prepare_run()
        self.replay_buffer = self._register_resource(
            ReplayBuffer(
                self.replay_buffer_n, self.num_envs, self.obs_dim, self.action_dim,
                self.critic_dim, self.device, recorder,
            )
        )  # fmt: skip
        self.replay_buffer.while_waiting = self.check_collector  # a collector killed mid-add
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
        self._batches.open(self, max_iterations)

    # -- one iteration ---------------------------------------------------------------------------

    def _iteration(self, iteration: int, run: RunState, logger: OffPolicyLogger | None) -> None:
        """Wait for data, let the batch source prepare, train, then (rank 0) publish the actor
        and log."""
        wait_time = self._wait_phase(iteration, run, logger)
        h2d_time, released = self._batches.prepare(self, iteration, run)
        t1 = time.perf_counter()
        metrics = self._train(iteration, run.recorder)
        train_time = time.perf_counter() - t1
        if logger is None:
            return  # a follower rank: rank 0 publishes, logs and saves
        weight_sync_time = self._publish(run, release_collector=not released)
        run.total_env_steps = int(self.replay_buffer.ptr.item())
        timing = {
            "train_time": train_time,
            "wait_time": wait_time,
            "learner_incremental_h2d_time": h2d_time,
            "weight_sync_time": weight_sync_time,
        }
        record = run.record(iteration, metrics, len(self.replay_buffer), timing)
        run.reported(self._sinks.block(record, self.learner))

    def _wait_phase(self, iteration: int, run: RunState, logger: OffPolicyLogger | None) -> float:
        """Rank 0 waits for this iteration's data, takes the collector's metrics and feeds the
        normaliser; with several ranks it then tells the others to go on (or stop) and shares
        the statistics. Returns the wait in seconds."""
        if self.world_size == 1:
            return self._wait_and_feed(iteration, run, logger)
        wait = functools.partial(self._wait_and_feed, iteration, run, logger) if run.lead else None
        wait_time = ranks.wait_on_lead(wait)
        ranks.broadcast_normalizers(self.learner)
        return wait_time

    def _wait_and_feed(self, iteration: int, run: RunState, logger: OffPolicyLogger) -> float:
        t0 = time.perf_counter()
        with maybe_span(run.recorder, "learner/wait_for_data", cat="learner", iteration=iteration):
            self._wait_for_data(run, logger)
        wait_time = time.perf_counter() - t0
        run.take_metrics(self.metrics_queue, logger)
        self._feed_normalizer()
        return wait_time

    def _wait_for_data(self, run: RunState, logger: OffPolicyLogger) -> None:
        """Block until this iteration may train (sync: one new chunk past the threshold)."""
        threshold = self.config.train_start_rows
        while True:
            self.check_collector()
            self._check_stop()  # rank 0 only (several ranks: inside `ranks.wait_on_lead`)
            if self.sync_collection:
                try:
                    self.collection_ready_queue.get(timeout=_WAIT_POLL_S)
                except queue.Empty:
                    continue
                run.take_metrics(self.metrics_queue, logger)
                if len(self.replay_buffer) >= threshold:
                    return
                logger.log_buffer_fill(len(self.replay_buffer), threshold)
                self._put_done()  # warm-up chunk: collect the next one
            else:
                if len(self.replay_buffer) >= threshold:
                    return
                run.take_metrics(self.metrics_queue, logger)
                logger.log_buffer_fill(len(self.replay_buffer), threshold)
                time.sleep(_ASYNC_POLL_S)

    def _feed_normalizer(self) -> None:
        """Merge the rows collected since the last iteration into the learner's statistics:
        observations into its normalisers, and (a learner with ``observe_rewards``, FlashSAC)
        rewards and episode ends ``[S, num_envs]`` in step order, as the JAX loop's
        ``Agent.observe_rewards``."""
        observe = getattr(self.learner, "observe_rewards", None)
        if not self.obs_normalization and observe is None:
            return
        rows, self._replay_read_ptr = self.replay_buffer.rows_since(self._replay_read_ptr)
        if rows.shape[0] == 0:
            return
        columns = self.replay_buffer.split_columns(rows.to(self.device))
        if self.obs_normalization:
            self.learner.update_normalizers(columns["obs"], columns.get("critic"))
        if observe is not None:
            # The collector adds one row per env per step, so the rows are whole steps in env
            # order (the ring drops whole steps, as its capacity is a multiple of num_envs).
            steps = columns["rewards"].shape[0] // self.num_envs
            observe(
                columns["rewards"].reshape(steps, self.num_envs),
                columns["dones"].reshape(steps, self.num_envs) > 0,
            )

    def _local_batch_size(self) -> int:
        """Rows of one update on one rank: the global batch is split evenly over the ranks."""
        return self.batch_size // self.world_size

    def _sample_batch(self, iteration: int, rec: TraceRecorder | None) -> dict[str, torch.Tensor]:
        return self._batches.sample(self, iteration, rec)

    def _train(self, iteration: int, rec: TraceRecorder | None) -> dict[str, float]:
        """This iteration's batches, then the update schedule on consecutive slices."""
        batch = self._sample_batch(iteration, rec)
        return run_updates(
            self.learner, batch, self.updates_per_step, self.policy_frequency,
            rows=self._local_batch_size(), recorder=rec,
        )  # fmt: skip

    def _publish(self, run: RunState, release_collector: bool = True) -> float:
        """Statistics and actor weights to the collector, then release it; returns seconds."""
        t0 = time.perf_counter()
        if self.obs_stats is not None:
            self.obs_stats.put(*actor_input_statistics(self.learner))
        with maybe_span(run.recorder, "learner/weight_sync_write", cat="learner"):
            # A collector killed while reading the weights holds their lock forever.
            self.weight_sync.write_weights(self.learner.actor.state_dict(), self.check_collector)
        weight_sync_time = time.perf_counter() - t0
        if run.recorder is not None:
            run.recorder.counter("replay_size", len(self.replay_buffer), cat="learner")
        if release_collector:
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
