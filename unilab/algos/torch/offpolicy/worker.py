"""Off-policy collector for SAC and TD3.

Collects (obs, action, reward, next_obs, done) transitions using the current actor policy. Runs
in a subprocess; writes to ReplayBuffer.

One loop iteration (reference §1.3) is one vectorised `env.step`: refresh the actor when the
learner published new weights, normalise the policy input with the learner's statistics (a
privileged actor's, HORA-SAC's, with its privileged values: `collector_actor.actor_inputs`),
sample exploration actions, step, write the transitions (the true final observation replaces
`next_obs` of ended episodes), serve a pending pack request (B path), keep episode statistics,
and, with `sync_collection`, hand over every `env_steps_per_sync` steps and wait for the
learner. Every 10 steps a metrics message goes to the learner.

This module holds the entry point `off_policy_collector_fn` and the loop (`_Collector`: set-up,
step, sync hand-over, teardown). Its pieces: `collector_actor` (the actor's dims, build and
check, its input and exploration actions; the documented helpers, re-exported here),
`collector_stats` (timings, episode statistics, the metrics message) and `collector_pack`
(serving the B path's pack requests).

Deliberate deviations from the reference, each checked by a test:

- No zero-action warm-up step: the first observation comes from the reset, so the first
  transition is a real one and is stored (the reference discarded it).
- Episode returns and lengths are kept in `deque(maxlen=100)` (the reference's lists grew for
  the whole run).
- The policy input is normalised with the learner's own formula `(x - mean) / (std + eps)`,
  `eps = NORMALIZER_EPS` (the reference divided by `std + 1e-8` while the TD3 learner used
  `1e-2`).
- The TD3 per-env noise scales are not part of the actor's `state_dict`, so a weight refresh
  does not overwrite them (they are resampled per env on `done` only).
- Blocking queue operations wake up every 50 ms to check the stop event and that the learner
  process is still alive, so the collector never outlives its learner.
"""

from __future__ import annotations

import collections
import queue
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from unilab.algos.torch.offpolicy.collector_actor import (
    actor_inputs,
    build_collector_actor,
    policy_input,
    resolve_collector_actor_dims,
    resolve_offpolicy_actor_priv_info,
    sample_offpolicy_actions,
)
from unilab.algos.torch.offpolicy.collector_pack import POLL_S, PackServer
from unilab.algos.torch.offpolicy.collector_stats import COLLECTOR_TIMING_KEYS, CollectorStats
from unilab.ipc.async_runner import parent_alive
from unilab.ipc.weight_sync import SharedWeightSync, make_layout
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = [
    "COLLECTOR_TIMING_KEYS",
    "collector_kwargs",
    "off_policy_collector_fn",
    "resolve_collector_actor_dims",
    "resolve_offpolicy_actor_priv_info",
    "sample_offpolicy_actions",
]

_EXTRA_KWARGS = ("parent_pid", "nthread", "torch_threads")


def off_policy_collector_fn(
    stop_event: Any,
    env_name: str,
    num_envs: int,
    replay_buffer: Any,
    weight_sync_name: str,
    weight_param_shapes: Mapping[str, tuple[int, ...]],
    algo_type: str = "sac",
    actor_hidden_dim: int = 512,
    use_layer_norm: bool = True,
    learning_starts: int = 0,
    metrics_queue: Any = None,
    weight_sync_lock: Any = None,
    sync_collection: bool = False,
    collection_ready_queue: Any = None,
    trainer_done_queue: Any = None,
    env_steps_per_sync: int = 1,
    obs_normalization: bool = False,
    shared_obs_normalizer_stats: Any = None,
    sim_backend: str = "mujoco",
    env_cfg_override: dict | None = None,
    obs_dim: int | None = None,
    action_dim: int | None = None,
    actor_kwargs: dict | None = None,
    seed: int | None = None,
    trace_enabled: bool = False,
    trace_thread_time: bool = False,
    collector_pack_request_queue: Any = None,
    collector_pack_ready_queue: Any = None,
    collector_pack_shared_slots: Any = None,
    **kwargs: Any,
) -> None:
    """Entry point for the off-policy collector subprocess.

    Error handling is provided by _collector_entry_wrapper in async_runner.py.

    `weight_param_shapes` maps the actor's `state_dict` names to shapes; the collector builds
    its actor from the settings given, checks it against these shapes and attaches to the
    weight block `weight_sync_name` (guarded by `weight_sync_lock`). `learning_starts` is
    accepted for the documented signature: the learner alone decides when learning starts.
    Extra keyword arguments: `parent_pid` (set by the runner), `nthread` (C MuJoCo threads),
    `torch_threads` (actor inference threads, default 1).
    """
    del learning_starts
    unknown = sorted(set(kwargs) - set(_EXTRA_KWARGS))
    if unknown:
        raise TypeError(f"off_policy_collector_fn got unexpected keyword arguments {unknown}")
    if sync_collection and (collection_ready_queue is None or trainer_done_queue is None):
        raise ValueError("sync_collection needs collection_ready_queue and trainer_done_queue")
    torch.set_num_threads(int(kwargs.get("torch_threads") or 1))
    collector = _Collector(
        stop_event=stop_event,
        replay=replay_buffer,
        metrics_queue=metrics_queue,
        algo_type=algo_type,
        sync=(collection_ready_queue, trainer_done_queue) if sync_collection else None,
        env_steps_per_sync=env_steps_per_sync,
        obs_stats=shared_obs_normalizer_stats if obs_normalization else None,
        pack=(
            collector_pack_request_queue,
            collector_pack_ready_queue,
            collector_pack_shared_slots,
        ),
        recorder=TraceRecorder("offpolicy_collector", thread_time=trace_thread_time)
        if trace_enabled
        else None,
        parent_pid=kwargs.get("parent_pid"),
    )
    try:
        collector.setup(
            env_name, num_envs, sim_backend, env_cfg_override, seed, kwargs.get("nthread"),
            obs_dim, action_dim, actor_hidden_dim, use_layer_norm, actor_kwargs or {},
            weight_sync_name, weight_param_shapes, weight_sync_lock,
        )  # fmt: skip
        collector.run()
    finally:
        collector.shutdown()


class _Collector:
    """State of one collector process (see the module docstring for the loop)."""

    def __init__(
        self,
        stop_event: Any,
        replay: Any,
        metrics_queue: Any,
        algo_type: str,
        sync: tuple[Any, Any] | None,
        env_steps_per_sync: int,
        obs_stats: Any,
        pack: tuple[Any, Any, Any],
        recorder: TraceRecorder | None,
        parent_pid: int | None,
    ) -> None:
        self.stop_event = stop_event
        self.replay = replay
        self.replay.recorder = recorder
        self.metrics_queue = metrics_queue
        self.algo_type = algo_type
        self.sync = sync
        self.env_steps_per_sync = max(1, int(env_steps_per_sync))
        self.obs_stats = obs_stats
        self.pack = PackServer(*pack)
        self.recorder = recorder
        self.parent_pid = parent_pid
        if parent_pid is not None:  # a learner killed holding the replay's lock: do not wait on
            self.replay.while_waiting = self._raise_if_orphaned
        self.env: Any = None
        self.weights: SharedWeightSync | None = None
        self.stats = CollectorStats()

    @property
    def returns(self) -> collections.deque[float]:
        """Returns of the last 100 finished episodes."""
        return self.stats.returns

    @property
    def lengths(self) -> collections.deque[float]:
        """Lengths of the last 100 finished episodes."""
        return self.stats.lengths

    # -- setup / teardown ------------------------------------------------------------------

    def setup(
        self,
        env_name: str,
        num_envs: int,
        sim_backend: str,
        env_cfg_override: dict | None,
        seed: int | None,
        nthread: int | None,
        obs_dim: int | None,
        action_dim: int | None,
        hidden_dim: int,
        use_layer_norm: bool,
        actor_kwargs: dict,
        weight_sync_name: str,
        weight_param_shapes: Mapping[str, tuple[int, ...]],
        weight_sync_lock: Any,
    ) -> None:
        from unilab_jax.envs.vec_env import make

        env_seed = 0 if seed is None else int(seed)
        if seed is not None:
            torch.manual_seed(env_seed)
            np.random.seed(env_seed % 2**32)
        self.env = make(
            env_name, num_envs, sim_backend, env_cfg_override, env_seed, nthread=nthread
        )  # MJX ignores nthread
        self.state = self.env.init_state() if self.env.state is None else self.env.state
        obs_dim, action_dim = resolve_collector_actor_dims(self.env, obs_dim, action_dim)
        self.actor, self.actor_state = build_collector_actor(
            self.algo_type, obs_dim, action_dim, hidden_dim, use_layer_norm, num_envs,
            actor_kwargs, weight_param_shapes,
        )  # fmt: skip
        layout, _ = make_layout(self.actor_state)
        self.weights = SharedWeightSync.attach(
            weight_sync_name, layout, weight_sync_lock, self.recorder
        )
        self.version = self.weights.read_weights_into(self.actor_state, self._raise_if_orphaned)
        self.stats.start(num_envs)
        self.prev_dones = torch.zeros(num_envs)

    def shutdown(self) -> None:
        if self.recorder is not None and self.metrics_queue is not None:
            self._send({"trace_events": self.recorder.drain()}, block=True)
        if self.weights is not None:
            self.weights.close()
        if self.env is not None:
            self.env.close()
        self.replay.close()

    # -- helpers ---------------------------------------------------------------------------

    def _raise_if_orphaned(self) -> None:
        if self.parent_pid is not None and not parent_alive(self.parent_pid):
            raise RuntimeError("the learner process is gone")

    def _stopping(self) -> bool:
        if self.stop_event.is_set():
            return True
        if self.parent_pid is not None and not parent_alive(self.parent_pid):
            self.stop_event.set()
            return True
        return False

    def _send(self, message: dict[str, Any], block: bool = False) -> None:
        if self.metrics_queue is None:
            return
        try:
            if block:
                self.metrics_queue.put(message, timeout=1.0)
            else:
                self.metrics_queue.put_nowait(message)
        except queue.Full:
            pass  # the learner is behind on metrics; the next message carries fresh ones

    def _policy_input(self, obs: np.ndarray) -> torch.Tensor:
        return policy_input(obs, self.obs_stats)

    def _serve_pack_request(self) -> None:
        """B path: pack one requested batch into its shared slot (`collector_pack`)."""
        self.pack.serve(self.replay, self.recorder, self._stopping)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        steps_since_sync = 0
        while not self._stopping():
            self._step()
            steps_since_sync += 1
            if self.sync is not None and steps_since_sync >= self.env_steps_per_sync:
                t0 = time.perf_counter()
                self._handover()
                self.stats.add_time("sync_coordination_ms", time.perf_counter() - t0)
                steps_since_sync = 0
            if self.stats.end_iteration():
                self._send_metrics()

    def _step(self) -> None:
        rec = self.recorder
        t0 = time.perf_counter()
        with maybe_span(rec, "collector/check_weight_update", cat="collector"):
            if self.weights.version > self.version:
                self.version = self.weights.read_weights_into(
                    self.actor_state, self._raise_if_orphaned
                )
        t1 = time.perf_counter()
        state = self.state
        obs, critic = state.obs["obs"], state.obs.get("critic", state.obs["obs"])
        with maybe_span(rec, "collector/actor_infer_cpu", cat="collector"):
            # A privileged actor (HORA-SAC) also reads the privileged values (priv None else).
            policy_obs, priv = actor_inputs(self.algo_type, obs, critic, state.info, self.obs_stats)
            actions = sample_offpolicy_actions(
                self.actor, self.algo_type, policy_obs, self.prev_dones, priv
            )
        t2 = time.perf_counter()
        with maybe_span(rec, "collector/env_step", cat="collector"):
            actions_np = actions.numpy()
            nxt = self.env.step(actions_np)
        t3 = time.perf_counter()
        dones = nxt.terminated | nxt.truncated
        final = nxt.final_observation
        with maybe_span(rec, "collector/replay_add", cat="collector"):
            # `final_observation` equals `obs` where nothing ended and holds the true last
            # observation where an episode ended: exactly the bootstrap's next_obs.
            self.replay.add(
                obs, actions_np, nxt.reward, final["obs"], dones, nxt.truncated,
                critic=critic, next_critic=final.get("critic", final["obs"]),
            )  # fmt: skip
            self._serve_pack_request()
        t4 = time.perf_counter()
        self.stats.record_step(nxt, dones)
        self.prev_dones = torch.from_numpy(dones.astype(np.float32))
        self.state = nxt
        phases = (t1 - t0, t2 - t1, t3 - t2, t4 - t3)
        for key, dt in zip(COLLECTOR_TIMING_KEYS[:4], phases, strict=True):
            self.stats.add_time(key, dt)

    def _handover(self) -> None:
        """Sync mode: announce a finished chunk, then wait until the learner releases us."""
        ready_q, done_q = self.sync
        with maybe_span(self.recorder, "collector/signal_ready", cat="collector"):
            while not self._stopping():
                try:
                    ready_q.put(True, timeout=POLL_S)
                    break
                except queue.Full:
                    self._serve_pack_request()
        with maybe_span(self.recorder, "collector/wait_trainer_done", cat="collector"):
            while not self._stopping():
                try:
                    done_q.get(timeout=POLL_S)
                    break
                except queue.Empty:
                    self._serve_pack_request()
        if self.recorder is not None:
            self._send({"trace_events": self.recorder.drain()})

    def _send_metrics(self) -> None:
        message = self.stats.take_message(len(self.replay))
        if self.recorder is not None:
            message["trace_events"] = self.recorder.drain()
        self._send(message)


def collector_kwargs(loop: Any) -> dict[str, Any]:
    """Keyword arguments of `off_policy_collector_fn` (after `stop_event`) for a run of the
    torch loop ``loop`` (`torch_loop.TorchLoop`), from its settings and the run's IPC handles."""
    return {
        "env_name": loop.env_name,
        "num_envs": loop.num_envs,
        "replay_buffer": loop.replay_buffer,
        "weight_sync_name": loop.weight_sync.name,
        "weight_param_shapes": {
            k: tuple(v.shape) for k, v in loop.learner.actor.state_dict().items()
        },
        "algo_type": loop.algo_type,
        "actor_hidden_dim": loop.actor_hidden_dim,
        "use_layer_norm": loop.use_layer_norm,
        "learning_starts": loop.learning_starts,
        "metrics_queue": loop.metrics_queue,
        "weight_sync_lock": loop.weight_sync._lock,
        "sync_collection": loop.sync_collection,
        "collection_ready_queue": loop.collection_ready_queue,
        "trainer_done_queue": loop.trainer_done_queue,
        "env_steps_per_sync": loop.env_steps_per_sync,
        "obs_normalization": loop.obs_normalization,
        "shared_obs_normalizer_stats": loop.obs_stats,
        "sim_backend": loop.sim_backend,
        "env_cfg_override": loop.env_cfg_override,
        "obs_dim": loop.obs_dim,
        "action_dim": loop.action_dim,
        "actor_kwargs": loop.actor_kwargs,
        "seed": None if loop.seed is None else loop.seed + 1,
        "trace_enabled": loop.trace_enabled,
        "trace_thread_time": loop.trace_thread_time,
        **loop._batches.collector_kwargs(),
    }
