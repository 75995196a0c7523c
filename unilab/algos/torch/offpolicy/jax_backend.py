"""The off-policy facade's ``"mjx"`` backend: train a torch learner with the JAX core.

``OffPolicyRunner(learner, ..., sim_backend="mjx")`` keeps the reference's API (a torch
learner in, ``model_<iteration>.pt`` files and a trained learner out) while the whole loop
(collection, replay, updates) runs fused on the device in ``unilab_jax``. ``learn_with_jax``
takes the run's ``TrainConfig`` as the facade translated it (``settings.train_config``: no
keyword is relayed here), the algorithm hyperparameters from ``learner.config``, and the initial
weights, optimiser moments and normaliser statistics from the learner (the converters of the
torch registry, ``unilab.algos.torch.registry``: exact), trains with
``unilab_jax.training.trainer.train``
and writes the state back into the learner at every checkpoint and at the end.

Differences from the reference runner:

- ``log_interval`` (iterations per device call) divides ``save_interval``, so checkpoints land
  on its multiples; the console is updated once per block, not per iteration.
- ``max_iterations=0`` trains nothing and writes nothing, no checkpoint (the reference writes
  ``model_0.pt``) nor the core's ``run_config.json``; the learner is left as it was.
- ``learner.update_count`` grows by the critic updates made (``updates_per_step`` per learning
  iteration), what the learners' own ``update_critic`` counts; the reference runner adds one
  per learning iteration on top of that.
- A learner with the reference's ``symmetry_augmentation`` contract is refused: the core
  mirrors with the task's ``MirrorMap`` (a learner built with ``mirror=`` trains).
- The facade's ``TrainConfig`` asks for no deterministic evaluation (``eval_envs=0``); a
  config with ``eval_envs > 0`` (``runner.config = runner.config.replace(eval_envs=64)``
  before ``learn``, or a config passed here) makes the core run its evaluation, and the
  summary then relays its figures (`_EVAL_KEYS`). ``trace_path`` is always None.

Every ``model_<iteration>.pt`` carries the run's metadata (``checkpoints.checkpoint_meta``:
algorithm, hyperparameters, sizes, task, ``sim_backend="mjx"``), so
``unilab_jax.load_policy`` reads it as it reads the core's checkpoints.

SIGINT/SIGTERM are the core's (``unilab_jax.training.interrupts``): the first finishes the running
block, saves ``model_<iteration>.pt`` (written back into the learner) and raises
``RunStopped`` whose ``summary`` is this module's summary (status ``"interrupted (SIGTERM)"``),
a second one raises ``ImmediateStop`` at once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from unilab.algos.torch.offpolicy.checkpoints import checkpoint_meta, save_model
from unilab.algos.torch.registry import get_torch_algo
from unilab_jax.collection.step import TrainState
from unilab_jax.config import TrainConfig
from unilab_jax.training.facade import RunStopped, Trainer, train

__all__ = ["draw_seed", "learn_with_jax"]

# The reference's ``last_run_summary`` keys, in its order (``trace_path`` is always None here).
_SUMMARY_KEYS = (
    "status",
    "completed_iterations",
    "total_env_steps",
    "final_mean_reward",
    "best_mean_reward",
    "mean_episode_length",
    "last_checkpoint",
    "trace_path",
    "training_wall_time_sec",
)
# The core's deterministic-evaluation figures, relayed when the run evaluated (eval_envs > 0).
_EVAL_KEYS = (
    "eval_mean_return",
    "best_eval_return",
    "best_eval_iteration",
    "best_eval_env_steps",
    "eval_time_sec",
)


def draw_seed() -> int:
    """A fresh seed for a run asked for with ``seed=None``."""
    return int(np.random.SeedSequence().entropy % 2**31)


def learn_with_jax(learner: Any, config: TrainConfig, *, log_dir: str, logger_type: str) -> dict:
    """Train ``learner`` (a learner of ``unilab.algos.torch.registry``) as ``config`` says (the
    facade's translation, ``settings.train_config``) with the JAX core and write the trained
    state back into it.

    Checkpoints ``<log_dir>/model_<iteration>.pt`` (``learner.get_state_dict()``) are written
    at multiples of ``config.save_interval`` and after the last iteration, each with the
    run's metadata (``checkpoints.checkpoint_meta``). ``logger_type``: ``"tensorboard"``,
    ``"wandb"``, or anything else for console only (``"no_print"`` silences the console too).
    Returns the reference's run summary plus ``backend``, ``compile_time_sec`` and
    ``warnings``; with ``config.eval_envs > 0`` also the core's evaluation figures
    (``eval_mean_return``: the deterministic policy's mean return after the last iteration,
    ``best_eval_return`` / ``_iteration`` / ``_env_steps``, ``eval_time_sec``).
    """
    spec = get_torch_algo(config.algo)
    config_type = spec.core.config_cls
    if not isinstance(learner.config, config_type):
        raise ValueError(
            f"algo_type {config.algo!r} needs a learner whose config is a "
            f"{config_type.__name__}, got {type(learner.config).__name__} "
            f"({type(learner).__name__})"
        )
    if getattr(learner, "use_symmetry", False) and getattr(learner, "mirror", None) is None:
        raise ValueError(
            "sim_backend='mjx' trains with the task's mirror map; the learner's "
            "symmetry_augmentation (the reference's contract) cannot run in the JAX core: build "
            f"the learner with mirror=unilab_jax.envs.load({config.env!r}).mirror instead"
        )
    config = config.replace(log_interval=_log_interval(config.save_interval, config.max_iterations))
    trainer = Trainer(config, learner.config)
    _check_dims(learner, trainer, config.env)
    state = trainer.init_state(config.seed)
    state = state.replace(agent=spec.torch_to_jax(learner, state.agent))
    update_count = learner.update_count

    def write_back(step: int, final: TrainState) -> None:
        spec.jax_to_torch(final.agent, learner)
        learner.update_count = update_count + _critic_updates(config, step)

    meta = checkpoint_meta(learner, config, "mjx")
    checkpointer = _TorchCheckpointer(Path(log_dir), learner, write_back, meta)
    try:
        result = train(
            config,
            trainer=trainer,
            initial_state=state,
            # A run that trains nothing writes nothing, not even the core's run_config.json.
            log_dir=log_dir if config.max_iterations > 0 else None,
            logger=logger_type if logger_type in ("tensorboard", "wandb") else "none",
            quiet=logger_type == "no_print",
            checkpointer=checkpointer,  # never called when no iteration runs
        )
    except RunStopped as stop:  # the final checkpoint wrote the state back into the learner
        stop.summary = _facade_summary(stop.summary, config.eval_envs)
        raise
    write_back(int(result.state.iteration), result.state)
    return _facade_summary(result.summary, config.eval_envs)


def _facade_summary(core_summary: dict, eval_envs: int = 0) -> dict:
    """The reference's keys of the core's run summary, plus ``backend``, compile time, the
    health warnings (e.g. a value support that clips) and, when the run evaluated
    (``eval_envs > 0``), the evaluation figures."""
    summary = {key: core_summary.get(key) for key in _SUMMARY_KEYS}
    summary["backend"] = "mjx"
    summary["compile_time_sec"] = core_summary.get("compile_time_sec")
    summary["warnings"] = list(core_summary.get("warnings") or [])
    if eval_envs > 0:
        summary.update({key: core_summary.get(key) for key in _EVAL_KEYS})
    return summary


def _log_interval(save_interval: int, max_iterations: int) -> int:
    """Iterations per device call: at most 10, dividing ``save_interval`` (so checkpoints fall
    on its multiples) and no more than the run (no step compiled longer than needed)."""
    interval = math.gcd(10, save_interval) if save_interval > 0 else 10
    return min(interval, max_iterations) if max_iterations > 0 else interval


def _critic_updates(config: TrainConfig, iterations: int) -> int:
    """Critic updates made in the first ``iterations`` iterations from an empty buffer.

    The loop learns in every iteration after which the buffer holds ``train_start_rows``
    rows; each iteration stores ``env_steps_per_sync`` rows per env.
    """
    slots_needed = -(-config.train_start_rows // config.num_envs)
    first = max(1, -(-slots_needed // config.env_steps_per_sync))
    return max(0, iterations - first + 1) * config.updates_per_step


def _check_dims(learner: Any, trainer: Trainer, env_name: str) -> None:
    pairs = (
        ("obs_dim", learner.obs_dim, trainer.obs_dim, "observation size"),
        ("critic_obs_dim", learner.critic_obs_dim, trainer.critic_dim, "critic observation size"),
        ("action_dim", learner.action_dim, trainer.env.action_size, "action size"),
    )
    for name, got, want, what in pairs:
        if got != want:
            raise ValueError(
                f"learner {name} {got} does not match {env_name}'s {what} {want}; "
                f"build the learner with {name}={want}"
            )


class _TorchCheckpointer:
    """``train``'s checkpointer: loads the JAX state into the learner and ``torch.save``s
    ``learner.get_state_dict()`` with the run's metadata as ``<log_dir>/model_<step>.pt``."""

    def __init__(self, log_dir: Path, learner: Any, write_back, meta: dict) -> None:
        self.log_dir = log_dir
        self.learner = learner
        self.write_back = write_back
        self.meta = meta

    def save(self, step: int, state: TrainState) -> str:
        self.write_back(step, state)
        meta = {**self.meta, "iteration": int(step)}
        return save_model(self.learner, self.log_dir / f"model_{step}.pt", meta)

    def close(self) -> None:
        pass
