"""``python -m unilab_jax.train``: train an algorithm of the registry (FastSAC, FastTD3) on a
registered task.

Every option is generated from the documented fields of ``TrainConfig`` and of the chosen
algorithm's config (``SACConfig`` / ``TD3Config``), so ``--help`` documents them all. Bad
input (unknown env or algo, sizes that cannot work) fails with a clear message before
anything is compiled.

Examples::

    python -m unilab_jax.train --env PendulumSwingup --algo sac --num-envs 64 --batch-size 1024
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python -m unilab_jax.train --num-devices 2

Several processes (``unilab_jax.distributed.processes``): ``unilab-jax launch --nproc 2 --
<options>`` on one machine; on several, start this command on each with ``--num-processes N
--process-id I --coordinator-address HOST:PORT`` (the same address everywhere, process 0's),
or under SLURM ``srun`` / Open MPI ``mpirun`` without the three (JAX reads them from the
scheduler). ``--num-devices`` counts the devices of all processes. Process 0 logs and writes
the run's files; the others print only errors.

This module is the program: the checks made before JAX starts, the build, the log dir's lock,
the run and the one line each way it can end (with the command that resumes it). The options
and the settings they give are ``unilab_jax.cli.train_options``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from unilab_jax.algos.registry import get_algo
from unilab_jax.cli.train_options import WANDB_OPTIONS, build_parser, configs_from_args
from unilab_jax.config import ConfigError, with_host_devices
from unilab_jax.distributed.cluster import detected_cluster
from unilab_jax.distributed.processes import (
    broadcast_int,
    hard_exit,
    is_multiprocess,
    is_primary,
    launch_prefix,
    local_device_count,
)
from unilab_jax.training.presets import family_of
from unilab_jax.training.resume import checkpoint_folder
from unilab_jax.training.rundir import claim_log_dir, probe_log_dir, release_all

__all__ = ["main", "build_parser"]


def _env_listing() -> list[str]:
    """Every env name with its preset family, a line for each adapter family whose package is
    missing, and one for the Playground tasks whose robot files no installed package ships."""
    from unilab_jax.envs import available_names
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES

    names = available_names()
    width = max(map(len, names), default=0) + 2
    lines = [f"{n:<{width}}preset: {family_of(n) or 'none (bare defaults)'}" for n in names]
    for prefix in ADAPTER_PREFIXES:
        if not any(name.startswith(prefix) for name in names):
            lines.append(
                f"# {prefix}<name>: not installed; pip install -e '.[adapters]' (Playground, Brax)"
            )
    if any(name.startswith("playground/") for name in names):
        from unilab_jax.envs.adapters.playground import unavailable_playground_names

        missing = sorted(unavailable_playground_names())
        if missing:
            lines.append(
                f"# not available offline (their robot models are not in any installed package; "
                f"loading one names the files): {', '.join(f'playground/{m}' for m in missing)}"
            )
    lines.append(
        "# presets: python -m unilab_jax.train --env NAME applies NAME's preset at the cpu or "
        "gpu scale (--preset cpu|gpu|none); options given win"
    )
    return lines


def _force_host_devices(n: int) -> None:
    """Ask XLA for ``n`` CPU devices; must run before JAX creates its CPU client."""
    flags = with_host_devices(os.environ.get("XLA_FLAGS", ""), n)
    if flags:
        os.environ["XLA_FLAGS"] = flags


def _first_process(args: argparse.Namespace) -> bool:
    """Whether this is process 0 (or the only one), known before JAX starts."""
    process_id = getattr(args, "process_id", None)
    if process_id is None and not hasattr(args, "num_processes"):
        cluster = detected_cluster()
        process_id = cluster.process_id if cluster else 0
    return not process_id


def _resume_state(trainer, resume: str, step: int | None, current: dict):
    """The checkpoint ``step`` (default: newest) under ``resume``, restored into this
    trainer's state layout (``unilab_jax.training.resume``); a failure is one clear line and exit
    code 2
    (bad input: other settings than the checkpoint's, a damaged or missing checkpoint)."""
    from unilab_jax.training.resume import ResumeError, restore_run

    try:
        return restore_run(trainer, resume, step, current)
    except ResumeError as err:
        offer = (
            f"; resume from the previous one with --resume {resume} --resume-step {err.older}"
            if err.older is not None
            else ""
        )
        print(f"error: --resume {resume}: {err.reason}{offer}", file=sys.stderr)
        raise SystemExit(2) from None


def default_log_dir(config, started: _dt.datetime) -> Path:
    """``logs/<algo>/<env>/<time>_<physics>``: the reference's layout, named by the physics the
    run collects with (``mjx`` or ``mujoco``)."""
    name = f"{started:%Y-%m-%d_%H-%M-%S}_{config.physics}"
    return Path("logs") / get_algo(config.algo).log_name / config.env / name


#: The exit code of a run that diverged.
DIVERGED = 3


def main(argv: list[str] | None = None) -> int:
    """The CLI: exit code 0 when done, 2 for bad input, 1 for a failed save, 3 when the run
    diverged (a non-finite env step or learner quantity), 130/143 when stopped by SIGINT or
    SIGTERM (after such a stop a further signal ends the process at once, with the same
    status: ``_leave_on_signals``)."""
    from unilab_jax.training.interrupts import ImmediateStop, signal_name, stop_now

    def terminate(signum, frame):  # until train() installs its own, graceful handler
        raise stop_now(signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        code = _main(argv)
    except (KeyboardInterrupt, ImmediateStop) as stop:  # before training began: nothing to save
        signum = getattr(stop, "signum", signal.SIGINT)
        print(f"\n{signal_name(signum)} before training began; nothing to save", file=sys.stderr)
        # A compile may still run in a background thread (the step's, the evaluator's): the
        # interpreter's teardown under it crashes (SIGSEGV / abort), so leave without one.
        hard_exit(128 + signum)
    except BaseException as err:
        if not is_multiprocess():
            raise
        _fail_alone(err)
    finally:
        if signal.getsignal(signal.SIGTERM) is terminate:  # not after a stop: _leave_on_signals
            signal.signal(signal.SIGTERM, previous)
    if is_multiprocess() and code not in (0, 128 + signal.SIGINT, 128 + signal.SIGTERM):
        hard_exit(code)
    return code


def _fail_alone(err: BaseException) -> None:
    """A process of a multi-process run that fails exits at once, without jax.distributed's
    shutdown barrier (which would wait for peers still busy): its closed connections make the
    others fail within moments, and the launcher stops them."""
    import traceback

    if isinstance(err, SystemExit):
        if isinstance(err.code, str):
            print(err.code, file=sys.stderr)
        hard_exit(err.code if isinstance(err.code, int) else 1)
    traceback.print_exception(err)
    hard_exit(1)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # before any heavy import: these fail in a fraction of a second, creating nothing
        if args.resume:
            checkpoint_folder(args.resume, "--resume")
        if args.log_dir and _first_process(args):  # process 0 claims it; the others do not
            probe_log_dir(args.log_dir)
    except ConfigError as err:
        parser.exit(2, f"error: {err}\n")
    from unilab_jax.envs import UnknownEnvError, registered_names
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES

    if args.list_envs:
        print("\n".join(_env_listing()))
        return 0
    try:
        config, algo_overrides, preset = configs_from_args(args)
        if config.env not in registered_names() and not config.env.startswith(ADAPTER_PREFIXES):
            raise ConfigError(
                f"unknown env {config.env!r}; registered tasks: {', '.join(registered_names())}"
                f"; adapters: {', '.join(ADAPTER_PREFIXES)}<name> (--list-envs)"
            )
        # Before JAX creates its CPU client; in a multi-process run, this process's share.
        # C MuJoCo's overlapped collection runs its JAX code on a CPU device of its own.
        overlap = config.physics == "mujoco" and config.collection == "overlap"
        _force_host_devices(local_device_count(config) + int(overlap))

        from unilab_jax.training.trainer import Trainer, run_config

        if preset and not args.quiet and _first_process(args):
            print(preset, flush=True)
        # Validates the configuration (once), loads the env and builds the agent; nothing
        # is compiled yet.
        trainer = Trainer(config, algo_overrides)
    except (ConfigError, UnknownEnvError) as err:
        parser.exit(2, f"error: {err}\n")
    # The processes of one run share one log dir: process 0's clock names it.
    started = _dt.datetime.fromtimestamp(broadcast_int(int(_dt.datetime.now().timestamp())))
    log_dir = Path(args.log_dir or default_log_dir(config, started))
    current = run_config(config, trainer.algo_config)
    initial_state = (
        _resume_state(trainer, args.resume, args.resume_step, current) if args.resume else None
    )
    if not is_primary():  # process 0 owns the log dir; the others only write checkpoints
        return _run(parser, args, config, trainer, log_dir, initial_state, argv)
    try:
        lock = claim_log_dir(log_dir)  # held until the summary is written
    except ConfigError as err:
        parser.exit(2, f"error: {err}\n")
    if lock.took_over:
        print(
            f"note: {log_dir} was locked by a run that is gone (pid {lock.took_over.get('pid')}); "
            "this run takes it over",
            file=sys.stderr,
        )
    with lock:
        return _run(parser, args, config, trainer, log_dir, initial_state, argv)


def _run(parser, args, config, trainer, log_dir: Path, initial_state, argv) -> int:
    """Train and report; a signal, a full disk or a busy log dir end in one clear line."""
    from unilab_jax.distributed.processes import ProcessLostError
    from unilab_jax.training.checkpoint import CheckpointSaveError
    from unilab_jax.training.interrupts import ImmediateStop, RunStopped, signal_name
    from unilab_jax.training.trainer import train

    try:
        result = train(
            config,
            trainer=trainer,
            log_dir=log_dir,
            logger=args.logger,
            quiet=args.quiet,
            initial_state=initial_state,
            wandb={k.removeprefix("wandb_"): getattr(args, k) for k in WANDB_OPTIONS},
        )
    except RunStopped as stop:
        # train() saved the block just finished and restored the terminal.
        _write_summary(log_dir, stop.summary)
        print(
            f"\n{stop}. Resume with: {_resume_command(argv, log_dir)}",
            file=sys.stderr,
        )
        _leave_on_signals(stop.exit_code)
        return stop.exit_code
    except ImmediateStop as stop:
        print(
            f"\nsecond {signal_name(stop.signum)}: stopped at once; the checkpoints so far are "
            f"in {log_dir / 'checkpoints'}",
            file=sys.stderr,
        )
        release_all()  # the lock file, which os._exit would leave naming this process
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(stop.exit_code)  # do not wait for the device call still running
    except CheckpointSaveError as err:
        print(
            f"\nerror: {err}. Training stopped (continuing would run unprotected); free space "
            f"or fix the file system, then resume with: {_resume_command(argv, log_dir)}",
            file=sys.stderr,
        )
        return 1
    except ProcessLostError as err:
        print(f"\nerror: {err}. Checkpoints so far: {log_dir / 'checkpoints'}", file=sys.stderr)
        return 1
    except FloatingPointError as err:  # EnvNaNError, LearnerDivergedError, C MuJoCo's
        _write_summary(log_dir, {"status": "diverged", "error": str(err)})
        print(
            f"\nerror: {err}.\nThe checkpoints so far (all finite) are in "
            f"{log_dir / 'checkpoints'}",
            file=sys.stderr,
        )
        return DIVERGED
    summary = _write_summary(log_dir, result.summary)
    if args.quiet and is_primary():
        print(json.dumps(summary))
    return 0


def _leave_on_signals(code: int) -> None:
    """After a run a signal stopped (saved, summary written, resume line printed), what is
    left is releasing the lock and the interpreter's teardown (JAX, orbax's threads), which
    can take a while. A further SIGINT/SIGTERM then ends the process at once with the stop's
    status, the lock released, instead of a traceback or the default action (a kill, -15)."""

    def leave(signum, frame):
        release_all()
        hard_exit(code)

    signal.signal(signal.SIGINT, leave)
    signal.signal(signal.SIGTERM, leave)


def _write_summary(log_dir: Path, summary: dict) -> dict:
    summary = dict(summary, log_dir=str(log_dir))
    if not is_primary():
        return summary
    with contextlib.suppress(OSError):  # a full disk already said so
        (log_dir / "run_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _resume_command(argv: list[str] | None, log_dir: Path) -> str:
    """This run's command line, continuing from ``log_dir`` into ``log_dir``."""
    args = list(sys.argv[1:] if argv is None else argv)
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--resume", "--log-dir", "--resume-step"):
            skip = "=" not in arg
            continue
        kept.append(arg)
    tail = ["--resume", str(log_dir), "--log-dir", str(log_dir)]
    prefix = launch_prefix()
    if prefix:  # started by unilab-jax launch: resume through it (it adds the process options)
        return f"{prefix} {shlex.join(_without_launch_options(kept) + tail)}"
    return shlex.join(["python", "-m", "unilab_jax.train", *kept, *tail])


def _without_launch_options(args: list[str]) -> list[str]:
    """``args`` less the per-process options the launcher adds."""
    added = ("--num-processes", "--process-id", "--coordinator-address")
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.split("=", 1)[0] in added:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return kept


if __name__ == "__main__":
    sys.exit(main())
