"""What happens when a CLI run is preempted, doubled or pointed at a bad place: SIGTERM/SIGINT
save the finished block and restore the cursor (in a real pty), a second signal stops at once,
a second run on the same log dir fails at once, a stale lock is taken over, missing or
unwritable paths fail in a fraction of a second and create nothing."""

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from unilab_jax.training.rundir import LOCK_FILE, LogDirError, claim_log_dir, probe_log_dir

TINY = (
    "--env", "PendulumSwingup", "--algo", "td3", "--num-envs", "8", "--replay-buffer-n", "16",
    "--batch-size", "32", "--updates-per-step", "2", "--actor-hidden-dim", "16",
    "--critic-hidden-dim", "32", "--num-atoms", "11", "--eval-envs", "0", "--logger", "none",
    "--max-iterations", "10000000",
)  # fmt: skip
HIDE, SHOW = b"\x1b[?25l", b"\x1b[?25h"


class PtyRun:
    """``python -m unilab_jax.train ARGS`` on a pseudo-terminal, its output collected."""

    def __init__(self, *args: str) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "unilab_jax.train", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            # Python's own SIGINT handling, whatever this test process inherited.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        os.close(slave)
        self.master, self.output = master, b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"{what} never happened; output: {self.text[-2000:]}")
            time.sleep(0.1)

    def finish(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the run did not exit within {timeout}s; output: {self.text[-2000:]}")
        finally:
            self._reader.join(timeout=5)
            os.close(self.master)

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")


def _checkpoints(log_dir: Path) -> list[int]:
    folder = log_dir / "checkpoints"
    return (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []
    )


@pytest.mark.parametrize("again", [False, True], ids=["once", "repeated"])
def test_sigterm_saves_the_finished_block_restores_the_cursor_and_exits_143(tmp_path, again):
    log_dir = tmp_path / "run"
    run = PtyRun(*TINY, "--log-interval", "10", "--save-interval", "100000", "--log-dir",
                 str(log_dir))  # fmt: skip
    run.wait_for(lambda: b"Compiled" in run.output, 180, "compilation")
    # A second run on the same log dir is refused at once, naming the owner.
    second = subprocess.run(
        [sys.executable, "-m", "unilab_jax.train", *TINY, "--log-dir", str(log_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2
    assert f"is in use by another run (pid {run.proc.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    time.sleep(1.0)  # some blocks done, no checkpoint yet (save interval 100000)
    assert _checkpoints(log_dir) == []
    run.proc.send_signal(signal.SIGTERM)
    # Once the stop is reported, more SIGTERMs (a scheduler repeating itself) land in the
    # teardown: they end it at once with the same status, the lock released. (Sent always, they
    # would hide the status the run itself returns: "once" sends none.)
    deadline = time.monotonic() + 60
    while run.proc.poll() is None and time.monotonic() < deadline:
        if again and b"Resume with" in run.output:
            run.proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    assert run.finish(timeout=60) == 143
    text = run.text
    assert "nothing to save" not in text
    assert "SIGTERM: stopped after iteration" in text and "Traceback" not in text
    iteration = int(text.split("SIGTERM: stopped after iteration ")[1].split(";")[0])
    assert iteration > 0 and iteration % 10 == 0  # a whole block, never a partial one
    assert _checkpoints(log_dir) == [iteration]
    assert f"--resume {log_dir} --log-dir {log_dir}" in text
    assert run.output.rfind(SHOW) > run.output.rfind(HIDE) >= 0  # the cursor is back
    summary = json.loads((log_dir / "run_summary.json").read_text())
    assert summary["status"] == "interrupted (SIGTERM)"
    assert summary["completed_iterations"] == iteration
    assert (log_dir / LOCK_FILE).read_text() == ""  # released


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_second_signal_stops_at_once_without_waiting_for_the_block(tmp_path, signame):
    log_dir = tmp_path / "run"
    signum = getattr(signal, signame)
    # One block is tens of thousands of iterations: many seconds on any CPU.
    run = PtyRun(*TINY, "--log-interval", "40000", "--save-interval", "0", "--log-dir",
                 str(log_dir))  # fmt: skip
    run.wait_for(lambda: b"Compiled" in run.output, 180, "compilation")
    # Into the first block: a signal right after "Compiled", before the loop's first look at
    # the stop flag, stops the run with nothing to save, and the second would then land in
    # the teardown (not the case tested here).
    time.sleep(1.0)
    run.proc.send_signal(signum)
    time.sleep(1.0)
    assert run.proc.poll() is None, "the first signal must let the block finish"
    run.proc.send_signal(signum)
    sent = time.monotonic()
    assert run.finish(timeout=60) == 128 + signum
    assert time.monotonic() - sent < 5.0, f"the second {signame} waited for the block"
    assert f"second {signame}: stopped at once" in run.text and "Traceback" not in run.text
    assert run.output.rfind(SHOW) > run.output.rfind(HIDE) >= 0
    assert _checkpoints(log_dir) == []  # nothing half-written, nothing saved
    assert (log_dir / LOCK_FILE).read_text() == ""  # released


def test_a_sigterm_before_training_that_a_finaliser_swallowed_still_stops_the_run(tmp_path):
    """A signal handler's exception raised while a ``__del__`` runs is printed and lost: a
    SIGTERM landing there before training began once let the run train on. Here a finaliser
    running early in the program raises SIGTERM: the run still stops before training, exit
    143, nothing saved (unmutated, the run trained its 4 iterations and exited 0)."""
    log_dir = tmp_path / "run"
    args = [a for a in TINY if a != "10000000"][:-1] + ["--max-iterations", "4"]
    script = f"""
import signal, sys
import unilab_jax.cli.train as cli

class SignalsWhenFreed:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)  # its StopRequested is raised here, and lost

probe = cli.probe_log_dir
def probe_then_free(path):
    probe(path)
    SignalsWhenFreed()

cli.probe_log_dir = probe_then_free
sys.exit(cli.main({[*args, "--log-dir", str(log_dir)]!r}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert "Exception ignored" in proc.stderr  # the handler's exception was swallowed
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "SIGTERM before training began; nothing to save" in proc.stderr
    assert not _checkpoints(log_dir) and not (log_dir / "run_summary.json").exists()


def test_sigint_during_start_up_exits_130_with_nothing_saved(tmp_path):
    log_dir = tmp_path / "run"
    run = PtyRun(*TINY, "--save-interval", "0", "--log-dir", str(log_dir))
    # run_config.json is written just before the step starts compiling in the background and
    # init runs: the signal lands before training begins. (With a cold compile still running
    # there, the interpreter's teardown used to crash, SIGSEGV or abort: the CLI now leaves
    # without one. The suite's compilation cache makes that compile too short to catch here.)
    run.wait_for(lambda: (log_dir / "run_config.json").exists(), 180, "the run's start")
    run.proc.send_signal(signal.SIGINT)
    assert run.finish(timeout=60) == 130, run.text[-2000:]
    assert "SIGINT before training began; nothing to save" in run.text
    assert not _checkpoints(log_dir)
    assert not (log_dir / "run_summary.json").exists()


def test_missing_resume_path_and_file_log_dir_fail_at_once_creating_nothing(tmp_path):
    start = time.perf_counter()
    missing = tmp_path / "nowhere"
    proc = subprocess.run(
        [sys.executable, "-m", "unilab_jax.train", "--resume", str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and f"--resume {missing}: no such directory" in proc.stderr
    assert not missing.exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "unilab_jax.train", "--log-dir", str(a_file)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr
    assert time.perf_counter() - start < 10  # no JAX import, no build


def test_a_stale_lock_of_a_dead_run_is_taken_over(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from unilab_jax.training.rundir import claim_log_dir; "
         f"claim_log_dir({str(tmp_path)!r}); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(LogDirError, match=f"in use by another run \\(pid {holder.pid} "):
        claim_log_dir(tmp_path)
    with pytest.raises(LogDirError, match="in use"):
        probe_log_dir(tmp_path)
    holder.kill()  # dies holding the lock: the kernel drops it, the file stays
    holder.wait()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder.pid
    probe_log_dir(tmp_path)
    with claim_log_dir(tmp_path) as lock:
        assert lock.took_over["pid"] == holder.pid
        with claim_log_dir(tmp_path):  # nested claims in one process share the lock
            pass
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_a_read_only_log_dir_is_refused_before_anything_is_built(tmpfs):
    read_only = tmpfs("ro,size=64k")
    with pytest.raises(LogDirError, match="cannot be written"):
        probe_log_dir(read_only / "run")
    with pytest.raises(LogDirError, match="cannot be written"):
        claim_log_dir(read_only / "run")


def test_a_diverged_learner_stops_the_run_with_a_named_error_and_exit_3(tmp_path, capsys):
    """A learning rate of 1e12 makes the critic's loss non-finite within the first block: the
    run stops there (it printed ``qf_loss nan`` block after block and exited 0 before), says
    which iteration and quantity, exits 3, records the status, and saves nothing after it."""
    from unilab_jax.train import main

    args = [a for a in TINY if a != "10000000"][:-1]  # TINY without --max-iterations N
    code = main([*args, "--max-iterations", "8", "--log-interval", "2", "--save-interval", "2",
                 "--critic-lr", "1e12", "--log-dir", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 3, err
    assert "the learner diverged at iteration" in err and "qf_loss = nan" in err
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary["status"] == "diverged" and "qf_loss" in summary["error"]
    # Exactly the blocks before the one that diverged were saved (every 2 iterations), so every
    # checkpoint is finite; the diverged block's own is not written.
    import re

    import jax
    import numpy as np

    import unilab_jax
    from unilab_jax.training.checkpoint import list_steps

    diverged = int(re.search(r"diverged at iteration (\d+)", err).group(1))
    block_start = (diverged - 1) // 2 * 2  # the iterations done before its block
    saved = list_steps(tmp_path / "run" / "checkpoints")
    assert list(saved) == list(range(2, block_start + 1, 2)), (diverged, saved)
    for step in saved:
        policy = unilab_jax.load_policy(tmp_path / "run", step)
        assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(policy.state))


def test_a_failed_save_stops_the_run_with_exit_1_and_the_resume_command(
    tmp_path, capsys, monkeypatch
):
    """The disk fills up after checkpoint 2: the save of 4 fails, training stops there (going
    on would run unprotected), exit 1, naming the intact checkpoint and the resume command."""
    import errno

    from unilab_jax.train import main
    from unilab_jax.training.checkpoint import CheckpointWriter

    write = CheckpointWriter._write

    def full_after_2(self, iteration, items, eval_return):
        if iteration > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, iteration, items, eval_return)

    monkeypatch.setattr(CheckpointWriter, "_write", full_after_2)
    log_dir = tmp_path / "run"
    args = [a for a in TINY if a != "10000000"][:-1]  # TINY without --max-iterations N
    code = main([*args, "--max-iterations", "8", "--log-interval", "2", "--save-interval", "2",
                 "--log-dir", str(log_dir)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    assert (f"error: could not write checkpoint 4 under {log_dir / 'checkpoints'}: No space "
            "left on device; checkpoint 2 is intact. Training stopped;") in err  # fmt: skip
    assert f"--resume {log_dir} --log-dir {log_dir}" in err and "Traceback" not in err
    assert _checkpoints(log_dir) == [2]


def test_train_owns_its_run_from_python(tmp_path, monkeypatch, capsys):
    """``train`` itself, not the CLI, names a new run's folder (``log_dir=True``:
    ``logs/<algo>/<env>/<time>_<physics>``), holds its lock while it runs and writes
    ``run_config.json`` and ``run_summary.json``; ``resume=True`` goes on in it, taking over
    the lock a killed run left, and saying so."""
    from tiny import TINY, TINY_SAC  # tests/tiny.py

    from unilab_jax.training.trainer import train

    monkeypatch.chdir(tmp_path)
    config = TINY.replace(save_interval=2)
    first = train(config, TINY_SAC, log_dir=True, logger="none", quiet=True)
    (run,) = (tmp_path / "logs" / "fast_sac" / "PendulumSwingup").iterdir()
    assert run.name.endswith("_mjx") and first.summary["log_dir"] == str(run.relative_to(tmp_path))
    assert (run / "run_config.json").exists() and (run / LOCK_FILE).read_text() == ""
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["completed_iterations"] == 6
    # A run killed (SIGKILL) holding the lock left its record; the kernel dropped its flock.
    (run / LOCK_FILE).write_text(json.dumps({"pid": 999999999, "host": "h", "started": 0}))
    capsys.readouterr()
    more = train(config.replace(max_iterations=8), TINY_SAC, log_dir=run, resume=True,
                 logger="none", sinks=[])  # fmt: skip
    note = f"note: {run} was locked by a run that is gone (pid 999999999); this run takes it over"
    assert note in capsys.readouterr().err
    assert more.summary["completed_iterations"] == 8
    assert json.loads((run / "run_summary.json").read_text())["completed_iterations"] == 8
