"""Where the host loop's block records go: the console panel, TensorBoard/wandb, checkpoints and
any user callback are all sinks of the same records.

``unilab_jax.training.trainer.train`` runs ``log_interval`` iterations per device call and turns
each
call's reduced metrics into one *block record* (a plain dict, kept in ``TrainResult.history``):

===================  =====================================================================
``iteration``        iterations completed after this block
``env_steps``        ``iteration * num_envs * env_steps_per_sync``
``episodes``         episodes that ended during the block
``mean_return``      mean return of those episodes (None when none ended)
``mean_length``      their mean length (None when none ended)
``timeout_rate``     fraction of them that hit the time limit (None when none ended)
``terminated_rate``  fraction of them that terminated (None when none ended)
``learning``         whether the block's last iteration updated the learner
``buffer_rows``      rows stored in the replay after the block
``learner``          mean learner metrics over the block's learning iterations ({} if none)
``components``       mean per-step reward components
``sec_per_iter``     wall-clock seconds per iteration of the block
``elapsed_sec``      wall-clock seconds since ``train`` began (compile and earlier evaluations
                     included), taken when the block's results arrived
``checkpoint``       path written after this block (added by ``CheckpointSink``), or absent
``warnings``         new warnings raised after this block (added by ``HealthSink``), or absent
``eval_return``      mean return of the deterministic evaluation run after this block (added
                     by ``EvalSink`` every ``eval_interval`` iterations and after the last),
                     with ``eval_length`` and ``eval_sec`` (its wall-clock cost); or absent
``timing``           the torch path only: ``OffPolicyLogger.log_step``'s seconds of the
                     iteration (``train_time``, ``wait_time``, ``weight_sync_time``, ...)
===================  =====================================================================

The facade's torch loop (``unilab.algos.torch.offpolicy.torch_loop``) reports through the
same sinks, one record per iteration (a block of one): its checkpoints on the same schedule
(``CheckpointSink``), the same value-support check (``HealthSink``, patience counted in
iterations) and the same console panel and TensorBoard/wandb scalars (``LoggerSink``).

A sink has four methods, called in this order: ``start(run)`` once, ``status(text)`` for
messages between blocks ("Compiling..."), ``block(record, state)`` after every block, and
``finish(summary)`` once training ended normally; ``close()`` is called always, also after an
error or Ctrl+C (the console sink restores the terminal there). ``block`` may return a dict of
fields to add to the record, which later sinks and the history see (the checkpoint sink adds
``checkpoint``), so the order of the sinks matters: ``train`` puts the health checks and the
evaluation first (the evaluation's return ranks the checkpoints), then the checkpoint sink,
then the reporting sinks.

Modules: `base` (`RunInfo`, the protocols, `SinkChain`, `CallbackSink`), `checks` (checkpoints,
evaluation, health) and `console` (the panel with TensorBoard/wandb, plain lines).
"""

from unilab_jax.training.sinks.base import (
    BaseSink,
    CallbackSink,
    Checkpointer,
    RunInfo,
    Sink,
    SinkChain,
)
from unilab_jax.training.sinks.checks import CheckpointSink, EvalSink, HealthSink
from unilab_jax.training.sinks.console import (
    WANDB_RUN_FILE,
    LoggerSink,
    PlainLineSink,
    write_wandb_run,
)

__all__ = [
    "WANDB_RUN_FILE",
    "BaseSink",
    "CallbackSink",
    "CheckpointSink",
    "Checkpointer",
    "EvalSink",
    "HealthSink",
    "LoggerSink",
    "PlainLineSink",
    "RunInfo",
    "Sink",
    "SinkChain",
    "write_wandb_run",
]
