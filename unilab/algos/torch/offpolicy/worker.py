"""Off-policy collector for SAC and TD3.

Collects (obs, action, reward, next_obs, done) transitions using the current actor policy. Runs
in a subprocess; writes to ReplayBuffer.

One loop iteration (reference §1.3) is one vectorised `env.step`: refresh the actor when the
learner published new weights, normalise the policy input with the learner's statistics, sample
exploration actions, step, write the transitions (the true final observation replaces
`next_obs` of ended episodes), serve a pending pack request (B path), keep episode statistics,
and, with `sync_collection`, hand over every `env_steps_per_sync` steps and wait for the
learner. Every 10 steps a metrics message goes to the learner.

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

from unilab.algos.torch.common.normalization import NORMALIZER_EPS
from unilab.algos.torch.registry import build_actor, get_torch_algo
from unilab.ipc.async_runner import parent_alive
from unilab.ipc.weight_sync import SharedWeightSync, _make_layout
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = [
    "COLLECTOR_TIMING_KEYS",
    "off_policy_collector_fn",
    "resolve_collector_actor_dims",
    "resolve_offpolicy_actor_priv_info",
    "sample_offpolicy_actions",
]

#: Exclusive phases of one collector iteration, reported as average ms per iteration.
COLLECTOR_TIMING_KEYS = (
    "weight_sync_ms",
    "action_select_ms",
    "env_step_ms",
    "replay_ms",
    "sync_coordination_ms",
)
METRICS_EVERY = 10  # collector iterations between two metrics messages
_POLL_S = 0.05
_EXTRA_KWARGS = ("parent_pid", "nthread", "torch_threads")


def resolve_collector_actor_dims(
    env: Any, obs_dim: int | None = None, action_dim: int | None = None
) -> tuple[int, int]:
    """Resolve actor dims for the collector.

    Prefer explicit dims from the parent process so learner and collector build identical
    actor shapes on override-heavy env paths.
    """
    if obs_dim is None:
        obs_dim = int(env.obs_groups_spec["obs"][0])
    if action_dim is None:
        action_dim = int(env.action_space.shape[0])
    return int(obs_dim), int(action_dim)


def sample_offpolicy_actions(
    actor: torch.nn.Module,
    algo_type: str,
    obs_torch: torch.Tensor,
    prev_dones_torch: torch.Tensor,
    priv_info_torch: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample collector actions using the algorithm's exploration policy.

    The policy is the torch registry's `explore` of `algo_type` (sac / td3:
    `actor.explore(obs, dones=prev_dones, deterministic=False)`; TD3 resamples the noise scale
    of envs whose previous step ended). Other algorithms raise `ValueError`.
    """
    explore = get_torch_algo(algo_type).explore
    return explore(actor, obs_torch, prev_dones_torch, priv_info_torch)


def resolve_offpolicy_actor_priv_info(
    *, algo_type: str, obs_np: np.ndarray, critic_np: np.ndarray | None, info: Mapping[str, Any]
) -> np.ndarray | None:
    """Collector-side actor context for privileged off-policy actors: None.

    The reference's privileged actor (HORA-SAC) read it from ``info["critic_info"]`` or the
    critic columns beyond the actor's; neither algorithm of this project (``sac``, ``td3``) has
    one, so the collector passes no context. The reference's signature, kept.
    """
    del algo_type, obs_np, critic_np, info
    return None


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
        self.pack_requests, self.pack_ready, self.pack_slots = pack
        self.pending_pack: dict[str, Any] | None = None
        self.recorder = recorder
        self.parent_pid = parent_pid
        self.env: Any = None
        self.weights: SharedWeightSync | None = None
        self.timing = dict.fromkeys(COLLECTOR_TIMING_KEYS, 0.0)
        self.timing_steps = 0
        self.returns: collections.deque[float] = collections.deque(maxlen=100)
        self.lengths: collections.deque[float] = collections.deque(maxlen=100)
        self.components: dict[str, list[float]] = {}
        self.timeouts = 0
        self.terminations = 0
        self.total_steps = 0

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
        self.actor = build_actor(
            self.algo_type, obs_dim, action_dim, hidden_dim, use_layer_norm, "cpu", num_envs,
            **actor_kwargs,
        )  # fmt: skip
        self.actor.eval()
        self.actor_state = self.actor.state_dict()
        shapes = {k: tuple(v.shape) for k, v in self.actor_state.items()}
        expected = {k: tuple(v) for k, v in weight_param_shapes.items()}
        if shapes != expected:
            raise ValueError(
                f"collector actor {shapes} does not match the learner's actor {expected}; "
                "pass the learner's actor_hidden_dim / use_layer_norm / actor_kwargs"
            )
        layout, _ = _make_layout(self.actor_state)
        self.weights = SharedWeightSync.attach(
            weight_sync_name, layout, weight_sync_lock, self.recorder
        )
        self.version = self.weights.read_weights_into(self.actor_state)
        self.num_envs = num_envs
        self.ep_return = np.zeros(num_envs, dtype=np.float64)
        self.ep_length = np.zeros(num_envs, dtype=np.int64)
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
        x = torch.from_numpy(obs)
        stats = self.obs_stats.get() if self.obs_stats is not None else None
        if stats is None:
            return x
        mean, std = stats
        return (x - torch.from_numpy(mean)) / (torch.from_numpy(std) + NORMALIZER_EPS)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        steps_since_sync = 0
        while not self._stopping():
            self._step()
            steps_since_sync += 1
            if self.sync is not None and steps_since_sync >= self.env_steps_per_sync:
                t0 = time.perf_counter()
                self._handover()
                self.timing["sync_coordination_ms"] += (time.perf_counter() - t0) * 1e3
                steps_since_sync = 0
            self.timing_steps += 1
            if self.timing_steps >= METRICS_EVERY:
                self._send_metrics()

    def _step(self) -> None:
        rec = self.recorder
        t0 = time.perf_counter()
        with maybe_span(rec, "collector/check_weight_update", cat="collector"):
            if self.weights.version > self.version:
                self.version = self.weights.read_weights_into(self.actor_state)
        t1 = time.perf_counter()
        state = self.state
        obs, critic = state.obs["obs"], state.obs.get("critic", state.obs["obs"])
        with maybe_span(rec, "collector/actor_infer_cpu", cat="collector"):
            actions = sample_offpolicy_actions(
                self.actor, self.algo_type, self._policy_input(obs), self.prev_dones
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
        self._bookkeeping(nxt, dones)
        self.prev_dones = torch.from_numpy(dones.astype(np.float32))
        self.state = nxt
        phases = (t1 - t0, t2 - t1, t3 - t2, t4 - t3)
        for key, dt in zip(COLLECTOR_TIMING_KEYS[:4], phases, strict=True):
            self.timing[key] += dt * 1e3

    def _bookkeeping(self, nxt: Any, dones: np.ndarray) -> None:
        self.total_steps += self.num_envs
        self.ep_return += nxt.reward
        self.ep_length += 1
        ended = np.flatnonzero(dones)
        if ended.size:
            self.returns.extend(self.ep_return[ended].tolist())
            self.lengths.extend(self.ep_length[ended].tolist())
            self.ep_return[ended] = 0.0
            self.ep_length[ended] = 0
            self.timeouts += int(np.count_nonzero(nxt.truncated))
            self.terminations += int(np.count_nonzero(nxt.terminated & ~nxt.truncated))
        for key, value in nxt.info.get("log", {}).items():
            if key.startswith("reward/"):
                self.components.setdefault(key, []).append(float(value))

    def _handover(self) -> None:
        """Sync mode: announce a finished chunk, then wait until the learner releases us."""
        ready_q, done_q = self.sync
        with maybe_span(self.recorder, "collector/signal_ready", cat="collector"):
            while not self._stopping():
                try:
                    ready_q.put(True, timeout=_POLL_S)
                    break
                except queue.Full:
                    self._serve_pack_request()
        with maybe_span(self.recorder, "collector/wait_trainer_done", cat="collector"):
            while not self._stopping():
                try:
                    done_q.get(timeout=_POLL_S)
                    break
                except queue.Empty:
                    self._serve_pack_request()
        if self.recorder is not None:
            self._send({"trace_events": self.recorder.drain()})

    def _send_metrics(self) -> None:
        steps = max(self.timing_steps, 1)
        message: dict[str, Any] = {
            "total_steps": self.total_steps,
            "buffer_size": len(self.replay),
            "collector_timing_ms": {k: v / steps for k, v in self.timing.items()},
            "reward_components": {k: float(np.mean(v)) for k, v in self.components.items()},
        }
        if self.returns:
            message["mean_ep_reward"] = float(np.mean(self.returns))
            message["mean_ep_length"] = float(np.mean(self.lengths))
        done_events = self.timeouts + self.terminations
        if done_events:
            message["timeout_rate"] = self.timeouts / done_events
            message["terminated_rate"] = self.terminations / done_events
        if self.recorder is not None:
            message["trace_events"] = self.recorder.drain()
        self._send(message)
        self.timing = dict.fromkeys(COLLECTOR_TIMING_KEYS, 0.0)
        self.timing_steps = 0
        self.components = {}
        self.timeouts = self.terminations = 0

    # -- B path: pack sampled batches into shared host slots ---------------------------------

    def _serve_pack_request(self) -> None:
        """Pack one requested batch into its shared slot once the replay is new enough."""
        if self.pack_requests is None:
            return
        if self.pending_pack is None:
            try:
                self.pending_pack = self.pack_requests.get_nowait()
            except queue.Empty:
                return
        request = self.pending_pack
        if int(self.replay.ptr.item()) < request["min_snapshot_ptr"]:
            return  # deferred until a newer chunk is in the buffer
        self.pending_pack = None
        if request.get("learner_hot_gpu_slot") == request["shared_slot"]:
            raise ValueError(
                f"pack request {request['tick_id']} targets slot {request['shared_slot']}, "
                "which the learner is reading"
            )
        begin = time.perf_counter_ns()
        with maybe_span(self.recorder, "collector/cpu_pack_sample_batch", cat="collector"):
            generator = torch.Generator().manual_seed(int(request["sample_seed"]))
            rows = self.replay.sample_rows(int(request["sample_count"]), generator)
            self.pack_slots[int(request["shared_slot"])].copy_(rows)
        reply = {
            "tick_id": request["tick_id"],
            "shared_slot": request["shared_slot"],
            "snapshot_ptr": int(self.replay.ptr.item()),
            "pack_begin_ns": begin,
            "pack_end_ns": time.perf_counter_ns(),
        }
        while not self._stopping():
            try:
                self.pack_ready.put(reply, timeout=_POLL_S)
                return
            except queue.Full:
                continue
