"""The host loop of ``train``: the compiled step run block by block, each block's record
handed to the sinks, and the end of a run stopped by a signal.

The host touches the device once per block of ``log_interval`` iterations (``block_length``):
``compile_first_block`` waits for the first block's step (compiled in the background beside
init), ``run_blocks`` runs the blocks up to ``max_iterations`` or a stop signal, turning each
block's reduced metrics into a record (``unilab_jax.training.records``), and ``stop_on_signal``
saves
the state of a stopped run and raises ``RunStopped``. In a multi-process run every process
agrees on the stop signal before each block, and a lost process becomes one clear error
(``collective``). The loop itself prints and writes nothing: the sinks do.
"""

from __future__ import annotations

import time
from typing import Any

import jax

from unilab_jax.collection.step import TrainState
from unilab_jax.config import TrainConfig
from unilab_jax.distributed import processes
from unilab_jax.training.interrupts import StopSignals, run_stopped, signal_name
from unilab_jax.training.records import (
    block_record,
    check_finite,
    check_learner_finite,
    run_summary,
)
from unilab_jax.training.sinks import CheckpointSink, SinkChain

__all__ = ["block_length", "collective", "compile_first_block", "run_blocks", "stop_on_signal"]


def block_length(config: TrainConfig, done: int) -> int:
    """Iterations in the block that starts after ``done``: ``log_interval``, or what is left."""
    return min(config.log_interval, config.max_iterations - done)


def compile_first_block(
    trainer: Any, config: TrainConfig, state: TrainState, sinks: SinkChain, stop: StopSignals
) -> float:
    """Compile the first block's step (nothing for a run with nothing to do); seconds taken."""
    done = int(state.iteration)
    if done >= config.max_iterations:
        return 0.0
    num_iterations = block_length(config, done)
    compiled = num_iterations in trainer.step_compile_seconds  # a reused trainer: nothing to do
    start = time.perf_counter()
    stop.wait(trainer.step_fn, state, num_iterations)
    waited = time.perf_counter() - start
    compile_time = waited if compiled else trainer.step_compile_seconds[num_iterations]
    if compile_time > waited + 0.05:  # compiled in the background beside init
        sinks.status(f"Compiled in {compile_time:.1f}s ({compile_time - waited:.1f}s of it "
                 "while init ran)")  # fmt: skip
    else:
        sinks.status(f"Compiled in {compile_time:.1f}s")
    return compile_time


def run_blocks(
    trainer: Any,
    config: TrainConfig,
    state: TrainState,
    sinks: SinkChain,
    stop: StopSignals,
    start: float,
):
    """Run ``log_interval``-iteration blocks up to ``max_iterations`` (or until a stop signal),
    handing each block's record to the sinks. Returns (state, history, the signal the run
    stops on or None).

    Several processes act on the signal they agree on before each block (any process's stops
    them all after the same block). A signal that lands while that agreement runs is kept for
    the next one, never overwritten (it was lost so once: the slower process waits in the
    collective most of the time); one that lands during or after the last agreement of a
    finished run is not acted on (every process would otherwise have to save alone)."""
    history: list[dict] = []
    rows_per_iter = config.num_envs * config.env_steps_per_sync
    done = int(state.iteration)
    several = processes.is_multiprocess()
    while True:
        stopped = stop.requested
        if several:  # a signal to any process stops all after the same block
            stopped = collective(processes.agree_stop, stopped)
            stop.requested = stopped or stop.requested
        if done >= config.max_iterations or stopped is not None:
            break
        n = block_length(config, done)
        step = stop.wait(trainer.step_fn, state, n)
        t0 = time.perf_counter()
        call = collective if several else _call
        # The dispatch too runs in the waiting thread: on a busy CPU, XLA may run the block
        # inside the call itself, and a second signal must still stop the run at once.
        state, metrics = stop.wait(call, step, state)
        metrics = stop.wait(call, jax.device_get, metrics)  # the one host sync per block
        if stop.requested is not None:
            sinks.status(f"{signal_name(stop.requested)} received: stopping after this block "
                     "(send it again to stop at once)")  # fmt: skip
        elapsed = time.perf_counter() - t0
        check_finite(metrics, done, config.num_envs)
        check_learner_finite(metrics, done)
        done += n
        record = block_record(metrics, done, rows_per_iter, elapsed / n)
        record["elapsed_sec"] = time.perf_counter() - start
        history.append(sinks.block(record, state))
    return state, history, stopped


def stop_on_signal(
    signum: int,
    state: TrainState,
    history: list[dict],
    saver: CheckpointSink | None,
    sinks: SinkChain,
    config: TrainConfig,
    wall: float,
    compile_time: float,
) -> None:
    """The end of a run stopped by SIGINT/SIGTERM: save the state of the block just finished
    (unless its checkpoint is already written) and raise ``RunStopped``."""
    done = int(state.iteration)
    checkpoint = None
    if not history:
        saved = "nothing new to save (no block had finished)"
    elif saver is None:
        saved = "no checkpoint written (checkpoints are off: no log dir or save_interval 0)"
    else:
        sinks.status(f"{signal_name(signum)}: saving a checkpoint at iteration {done}...")
        checkpoint = saver.save_final(done, state)
        saved = f"saved checkpoint {checkpoint}"
    summary = run_summary(config, state, history, compile_time, wall, None)
    summary.update(status=f"interrupted ({signal_name(signum)})", last_checkpoint=checkpoint)
    raise run_stopped(signum, done, checkpoint, summary, saved)


def collective(fn, *args):
    """``fn(*args)`` in a multi-process run: a failed cross-process collective (a process
    died) becomes one clear ``ProcessLostError``."""
    try:
        return fn(*args)
    except (jax.errors.JaxRuntimeError, ValueError, RuntimeError) as err:
        if not processes.peer_failure(err):
            raise
        raise processes.lost_process(err) from err


def _call(fn, *args):
    """``fn(*args)``: what ``collective`` is for a single process."""
    return fn(*args)
