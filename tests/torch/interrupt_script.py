"""Runs a long off-policy `learn()` with the console display; used by the signal tests.

Usage: python interrupt_script.py LOG_DIR [KIND]. KIND: "single" (default, `OffPolicyRunner`),
"uncaught" (the same, calling `learn` as README's example does, catching nothing),
"double" (`DoubleBufferOffPolicyRunner`), "multi" (`MultiGPUOffPolicyRunner`, two gloo ranks),
"mjx" (`OffPolicyRunner(sim_backend="mjx")`: the JAX core trains, in blocks of 10 iterations)
or "slow" (a single learner whose iterations from the 3rd on take 30 s: a first signal would
wait for the iteration, a second must not). Writes "READY" straight to stdout after the first
training iteration (after the 2nd for "slow"), then keeps training until stopped, and exits
with the conventional status of the signal that stopped it (130, 143). SIGUSR1
dumps every thread's stack to stderr (the tests ask for it when the run does not exit in time).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time

import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.offpolicy.double_buffer_runner import DoubleBufferOffPolicyRunner
from unilab.algos.torch.offpolicy.multi_gpu_runner import MultiGPUOffPolicyRunner
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner
from unilab_jax.training.interrupts import ImmediateInterrupt, TrainingInterrupted

SLOW_ITERATION_S = 30.0
LEARNER_KWARGS = dict(obs_dim=3, action_dim=1, critic_obs_dim=3, actor_hidden_dim=32,
                      critic_hidden_dim=32, v_min=-5.0, v_max=40.0)  # fmt: skip


class _Ready:
    """Announces the first trained iteration (in rank 0 with several ranks)."""

    ready_after = 1

    def _iteration(self, iteration, run, logger):
        super()._iteration(iteration, run, logger)
        if iteration == self.ready_after and logger is not None:
            os.write(sys.stdout.fileno(), f"\nREADY {iteration}\n".encode())


class ReadyRunner(_Ready, OffPolicyRunner):
    pass


class ReadyDoubleBufferRunner(_Ready, DoubleBufferOffPolicyRunner):
    pass


class ReadyMultiRunner(_Ready, MultiGPUOffPolicyRunner):
    pass


class SlowRunner(ReadyRunner):
    ready_after = 2

    def _train(self, iteration, rec):
        if iteration > self.ready_after:
            time.sleep(SLOW_ITERATION_S)
        return super()._train(iteration, rec)


def _announce_core_blocks() -> None:
    """The mjx path: READY after the core's first block (its public ``on_block`` callback)."""
    from unilab.algos.torch.offpolicy import jax_backend

    core_train = jax_backend.train

    def train(*args, **kwargs):
        kwargs["on_block"] = lambda record: os.write(
            sys.stdout.fileno(), f"\nREADY {record['iteration']}\n".encode()
        )
        return core_train(*args, **kwargs)

    jax_backend.train = train


def main() -> None:
    # Start like a Python launched from a shell. An ignored SIGINT is inherited across exec, and
    # Python then keeps it ignored: a test process that ignores SIGINT (measured: after earlier
    # tests of the suite) would otherwise hand this run a Ctrl+C it can never see. The same
    # for SIGTERM (the runner installs its handlers only over the defaults).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    torch.set_num_threads(1)
    kind = sys.argv[2] if len(sys.argv) > 2 else "single"
    kwargs = dict(
        num_envs=16, replay_buffer_n=64, batch_size=32, updates_per_step=2, policy_frequency=2,
        actor_hidden_dim=32, seed=0, sync_collection=True,
    )  # fmt: skip
    learner = FastSACLearner(**LEARNER_KWARGS)
    if kind == "mjx":
        _announce_core_blocks()
        kwargs.pop("sync_collection")
        runner = OffPolicyRunner(learner, "PendulumSwingup", "sac", sim_backend="mjx", **kwargs)
    elif kind == "multi":
        runner = ReadyMultiRunner(
            learner, "PendulumSwingup", "sac", LEARNER_KWARGS, num_gpus=2, **kwargs
        )
    else:
        cls = {"single": ReadyRunner, "uncaught": ReadyRunner, "double": ReadyDoubleBufferRunner,
               "slow": SlowRunner}[kind]  # fmt: skip
        runner = cls(learner, "PendulumSwingup", "sac", **kwargs)
    if kind == "uncaught":  # a stop ends the script by itself: 130, one line, no traceback
        runner.learn(max_iterations=1_000_000, save_interval=0, log_dir=sys.argv[1],
                     logger_type="console")  # fmt: skip
        return
    try:
        runner.learn(max_iterations=1_000_000, save_interval=0, log_dir=sys.argv[1],
                     logger_type="console")  # fmt: skip
    except (TrainingInterrupted, ImmediateInterrupt) as stop:
        # CPython exits with the SIGINT status (130) only for a plain uncaught
        # KeyboardInterrupt, not for a subclass (exit status 1 after a traceback): a script that
        # wants it asks. SIGTERM's TrainingTerminated is a SystemExit(143): left uncaught.
        raise SystemExit(stop.exit_code) from None


if __name__ == "__main__":
    main()
