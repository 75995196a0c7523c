"""The reference UniLab's surfaces that users and authors of new algorithms meet, re-expressed
against the facade from the reference's own tests (unilabsim/UniLab @ 9aa57115):

- FlashSAC's reward statistics size themselves on their first rewards
  (``tests/algos/test_flash_sac_learner.py``: its ``RewardNormalizer`` takes no env count);
- ``from unilab.logging import OffPolicyLogger`` with the reference's constructor
  (``tests/utils/test_experiment_tracking.py``);
- the shared-memory classes its developer guide tells authors to reuse take its constructor
  arguments (``tests/ipc/test_replay_buffer.py``, ``test_shared_weight_sync.py``,
  ``test_shared_obs_stats.py``, ``test_async_runner.py``).

The checks mirror what those tests observe, through public attributes where the reference's
read private ones (its ``_storage`` / ``_obs_sl``: our ``storage`` / ``split_columns``), and
our return recursion where they differ on purpose (``docs/moving_from_unilab.md``).
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import queue
from typing import Any

import numpy as np
import pytest
import torch
from test_flash_sac_reference_api import ACT, CRITIC, OBS
from test_flash_sac_reference_api import batch as flash_batch

from unilab.ipc import AsyncRunner, ReplayBuffer, SharedObsNormStats, SharedWeightSync

torch.set_num_threads(1)  # 2 shared cores: keep the parent from competing with a child

SPAWN = mp.get_context("spawn")

# --- 1. FlashSAC's reward statistics, sized on first use ---------------------------------------

TINY = dict(actor_hidden_dim=16, critic_hidden_dim=16, actor_num_blocks=1, critic_num_blocks=1)


def test_reward_statistics_without_an_env_count_size_themselves_on_the_first_rewards():
    from unilab.algos.torch.flash_sac import RewardStatistics

    stats = RewardStatistics()  # the reference's RewardNormalizer(gamma, g_max, device)
    assert stats.num_envs == 0
    # The reference's feed (test_reward_normalizer_tracks_discounted_returns), gamma 0.5; ours
    # ends env 1's episode after step 0 (G = r + carried, carried = gamma (1 - done) G).
    stats.observe(torch.tensor([[2.0, 1.0], [4.0, 3.0]]), torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
                  0.5)  # fmt: skip
    assert stats.num_envs == 2
    torch.testing.assert_close(stats.carried / 0.5, torch.tensor([5.0, 3.0]))  # the last G
    torch.testing.assert_close(stats.abs_max, torch.tensor(5.0))  # the reference's g_r_max
    assert float(stats.count) == 4.0
    # Another env count later restarts the carried returns, as the reference's does.
    stats.observe(torch.ones(3), torch.zeros(3), 0.5)  # one step may be [num_envs]
    assert stats.carried.tolist() == [0.5, 0.5, 0.5] and float(stats.count) == 7.0
    # Given an env count, the statistics refuse another one.
    fixed = RewardStatistics(2)
    with pytest.raises(ValueError, match="rewards of 3 envs, but the statistics carry 2"):
        fixed.observe(torch.ones(1, 3), torch.zeros(1, 3), 0.5)


def test_a_flash_sac_learner_built_without_num_envs_takes_the_rewards_env_count():
    from unilab.algos.torch.flash_sac import FlashSACLearner, RewardStatistics

    # The reference's test_flashsac_critic_update_does_not_advance_reward_stats_from_sampled_batch.
    learner = FlashSACLearner(obs_dim=OBS, action_dim=ACT, critic_obs_dim=CRITIC, **TINY)
    learner.observe_rewards(torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2))
    before = learner.reward_stats.carried.clone()
    assert before.shape == (2,)
    learner.update_critic(flash_batch())
    torch.testing.assert_close(learner.reward_stats.carried, before)
    # Its checkpoint loads into a learner, and statistics, not yet sized
    # (test_flashsac_state_dict_round_trip).
    restored = FlashSACLearner(obs_dim=OBS, action_dim=ACT, critic_obs_dim=CRITIC, **TINY)
    restored.load_state_dict(learner.get_state_dict())
    torch.testing.assert_close(restored.reward_stats.carried, before)
    stats = RewardStatistics()
    stats.load_state_dict(learner.reward_stats.state_dict())
    assert stats.num_envs == 2 and float(stats.count) == float(learner.reward_stats.count)


# --- 2. OffPolicyLogger from unilab.logging ----------------------------------------------------

# The reference's OffPolicyLogger.__init__ (src/unilab/logging/offpolicy.py), read by hand.
REFERENCE_LOGGER = [
    ("algo_name", "RL"), ("max_iterations", 1500), ("num_envs", 4096), ("env_name", ""),
    ("obs_dim", 0), ("action_dim", 0), ("refresh_per_second", 4), ("log_dir", ""),
    ("log_backend", "tensorboard"), ("wandb_project", "unilab"), ("wandb_entity", None),
    ("wandb_name", ""), ("wandb_group", None), ("wandb_job_type", None), ("wandb_tags", None),
    ("wandb_notes", None),
]  # fmt: skip


def test_off_policy_logger_imports_from_unilab_logging_with_the_references_constructor():
    from unilab.logging import OffPolicyLogger

    params = list(inspect.signature(OffPolicyLogger).parameters.values())
    assert [(p.name, p.default) for p in params] == REFERENCE_LOGGER
    # The reference's positional order, and its calls (test_experiment_tracking.py).
    logger = OffPolicyLogger("FastSAC", 3, 8, "PendulumSwingup", 3, 1, 4, "", "none")
    try:
        assert (logger.algo_name, logger.max_iterations, logger.env_name) == (
            "FastSAC", 3, "PendulumSwingup"
        )  # fmt: skip
        assert (logger.obs_dim, logger.action_dim) == (3, 1)
        logger.start()
        logger.log_step(iteration=1, train_time=0.01, wait_time=0.0)
        logger.log_collector(total_steps=128, buffer_size=128, mean_reward=2.0)
        logger.log_status("Collector metrics updated")
        logger.log_save("/tmp/model_2.pt")
        logger.finish()
    finally:
        logger.close()


# --- 3. the shared-memory classes, with the reference's arguments ------------------------------

R_OBS, R_ACT = 8, 3
FIELDS = {"obs", "next_obs", "actions", "rewards", "dones", "truncated"}


def ref_buffer(capacity: int = 128) -> ReplayBuffer:
    return ReplayBuffer(capacity=capacity, obs_dim=R_OBS, action_dim=R_ACT, device="cpu")


def random_batch(n: int) -> tuple[torch.Tensor, ...]:
    return (torch.randn(n, R_OBS), torch.randn(n, R_ACT), torch.randn(n), torch.randn(n, R_OBS),
            torch.zeros(n), torch.zeros(n))  # fmt: skip


def test_replay_buffer_takes_the_references_capacity_in_rows():
    buf = ref_buffer()
    try:
        assert buf.capacity == 128 and int(buf.size[0]) == 0
        buf.add(*random_batch(16))
        assert int(buf.size[0]) == 16
        batch = buf.sample(32)
        assert set(batch) == FIELDS  # no critic columns: critic_dim defaults to 0
        assert batch["obs"].shape == (32, R_OBS) and batch["actions"].shape == (32, R_ACT)
        assert batch["rewards"].shape == (32,)
    finally:
        buf.close()
    # Positionally, in its order (capacity, obs_dim, action_dim, device, defer_gpu,
    # critic_dim, packed_cpu_storage); its critic_dim makes critic / next_critic mandatory.
    buf = ReplayBuffer(16, R_OBS, R_ACT, "cpu", False, 2, True)
    try:
        assert (buf.capacity, buf.obs_dim, buf.action_dim, buf.critic_dim) == (16, R_OBS, R_ACT, 2)
        with pytest.raises(ValueError, match="critic"):
            buf.add(*random_batch(4))
        buf.add(*random_batch(4), critic=torch.ones(4, 2), next_critic=torch.ones(4, 2))
        assert set(buf.sample(4)) == FIELDS | {"critic", "next_critic"}
    finally:
        buf.close()


def test_replay_buffer_of_the_references_arguments_wraps_as_its_ring():
    buf = ref_buffer(capacity=32)
    try:
        buf.add(*random_batch(48))  # more than it holds: the newest 32 stay
        assert int(buf.size[0]) == 32 and int(buf.ptr[0]) == 48
    finally:
        buf.close()
    buf = ref_buffer(capacity=32)
    try:
        buf.add(*random_batch(28))
        obs = torch.arange(8 * R_OBS, dtype=torch.float32).reshape(8, R_OBS)
        zeros = torch.zeros(8)
        buf.add(obs, torch.zeros(8, R_ACT), zeros + 99.0, torch.zeros(8, R_OBS), zeros, zeros)
        assert int(buf.ptr[0]) == 36 and int(buf.size[0]) == 32
        stored = buf.split_columns(buf.storage)["obs"]
        torch.testing.assert_close(stored[28:32], obs[:4])
        torch.testing.assert_close(stored[0:4], obs[4:8])
    finally:
        buf.close()


def test_replay_buffer_patches_terminal_next_obs_under_the_references_keyword():
    buf = ref_buffer(capacity=8)
    try:
        next_obs = torch.arange(4 * R_OBS, dtype=torch.float32).reshape(4, R_OBS)
        mask = torch.tensor([False, True, False, True])
        terminal = torch.full((4, R_OBS), 99.0)
        buf.add(torch.zeros(4, R_OBS), torch.zeros(4, R_ACT), torch.zeros(4), next_obs,
                torch.tensor([0.0, 1.0, 0.0, 1.0]), torch.tensor([0.0, 1.0, 0.0, 0.0]),
                terminal_mask=mask, terminal_next_obs=terminal)  # fmt: skip
        expected = next_obs.clone()
        expected[mask] = terminal[mask]
        torch.testing.assert_close(buf.split_columns(buf.storage[:4])["next_obs"], expected)
    finally:
        buf.close()


def tiny_shapes() -> dict[str, torch.Size]:
    return {"layer.weight": torch.Size([4, 3]), "layer.bias": torch.Size([4])}


def random_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=g) for name, shape in tiny_shapes().items()}


def zeros_like_shapes() -> dict[str, torch.Tensor]:
    return {name: torch.zeros(shape) for name, shape in tiny_shapes().items()}


def assert_weights_equal(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    for name in tiny_shapes():
        torch.testing.assert_close(got[name], want[name])


def test_weight_sync_takes_the_references_shapes_and_from_state_dict():
    ws = SharedWeightSync(tiny_shapes(), create=True)
    try:
        assert ws.version == 0  # the raw constructor starts at 0
        weights = random_weights()
        ws.write_weights(weights)
        assert ws.version == 1
        ws.write_weights(weights)
        assert ws.version == 2
        read = zeros_like_shapes()
        assert ws.read_weights_into(read) == 2
        assert_weights_equal(read, weights)
    finally:
        ws.cleanup()
    weights = random_weights(1)
    ws = SharedWeightSync.from_state_dict(weights, create=True)
    try:
        assert ws.version >= 1 and ws.name
        read = zeros_like_shapes()
        assert ws.read_weights_into(read) >= 1
        assert_weights_equal(read, weights)
        ws.close()  # no unlink: an attached process's call
    finally:
        ws.cleanup()  # the owner still unlinks
        ws.cleanup()  # idempotent


def test_weight_sync_attaches_by_name_with_create_false_with_or_without_a_lock():
    owner = SharedWeightSync.from_state_dict(random_weights(2), create=True)
    attached = SharedWeightSync(tiny_shapes(), create=False, shm_name=owner.name, lock=None)
    try:
        assert attached.version == owner.version
        read, owners = zeros_like_shapes(), zeros_like_shapes()
        attached.read_weights_into(read)
        owner.read_weights_into(owners)
        assert_weights_equal(read, owners)
        new = random_weights(3)
        attached.write_weights(new)  # the lockless path
        read = zeros_like_shapes()
        assert owner.read_weights_into(read) == 2
        assert_weights_equal(read, new)
    finally:
        attached.close()
        owner.cleanup()


def _attach_and_write(shm_name: str, lock: Any, shapes: dict, results: Any) -> None:
    """A spawned process attaches by name (the reference's collector) and writes."""
    ws = SharedWeightSync(shapes, create=False, shm_name=shm_name, lock=lock)
    weights = {name: torch.full(shape, 7.0) for name, shape in shapes.items()}
    ws.write_weights(weights)
    results.put(ws.version)
    ws.close()


def test_weight_sync_attached_by_name_in_a_spawned_process_writes_to_the_owner():
    ws = SharedWeightSync(tiny_shapes(), create=True)
    results = SPAWN.Queue()
    proc = SPAWN.Process(target=_attach_and_write,
                         args=(ws.name, ws._lock, tiny_shapes(), results))  # fmt: skip
    proc.start()
    try:
        version = results.get(timeout=60)
    finally:
        proc.join(30)
        results.close()
    try:
        assert proc.exitcode == 0
        read = zeros_like_shapes()
        assert ws.read_weights_into(read) == version == 1
        assert_weights_equal(read, {n: torch.full(s, 7.0) for n, s in tiny_shapes().items()})
    finally:
        ws.cleanup()


class _ThreadingContext:
    """The reference test's context: a thread queue, whose ``empty()`` is exact."""

    @staticmethod
    def Queue(maxsize: int = 0) -> queue.Queue:  # noqa: N802 - multiprocessing's name
        return queue.Queue(maxsize=maxsize)


def test_obs_stats_take_the_references_context_and_one_tuple():
    stats = SharedObsNormStats(_ThreadingContext())
    try:
        assert stats.get() is None
        mean, std = np.ones(8, dtype=np.float32), np.full(8, 2.0, dtype=np.float32)
        stats.put((mean, std))
        got = stats.get()
        assert got is not None
        np.testing.assert_array_equal(got[0], mean)
        np.testing.assert_array_equal(got[1], std)
        for i in range(3):  # more than its bound: never blocks, the latest wins
            stats.put((np.full(4, float(i), dtype=np.float32), np.ones(4, dtype=np.float32)))
        assert stats.get()[0].tolist() == [2.0] * 4
    finally:
        stats.close()
    spawned = SharedObsNormStats(SPAWN)  # a multiprocessing context, as the reference's runners
    spawned.close()


class _MinimalRunner(AsyncRunner):
    """The smallest concrete runner: the abstract methods a subclass must give, doing nothing,
    so the base class's own constructor, close and collector start are what is tested."""

    def _get_default_device(self) -> str:
        return "default-device"

    def _build_learner(self) -> Any:
        return None

    def _collector_fn(self, stop_event: Any, **kwargs: Any) -> None:
        pass

    def learn(self, max_iterations: int, save_interval: int = 50, log_dir: str = "logs") -> None:
        pass


def minimal_runner(**kwargs: Any) -> _MinimalRunner:
    return _MinimalRunner(env_name="DummyEnv", env_cfg_overrides={}, rl_cfg={"gamma": 0.99},
                       **kwargs)  # fmt: skip


def test_async_runner_takes_the_references_arguments():
    r = minimal_runner()
    assert (r.env_name, r.env_cfg_overrides, r.rl_cfg) == ("DummyEnv", {}, {"gamma": 0.99})
    assert r.device == r.collector_device == "default-device"  # _get_default_device()
    assert (r.sim_backend, r.num_envs) == ("mujoco", 4096)
    assert r._shared_resources == [] and r._collector_process is None
    r = minimal_runner(device="cpu", collector_device="cpu", sim_backend="motrix", num_envs=64)
    assert (r.device, r.collector_device, r.sim_backend, r.num_envs) == ("cpu", "cpu", "motrix", 64)
    r.close()
    r.close()  # idempotent, with no collector


def test_async_runner_close_releases_resources_appended_directly():
    """Real resources appended as the reference's runners do: two weight blocks (released by
    ``cleanup``: their segments leave ``/dev/shm``) and a statistics queue (by ``close``)."""
    from pathlib import Path

    r = minimal_runner()
    blocks = [SharedWeightSync({"w": (3,)}) for _ in range(2)]
    stats = SharedObsNormStats(SPAWN)
    r._shared_resources.extend([*blocks, stats])
    assert all(Path("/dev/shm", b.name).exists() for b in blocks)
    r.close()
    assert not any(Path("/dev/shm", b.name).exists() for b in blocks)
    assert stats._queue is None


def _report_kwargs(stop_event: Any, report_queue: Any, token: str, sim_backend: str = "missing"):
    """The reference test's collector: it receives exactly the kwargs it was started with."""
    report_queue.put({"sim_backend": sim_backend, "token": token})
    stop_event.wait(timeout=30)


def test_async_runner_starts_a_collector_with_the_stop_event_among_its_kwargs():
    r = minimal_runner(sim_backend="motrix")
    report_queue = SPAWN.Queue()
    try:
        r._start_collector(
            target_fn=_report_kwargs,
            kwargs={"stop_event": r._stop_event, "report_queue": report_queue, "token": "ok"},
        )
        assert r._collector_process is not None
        payload = report_queue.get(timeout=60)
        assert payload == {"sim_backend": "missing", "token": "ok"}  # no runner fields merged
        process = r._collector_process
    finally:
        r.close()
        report_queue.close()
    assert r._stop_event.is_set()
    assert not process.is_alive() and process.exitcode == 0
