"""Resuming a run from its checkpoint: ``train(config, resume=RUN)`` and ``--resume RUN``.

A resumed run continues exactly where the checkpoint stopped: the whole training state is
restored (agent, replay, env states, exploration state, PRNG key, iteration), so training on
from checkpoint N gives bit for bit the arrays an uninterrupted run has at every later
checkpoint. ``max_iterations`` counts from the start of the run, not from the checkpoint.

The settings must be the checkpoint's: a run resumed with others (``num_envs``, and as well
those that keep every array's shape, ``batch_size``, ``gamma``, ``critic_lr``, ...) raises
``ResumeError`` naming each difference (``num_envs: checkpoint 8, now 16``), from the
checkpoint's ``meta`` item alone, before anything is built or compiled. Settings that only steer
the host loop (``FREE_ON_RESUME``: the iteration count, intervals, evaluation, seed, collection
schedule, launch) may change freely. A damaged checkpoint (a file whose
size or checksum is not the recorded one) is named, with the newest intact one before it
(``ResumeError.older``).

``resume_source`` (``train``'s first step) and ``checkpoint_folder`` check the path in a fraction
of a second, before JAX starts (this module imports neither JAX nor orbax until it restores),
so a mistyped ``--resume`` fails at once and creates nothing.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from unilab_jax.distributed.local_launch import LAUNCH_OPTIONS
from unilab_jax.distributed.processes import LAUNCH_FIELDS, launch_prefix
from unilab_jax.errors import CheckpointError, ConfigError

__all__ = [
    "FREE_ON_RESUME",
    "ResumeError",
    "checkpoint_folder",
    "restore_run",
    "resume_command",
    "resume_source",
]

#: Settings that only steer the host loop: a resumed run may change them freely.
FREE_ON_RESUME = frozenset({
    "max_iterations", "log_interval", "save_interval", "eval_envs", "eval_interval", "seed",
    "matmul_precision", "collection", "physics_threads", *LAUNCH_FIELDS,
})  # fmt: skip


class ResumeError(CheckpointError):
    """The checkpoint cannot be resumed: missing, damaged (``older``: the newest intact step
    before it, or None) or written with other settings (``differences``)."""

    def __init__(
        self, reason: str, *, older: int | None = None, differences: list[str] | None = None
    ):
        super().__init__(reason)
        self.reason, self.older, self.differences = reason, older, differences or []

    def __str__(self) -> str:
        if self.older is None:
            return self.reason
        return f"{self.reason}; resume from the previous one: resume_step={self.older}"


def checkpoint_folder(path: str | Path, option: str = "resume") -> Path:
    """The checkpoint folder of a run's log dir (or of its ``checkpoints/`` folder itself);
    ``ConfigError`` at once, creating nothing, when there is none (the message names the
    ``option`` it came from)."""
    directory = Path(path)
    if (directory / "checkpoints").is_dir():
        directory = directory / "checkpoints"
    if not directory.is_dir():
        raise ConfigError(f"{option} {path}: no such directory")
    if not any(p.name.isdigit() for p in directory.iterdir()):
        run, hint = directory.parent.parent, ""
        if directory.name.isdigit() and directory.parent.name == "checkpoints":
            step = directory.name
            hint = f"--resume {run} --resume-step {step}" if option.startswith("--") else (
                f"resume={str(run)!r}, resume_step={step}")  # fmt: skip
            hint = f" (it is one checkpoint: pass {hint})"
        raise ConfigError(f"{option} {path}: no checkpoint in {directory}{hint}")
    return directory


def resume_source(resume, resume_step, log_dir, initial_state) -> str | Path | None:
    """The run ``train(resume=...)`` continues (``True``: ``log_dir``), its checkpoint folder
    checked at once, before anything is built; None for a fresh run."""
    if resume is True:
        if log_dir is None or isinstance(log_dir, bool):
            raise ConfigError("resume=True continues the run in log_dir; pass log_dir (a path)")
        resume = log_dir
    if resume is None or resume is False:
        if resume_step is not None:
            raise ConfigError(f"resume_step {resume_step} given without resume")
        return None
    if initial_state is not None:
        raise ConfigError("pass resume or initial_state, not both")
    checkpoint_folder(resume)
    return resume


def _damaged(err: Exception, older: int | None) -> str:
    return str(err) + ("" if older is not None else "; no earlier checkpoint is left")


def restore_run(trainer: Any, path: str | Path, step: int | None, settings: dict) -> Any:
    """The ``TrainState`` of checkpoint ``step`` (None: the newest) of the run at ``path``,
    restored into the layout of ``trainer.init_state()`` (its shardings included);
    ``ResumeError`` says why not, comparing the checkpoint's settings with ``settings`` (the
    run's ``run_config``)."""
    from unilab_jax.training.checkpoint import (
        CheckpointDamagedError,
        CheckpointMismatchError,
        list_steps,
        read_meta,
        restore_checkpoint,
    )

    directory = checkpoint_folder(path)
    steps = list_steps(directory)
    if step is not None and step not in steps:
        saved = ", ".join(map(str, steps))
        raise ResumeError(f"no checkpoint {step} in {directory} (saved: {saved})")
    step = steps[-1] if step is None else step
    older = max((s for s in steps if s < step), default=None)
    try:
        saved = read_meta(directory, step).get("config") or {}
    except CheckpointDamagedError as err:  # its meta item
        raise ResumeError(_damaged(err, older), older=older) from None
    except CheckpointError as err:  # of an older format
        raise ResumeError(str(err)) from None
    changed = setting_differences(saved, settings) if saved else []
    if changed:  # before init_state: nothing is built or compiled for a run that cannot go on
        raise ResumeError(
            f"checkpoint {step} was written with other settings: {'; '.join(changed)}; pass "
            "the checkpoint's values to resume it",
            differences=changed,
        )
    try:
        return restore_checkpoint(directory, trainer.init_state(), step=step)
    except CheckpointDamagedError as err:
        raise ResumeError(_damaged(err, older), older=older) from None
    except CheckpointMismatchError as err:
        changed = setting_differences(saved, settings)
        detail = "; ".join(changed) if changed else "; ".join(err.differences[:3]) + " (no config)"
        raise ResumeError(
            f"checkpoint {step} was written with other settings: {detail}; pass the "
            "checkpoint's values to resume it",
            differences=changed,
        ) from None
    except CheckpointError as err:
        raise ResumeError(str(err)) from None


def setting_differences(saved: dict, current: dict) -> list[str]:
    """``"name: checkpoint X, now Y"`` for every setting that differs (host-only ones aside)."""
    out = []
    # Another algorithm has other settings altogether: naming the algorithm says it all.
    same_algo = saved.get("train", {}).get("algo") == current.get("train", {}).get("algo")
    for section in ("train", "algo") if same_algo else ("train",):
        old, new = saved.get(section, {}), current.get(section, {})
        for name in sorted(set(old) | set(new)):
            if name in FREE_ON_RESUME or old.get(name) == new.get(name):
                continue
            out.append(f"{name}: checkpoint {old.get(name)!r}, now {new.get(name)!r}")
    return out


def resume_command(argv: list[str], log_dir: str | Path) -> str:
    """The command line that goes on with a stopped run: ``argv`` (the train options it was
    started with) continuing from ``log_dir`` into ``log_dir``, through ``unilab-jax launch``
    when that started it."""
    prefix = launch_prefix()
    drop = {"--resume", "--log-dir", "--resume-step", *(LAUNCH_OPTIONS if prefix else ())}
    kept, value = [], False
    for arg in argv:  # less the options ``drop`` and their values
        name = arg.split("=", 1)[0]
        if not value and name not in drop:
            kept.append(arg)
        value = not value and name in drop and "=" not in arg
    command = shlex.join([*kept, "--resume", str(log_dir), "--log-dir", str(log_dir)])
    return f"{prefix or 'python -m unilab_jax.train'} {command}"
