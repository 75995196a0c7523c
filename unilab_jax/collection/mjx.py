"""MJX collection: the envs step inside the fused, scanned device step (``collection.step``), so
collecting and learning are one compiled program per block length.

``MjxCollection`` is what ``Trainer`` holds with ``physics="mjx"``; ``MujocoCollection``
(``collection.mujoco``) the same interface on C MuJoCo threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from unilab_jax.algos.agent import Agent, observer
from unilab_jax.collection.compiling import Background
from unilab_jax.collection.step import (
    TrainState,
    make_evaluate,
    make_init_fn,
    make_train_step,
    state_specs,
)
from unilab_jax.config import TrainConfig
from unilab_jax.envs.base import Env

__all__ = ["MjxCollection"]


class MjxCollection:
    """The fused MJX step and the MJX evaluation for one ``Trainer``."""

    def __init__(
        self, config: TrainConfig, env: Env, agent: Agent, mesh: Mesh, trace_counter: list[int]
    ) -> None:
        self.config, self.env, self.agent, self.mesh = config, env, agent, mesh
        self.trace_counter = trace_counter
        self._init = make_init_fn(config, env, agent, mesh)
        #: The evaluators by env count: compiled (or compiling, a ``Background``).
        self.evaluators: dict[int, Any] = {}

    def init_state(self, seed: int) -> TrainState:
        return self._init(jax.random.PRNGKey(seed))

    def state_shapes(self) -> TrainState:
        """The ``TrainState`` that ``init_state`` returns, as ``jax.ShapeDtypeStruct`` leaves with
        its shardings: what compiling the step needs, without running (or compiling) init."""
        shapes = jax.eval_shape(self._init, jax.random.PRNGKey(0))
        replicated = NamedSharding(self.mesh, PartitionSpec())

        def shard(spec: PartitionSpec, subtree: Any) -> Any:
            sharding = NamedSharding(self.mesh, spec)
            # JAX hands an empty array (MJX's unused fields, e.g. `act [envs, 0]`) out of
            # `shard_map` replicated, whatever its spec: what init returns, the step must take.
            return jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(
                    x.shape, x.dtype, sharding=replicated if x.size == 0 else sharding
                ),
                subtree,
            )

        return jax.tree.map(
            shard, state_specs(), shapes, is_leaf=lambda x: isinstance(x, PartitionSpec)
        )

    def compile_step(self, num_iterations: int, precision: Callable[[], Any]) -> Callable:
        """The fused step of ``num_iterations`` iterations, compiled (``precision``: the context
        every trace runs under; set in the thread that traces)."""
        jitted = make_train_step(
            self.config, self.env, self.agent, self.mesh, num_iterations, self.trace_counter
        )
        with precision():
            return jitted.lower(self.state_shapes()).compile()

    def precompile_evaluator(
        self, agent_state: Any, num_envs: int, precision: Callable[[], Any]
    ) -> None:
        """Start compiling the evaluator of ``num_envs`` envs for ``agent_state``'s layout in a
        background thread; the first evaluation waits only for what is left."""
        if num_envs in self.evaluators:
            return
        fn = make_evaluate(self.env, self.agent.act, num_envs, observer(self.agent))
        # Shapes and shardings now: the step donates (deletes) the state's buffers later.
        agent = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), agent_state
        )
        key = jax.ShapeDtypeStruct((2,), jax.numpy.uint32)

        def compile_evaluator():
            with precision():  # a thread of its own: the setting is per thread
                return fn.lower(agent, key).compile()

        self.evaluators[num_envs] = Background(compile_evaluator, f"compile-eval-{num_envs}")

    def evaluate_episodes(
        self, agent_state: Any, num_envs: int, seed: int, precision: Callable[[], Any]
    ) -> tuple[float, float]:
        """``(mean return, mean length)`` of one deterministic episode in each of ``num_envs``
        fresh MJX envs (compiled once per ``num_envs``)."""
        evaluator = self.evaluators.get(num_envs)
        if evaluator is None:
            evaluator = make_evaluate(self.env, self.agent.act, num_envs, observer(self.agent))
        if isinstance(evaluator, Background):
            evaluator = evaluator.result()
        self.evaluators[num_envs] = evaluator
        with precision():  # a first call traces
            mean, _, lengths = evaluator(agent_state, jax.random.PRNGKey(seed))
        return float(mean), float(np.mean(lengths))

    def close(self) -> None:
        """Nothing to release: MJX holds no threads."""
