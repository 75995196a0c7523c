"""``unilab-jax train`` (``python -m unilab_jax.train``): train an algorithm of the registry.

A two-stage parse: the first reads ``RunOptions``, ``--env`` and ``--algo`` and checks
``--resume`` and ``--log-dir`` before JAX is imported; the second parses ``RunOptions``,
``TrainConfig`` and ``--algo``'s config over the task's preset (or ``--config``'s settings).
``trainer.train`` owns the run; the exit code says how it ended: 0 done, 2 bad input (before
anything compiles), 1 a failed save or process, 3 diverged, 130 / 143 SIGINT / SIGTERM."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from unilab_jax.algos.registry import ALGOS, get_algo
from unilab_jax.cli.options import documented, error, parse, values
from unilab_jax.config import (
    COLLECTIONS,
    LOGGERS,
    MATMUL_PRECISIONS,
    PHYSICS,
    ConfigError,
    TrainConfig,
)
from unilab_jax.distributed import processes
from unilab_jax.distributed.cluster import detected_cluster
from unilab_jax.errors import CheckpointError
from unilab_jax.training import interrupts
from unilab_jax.training.presets import PRESET_CHOICES, get_preset, preset_line, task_list
from unilab_jax.training.resume import ResumeError, checkpoint_folder, resume_command
from unilab_jax.training.rundir import probe_log_dir

__all__ = ["RunOptions", "main", "parse_args"]
_ABOUT = (
    "Train an algorithm with the fused, jitted, data-parallel JAX loop. The defaults shown are "
    "--env's preset's (else the bare ones) or --config FILE's, and --algo's settings (--algo td3 "
    "--help: FastTD3's). A task may suggest a C51 support (--v-min/--v-max) for its rewards."
)


@dataclass(frozen=True)
class RunOptions:
    """The run itself, not what it trains."""

    logger: Literal[LOGGERS] = "tensorboard"
    """Metrics backend besides the live console panel."""
    log_dir: str | None = None
    """Where logs and checkpoints go; None: logs/<algo>/<env>/<time>_<physics>."""
    wandb_project: str | None = None
    """With --logger wandb: the W&B project; None: unilab."""
    wandb_entity: str | None = None
    """With --logger wandb: the W&B entity (team or user)."""
    wandb_group: str | None = None
    """With --logger wandb: the W&B group, e.g. one per sweep."""
    wandb_name: str | None = None
    """With --logger wandb: the W&B run name; None: <algo>_<env>."""
    config: str | None = None
    """Rerun a run: its run_config.json's settings, presets aside; options given win."""
    resume: str | None = None
    """Go on from the newest checkpoint of this run (log dir or checkpoints/), with the
    settings it recorded, writing on into it; options given must match them or be the host
    loop's (--max-iterations, intervals). --log-dir elsewhere: continue into a new run."""
    resume_step: int | None = None
    """With --resume: the checkpoint of this iteration instead of the newest."""
    preset: Literal[PRESET_CHOICES] = "auto"
    """The task family's sizes (--list-envs): auto is gpu when JAX runs on a GPU or TPU, else
    cpu; none: the bare defaults. Options given win; default: $UNILAB_JAX_PRESET."""
    quiet: bool = False
    """No console output; the summary as JSON."""
    list_envs: bool = False
    """Print the registered tasks and their preset families, and exit."""


@dataclass(frozen=True)
class _FirstStage:
    run: RunOptions
    env: str | None = None
    algo: str | None = None
    process_id: int | None = None


def parse_args(argv: list[str]) -> tuple[RunOptions, TrainConfig, dict, str | None]:
    """The run's options, config, algorithm settings (the preset's or ``--config``'s, then those
    given) and the preset's line (or None); bad input: ``ConfigError`` or tyro's exit."""
    return _second_stage(argv, _first_stage(argv))


def _first_stage(argv: list[str]) -> _FirstStage:
    preset, choices = os.environ.get("UNILAB_JAX_PRESET", "auto"), ", ".join(PRESET_CHOICES)
    if preset not in PRESET_CHOICES:
        raise ConfigError(f"UNILAB_JAX_PRESET={preset!r}: choose one of {choices}")
    default = _FirstStage(RunOptions(preset=preset))
    return parse(_FirstStage, argv, default=default, return_unknown_args=True, add_help=False)[0]


def _second_stage(argv: list[str], first: _FirstStage):
    _check_names(first)
    run, saved, saved_algo = first.run, {}, {}
    source = run.config or _recorded_settings(run.resume)
    if source:
        from unilab_jax.training.run_settings import read_run_config

        saved, saved_algo = read_run_config(source)
    env = first.env or saved.get("env", TrainConfig.env)
    algo = first.algo or saved.get("algo", TrainConfig.algo)
    cls = get_algo(algo).config_cls
    wrong = _given(argv, {f for s in ALGOS.values() for f in _fields(s.config_cls)} - _fields(cls))
    if wrong:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(wrong))
        raise ConfigError(f"option(s) {flags} do not apply to --algo {algo}")
    preset = None if source else get_preset(env, run.preset)
    train_base = preset.train_settings(algo) if preset else saved
    algo_base = preset.algo_settings(algo) if preset else {}
    if saved.get("algo", algo) == algo and not preset:  # --config's, for its algorithm only
        algo_base = saved_algo
    names = ", ".join(f"{spec.name} ({spec.display_name})" for spec in ALGOS.values())
    loop = documented(
        TrainConfig,
        types=dict(
            algo=Literal[tuple(ALGOS)],
            physics=Literal[PHYSICS],
            collection=Literal[COLLECTIONS],
            matmul_precision=Literal[MATMUL_PRECISIONS],
        ),
        metavars=dict(env=_env_metavar()),
        algo=f"The algorithm: {names}.",
        env_overrides="Task config fields to replace, as NAME VALUE pairs (a VALUE that reads "
        'as JSON is taken as such: 0.5, true, ["a.npz", "b.npz"]), over the preset\'s: e.g. '
        "--env-overrides motion_file my_clip.npz.",
    )
    run_options, algo_options = documented(RunOptions), documented(cls)
    fields = [("run", run_options), ("train", loop), ("algo", algo_options)]
    options = dataclasses.make_dataclass("Options", fields, namespace={"__doc__": _ABOUT})
    try:
        algo_default = algo_options(**algo_base)
    except TypeError as err:
        raise ConfigError(f"--config {source}: {err}") from None
    train_default = loop(**{**train_base, "env": env, "algo": algo})
    default = options(run_options(**values(run)), train_default, algo_default)
    got = parse(options, argv, default=default, prog="unilab-jax train")
    given = _given(argv, _fields(cls))
    algo_settings = {**algo_base, **{name: getattr(got.algo, name) for name in given}}
    line = preset and preset_line(preset, algo, given | _given(argv, _fields(TrainConfig)))
    line = line or (source and f"Settings: the ones {source} records (options given win)")
    train = values(got.train)
    if _given(argv, {"env_overrides"}):  # over the preset's (or --config's) overrides
        typed = {k: _json_or_text(v) for k, v in (train["env_overrides"] or {}).items()}
        train["env_overrides"] = {**(train_base.get("env_overrides") or {}), **typed}
    return got.run, TrainConfig(**train), algo_settings, line


def _check_names(first: _FirstStage) -> None:
    """An unknown ``--algo`` or ``--env`` is bad input (exit 2, ``--help`` too), named with
    the known ones, before anything is parsed over a preset."""
    if first.algo is not None:
        get_algo(first.algo)  # UnknownAlgoError: a ConfigError naming the algorithms
    if first.env is None:
        return
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES, adapter_names
    from unilab_jax.envs.registry import registered_names

    ours = registered_names()
    if first.env in ours:
        return
    if first.env.startswith(ADAPTER_PREFIXES):
        known = [n for n in adapter_names() if n.startswith(first.env.split("/")[0] + "/")]
        if first.env in known:
            return
        choices = ", ".join(known) or "none: its package is not installed (pip install .[adapters])"
    else:
        choices = ", ".join(ours) + "; or playground/<Name>, brax/<name> (--list-envs)"
    raise ConfigError(f"unknown --env {first.env!r}; choose one of {choices}")


def _env_metavar() -> str:
    """``--env``'s values in the help: this install's tasks and the adapters' prefixes."""
    from unilab_jax.envs.registry import registered_names

    return "{" + ",".join(registered_names()) + ",playground/NAME,brax/NAME}"


def _recorded_settings(resume: str | None) -> str | None:
    """The ``run_config.json`` the run ``--resume`` names recorded (None: no --resume, or a run
    without one, whose settings come from the options and the preset as for a new run)."""
    if not resume:
        return None
    path = _resumed_run(resume) / "run_config.json"
    return str(path) if path.is_file() else None


def _resumed_run(resume: str) -> Path:
    """The log dir of the run ``--resume`` names (its log dir or its ``checkpoints/``): the
    parent of the checkpoint folder ``checkpoint_folder`` finds there."""
    return checkpoint_folder(resume, "--resume").parent


def _json_or_text(value: str):
    """A command-line value: what it reads as in JSON (a number, a bool, a list), else itself."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _given(argv: list[str], names: set[str]) -> set[str]:
    """The ``names`` whose option ``argv`` spells (``--name``, ``--name=V``, ``--no-name``)."""
    spelled = {arg.split("=", 1)[0][2:].replace("_", "-") for arg in argv if arg[:2] == "--"}
    return {n for n in names if {(o := n.replace("_", "-")), f"no-{o}"} & spelled}


def main(argv: list[str] | None = None) -> int:
    """The program's exit code (the module docstring's)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _stop_before_training)  # until train() has its own
    try:
        return processes.exit_as_one_of_several(lambda: _main(argv))
    finally:
        if signal.getsignal(signal.SIGTERM) is _stop_before_training:
            signal.signal(signal.SIGTERM, previous)


def _stop_before_training(signum, frame):
    # Noted as well as raised: an exception raised inside a finaliser is lost, the note is not
    # (train() raises it again when it takes the signals; _main checks it before building).
    raise interrupts.note_early_stop(signum)


def _main(argv: list[str]) -> int:
    try:
        first = _first_stage(argv)
        if first.run.resume:  # before JAX is imported: a fraction of a second, nothing made
            checkpoint_folder(first.run.resume, "--resume")
        process_zero = not (first.process_id or getattr(detected_cluster(), "process_id", 0))
        if first.run.log_dir and process_zero:  # process 0 claims it, the others do not
            probe_log_dir(first.run.log_dir)
        if first.run.list_envs:
            print(task_list())
            return 0
        run, config, algo, line = _second_stage(argv, first)
        interrupts.raise_early_stop()  # a SIGTERM so far whose exception was swallowed
        processes.request_host_devices(config)  # before JAX starts
        if line and not run.quiet and process_zero:
            print(line, flush=True)
        from unilab_jax.training.trainer import train

        wandb = {k.removeprefix("wandb_"): v for k, v in values(run).items() if k[:6] == "wandb_"}
        # --resume alone writes on into the run it continues (--log-dir elsewhere: a new one).
        log_dir = run.log_dir or (str(_resumed_run(run.resume)) if run.resume else True)
        result = train(config, algo, log_dir=log_dir, logger=run.logger, wandb=wandb,
                       quiet=run.quiet, resume=run.resume, resume_step=run.resume_step)  # fmt: skip
    except ResumeError as err:
        older = f" --resume-step {err.older}" if err.older is not None else ""
        older = older and f"; resume from the previous one with --resume {run.resume}{older}"
        return error(f"--resume {run.resume}: {err.reason}{older}")
    except ValueError as err:  # a ConfigError, or the env registry's UnknownEnvError
        unknown_env = getattr(sys.modules.get("unilab_jax.envs"), "UnknownEnvError", ConfigError)
        if not isinstance(err, ConfigError | unknown_env):
            raise
        return error(str(err))
    except interrupts.RunStopped as stop:  # train() saved the block and wrote the summary
        print(f"\n{stop}. Resume with: {resume_command(argv, stop.log_dir)}", file=sys.stderr)
        code = stop.exit_code
        for signum in (signal.SIGINT, signal.SIGTERM):  # a further one ends the teardown at once
            signal.signal(signum, lambda signum, frame: processes.hard_exit(code))
        return code
    except interrupts.ImmediateStop as stop:  # a second signal: do not wait for the device
        print(f"\n{stop}; checkpoints so far: {stop.log_dir / 'checkpoints'}", file=sys.stderr)
        processes.hard_exit(stop.exit_code)
    except (interrupts.StopRequested, KeyboardInterrupt) as stop:  # before training began
        name = interrupts.signal_name(signum := getattr(stop, "signum", signal.SIGINT))
        print(f"\n{name} before training began; nothing to save", file=sys.stderr)
        # A compile may still run in a background thread (the step's, the evaluator's): the
        # interpreter's teardown under it crashes (SIGSEGV / abort), so leave without one.
        processes.hard_exit(128 + signum)
    except (CheckpointError, processes.ProcessLostError) as err:  # a failed save or process
        fix = "free space or fix the file system, then " if isinstance(err, CheckpointError) else ""
        resume = resume_command(argv, err.log_dir)
        print(f"\nerror: {err}. Training stopped; {fix}resume with: {resume}", file=sys.stderr)
        return 1
    except FloatingPointError as err:  # EnvNaNError, LearnerDivergedError, C MuJoCo's
        where = err.log_dir / "checkpoints"
        print(f"\nerror: {err}.\nThe checkpoints so far (all finite): {where}", file=sys.stderr)
        return 3
    if run.quiet and processes.is_primary():
        print(json.dumps(result.summary))
    return 0
