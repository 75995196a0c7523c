"""The C MuJoCo collector of ``physics="mujoco"``: this process's envs stepped on CPU threads
with the exploration policy, one chunk of ``env_steps_per_sync`` steps at a time.

``Collector`` holds this process's rows of the batch (``MujocoVecEnv``) and the collector's
carry between chunks (exploration state, done flags, running episode returns and lengths);
``collect`` plays one chunk and returns its transitions and statistics. The exploration noise
of a row is keyed per mesh shard (``fold_in(key, shard)``), so it does not depend on how many
processes or devices the run has. ``collector_device`` is the CPU device its JAX code runs
on; ``over_processes`` and ``stack_metrics`` turn a block's chunk statistics into the fused
step's metrics layout (``unilab_jax.collection.mujoco`` runs the schedule around it).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from unilab_jax.algos.agent import Agent, Transition, actor_observation
from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.distributed import processes
from unilab_jax.envs.vec_env import MujocoVecEnv
from unilab_jax.errors import EnvNaNError

__all__ = ["Collector", "collector_device", "default_threads", "over_processes", "stack_metrics"]

# Folded into the run's seed for the exploration keys (apart from the learner's stream).
_EXPLORE_STREAM = 0x4D4A43  # "MJC"
_COUNTS = ("episodes", "return_sum", "length_sum", "terminated", "truncated")


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


class Collector:
    """This process's C MuJoCo rows ``[first_row, first_row + local_envs)`` of the batch, the
    exploration policy acting on them on ``device``, and the collector's carry.

    ``reset`` starts a fresh run, ``load`` continues from a saved carry; ``explore_state``,
    ``prev_done``, ``ep_ret`` and ``ep_len`` are the carry (host side), ``vec`` the envs.
    """

    def __init__(
        self,
        config: TrainConfig,
        task: Any,
        agent: Agent,
        device: jax.Device,
        shards: tuple[int, int],
        rows: tuple[int, int],
        threads: int,
    ) -> None:
        self.config, self.agent, self.device = config, agent, device
        self._first_shard, self._shards = shards
        self.first_row, self.local_envs = rows
        self.vec = MujocoVecEnv(
            task, config.env, self.local_envs, config.seed, nthread=threads,
            device=device, rows=(self.first_row, config.num_envs),
            block=self.local_envs // self._shards,
        )  # fmt: skip
        self._explore = jax.jit(self._explore_shard)
        self._explore_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), _EXPLORE_STREAM)
        self.explore_state: Any = None
        self.prev_done = self.ep_ret = self.ep_len = None

    def _explore_shard(self, policy, explore_state, obs, prev_done, key, shard):
        """``agent.explore`` over one mesh shard's rows with the shard's key
        ``fold_in(key, shard)``. One compiled program serves every shard of every layout (the
        shard is an argument), so a row's action is computed by the same program on the same
        rows whether its process holds one shard or several: kernels such as YNNPACK's dots
        pick their blocking by the rows of a call and the CPU's vector ISA, so a program over
        2 shards' rows need not give a row the bits a program over 1 shard's rows gives it."""
        return self.agent.explore(
            policy, explore_state, obs, prev_done, jax.random.fold_in(key, shard)
        )

    def _act(self, policy, obs, key) -> np.ndarray:
        """This process's rows' actions (numpy), shard by shard (``_explore_shard``); the
        exploration state moves on."""
        k, state = self._shards, self.explore_state
        if k == 1:
            actions, self.explore_state = self._explore(
                policy, state, obs, self.prev_done, key, np.int32(self._first_shard)
            )
            return np.asarray(actions)
        size = self.local_envs // k
        out = []
        for i in range(k):
            rows = slice(i * size, (i + 1) * size)
            out.append(self._explore(
                policy, jax.tree.map(lambda x, r=rows: x[r], state), obs[rows],
                self.prev_done[rows], key, np.int32(self._first_shard + i),
            ))  # fmt: skip
        self.explore_state = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[s for _, s in out])
        return np.concatenate([np.asarray(a) for a, _ in out])

    def reset(self, seed: int, key: jax.Array) -> None:
        """Envs reset with staggered time limits, this process's rows of the exploration state
        drawn from ``key`` for the whole batch, zero episode statistics."""
        self.vec.init_state(seed)
        rows = slice(self.first_row, self.first_row + self.local_envs)
        with jax.default_device(self.device):
            whole = self.agent.init_explore(jax.device_put(key, self.device), self.config.num_envs)
            self.explore_state = jax.tree.map(lambda x: x[rows], whole)
        n = self.local_envs
        self.prev_done = np.zeros(n, bool)
        self.ep_ret = np.zeros(n, np.float32)
        self.ep_len = np.zeros(n, np.int32)

    def load(self, env: Any, explore: Any, prev_done, ep_ret, ep_len) -> None:
        """Continue from a saved carry (this process's rows, numpy): the C MuJoCo batch,
        observations, task state and keys (``env``), exploration state, episode statistics."""
        self.vec.restore(env)
        self.explore_state = jax.device_put(explore, self.device)
        self.prev_done = np.array(prev_done, bool)
        self.ep_ret = np.array(ep_ret, np.float32)
        self.ep_len = np.array(ep_len, np.int32)

    def collect(self, policy: Any, iteration: int) -> tuple[Transition, dict]:
        """One chunk of ``env_steps_per_sync`` env steps with the exploration policy of
        ``policy`` (an agent state on the collector's device); ``iteration`` keys the noise.
        Returns the chunk (numpy, ``[S, N, ...]``) and the chunk's collection statistics."""
        cfg, vec = self.config, self.vec
        keys = jax.random.split(jax.random.fold_in(self._explore_key, iteration),
                                cfg.env_steps_per_sync)  # fmt: skip
        rows: list[Transition] = []
        stats = {k: 0.0 for k in _COUNTS}
        components: dict[str, float] = {}
        for key in keys:
            obs = vec.state.obs
            with jax.default_device(self.device):
                actions = self._act(policy, actor_observation(self.agent, obs), key)
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
            self._count(stats, components, nxt, len(keys))
        chunk = jax.tree.map(lambda *xs: np.stack(xs), *rows)
        stats["nan_env"] = cfg.num_envs  # a non-finite step raised above
        stats["components"] = components  # "reward/<name>", as the MJX step's
        return chunk, stats

    def _count(self, stats: dict, components: dict, nxt: Any, steps: int) -> None:
        """One env step's episode statistics into ``stats`` and its reward components' mean
        into ``components``; ended episodes start their return and length at zero."""
        done = nxt.terminated | nxt.truncated
        self.ep_ret = self.ep_ret + nxt.reward
        self.ep_len = self.ep_len + 1
        stats["episodes"] += float(done.sum())
        stats["return_sum"] += float(self.ep_ret[done].sum())
        stats["length_sum"] += float(self.ep_len[done].sum())
        stats["terminated"] += float((nxt.terminated & ~nxt.truncated).sum())
        stats["truncated"] += float(nxt.truncated.sum())
        for name, value in nxt.info["log"].items():
            components[name] = components.get(name, 0.0) + value / steps
        self.ep_ret = np.where(done, 0.0, self.ep_ret).astype(np.float32)
        self.ep_len = np.where(done, 0, self.ep_len).astype(np.int32)
        self.prev_done = done

    def close(self) -> None:
        """Stop the C MuJoCo threads of the training batch."""
        self.vec.close()


def default_threads() -> int:
    """C MuJoCo threads by default: this process's CPU cores, shared with the other processes
    of the run on this machine (as the launcher, SLURM or Open MPI report them)."""
    from unilab_jax.envs.mujoco_backend import default_nthread

    if not processes.is_multiprocess():
        return default_nthread()
    for name in ("UNILAB_JAX_LOCAL_PROCESSES", "SLURM_NTASKS_PER_NODE",
                 "OMPI_COMM_WORLD_LOCAL_SIZE"):  # fmt: skip
        try:
            return max(1, default_nthread() // max(1, int(os.environ[name])))
        except (KeyError, ValueError):
            continue
    return default_nthread()


def over_processes(stats: list[dict], collect_sec: float) -> tuple[list[dict], float]:
    """Every process's collection statistics of a block, combined (a collective): counts and
    sums added, reward components averaged (every process has as many envs), the slowest
    process's collection time."""
    from jax.experimental import multihost_utils

    counts = _COUNTS
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


def stack_metrics(stats: list[dict], learned: list[dict]) -> dict:
    """Per-iteration collection statistics and learner metrics as the fused step's metrics:
    one ``[iterations]`` array per leaf."""
    stack = lambda *xs: np.stack([np.asarray(x) for x in xs])  # noqa: E731
    metrics = jax.tree.map(stack, *learned)
    for name in (*_COUNTS, "nan_env"):
        metrics[name] = np.asarray([s[name] for s in stats], np.float32)
    metrics["components"] = jax.tree.map(stack, *[s["components"] for s in stats])
    return metrics
