"""The sinks one ``train`` run reports to, in the order they see each block's record.

``console_sinks`` is the default reporting (the live panel, or plain lines when stdout is
not a terminal, with TensorBoard/wandb files); ``run_sinks`` puts the checkpoint writer, the
health check and the evaluation in front of the reporting sinks, so that every other sink
sees their fields, all in one ``SinkChain``. The sinks themselves are ``unilab_jax.training.sinks``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from unilab_jax.algos.c51 import value_support
from unilab_jax.config import TrainConfig
from unilab_jax.distributed import processes
from unilab_jax.training.interrupts import StopSignals
from unilab_jax.training.sinks import (
    Checkpointer,
    CheckpointSink,
    EvalSink,
    HealthSink,
    LoggerSink,
    PlainLineSink,
    Sink,
    SinkChain,
)

__all__ = ["console_sinks", "health_sink", "run_sinks"]


def console_sinks(logger: str, quiet: bool, wandb: dict | None) -> list[Sink]:
    """The live panel on a terminal; plain lines in a log file (stdout redirected), with the
    panel's TensorBoard/wandb files still written. Only process 0 of a multi-process run
    reports (the others are silent and write no logs)."""
    if not processes.is_primary():
        return []
    if quiet or sys.stdout.isatty():
        return [LoggerSink(logger, quiet, wandb)]
    return [PlainLineSink(), LoggerSink(logger, quiet=True, wandb=wandb)]


def health_sink(algo_config: Any, env: Any) -> HealthSink:
    """The health checks, suggesting the task's derived support when it declares one."""
    cfg = algo_config
    suggest = (None, None)
    if env.reward_bounds is not None:
        suggest = value_support(env.reward_bounds, cfg.gamma, env.episode_length)
    return HealthSink(
        cfg.v_min, cfg.v_max, cfg.gamma, suggest_v_min=suggest[0], suggest_v_max=suggest[1]
    )


def run_sinks(
    trainer: Any,
    config: TrainConfig,
    reporting: Sequence[Sink],
    checkpointer: Checkpointer | None,
    stop: StopSignals,
) -> tuple[SinkChain, CheckpointSink | None]:
    """``(sinks, saver)``: the run's sinks as one chain: the health checks and the evaluation
    (``eval_envs`` > 0; ``trainer.evaluate_episodes``, waited on under ``stop``), then the
    checkpoint sink (``saver``, None without a ``checkpointer``; after the evaluation, whose
    return ranks the checkpoints), in front of the ``reporting`` sinks."""
    chain = SinkChain([])
    checks: list[Sink] = [health_sink(trainer.algo_config, trainer.env)]
    if config.eval_envs > 0:
        checks.append(
            EvalSink(
                lambda s: stop.wait(
                    trainer.evaluate_episodes, s, config.eval_envs, config.seed + 1
                ),
                config.resolved_eval_interval,
                config.max_iterations,
                announce=chain.status,  # every sink of the chain, once it is filled below
            )
        )
    saver = None
    if checkpointer is not None:
        saver = CheckpointSink(checkpointer, config.save_interval, config.max_iterations)
    chain.sinks = [*checks, *([saver] if saver is not None else []), *reporting]
    return chain, saver
