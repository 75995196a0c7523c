"""``python -m unilab_jax.train``: train FastSAC or FastTD3 on a registered task.

Every option is generated from the documented fields of ``TrainConfig`` and of the chosen
algorithm's config (``SACConfig`` / ``TD3Config``), so ``--help`` documents them all. Bad
input (unknown env or algo, sizes that cannot work) fails with a clear message before
anything is compiled.

Examples::

    python -m unilab_jax.train --env PendulumSwingup --algo sac --num-envs 64 --batch-size 1024
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python -m unilab_jax.train --num-devices 2
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import sys
import types
import typing
from pathlib import Path

from unilab_jax.algos.registry import ALGOS, get_algo
from unilab_jax.config import LOGGERS, ConfigError, TrainConfig, field_docs, with_host_devices

__all__ = ["main", "build_parser"]

# Loop options the CLI does not expose (set through the Python API).
_HIDDEN_TRAIN_FIELDS = {"env_overrides"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _arg_type(annotation) -> type:
    """The scalar type of a (possibly optional) field annotation."""
    if isinstance(annotation, str):
        annotation = eval(annotation, {"__builtins__": __builtins__})  # noqa: S307 (our own dataclasses)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def _add_dataclass_options(group, cls, skip=(), seen=None, others=()) -> list[str]:
    """Add one ``--option`` per documented field of ``cls``; returns the field names added.

    ``others`` are further ``(label, dataclass)`` pairs sharing some field names (TD3Config
    next to SACConfig): a shared option shows every default that differs."""
    docs = field_docs(cls)
    other_defaults = [(label, _defaults(other)) for label, other in others]
    added = []
    for f in dataclasses.fields(cls):
        if f.name in skip or (seen is not None and f.name in seen):
            continue
        typ = _arg_type(f.type)
        kind = _parse_bool if typ is bool else typ
        if typ not in (bool, int, float, str):
            continue
        default = f"{f.default}"
        for label, defaults in other_defaults:
            if f.name in defaults and defaults[f.name] != f.default:
                default += f"; {label}: {defaults[f.name]}"
        group.add_argument(
            _flag(f.name),
            dest=f.name,
            type=kind,
            default=argparse.SUPPRESS,
            metavar=typ.__name__.upper(),
            help=f"{docs.get(f.name, '')} (default: {default})".replace("%", "%%"),
        )
        added.append(f.name)
        if seen is not None:
            seen.add(f.name)
    return added


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m unilab_jax.train",
        description=(
            "Train FastSAC or FastTD3 on an MJX task with the fused, jitted, data-parallel "
            "JAX loop. Algorithm settings apply to the chosen --algo; defaults are the "
            "reference's (spec/reference_system.md). A task may suggest its C51 support "
            "(--v-min/--v-max) for its reward scale; explicit values win."
        ),
    )
    run = parser.add_argument_group("run")
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
    run.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue from the newest orbax checkpoint in DIR (a run's log dir or its "
        "checkpoints/ folder); the loop options must match that run's",
    )
    run.add_argument("--quiet", action="store_true", help="no console output (summary JSON only)")
    run.add_argument("--list-envs", action="store_true", help="print the registered tasks and exit")
    loop = parser.add_argument_group("loop (TrainConfig)")
    train_fields = _add_dataclass_options(loop, TrainConfig, skip=_HIDDEN_TRAIN_FIELDS)
    parser.set_defaults(_train_fields=train_fields)
    # The first algorithm's options carry the shared ones; each other one adds its own.
    seen: set[str] = set()
    first, *rest = ALGOS.values()
    group = parser.add_argument_group(
        f"algorithm settings for --algo {first.name} ({first.config_cls.__name__})"
    )
    others = [(spec.name, spec.config_cls) for spec in rest]
    _add_dataclass_options(group, first.config_cls, seen=seen, others=others)
    for spec in rest:
        group = parser.add_argument_group(
            f"algorithm settings for --algo {spec.name} only ({spec.config_cls.__name__}); "
            "the shared ones are above"
        )
        _add_dataclass_options(group, spec.config_cls, seen=seen)
    return parser


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _configs_from_args(args: argparse.Namespace) -> tuple[TrainConfig, dict]:
    values = vars(args)
    train_kwargs = {k: values[k] for k in args._train_fields if k in values}
    config = TrainConfig(**train_kwargs)
    algo_fields = _fields(get_algo(config.algo).config_cls)
    given = {k for k in values if not k.startswith("_") and k not in train_kwargs}
    given -= {"logger", "log_dir", "quiet", "list_envs", "resume"}
    wrong = sorted(given - algo_fields)
    if wrong:
        raise ConfigError(
            f"option(s) {', '.join(_flag(w) for w in wrong)} do not apply to --algo {config.algo}"
        )
    return config, {k: values[k] for k in given}


def _force_host_devices(n: int) -> None:
    """Ask XLA for ``n`` CPU devices; must run before JAX creates its CPU client."""
    flags = with_host_devices(os.environ.get("XLA_FLAGS", ""), n)
    if flags:
        os.environ["XLA_FLAGS"] = flags


def _resume_state(trainer, resume: str):
    """The newest checkpoint under ``resume``, restored into this trainer's state layout."""
    from unilab_jax.checkpoint import restore_checkpoint

    directory = Path(resume)
    if (directory / "checkpoints").is_dir():
        directory = directory / "checkpoints"
    try:
        return restore_checkpoint(directory, trainer.init_state())
    except FileNotFoundError as err:
        raise SystemExit(f"error: --resume {resume}: {err}") from None
    except ValueError as err:
        raise SystemExit(
            f"error: --resume {resume}: the checkpoint does not fit this configuration ({err}); "
            "use the same --env, --algo, --num-envs, --replay-buffer-n, --num-devices and "
            "network settings as the run that wrote it (see its run_config.json)"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from unilab_jax.envs import UnknownEnvError, available_names, registered_names
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES

    if args.list_envs:
        print("\n".join(available_names()))
        return 0
    try:
        config, algo_overrides = _configs_from_args(args)
        if config.env not in registered_names() and not config.env.startswith(ADAPTER_PREFIXES):
            raise ConfigError(
                f"unknown env {config.env!r}; registered tasks: {', '.join(registered_names())}"
                f"; adapters: {', '.join(ADAPTER_PREFIXES)}<name> (--list-envs)"
            )
        _force_host_devices(config.num_devices)  # before JAX creates its CPU client

        from unilab_jax.trainer import Trainer, train

        # Validates the configuration (once), loads the env and builds the agent; nothing
        # is compiled yet.
        trainer = Trainer(config, algo_overrides)
    except (ConfigError, UnknownEnvError) as err:
        parser.exit(2, f"error: {err}\n")
    algo_config = trainer.algo_config
    log_dir = Path(
        args.log_dir
        or Path("logs")
        / get_algo(config.algo).log_name
        / config.env
        / f"{_dt.datetime.now():%Y-%m-%d_%H-%M-%S}_mjx"
    )
    initial_state = _resume_state(trainer, args.resume) if args.resume else None
    try:
        result = train(
            config,
            trainer=trainer,
            log_dir=log_dir,
            logger=args.logger,
            quiet=args.quiet,
            initial_state=initial_state,
        )
    except KeyboardInterrupt:
        # train() has already closed the live display (cursor restored); no traceback.
        print(
            f"\nInterrupted; checkpoints so far are in {log_dir / 'checkpoints'}", file=sys.stderr
        )
        return 130
    summary = dict(result.summary, log_dir=str(log_dir))
    (log_dir / "run_summary.json").write_text(json.dumps(summary, indent=2))
    (log_dir / "run_config.json").write_text(
        json.dumps(
            {"train": dataclasses.asdict(config), "algo": dataclasses.asdict(algo_config)},
            indent=2,
            default=str,
        )
    )
    if args.quiet:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
