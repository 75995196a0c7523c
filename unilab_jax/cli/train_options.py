"""The options of ``python -m unilab_jax.train``, and the run's settings they give.

``build_parser`` generates one option per documented field of ``TrainConfig`` and of every
algorithm's config (``SACConfig`` / ``TD3Config``; the first algorithm's group carries the
shared ones), beside the options of the run itself (logger, log dir, wandb, ``--config``,
``--resume``, ``--preset``). ``configs_from_args`` turns parsed options into the run's
``TrainConfig`` and algorithm overrides: ``--config FILE``'s settings or else the task's
preset, then the options given, which win. The program is ``unilab_jax.cli.train``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

from unilab_jax.algos.hyperparams import settings_from_json
from unilab_jax.algos.registry import ALGOS, get_algo
from unilab_jax.cli.options import add_dataclass_options, flag
from unilab_jax.config import LOGGERS, ConfigError, TrainConfig
from unilab_jax.distributed.processes import LAUNCH_FIELDS
from unilab_jax.training.presets import PRESET_CHOICES, get_preset, preset_line

__all__ = ["WANDB_OPTIONS", "build_parser", "configs_from_args"]

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
        help="where logs and orbax checkpoints go (default: "
        "logs/<algo>/<env>/<time>_<physics>, physics mjx or mujoco)",
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


WANDB_OPTIONS = ("wandb_project", "wandb_entity", "wandb_group", "wandb_name")
_RUN_OPTIONS = {
    "logger", "log_dir", "quiet", "list_envs", "config", "resume", "resume_step", "preset",
    *WANDB_OPTIONS,
}  # fmt: skip


def configs_from_args(args: argparse.Namespace) -> tuple[TrainConfig, dict, str | None]:
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
    config = TrainConfig(**{**preset.train_settings(config.algo), **train_given})
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
