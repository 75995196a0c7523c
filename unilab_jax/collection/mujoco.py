"""C MuJoCo collection for the JAX learner: ``TrainConfig(physics="mujoco")``.

The reference system's architecture with our learner: the task's envs are stepped by C MuJoCo
on CPU threads (``envs.vec_env.MujocoVecEnv``: ``MujocoBatchPhysics`` with the GIL released
while stepping, and the task's own JAX code for actions, observations, rewards, time limits and
resets, the same code MJX runs), the exploration policy acts with the current actor on a CPU
device, and each iteration's chunk of ``env_steps_per_sync`` steps moves into the device replay,
where ``step.make_chunk_step`` runs the same update block as the fused MJX step.

Two schedules (``TrainConfig.collection``):

* ``"sync"``: collect a chunk with the actor of the last iteration, then learn from it. The
  MJX path's schedule, deterministic; the parity reference.
* ``"overlap"``: while the learner updates on chunk ``k``, the collector gathers chunk ``k + 1``
  with the actor from before that update, so the policy acting is at most one iteration
  (``updates_per_step`` gradient steps) behind; the record reports it (``policy_lag``). The
  collector's JAX code runs on a CPU device of its own (XLA runs one device's programs in
  order, so sharing the learner's would serialise the two). Each block starts with one chunk
  collected in turn, so that the state between blocks holds no chunk in flight: checkpoints
  and resumes see the same quiescent state as with ``"sync"``, and the schedule stays
  deterministic for a given ``log_interval``.

Between blocks the whole state is a ``TrainState`` as on MJX: ``env`` holds the C MuJoCo
integration state (float64 words as ``uint32``), observations, task state, keys and step
counters (``MujocoVecEnv.snapshot``), sharded over envs like every per-env leaf, so the
checkpoint format, its checksums and a bit-exact resume need nothing new. Exploration keys are
``fold_in(key(seed), iteration)``: a resume draws the same noise.

Evaluation runs the deterministic policy on C MuJoCo too (one full episode per env from
unstaggered resets keyed like the MJX evaluation's).

Several processes (``jax.distributed``): each process steps its own share of the envs (the
rows of its devices in the mesh) on its own threads; its chunks and state rows become the
global arrays of the mesh (``jax.make_array_from_process_local_data``), the collection
statistics are summed over processes once per block, and the evaluation episodes are split
over processes. Per-env randomness does not depend on the layout: reset keys and staggered
time limits are the rows of the whole batch's draw, exploration noise is keyed per mesh shard
(``fold_in(key, shard)``), and every JAX program of the collection (the acting actor, the
task's per-env code) runs once per mesh shard on that shard's rows, in a process of several
shards too (XLA:CPU's dot kernels block by a call's rows and the CPU's vector ISA, so a call
over 8 rows need not give a row the bits a call over its 4 gives it). So 2 processes of 1
device train exactly what 1 process of 2 devices trains, on any CPU. The overlapped schedule
runs in one process only (``TrainConfig`` says so).

Deviation from the MJX path: one process's collector holds all of its envs in one C MuJoCo
batch on the host whatever its device count (its JAX programs run shard by shard; chunks are
split over devices when they move to the replay).

This module holds ``MujocoCollection``, what ``Trainer`` delegates to: the state between
blocks, the compiled chunk step, the two schedules and the C MuJoCo evaluation. The collector
itself (the envs, the exploration policy acting on them, one chunk and its statistics) is
``unilab_jax.collection.collector``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from unilab_jax.algos.agent import Agent, Transition, observer
from unilab_jax.collection.collector import (
    Collector,
    collector_device,
    default_threads,
    over_processes,
    stack_metrics,
)
from unilab_jax.collection.replay import init_replay
from unilab_jax.collection.step import (
    DATA_AXIS,
    LearnerState,
    TrainState,
    learner_specs,
    make_chunk_step,
)
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.distributed import processes
from unilab_jax.envs.base import Env
from unilab_jax.envs.episodes import mujoco_episodes
from unilab_jax.envs.vec_env import MujocoVecEnv

__all__ = ["MujocoCollection", "collector_device"]


class MujocoCollection:
    """C MuJoCo collection plus the chunk-fed learner step, for one ``Trainer``.

    ``init_state``, ``compile_step``, ``precompile_evaluator`` and ``evaluate_episodes`` are
    the interface ``Trainer`` holds (``MjxCollection``'s too); ``close`` stops the threads.
    """

    def __init__(
        self, config: TrainConfig, env: Env, agent: Agent, mesh: Mesh, trace_counter: list[int]
    ) -> None:
        task = getattr(env, "task", None)
        if task is None:  # validate() refuses adapters by name; anything else Env-like here
            raise ConfigError(f"{config.env} has no C MuJoCo task; use physics 'mjx'")
        self.config, self.task, self.agent, self.mesh = config, task, agent, mesh
        self.device = collector_device(config, mesh)
        # This process's rows of the global batch: those of its devices in the mesh.
        here = jax.process_index()
        mine = [i for i, d in enumerate(mesh.devices.flat) if d.process_index == here]
        if mine != list(range(mine[0], mine[0] + len(mine))):
            raise ConfigError(f"this process's devices are not contiguous in the mesh ({mine})")
        shard = config.num_envs // mesh.size
        self.first_row, self.local_envs = mine[0] * shard, len(mine) * shard
        self.threads = config.physics_threads or default_threads()
        #: The collector (its envs and carry); ``vec`` is its C MuJoCo batch.
        self.collector = Collector(
            config, task, agent, self.device, shards=(mine[0], len(mine)),
            rows=(self.first_row, self.local_envs), threads=self.threads,
        )  # fmt: skip
        self.vec = self.collector.vec
        self._act = jax.jit(agent.act)
        self._chunk_step = make_chunk_step(config, agent, mesh, trace_counter)
        self._compiled: Any = None
        self._eval_envs: dict[int, MujocoVecEnv] = {}
        self._sharded = NamedSharding(mesh, P(DATA_AXIS))
        self._chunk_sharding = NamedSharding(mesh, P(None, DATA_AXIS))
        # The TrainState the collector's carry belongs to.
        self._current: TrainState | None = None
        self._example = self._example_transition()

    # ------------------------------------------------------------------ state
    def _example_transition(self) -> Transition:
        n, sizes = self.config.num_envs, self.vec.obs_groups_spec
        a = self.vec.action_space.shape[0]
        z = lambda *shape: np.zeros((n, *shape), np.float32)  # noqa: E731
        return Transition(
            obs=z(*sizes["obs"]), critic=z(*sizes["critic"]), actions=z(a), rewards=z(),
            next_obs=z(*sizes["obs"]), next_critic=z(*sizes["critic"]), terminated=z(),
            truncated=z(),
        )  # fmt: skip

    def _init_learner(self, key: jax.Array) -> LearnerState:
        k_agent, k_loop = jax.random.split(key)
        example = self._example

        def init(k_agent, k_loop):
            return LearnerState(
                agent=self.agent.init(k_agent),
                replay=init_replay(example, self.config.replay_buffer_n),
                key=k_loop,
                iteration=jnp.int32(0),
            )

        shardings = jax.tree.map(
            lambda spec: NamedSharding(self.mesh, spec),
            learner_specs(),
            is_leaf=lambda x: isinstance(x, P),
        )
        return jax.jit(init, out_shardings=shardings)(k_agent, k_loop)

    def init_state(self, seed: int) -> TrainState:
        """A fresh run: agent and empty replay (sharded as on MJX), envs reset with staggered
        time limits, zero episode statistics."""
        key = jax.random.PRNGKey(seed)
        k_learner, k_explore = jax.random.split(key)
        learner = self._init_learner(k_learner)
        self.collector.reset(seed, k_explore)
        return self._pack(learner)

    def _pack(self, learner: LearnerState) -> TrainState:
        """The collector's carry and ``learner`` as one ``TrainState`` (per-env leaves sharded
        over the mesh); remembered as the state the collector is in."""
        put = lambda tree: self._global(tree, self._sharded, 0)  # noqa: E731
        carry = self.collector
        state = TrainState(
            agent=learner.agent,
            explore=put(jax.device_get(carry.explore_state)),
            env=put(self.vec.snapshot()),
            prev_done=put(carry.prev_done),
            episode_return=put(carry.ep_ret),
            episode_length=put(carry.ep_len),
            replay=learner.replay,
            key=learner.key,
            iteration=learner.iteration,
        )
        self._current = state
        return state

    def _load(self, state: TrainState) -> None:
        """Make the collector continue from ``state`` (a restored checkpoint, another run's
        state): the C MuJoCo batch, observations, task state, keys and episode statistics."""
        host = jax.tree.map(
            self._local_rows,
            (state.env, state.explore, state.prev_done, state.episode_return, state.episode_length),
        )
        self.collector.load(*host)
        self._current = state

    def _global(self, tree: Any, sharding: NamedSharding, axis: int) -> Any:
        """This process's rows (numpy, env axis ``axis``) as the global arrays of the mesh."""

        def one(x):
            x = np.asarray(x)
            shape = list(x.shape)
            shape[axis] = self.config.num_envs
            return jax.make_array_from_process_local_data(sharding, x, tuple(shape))

        return jax.tree.map(one, tree)

    def _local_rows(self, x: jax.Array) -> np.ndarray:
        """This process's rows of a per-env global array (numpy)."""
        if x.is_fully_addressable or x.sharding.is_fully_replicated:  # e.g. empty arrays
            whole = x if x.is_fully_addressable else x.addressable_data(0)
            return np.asarray(whole)[self.first_row : self.first_row + self.local_envs]
        shards = sorted(x.addressable_shards, key=lambda s: s.index[0].start or 0)
        return np.concatenate([np.asarray(s.data) for s in shards])

    def state_shapes(self) -> LearnerState:
        """Shapes and shardings of the learner's state (what compiling the chunk step needs)."""
        shapes = jax.eval_shape(self._init_learner, jax.random.PRNGKey(0))
        return _with_shardings(shapes, learner_specs(), self.mesh)

    def chunk_shapes(self) -> Transition:
        s = self.config.env_steps_per_sync
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((s, *x.shape), x.dtype, sharding=self._chunk_sharding),
            self._example,
        )

    def compile(self, precision: Callable[[], Any]) -> Any:
        """Compile the chunk-fed learner step (once; thread-safe to call from a background
        thread before any state exists)."""
        if self._compiled is None:
            with precision():
                self._compiled = self._chunk_step.lower(
                    self.state_shapes(), self.chunk_shapes()
                ).compile()
        return self._compiled

    # ------------------------------------------------------------------ schedules
    def _policy_copy(self, agent_state: Any) -> Any:
        """The agent state the collector acts with, on its device: a copy, since the learner
        donates (deletes) its buffers while the overlapped collector still acts."""
        return jax.device_put(_local(agent_state), self.device, donate=False, may_alias=False)

    def _policy_now(self, agent_state: Any) -> Any:
        """The agent state for a collection that ends before the learner runs again (no copy
        when the collector shares the learner's device)."""
        agent_state = _local(agent_state)
        on_device = {d for leaf in jax.tree.leaves(agent_state) for d in leaf.devices()}
        return agent_state if on_device == {self.device} else self._policy_copy(agent_state)

    def compile_step(self, num_iterations: int, precision: Callable[[], Any]) -> Callable:
        """The block step of ``num_iterations`` iterations (one compiled chunk step serves every
        block length)."""
        self.compile(precision)
        return self.block_step(num_iterations, precision)

    def block_step(self, num_iterations: int, precision: Callable[[], Any]) -> Callable:
        """``step(state) -> (state, metrics)``: ``num_iterations`` iterations of collection and
        learning, ``metrics`` laid out as the fused step's (leaves ``[num_iterations]``)."""
        learn = self.compile(precision)
        overlap = self.config.collection == "overlap"
        collect = self.collector.collect

        def step(state: TrainState) -> tuple[TrainState, dict]:
            if state is not self._current:
                self._load(state)
            learner = LearnerState(state.agent, state.replay, state.key, state.iteration)
            first = int(state.iteration)
            records, lags = [], []
            collect_sec = 0.0
            t0 = time.perf_counter()
            chunk, stats = collect(self._policy_now(learner.agent), first)
            collect_sec += time.perf_counter() - t0
            for i in range(num_iterations):
                policy = self._policy_copy(learner.agent) if overlap else None
                learner, learned = learn(learner, self._global(chunk, self._chunk_sharding, 1))
                records.append((stats, learned))
                lags.append(0 if (i == 0 or not overlap) else 1)
                if i + 1 == num_iterations:
                    break
                t0 = time.perf_counter()
                if overlap:  # runs while the learner computes
                    chunk, stats = collect(policy, first + i + 1)
                else:
                    chunk, stats = collect(self._policy_now(learner.agent), first + i + 1)
                collect_sec += time.perf_counter() - t0
            learned = jax.device_get([r[1] for r in records])
            stats = [r[0] for r in records]
            if processes.is_multiprocess():
                stats, collect_sec = over_processes(stats, collect_sec)
            metrics = stack_metrics(stats, learned)
            metrics["policy_lag"] = np.asarray(lags, np.float32)
            metrics["collect_sec"] = np.full(num_iterations, collect_sec / num_iterations)
            return self._pack(learner), metrics

        return step

    # ------------------------------------------------------------------ evaluation
    def precompile_evaluator(
        self, agent_state: Any, num_envs: int, precision: Callable[[], Any]
    ) -> None:
        """Nothing to compile: C MuJoCo evaluation runs the jitted actor already compiled."""

    def evaluate_episodes(
        self, agent_state: Any, num_envs: int, seed: int, precision: Callable[[], Any] | None = None
    ) -> tuple[float, float]:
        """``(mean return, mean length)`` of one deterministic episode per env on C MuJoCo,
        from unstaggered resets keyed by ``seed`` (as the MJX evaluation's). In a
        multi-process run each process runs its share of the episodes (a collective)."""
        vec = self._eval_envs.get(num_envs)
        if vec is None:
            count, index = jax.process_count(), jax.process_index()
            if num_envs < count:  # too few to share: every process runs them all
                count, index = 1, 0
            first, end = index * num_envs // count, (index + 1) * num_envs // count
            vec = MujocoVecEnv(self.task, self.config.env, end - first, seed,
                               nthread=self.threads, device=self.device,
                               rows=(first, num_envs))  # fmt: skip
            self._eval_envs[num_envs] = vec
        episodes = mujoco_episodes(
            vec, self._act, _local(agent_state), seed, observe=observer(self.agent)
        )
        sums = np.array([episodes["returns"].sum(), episodes["lengths"].sum()], np.float64)
        if processes.is_multiprocess() and vec.num_envs < num_envs:
            from jax.experimental import multihost_utils

            parts = multihost_utils.process_allgather(sums.astype(np.float32))
            sums = np.asarray(parts, np.float64).sum(axis=0)
        return float(sums[0] / num_envs), float(sums[1] / num_envs)

    def close(self) -> None:
        """Stop the C MuJoCo threads (training and evaluation batches)."""
        self.collector.close()
        for vec in self._eval_envs.values():
            vec.close()
        self._eval_envs.clear()


def _local(tree: Any) -> Any:
    """A replicated global state as arrays on one of this process's devices (the same
    arrays in a one-process run)."""
    return jax.tree.map(lambda x: x if x.is_fully_addressable else x.addressable_data(0), tree)


def _with_shardings(shapes: Any, specs: Any, mesh: Mesh) -> Any:
    """``shapes`` (``ShapeDtypeStruct`` leaves) with the shardings of the prefix ``specs``."""

    def shard(spec: P, subtree: Any) -> Any:
        sharding = NamedSharding(mesh, spec)
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), subtree
        )

    return jax.tree.map(shard, specs, shapes, is_leaf=lambda x: isinstance(x, P))
