"""A run's settings, and the checks ``train`` makes on them before anything is built.

``resolve_algo_config`` is the algorithm's config for a task (defaults, the caller's overrides,
the value support the task's reward bounds imply); ``run_config`` is both configs as JSON
values, what ``run_config.json`` (``write_run_config``; ``read_run_config`` reads one back for a
rerun) and every checkpoint's ``meta`` item record and what a resume is compared against.
``check_same_build`` says whether a reused ``Trainer`` fits a config.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from unilab_jax.algos.c51 import value_support
from unilab_jax.algos.hyperparams import settings_from_json
from unilab_jax.algos.registry import get_algo
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.distributed.processes import LAUNCH_FIELDS
from unilab_jax.envs import Env

__all__ = [
    "RUN_CONFIG_FILE",
    "check_same_build",
    "read_run_config",
    "resolve_algo_config",
    "run_config",
    "write_run_config",
]


RUN_CONFIG_FILE = "run_config.json"


def resolve_algo_config(algo: str, env: Env, overrides: dict | None = None):
    """The algorithm's config: its defaults, then the caller's ``overrides`` (which win), then,
    for a task that declares its per-step ``reward_bounds``, a value support derived from them
    for the run's discount (``c51.value_support``), on each edge the caller did not set (not
    for an algorithm that scales its rewards to fit its support: FlashSAC's ``reward_scaling``).
    Validated by ``Trainer``."""
    cls = get_algo(algo).config_cls
    overrides = dict(overrides or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"unknown {algo} setting(s) {unknown}; valid settings: {', '.join(sorted(known))}"
        )
    cfg = dataclasses.replace(cls(), **overrides)
    # FlashSAC scales its rewards to keep returns within its fixed support.
    if env.reward_bounds is not None and not getattr(cfg, "reward_scaling", False):
        derived = value_support(env.reward_bounds, cfg.gamma, env.episode_length)
        support = dict(zip(("v_min", "v_max"), derived, strict=True))
        cfg = dataclasses.replace(cfg, **{k: v for k, v in support.items() if k not in overrides})
    return cfg


def run_config(config: TrainConfig, algo_config: Any) -> dict:
    """A run's settings as JSON values, ``{"train": ..., "algo": ...}``: what
    ``run_config.json`` and every checkpoint's ``meta`` item record, and what a resume is
    compared against."""

    def jsonable(value: Any) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))

    return {"train": jsonable(config), "algo": jsonable(algo_config)}


def write_run_config(log_dir: Path, settings: dict) -> None:
    """``settings`` (``run_config``'s) as ``log_dir/run_config.json``."""
    (log_dir / RUN_CONFIG_FILE).write_text(json.dumps(settings, indent=2))


def read_run_config(path: str | Path) -> tuple[dict, dict]:
    """The ``(train, algo)`` settings a ``run_config.json`` records, less how that run was
    started (``LAUNCH_FIELDS``); ``ConfigError`` for a file that is not one."""
    try:
        saved = json.loads(Path(path).read_text())
        train, algo = dict(saved["train"]), dict(saved.get("algo") or {})
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"--config {path}: not a readable run_config.json ({type(err).__name__}: {err})"
        ) from None
    for name in LAUNCH_FIELDS:
        train.pop(name, None)
    unknown = sorted(set(train) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise ConfigError(f"--config {path}: unknown setting(s) {', '.join(unknown)}")
    return train, settings_from_json(algo)


# Fields the host loop reads per run; everything else shapes the compiled step.
_HOST_FIELDS = ("max_iterations", "save_interval", "log_interval", "eval_envs", "eval_interval")


def check_same_build(config: TrainConfig, built: TrainConfig) -> None:
    """A reused ``Trainer`` must have been built for the same shapes and schedule (its own
    config was validated when it was built; a changed host field is validated here)."""
    if config == built:
        return
    config.validate()
    same = dataclasses.replace(config, **{f: getattr(built, f) for f in _HOST_FIELDS})
    if same != built:
        raise ConfigError(
            "the trainer was built for a different configuration; only "
            f"{', '.join(_HOST_FIELDS)} may differ (build a new Trainer otherwise)"
        )
