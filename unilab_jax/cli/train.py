"""``python -m unilab_jax.train``: train an algorithm of the registry (FastSAC, FastTD3) on a
registered task.

Every option is generated from the documented fields of ``TrainConfig`` and of the chosen
algorithm's config (``SACConfig`` / ``TD3Config``), so ``--help`` documents them all. Bad
input (unknown env or algo, sizes that cannot work) fails with a clear message before
anything is compiled.

Examples::

    python -m unilab_jax.train --env PendulumSwingup --algo sac --num-envs 64 --batch-size 1024
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python -m unilab_jax.train --num-devices 2

Several processes (``unilab_jax.distributed``): ``python -m unilab_jax.launch --nproc 2 --
<options>`` on one machine; on several, start this command on each with ``--num-processes N
--process-id I --coordinator-address HOST:PORT`` (the same address everywhere, process 0's),
or under SLURM ``srun`` / Open MPI ``mpirun`` without the three (JAX reads them from the
scheduler). ``--num-devices`` counts the devices of all processes. Process 0 logs and writes
the run's files; the others print only errors.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from unilab_jax.algos.config import settings_from_json
from unilab_jax.algos.registry import ALGOS, get_algo
from unilab_jax.cli.options import add_dataclass_options, flag
from unilab_jax.cluster import detected_cluster
from unilab_jax.config import LOGGERS, ConfigError, TrainConfig, with_host_devices
from unilab_jax.distributed import (
    LAUNCH_FIELDS,
    broadcast_int,
    hard_exit,
    is_multiprocess,
    is_primary,
    launch_prefix,
    local_device_count,
)
from unilab_jax.presets import PRESET_CHOICES, family_of, get_preset, preset_line
from unilab_jax.resume import checkpoint_folder
from unilab_jax.rundir import claim_log_dir, probe_log_dir, release_all

__all__ = ["main", "build_parser"]

# Loop options the CLI does not expose (set through the Python API).
_HIDDEN_TRAIN_FIELDS = {"env_overrides"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m unilab_jax.train",
        description=(
            f"Train {' or '.join(spec.display_name for spec in ALGOS.values())} on an MJX task "
            "with the fused, jitted, data-parallel JAX loop. Algorithm settings apply to the "
            "chosen --algo; defaults are the reference's (UniLab's torch off-policy runner). A "
            "task may suggest its C51 support (--v-min/--v-max) for its reward scale; explicit "
            "values win."
        ),
    )
    _add_run_options(parser.add_argument_group("run"))
    _add_config_options(parser)
    return parser


def _add_run_options(run: argparse._ArgumentGroup) -> None:
    """The options of the run itself (not settings of what it trains)."""
    run.add_argument(
        "--logger",
        choices=LOGGERS,
        default="tensorboard",
        help="metrics backend besides the live console panel (default: tensorboard)",
    )
    run.add_argument(
        "--log-dir",
        default=None,
        help="where logs and orbax checkpoints go (default: logs/<algo>/<env>/<time>_mjx)",
    )
    for name, text in (
        ("project", "W&B project (default: unilab)"),
        ("entity", "W&B entity (team or user)"),
        ("group", "W&B group, e.g. one per sweep"),
        ("name", "W&B run name (default: <algo>_<env>)"),
    ):
        run.add_argument(f"--wandb-{name}", default=None, metavar=name.upper(),
                         help=f"with --logger wandb: {text}")  # fmt: skip
    run.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="rerun a run: take every setting from FILE (a run's run_config.json); options "
        "given with it win (e.g. --config logs/.../run_config.json --seed 1)",
    )
    run.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue from the newest checkpoint in DIR (a run's log dir or its "
        "checkpoints/ folder); the settings that shape the state must match that run's. "
        "To continue the same run, also pass --log-dir DIR",
    )
    run.add_argument(
        "--resume-step",
        type=int,
        default=None,
        metavar="N",
        help="with --resume: the checkpoint of iteration N instead of the newest (e.g. when "
        "the newest is damaged)",
    )
    run.add_argument(
        "--preset",
        choices=PRESET_CHOICES,
        default=os.environ.get("UNILAB_JAX_PRESET", "auto"),
        help="per-task sizes and settings (envs, batch, updates, discount, widths, ...) for the "
        "task's family (dm_control, locomotion, brax; --list-envs shows each task's): 'auto' "
        "picks the gpu-sized preset when JAX will run on a GPU or TPU and the cpu-sized one "
        "otherwise; 'none' keeps the bare defaults shown below (the reference's GPU recipe). "
        "Options given always win; --config FILE ignores presets (default: auto, or "
        "$UNILAB_JAX_PRESET when set)",
    )
    run.add_argument("--quiet", action="store_true", help="no console output (summary JSON only)")
    run.add_argument("--list-envs", action="store_true", help="print the registered tasks and exit")


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    """One option per documented field of ``TrainConfig`` and of every algorithm's config."""
    loop = parser.add_argument_group("loop (TrainConfig)")
    train_fields = add_dataclass_options(loop, TrainConfig, skip=_HIDDEN_TRAIN_FIELDS)
    parser.set_defaults(_train_fields=train_fields)
    (algo,) = [action for action in parser._actions if action.dest == "algo"]
    names = ", ".join(f"{spec.name} ({spec.display_name})" for spec in ALGOS.values())
    algo.help = f"the algorithm, one of {names} (default: {TrainConfig.algo})"
    # The first algorithm's options carry the shared ones; each other one adds its own.
    seen: set[str] = set()
    first, *rest = ALGOS.values()
    group = parser.add_argument_group(
        f"algorithm settings for --algo {first.name} ({first.config_cls.__name__})"
    )
    others = [(spec.name, spec.config_cls) for spec in rest]
    add_dataclass_options(group, first.config_cls, seen=seen, others=others)
    for spec in rest:
        group = parser.add_argument_group(
            f"algorithm settings for --algo {spec.name} only ({spec.config_cls.__name__}); "
            "the shared ones are above"
        )
        add_dataclass_options(group, spec.config_cls, seen=seen)


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


_WANDB_OPTIONS = ("wandb_project", "wandb_entity", "wandb_group", "wandb_name")
_RUN_OPTIONS = {
    "logger", "log_dir", "quiet", "list_envs", "config", "resume", "resume_step", "preset",
    *_WANDB_OPTIONS,
}  # fmt: skip


def _configs_from_args(args: argparse.Namespace) -> tuple[TrainConfig, dict, str | None]:
    """The run's ``TrainConfig``, algorithm overrides and the line saying which preset applied
    (None: none did): ``--config FILE``'s settings or else the task's preset, then the options
    given (which win)."""
    values = vars(args)
    saved_train, saved_algo = _read_config_file(args.config) if args.config else ({}, {})
    train_given = {k: values[k] for k in args._train_fields if k in values}
    config = TrainConfig(**{**saved_train, **train_given})
    algo_fields = _fields(get_algo(config.algo).config_cls)
    given = {k for k in values if not k.startswith("_") and k not in train_given} - _RUN_OPTIONS
    wrong = sorted(given - algo_fields)
    if wrong:
        raise ConfigError(
            f"option(s) {', '.join(flag(w) for w in wrong)} do not apply to --algo {config.algo}"
        )
    # The saved algorithm settings belong to the saved algorithm only.
    saved_algo = saved_algo if saved_train.get("algo", config.algo) == config.algo else {}
    algo_given = {k: values[k] for k in given}
    if args.preset not in PRESET_CHOICES:  # from $UNILAB_JAX_PRESET
        raise ConfigError(
            f"UNILAB_JAX_PRESET={args.preset!r}: choose one of {', '.join(PRESET_CHOICES)}"
        )
    preset = None if args.config else get_preset(config.env, args.preset)
    if preset is None:
        return config, {**saved_algo, **algo_given}, None
    config = TrainConfig(**{**preset.train, **train_given})
    line = preset_line(preset, config.algo, given=set(train_given) | set(algo_given))
    return config, {**preset.algo_settings(config.algo), **algo_given}, line


def _read_config_file(path: str) -> tuple[dict, dict]:
    """``(train, algo)`` settings of a ``run_config.json``; a bad file is a ``ConfigError``."""
    try:
        saved = json.loads(Path(path).read_text())
        train, algo = dict(saved["train"]), dict(saved.get("algo") or {})
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"--config {path}: not a readable run_config.json ({type(err).__name__}: {err})"
        ) from None
    for name in LAUNCH_FIELDS:  # how that run was started, not what it trained
        train.pop(name, None)
    known = _fields(TrainConfig)
    unknown = sorted(set(train) - known)
    if unknown:
        raise ConfigError(f"--config {path}: unknown setting(s) {', '.join(unknown)}")
    return train, settings_from_json(algo)


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
    trainer's state layout (``unilab_jax.resume``); a failure is one clear line."""
    from unilab_jax.resume import ResumeError, restore_run

    try:
        return restore_run(trainer, resume, step, current)
    except ResumeError as err:
        offer = (
            f"; resume from the previous one with --resume {resume} --resume-step {err.older}"
            if err.older is not None
            else ""
        )
        raise SystemExit(f"error: --resume {resume}: {err.reason}{offer}") from None


def main(argv: list[str] | None = None) -> int:
    """The CLI: exit code 0 when done, 2 for bad input, 1 for a failed save, 130/143 when
    stopped by SIGINT/SIGTERM."""
    from unilab_jax.interrupts import ImmediateStop, signal_name, stop_now

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
        config, algo_overrides, preset = _configs_from_args(args)
        if config.env not in registered_names() and not config.env.startswith(ADAPTER_PREFIXES):
            raise ConfigError(
                f"unknown env {config.env!r}; registered tasks: {', '.join(registered_names())}"
                f"; adapters: {', '.join(ADAPTER_PREFIXES)}<name> (--list-envs)"
            )
        # Before JAX creates its CPU client; in a multi-process run, this process's share.
        # C MuJoCo's overlapped collection runs its JAX code on a CPU device of its own.
        overlap = config.physics == "mujoco" and config.collection == "overlap"
        _force_host_devices(local_device_count(config) + int(overlap))

        from unilab_jax.trainer import Trainer, run_config

        if preset and not args.quiet and _first_process(args):
            print(preset, flush=True)
        # Validates the configuration (once), loads the env and builds the agent; nothing
        # is compiled yet.
        trainer = Trainer(config, algo_overrides)
    except (ConfigError, UnknownEnvError) as err:
        parser.exit(2, f"error: {err}\n")
    # The processes of one run share one log dir: process 0's clock names it.
    started = _dt.datetime.fromtimestamp(broadcast_int(int(_dt.datetime.now().timestamp())))
    log_dir = Path(
        args.log_dir
        or Path("logs")
        / get_algo(config.algo).log_name
        / config.env
        / f"{started:%Y-%m-%d_%H-%M-%S}_mjx"
    )
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
    from unilab_jax.checkpoint import CheckpointSaveError
    from unilab_jax.distributed import ProcessLostError
    from unilab_jax.interrupts import ImmediateStop, RunStopped, signal_name
    from unilab_jax.trainer import train

    try:
        result = train(
            config,
            trainer=trainer,
            log_dir=log_dir,
            logger=args.logger,
            quiet=args.quiet,
            initial_state=initial_state,
            wandb={k.removeprefix("wandb_"): getattr(args, k) for k in _WANDB_OPTIONS},
        )
    except RunStopped as stop:
        # train() saved the block just finished and restored the terminal.
        _write_summary(log_dir, stop.summary)
        print(
            f"\n{stop}. Resume with: {_resume_command(argv, log_dir)}",
            file=sys.stderr,
        )
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
    summary = _write_summary(log_dir, result.summary)
    if args.quiet and is_primary():
        print(json.dumps(summary))
    return 0


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
    if prefix:  # started by unilab_jax.launch: resume through it (it adds the process options)
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
