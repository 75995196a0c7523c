"""Runs a long off-policy `learn()` with the console display; used by the Ctrl+C test.

Usage: python interrupt_script.py LOG_DIR. Writes "READY <collector pid>" straight to stdout
after the first training iteration, then keeps training until interrupted. SIGUSR1 dumps
every thread's stack to stderr (the test asks for it when the run does not exit in time).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys

import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner


class _ReadyRunner(OffPolicyRunner):
    ready_printed = False

    def _iteration(self, iteration, run, logger):
        super()._iteration(iteration, run, logger)
        if not self.ready_printed:
            self.ready_printed = True
            pid = self._collector_process.pid
            os.write(sys.stdout.fileno(), f"\nREADY {pid}\n".encode())


def main() -> None:
    # Start like a Python launched from a shell. An ignored SIGINT is inherited across exec, and
    # Python then keeps it ignored: a test process that ignores SIGINT (measured: after earlier
    # tests of the suite) would otherwise hand this run a Ctrl+C it can never see.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    torch.set_num_threads(1)
    learner = FastSACLearner(3, 1, 3, actor_hidden_dim=32, critic_hidden_dim=32, v_min=-5, v_max=40)
    runner = _ReadyRunner(
        learner, "PendulumSwingup", "sac", num_envs=16, replay_buffer_n=64, batch_size=32,
        updates_per_step=2, policy_frequency=2, actor_hidden_dim=32, seed=0,
        sync_collection=True,
    )  # fmt: skip
    runner.learn(max_iterations=1_000_000, save_interval=0, log_dir=sys.argv[1],
                 logger_type="console")  # fmt: skip


if __name__ == "__main__":
    main()
