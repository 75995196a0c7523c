"""A run's settings, and the checks ``train`` makes on them before anything is built.

``resolve_algo_config`` is the algorithm's config for a task (defaults, the caller's overrides,
the value support the task's reward bounds imply); ``run_config`` is both configs as JSON
values, what ``run_config.json`` (``write_run_config``) and every checkpoint's ``meta.json``
record and what a resume is compared against. ``check_same_build`` says whether a reused
``Trainer`` fits a config; ``resume_source`` is the run ``train(resume=...)`` continues.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from unilab_jax.algos.c51 import value_support
from unilab_jax.algos.registry import get_algo
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.envs import Env
from unilab_jax.training.resume import checkpoint_folder

__all__ = [
    "RUN_CONFIG_FILE",
    "check_same_build",
    "resolve_algo_config",
    "resume_source",
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
    ``run_config.json`` and every checkpoint's ``meta.json`` record, and what a resume is
    compared against."""

    def jsonable(value: Any) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))

    return {"train": jsonable(config), "algo": jsonable(algo_config)}


def write_run_config(log_dir: Path, settings: dict) -> None:
    """``settings`` (``run_config``'s) as ``log_dir/run_config.json``."""
    (log_dir / RUN_CONFIG_FILE).write_text(json.dumps(settings, indent=2))


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


def resume_source(resume, resume_step, log_dir, initial_state) -> str | Path | None:
    """The run ``train(resume=...)`` continues (``True``: ``log_dir``), its checkpoint
    folder checked at once, before anything is built; None for a fresh run."""
    if resume is True:
        if log_dir is None:
            raise ConfigError("resume=True continues the run in log_dir, but no log_dir is given")
        resume = log_dir
    if resume is None or resume is False:
        if resume_step is not None:
            raise ConfigError(f"resume_step {resume_step} given without resume")
        return None
    if initial_state is not None:
        raise ConfigError("pass resume or initial_state, not both")
    checkpoint_folder(resume)
    return resume
