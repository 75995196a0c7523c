"""The host side of training: build, compile once, run the fused step, log, checkpoint.

The host touches the device once per ``log_interval`` iterations: it fetches that block's
reduced metrics, feeds the ``OffPolicyLogger`` and writes a checkpoint when one is due.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
from rich.console import Console

from unilab_jax import cpu_linalg
from unilab_jax.algos.agent import Agent
from unilab_jax.algos.sac import SACConfig, make_sac
from unilab_jax.algos.td3 import TD3Config, make_td3
from unilab_jax.checkpoint import CheckpointWriter
from unilab_jax.config import LOGGERS, ConfigError, TrainConfig
from unilab_jax.envs import Env, load
from unilab_jax.logging import OffPolicyLogger, use_console
from unilab_jax.loop import TrainState, make_evaluate, make_init_fn, make_mesh, make_train_step

__all__ = [
    "ALGO_CONFIGS",
    "ALGO_NAMES",
    "Checkpointer",
    "Trainer",
    "TrainResult",
    "resolve_algo_config",
    "train",
]

ALGO_CONFIGS = {"sac": SACConfig, "td3": TD3Config}
ALGO_NAMES = {"sac": "FastSAC", "td3": "FastTD3"}
_MAKERS = {"sac": make_sac, "td3": make_td3}


class Checkpointer(Protocol):
    """What ``train`` saves checkpoints through (``CheckpointWriter`` is one)."""

    def save(self, step: int, state: TrainState) -> str | Path:
        """Write ``state`` as the checkpoint of iteration ``step``; return the path written."""
        ...

    def close(self) -> None: ...


class EnvNaNError(FloatingPointError):
    """An environment produced a non-finite observation or reward."""


def resolve_algo_config(algo: str, env: Env, overrides: dict | None = None):
    """The algorithm's config: its defaults, then the task's C51 value bounds (when the task
    suggests some), then the caller's ``overrides`` (which win)."""
    if algo not in ALGO_CONFIGS:
        raise ConfigError(f"unknown algo {algo!r}; choose one of {', '.join(ALGO_CONFIGS)}")
    cls = ALGO_CONFIGS[algo]
    cfg = cls()
    if env.value_bounds is not None:
        cfg = dataclasses.replace(
            cfg, v_min=float(env.value_bounds[0]), v_max=float(env.value_bounds[1])
        )
    overrides = dict(overrides or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"unknown {algo} setting(s) {unknown}; valid settings: {', '.join(sorted(known))}"
        )
    return dataclasses.replace(cfg, **overrides)


@dataclass
class TrainResult:
    """What ``train`` returns: the final state and a run summary like the reference's
    ``last_run_summary``, plus the per-log-interval history."""

    state: TrainState
    summary: dict
    history: list[dict] = field(default_factory=list)


class Trainer:
    """Builds env, agent, mesh and the compiled step for one configuration.

    ``algo_config`` is a ``SACConfig``/``TD3Config``, or a dict of overrides applied by
    ``resolve_algo_config`` (None: defaults plus the task's value bounds).
    """

    def __init__(self, config: TrainConfig, algo_config: Any = None):
        config.validate(available_devices=len(jax.devices()))
        self.config = config
        self.env = load(
            config.env, sim_backend=config.sim_backend, config_override=config.env_overrides
        )
        if algo_config is None or isinstance(algo_config, dict):
            algo_config = resolve_algo_config(config.algo, self.env, algo_config)
        self.algo_config = algo_config
        self.obs_dim = self.env.obs_size["obs"]
        self.critic_dim = self.env.obs_size["critic"]
        self.agent: Agent = _MAKERS[config.algo](
            self.algo_config, self.obs_dim, self.critic_dim, self.env.action_size, axis_name="data"
        )
        # jaxlib 0.10.2's batched LAPACK kernels can deadlock on CPU (more likely across
        # forced host devices); lower Cholesky / triangular solve without LAPACK.
        cpu_linalg.install_on_cpu()
        self.mesh = make_mesh(config.num_devices)
        self.init = make_init_fn(config, self.env, self.agent, self.mesh)
        self._steps: dict[int, Any] = {}
        self._evaluators: dict[int, Any] = {}
        self.trace_counter = [0]

    def init_state(self, seed: int | None = None) -> TrainState:
        seed = self.config.seed if seed is None else seed
        return self.init(jax.random.PRNGKey(seed))

    def step_fn(self, state: TrainState, num_iterations: int):
        """The compiled step running ``num_iterations`` iterations (compiled once per length)."""
        if num_iterations not in self._steps:
            jitted = make_train_step(
                self.config,
                self.env,
                self.agent,
                self.mesh,
                num_iterations,
                self.trace_counter,
            )
            self._steps[num_iterations] = jitted.lower(state).compile()
        return self._steps[num_iterations]

    def evaluate(self, state: TrainState, num_envs: int = 64, seed: int = 0) -> float:
        """Mean return of one deterministic episode in each of ``num_envs`` fresh envs."""
        if num_envs not in self._evaluators:
            self._evaluators[num_envs] = make_evaluate(self.env, self.agent, num_envs)
        mean, _ = self._evaluators[num_envs](state.agent, jax.random.PRNGKey(seed))
        return float(mean)


def _mean_or_none(total: float, count: float) -> float | None:
    return float(total / count) if count > 0 else None


def _make_logger(backend: str, quiet: bool, **kwargs) -> OffPolicyLogger:
    """The run's logger; ``quiet`` silences the console but keeps TensorBoard/wandb files."""
    if not quiet:
        return OffPolicyLogger(log_backend=backend, **kwargs)
    if backend == "none":
        return OffPolicyLogger(log_backend="no_print", **kwargs)
    with use_console(Console(file=io.StringIO(), force_terminal=False)):
        return OffPolicyLogger(log_backend=backend, **kwargs)


def train(
    config: TrainConfig,
    algo_config: Any = None,
    *,
    log_dir: str | Path | None = None,
    logger: str = "tensorboard",
    quiet: bool = False,
    trainer: Trainer | None = None,
    initial_state: TrainState | None = None,
    checkpointer: Checkpointer | None = None,
) -> TrainResult:
    """Train ``config`` and return the final state, a summary and the history.

    ``log_dir`` receives TensorBoard/wandb files and orbax checkpoints (``checkpoints/``);
    without one, nothing is written. ``quiet`` silences the console (tests). ``trainer``
    reuses already compiled functions; ``initial_state`` continues from a given state.

    ``checkpointer`` replaces the orbax writer (with or without ``log_dir``): its
    ``save(iteration, state)`` is called when ``iteration`` reaches a multiple of
    ``save_interval`` and after the last block (also when ``save_interval`` is 0, as the
    reference always saves its final ``model_<max_iterations>.pt``); the path it returns
    becomes the summary's ``last_checkpoint``. ``close()`` is called when training ends.
    """
    if trainer is None:
        trainer = Trainer(config, algo_config)
    else:
        _check_same_build(config, trainer.config)
    env = trainer.env
    log_dir = Path(log_dir) if log_dir is not None else None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    if logger not in LOGGERS:
        raise ConfigError(f"unknown logger {logger!r}; choose one of {', '.join(LOGGERS)}")
    log = _make_logger(
        logger if log_dir is not None else "none",
        quiet,
        algo_name=ALGO_NAMES[config.algo],
        max_iterations=config.max_iterations,
        num_envs=config.num_envs,
        env_name=config.env,
        obs_dim=trainer.obs_dim,
        action_dim=env.action_size,
        log_dir=str(log_dir or ""),
    )
    log.set_collection_sync(True, config.env_steps_per_sync)
    if checkpointer is not None:
        ckpt = checkpointer
    elif log_dir is not None and config.save_interval > 0:
        ckpt = CheckpointWriter(log_dir / "checkpoints")
    else:
        ckpt = None
    state = initial_state if initial_state is not None else trainer.init_state()
    start = time.perf_counter()
    try:
        log.start(status=f"Compiling the fused step ({config.num_devices} device(s))...")
        done = int(state.iteration)
        compile_time = 0.0
        if done < config.max_iterations:  # nothing to compile for a run with nothing to do
            compile_start = time.perf_counter()
            trainer.step_fn(state, min(config.log_interval, config.max_iterations - done))
            compile_time = time.perf_counter() - compile_start
            log.log_status(f"Compiled in {compile_time:.1f}s")
        state, history, last_ckpt = _run_blocks(trainer, config, state, log, ckpt)
    except BaseException:
        log.close()  # restores the terminal (cursor) after Ctrl+C or an error
        raise
    finally:
        if ckpt is not None:
            ckpt.close()
    wall = time.perf_counter() - start
    eval_return = None
    done = int(state.iteration)
    if config.eval_envs > 0 and done > 0:
        log.log_status(f"Evaluating the deterministic policy on {config.eval_envs} envs...")
        eval_return = trainer.evaluate(state, config.eval_envs, seed=config.seed + 1)
    returns = [h["mean_return"] for h in history if h["mean_return"] is not None]
    lengths = [h["mean_length"] for h in history if h["mean_length"] is not None]
    summary = {
        "status": "completed",
        "completed_iterations": done,
        "total_env_steps": done * config.num_envs * config.env_steps_per_sync,
        "final_mean_reward": returns[-1] if returns else None,
        "best_mean_reward": max(returns) if returns else None,
        "mean_episode_length": lengths[-1] if lengths else None,
        "eval_mean_return": eval_return,
        "last_checkpoint": last_ckpt,
        "compile_time_sec": compile_time,
        "training_wall_time_sec": wall,
    }
    final = "n/a" if summary["final_mean_reward"] is None else f"{summary['final_mean_reward']:.3f}"
    best = "n/a" if summary["best_mean_reward"] is None else f"{summary['best_mean_reward']:.3f}"
    evaluated = "n/a" if eval_return is None else f"{eval_return:.3f}"
    log.finish(
        extra_summary=(
            f"  Final mean return: {final} | Best: {best} | Deterministic eval: {evaluated}\n"
            f"  Compile: {compile_time:.1f}s"
        )
    )
    return TrainResult(state=state, summary=summary, history=history)


def _run_blocks(trainer: Trainer, config: TrainConfig, state: TrainState, log, ckpt):
    """Run ``log_interval``-iteration blocks up to ``max_iterations``: log each block, save a
    checkpoint when one is due and at the end. Returns (state, history, last checkpoint)."""
    history: list[dict] = []
    recent_returns: list[float] = []
    rows_per_iter = config.num_envs * config.env_steps_per_sync
    done = int(state.iteration)
    next_save = _next_multiple(done, config.save_interval)
    last_ckpt = None
    while done < config.max_iterations:
        n = min(config.log_interval, config.max_iterations - done)
        step = trainer.step_fn(state, n)
        t0 = time.perf_counter()
        state, metrics = step(state)
        metrics = jax.device_get(metrics)  # the one host sync per block
        elapsed = time.perf_counter() - t0
        _check_finite(metrics, done, config.num_envs)
        done += n
        record = _record(metrics, done, rows_per_iter, elapsed / n)
        history.append(record)
        if record["mean_return"] is not None:
            recent_returns = (recent_returns + [record["mean_return"]])[-100:]
        _log_block(log, config, record, recent_returns, rows_per_iter)
        if ckpt is not None and (done >= next_save or done == config.max_iterations):
            last_ckpt = str(ckpt.save(done, state))
            log.log_save(last_ckpt)
            next_save = _next_multiple(done, config.save_interval)
    return state, history, last_ckpt


# Fields the host loop reads per run; everything else shapes the compiled step.
_HOST_FIELDS = ("max_iterations", "save_interval", "log_interval", "eval_envs")


def _check_same_build(config: TrainConfig, built: TrainConfig) -> None:
    """A reused ``Trainer`` must have been built for the same shapes and schedule."""
    config.validate()
    same = dataclasses.replace(config, **{f: getattr(built, f) for f in _HOST_FIELDS})
    if same != built:
        raise ConfigError(
            "the trainer was built for a different configuration; only "
            f"{', '.join(_HOST_FIELDS)} may differ (build a new Trainer otherwise)"
        )


def _next_multiple(current: int, interval: int) -> int:
    if interval <= 0:
        return math.inf  # type: ignore[return-value]
    return (current // interval + 1) * interval


def _record(metrics: dict, iteration: int, rows_per_iter: int, sec_per_iter: float) -> dict:
    episodes = float(np.sum(metrics["episodes"]))
    learning = np.asarray(metrics["learning"])
    learner = (
        {k: float(np.mean(np.asarray(v)[learning])) for k, v in metrics["learner"].items()}
        if learning.any()
        else {}
    )
    return {
        "iteration": iteration,
        "env_steps": iteration * rows_per_iter,
        "episodes": episodes,
        "mean_return": _mean_or_none(float(np.sum(metrics["return_sum"])), episodes),
        "mean_length": _mean_or_none(float(np.sum(metrics["length_sum"])), episodes),
        "timeout_rate": _mean_or_none(float(np.sum(metrics["truncated"])), episodes),
        "terminated_rate": _mean_or_none(float(np.sum(metrics["terminated"])), episodes),
        "learning": bool(learning[-1]),
        "buffer_rows": int(np.asarray(metrics["buffer_rows"])[-1]),
        "learner": learner,
        "components": {k: float(np.mean(v)) for k, v in metrics["components"].items()},
        "sec_per_iter": sec_per_iter,
    }


def _check_finite(metrics: dict, first_iteration: int, num_envs: int) -> None:
    """Raise ``EnvNaNError`` naming the env and iteration of the first non-finite step."""
    nan_env = np.asarray(metrics["nan_env"])  # [iterations]; num_envs when all were finite
    bad = np.nonzero(nan_env < num_envs)[0]
    if len(bad):
        i = int(bad[0])
        raise EnvNaNError(
            f"environment {int(nan_env[i])} produced a non-finite observation or reward at "
            f"iteration {first_iteration + i + 1}; check the task's physics settings (timestep, "
            "damping, actuator gains) or its observation/reward code for that state"
        )


def _log_block(log, config, record, recent_returns, rows_per_iter) -> None:
    log.log_collector(record["env_steps"], record["buffer_rows"], record["mean_return"] or 0.0)
    if record["mean_length"] is not None:
        log.update_ep_length(record["mean_length"])
        log.update_done_rates(record["timeout_rate"] or 0.0, record["terminated_rate"] or 0.0)
    if not record["learning"]:
        log.log_buffer_fill(record["buffer_rows"], config.train_start_rows)
    log.log_step(
        record["iteration"],
        metrics=record["learner"],
        reward=float(np.mean(recent_returns)) if recent_returns else None,
        reward_metrics={"mean_ep100": recent_returns[-1]} if recent_returns else None,
        reward_components=record["components"],
        train_time=record["sec_per_iter"],
        extra_info={"throughput_steps": rows_per_iter},
    )
