"""C MuJoCo collection for the JAX learner: ``TrainConfig(physics="mujoco")``.

The reference system's architecture with our learner: the task's envs are stepped by C MuJoCo
on CPU threads (``envs.vec_env.MujocoVecEnv``: ``MujocoBatchPhysics`` with the GIL released
while stepping, and the task's own JAX code for actions, observations, rewards, time limits and
resets, the same code MJX runs), the exploration policy acts with the current actor on a CPU
device, and each iteration's chunk of ``env_steps_per_sync`` steps moves into the device replay,
where ``loop.make_chunk_step`` runs the same update block as the fused MJX step.

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
(``fold_in(key, shard)``), so 2 processes of 1 device train exactly what 1 process of 2
devices trains. The overlapped schedule runs in one process only (``TrainConfig`` says so).

Deviation from the MJX path: one process's collector holds all of its envs in one batch on the
host whatever its device count (chunks are split over devices when they move to the replay).
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

from unilab_jax import distributed
from unilab_jax.algos.agent import Agent, Transition
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.envs.base import Env
from unilab_jax.envs.episodes import mujoco_episodes
from unilab_jax.envs.vec_env import MujocoVecEnv
from unilab_jax.errors import EnvNaNError
from unilab_jax.loop import (
    DATA_AXIS,
    LearnerState,
    TrainState,
    learner_specs,
    make_chunk_step,
)
from unilab_jax.replay import init_replay

__all__ = ["MujocoCollection", "collector_device"]

# Folded into the run's seed for the exploration keys (apart from the learner's stream).
_EXPLORE_STREAM = 0x4D4A43  # "MJC"


def collector_device(config: TrainConfig, mesh: Mesh) -> jax.Device:
    """The CPU device of this process the collector's JAX code runs on: on a CPU, the first
    device outside the learner's mesh for the ``"overlap"`` schedule (``ConfigError`` when
    there is none), else this process's first device of the mesh; beside an accelerator, the
    first CPU device."""
    cpus = jax.local_devices(backend="cpu")
    if jax.default_backend() != "cpu":
        return cpus[0]
    if config.collection == "sync":
        return next(d for d in mesh.devices.flat if d.process_index == jax.process_index())
    in_mesh = set(mesh.devices.flat)
    spare = [d for d in cpus if d not in in_mesh]
    if not spare:
        raise ConfigError(
            f"collection 'overlap' needs a CPU device apart from the learner's {len(in_mesh)}: "
            "set XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{len(in_mesh) + 1} before starting Python (python -m unilab_jax.train does it), "
            "or use collection 'sync'"
        )
    return spare[0]


class MujocoCollection:
    """C MuJoCo collection plus the chunk-fed learner step, for one ``Trainer``.

    ``init_state``, ``state_shapes``, ``precompile``, ``block_step`` and ``evaluate_episodes``
    are what ``Trainer`` delegates to with ``physics="mujoco"``; ``close`` stops the threads.
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
        self._first_shard, self._shards = mine[0], len(mine)
        self.threads = config.physics_threads or _default_threads()
        self.vec = MujocoVecEnv(
            task, config.env, self.local_envs, config.seed, nthread=self.threads,
            device=self.device, rows=(self.first_row, config.num_envs),
        )  # fmt: skip
        self._explore = jax.jit(self._explore_shards)
        self._act = jax.jit(agent.act)
        self._chunk_step = make_chunk_step(config, agent, mesh, trace_counter)
        self._compiled: Any = None
        self._eval_envs: dict[int, MujocoVecEnv] = {}
        self._sharded = NamedSharding(mesh, P(DATA_AXIS))
        self._chunk_sharding = NamedSharding(mesh, P(None, DATA_AXIS))
        self._explore_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), _EXPLORE_STREAM)
        # The collector's carry (host side); ``_current`` is the TrainState it belongs to.
        self._explore_state: Any = None
        self._prev_done = self._ep_ret = self._ep_len = None
        self._current: TrainState | None = None
        self._example = self._example_transition()

    def _explore_shards(self, policy, explore_state, obs, prev_done, key):
        """``agent.explore`` over this process's rows, each mesh shard's rows with its own key
        ``fold_in(key, shard)``: the noise a row gets does not depend on how many processes or
        devices the run has."""
        k = self._shards
        split = lambda x: x.reshape(k, x.shape[0] // k, *x.shape[1:])  # noqa: E731
        merge = lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])  # noqa: E731
        shards = self._first_shard + jnp.arange(k)
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(shards)
        explore = jax.vmap(self.agent.explore, in_axes=(None, 0, 0, 0, 0))
        actions, state = explore(
            policy, jax.tree.map(split, explore_state), split(obs), split(prev_done), keys
        )
        return merge(actions), jax.tree.map(merge, state)

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
        time limits (the reference's init), zero episode statistics."""
        key = jax.random.PRNGKey(seed)
        k_learner, k_explore = jax.random.split(key)
        learner = self._init_learner(k_learner)
        self.vec.init_state(seed)
        rows = slice(self.first_row, self.first_row + self.local_envs)
        with jax.default_device(self.device):
            whole = self.agent.init_explore(
                jax.device_put(k_explore, self.device), self.config.num_envs
            )
            self._explore_state = jax.tree.map(lambda x: x[rows], whole)
        n = self.local_envs
        self._prev_done = np.zeros(n, bool)
        self._ep_ret = np.zeros(n, np.float32)
        self._ep_len = np.zeros(n, np.int32)
        return self._pack(learner)

    def _pack(self, learner: LearnerState) -> TrainState:
        """The collector's carry and ``learner`` as one ``TrainState`` (per-env leaves sharded
        over the mesh); remembered as the state the collector is in."""
        put = lambda tree: self._global(tree, self._sharded, 0)  # noqa: E731
        state = TrainState(
            agent=learner.agent,
            explore=put(jax.device_get(self._explore_state)),
            env=put(self.vec.snapshot()),
            prev_done=put(self._prev_done),
            episode_return=put(self._ep_ret),
            episode_length=put(self._ep_len),
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
        env, explore, prev_done, ep_ret, ep_len = host
        self.vec.restore(env)
        self._explore_state = jax.device_put(explore, self.device)
        self._prev_done = np.array(prev_done, bool)
        self._ep_ret = np.array(ep_ret, np.float32)
        self._ep_len = np.array(ep_len, np.int32)
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

    # ------------------------------------------------------------------ collection
    def _collect(self, policy: Any, iteration: int) -> tuple[Transition, dict]:
        """One chunk of ``env_steps_per_sync`` env steps with the exploration policy of
        ``policy`` (an agent state on the collector's device); ``iteration`` keys the noise.
        Returns the chunk (numpy, ``[S, N, ...]``) and the chunk's collection statistics."""
        cfg, vec = self.config, self.vec
        keys = jax.random.split(jax.random.fold_in(self._explore_key, iteration),
                                cfg.env_steps_per_sync)  # fmt: skip
        rows: list[Transition] = []
        stats = {k: 0.0 for k in ("episodes", "return_sum", "length_sum", "terminated",
                                  "truncated")}  # fmt: skip
        components: dict[str, float] = {}
        for key in keys:
            obs = vec.state.obs
            with jax.default_device(self.device):
                actions, self._explore_state = self._explore(
                    policy, self._explore_state, obs["obs"], self._prev_done, key
                )
                actions = np.asarray(actions)
            try:
                nxt = vec.step(actions)
            except FloatingPointError as err:
                raise EnvNaNError(
                    f"{err} (at iteration {iteration + 1}, C MuJoCo collection)"
                ) from None
            rows.append(
                Transition(
                    obs=obs["obs"], critic=obs["critic"], actions=actions, rewards=nxt.reward,
                    next_obs=nxt.final_observation["obs"],
                    next_critic=nxt.final_observation["critic"],
                    terminated=nxt.terminated.astype(np.float32),
                    truncated=nxt.truncated.astype(np.float32),
                )
            )  # fmt: skip
            done = nxt.terminated | nxt.truncated
            self._ep_ret = self._ep_ret + nxt.reward
            self._ep_len = self._ep_len + 1
            stats["episodes"] += float(done.sum())
            stats["return_sum"] += float(self._ep_ret[done].sum())
            stats["length_sum"] += float(self._ep_len[done].sum())
            stats["terminated"] += float((nxt.terminated & ~nxt.truncated).sum())
            stats["truncated"] += float(nxt.truncated.sum())
            for name, value in nxt.info["log"].items():
                components[name] = components.get(name, 0.0) + value / len(keys)
            self._ep_ret = np.where(done, 0.0, self._ep_ret).astype(np.float32)
            self._ep_len = np.where(done, 0, self._ep_len).astype(np.int32)
            self._prev_done = done
        chunk = jax.tree.map(lambda *xs: np.stack(xs), *rows)
        stats["nan_env"] = cfg.num_envs  # a non-finite step raised above
        stats["components"] = components  # "reward/<name>", as the MJX step's
        return chunk, stats

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

    def block_step(self, num_iterations: int, precision: Callable[[], Any]) -> Callable:
        """``step(state) -> (state, metrics)``: ``num_iterations`` iterations of collection and
        learning, ``metrics`` laid out as the fused step's (leaves ``[num_iterations]``)."""
        learn = self.compile(precision)
        overlap = self.config.collection == "overlap"

        def step(state: TrainState) -> tuple[TrainState, dict]:
            if state is not self._current:
                self._load(state)
            learner = LearnerState(state.agent, state.replay, state.key, state.iteration)
            first = int(state.iteration)
            records, lags = [], []
            collect_sec = 0.0
            t0 = time.perf_counter()
            chunk, stats = self._collect(self._policy_now(learner.agent), first)
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
                    chunk, stats = self._collect(policy, first + i + 1)
                else:
                    chunk, stats = self._collect(self._policy_now(learner.agent), first + i + 1)
                collect_sec += time.perf_counter() - t0
            learned = jax.device_get([r[1] for r in records])
            stats = [r[0] for r in records]
            if distributed.is_multiprocess():
                stats, collect_sec = _over_processes(stats, collect_sec)
            metrics = _stack_metrics(stats, learned)
            metrics["policy_lag"] = np.asarray(lags, np.float32)
            metrics["collect_sec"] = np.full(num_iterations, collect_sec / num_iterations)
            return self._pack(learner), metrics

        return step

    # ------------------------------------------------------------------ evaluation
    def evaluate_episodes(self, agent_state: Any, num_envs: int, seed: int) -> tuple[float, float]:
        """``(mean return, mean length)`` of one deterministic episode per env on C MuJoCo,
        from unstaggered resets keyed by ``seed`` (as the MJX evaluation's). In a
        multi-process run each process runs its share of the episodes (a collective)."""
        vec = self._eval_envs.get(num_envs)
        if vec is None:
            processes, index = jax.process_count(), jax.process_index()
            if num_envs < processes:  # too few to share: every process runs them all
                processes, index = 1, 0
            first, end = index * num_envs // processes, (index + 1) * num_envs // processes
            vec = MujocoVecEnv(self.task, self.config.env, end - first, seed,
                               nthread=self.threads, device=self.device,
                               rows=(first, num_envs))  # fmt: skip
            self._eval_envs[num_envs] = vec
        episodes = mujoco_episodes(vec, self._act, _local(agent_state), seed)
        sums = np.array([episodes["returns"].sum(), episodes["lengths"].sum()], np.float64)
        if distributed.is_multiprocess() and vec.num_envs < num_envs:
            from jax.experimental import multihost_utils

            parts = multihost_utils.process_allgather(sums.astype(np.float32))
            sums = np.asarray(parts, np.float64).sum(axis=0)
        return float(sums[0] / num_envs), float(sums[1] / num_envs)

    def close(self) -> None:
        """Stop the C MuJoCo threads (training and evaluation batches)."""
        self.vec.close()
        for vec in self._eval_envs.values():
            vec.close()
        self._eval_envs.clear()


def _local(tree: Any) -> Any:
    """A replicated global state as arrays on one of this process's devices (the same
    arrays in a one-process run)."""
    return jax.tree.map(lambda x: x if x.is_fully_addressable else x.addressable_data(0), tree)


def _default_threads() -> int:
    """C MuJoCo threads by default: this process's CPU cores, shared with the other processes
    of the run on this machine (as the launcher, SLURM or Open MPI report them)."""
    import os

    from unilab_jax.envs.mujoco_backend import default_nthread

    if not distributed.is_multiprocess():
        return default_nthread()
    for name in ("UNILAB_JAX_LOCAL_PROCESSES", "SLURM_NTASKS_PER_NODE",
                 "OMPI_COMM_WORLD_LOCAL_SIZE"):  # fmt: skip
        try:
            return max(1, default_nthread() // max(1, int(os.environ[name])))
        except (KeyError, ValueError):
            continue
    return default_nthread()


def _over_processes(stats: list[dict], collect_sec: float) -> tuple[list[dict], float]:
    """Every process's collection statistics of a block, combined (a collective): counts and
    sums added, reward components averaged (every process has as many envs), the slowest
    process's collection time."""
    from jax.experimental import multihost_utils

    counts = ("episodes", "return_sum", "length_sum", "terminated", "truncated")
    names = sorted(stats[0]["components"])
    local = np.array(
        [[s[k] for k in counts] + [s["components"][k] for k in names] + [collect_sec]
         for s in stats], np.float32,
    )  # fmt: skip
    every = np.asarray(multihost_utils.process_allgather(local), np.float64)  # [P, iters, k]
    total, mean = every.sum(axis=0), every.mean(axis=0)
    combined = [
        {**{k: float(total[i, j]) for j, k in enumerate(counts)},
         "nan_env": s["nan_env"],
         "components": {k: float(mean[i, len(counts) + j]) for j, k in enumerate(names)}}
        for i, s in enumerate(stats)
    ]  # fmt: skip
    return combined, float(every[:, 0, -1].max())


def _with_shardings(shapes: Any, specs: Any, mesh: Mesh) -> Any:
    """``shapes`` (``ShapeDtypeStruct`` leaves) with the shardings of the prefix ``specs``."""

    def shard(spec: P, subtree: Any) -> Any:
        sharding = NamedSharding(mesh, spec)
        return jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), subtree
        )

    return jax.tree.map(shard, specs, shapes, is_leaf=lambda x: isinstance(x, P))


def _stack_metrics(stats: list[dict], learned: list[dict]) -> dict:
    """Per-iteration collection statistics and learner metrics as the fused step's metrics:
    one ``[iterations]`` array per leaf."""
    stack = lambda *xs: np.stack([np.asarray(x) for x in xs])  # noqa: E731
    metrics = jax.tree.map(stack, *learned)
    for name in ("episodes", "return_sum", "length_sum", "terminated", "truncated", "nan_env"):
        metrics[name] = np.asarray([s[name] for s in stats], np.float32)
    metrics["components"] = jax.tree.map(stack, *[s["components"] for s in stats])
    return metrics
