"""Torch-path IPC objects: replay ring (incl. torn reads under a real writer process), weight
sync and obs-stats channel across a spawned process, and clean-up of shared memory."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch
from leftovers import shm_entries

from unilab.ipc import ReplayBuffer, SharedObsNormStats, SharedWeightSync, StopFlag

torch.set_num_threads(1)  # 2 shared cores: keep the parent from competing with the child

SPAWN = mp.get_context("spawn")
OBS, ACT, CRITIC = 3, 2, 4
ID_MOD = 2**22  # row ids stay exact in float32


def transitions(n: int, base: float = 0.0) -> dict[str, torch.Tensor]:
    """Distinct, recognisable values per field."""
    r = torch.arange(n, dtype=torch.float32)[:, None] + base
    return dict(
        obs=r + torch.zeros(n, OBS), actions=r + 0.1 + torch.zeros(n, ACT), rewards=r[:, 0] + 0.2,
        next_obs=r + 0.3 + torch.zeros(n, OBS), dones=torch.zeros(n), truncated=torch.zeros(n),
        critic=r + 0.4 + torch.zeros(n, CRITIC), next_critic=r + 0.5 + torch.zeros(n, CRITIC),
    )  # fmt: skip


def make_buffer(capacity_n: int = 2, num_envs: int = 3) -> ReplayBuffer:
    return ReplayBuffer(capacity_n, num_envs, OBS, ACT, CRITIC)


# -- ReplayBuffer, single process ---------------------------------------------------------------


def test_add_packs_reference_columns_and_patches_terminal_next_obs():
    buf = make_buffer()
    assert buf.width == 2 * OBS + ACT + 3 + 2 * CRITIC
    t = transitions(3)
    t["dones"] = torch.tensor([0.0, 1.0, 0.0])
    mask = torch.tensor([False, True, False])
    buf.add(**t, terminal_mask=mask, terminal_obs=torch.full((3, OBS), -7.0),
            terminal_critic=torch.full((3, CRITIC), -9.0))  # fmt: skip
    cols = buf.split_columns(buf.storage[:3])
    assert torch.equal(cols["obs"], t["obs"]) and torch.equal(cols["actions"], t["actions"])
    assert torch.equal(cols["rewards"], t["rewards"]) and torch.equal(cols["dones"], t["dones"])
    assert torch.equal(cols["critic"], t["critic"])
    assert torch.equal(cols["next_obs"][[0, 2]], t["next_obs"][[0, 2]])
    assert torch.equal(cols["next_obs"][1], torch.full((OBS,), -7.0))  # the true last obs
    assert torch.equal(cols["next_critic"][1], torch.full((CRITIC,), -9.0))
    buf.close()


def test_add_wraps_at_ptr_mod_capacity_with_monotonic_ptr():
    buf = make_buffer(capacity_n=2, num_envs=3)  # 6 rows
    for step in range(3):
        buf.add(**transitions(3, base=10.0 * step))
    assert int(buf.ptr) == 9 and int(buf.size) == 6 and len(buf) == 6
    assert buf.storage[:3, 0].tolist() == [20.0, 21.0, 22.0]  # third write wrapped to slot 0
    assert buf.storage[3:, 0].tolist() == [10.0, 11.0, 12.0]
    buf.add(**transitions(4, base=30.0))  # crosses the end: slots 3, 4, 5, 0
    assert buf.storage[:, 0].tolist() == [33.0, 21.0, 22.0, 30.0, 31.0, 32.0]
    assert int(buf.ptr) == 13
    buf.close()


def test_sample_returns_reference_keys_and_shapes_from_written_rows():
    buf = make_buffer()
    with pytest.raises(RuntimeError, match="empty"):
        buf.sample(4)
    buf.add(**transitions(3))
    batch = buf.sample(64, generator=torch.Generator().manual_seed(0))
    assert set(batch) == {"obs", "next_obs", "actions", "rewards", "dones", "truncated",
                          "critic", "next_critic"}  # fmt: skip
    assert batch["obs"].shape == (64, OBS) and batch["rewards"].shape == (64,)
    assert batch["critic"].shape == (64, CRITIC) and batch["obs"].device.type == "cpu"
    assert set(batch["obs"][:, 0].tolist()) == {0.0, 1.0, 2.0}  # only rows [0, size)
    buf.close()


def test_add_without_critic_raises_when_critic_dim_positive():
    buf = make_buffer()
    t = transitions(3)
    del t["critic"]
    with pytest.raises(ValueError, match="critic"):
        buf.add(**t)
    buf.close()


def test_sample_skips_slots_of_a_write_in_progress():
    """A claimed-but-unpublished write (here: half garbage) is never visible to `sample`."""
    buf = make_buffer(capacity_n=3, num_envs=2)  # 6 rows
    for step in range(3):
        buf.add(**transitions(2, base=10.0 * step))
    start = buf._begin_write(2)  # will overwrite slots 0, 1 (the oldest rows)
    buf._copy_rows(start, torch.full((1, buf.width), float("nan")))  # torn: 1 of 2 rows copied
    batch = buf.sample(2000, generator=torch.Generator().manual_seed(1))
    assert not torch.isnan(batch["obs"]).any()
    assert set(batch["obs"][:, 0].tolist()) == {10.0, 11.0, 20.0, 21.0}
    buf._copy_rows(start, torch.full((2, buf.width), 99.0))
    buf._publish(start + 2)
    assert 99.0 in buf.sample(2000)["obs"][:, 0].tolist()
    buf.close()


def test_buffer_pickles_without_its_recorder_and_lock_wait_hook():
    from unilab.logging import TraceRecorder

    buf = make_buffer()
    buf.recorder = TraceRecorder("test")
    buf.while_waiting = print
    state = buf.__getstate__()  # the Lock inside only pickles while spawning a process
    assert state["recorder"] is None and state["while_waiting"] is None
    assert state["storage"] is buf.storage
    assert buf.recorder is not None and buf.while_waiting is print
    buf.close()


# -- ReplayBuffer under a concurrent writer process ---------------------------------------------


def _writer(buf: ReplayBuffer, started, stop, max_rows: int) -> None:
    """Collector stand-in: every column of row `a` (absolute row number) holds `a % ID_MOD`."""
    torch.set_num_threads(1)
    n = buf.num_envs
    zeros = {d: torch.zeros(n, w) for d, w in (("o", buf.obs_dim), ("a", buf.action_dim),
                                                ("c", buf.critic_dim))}  # fmt: skip
    while not stop.is_set() and int(buf.ptr) < max_rows:
        ids = ((int(buf.ptr) + torch.arange(n)) % ID_MOD).float()
        col = ids[:, None]
        buf.add(obs=zeros["o"] + col, actions=zeros["a"] + col, rewards=ids, next_obs=zeros["o"]
                + col, dones=ids, truncated=ids, critic=zeros["c"] + col,
                next_critic=zeros["c"] + col)  # fmt: skip
        if int(buf.ptr) >= buf.capacity:
            started.set()
    buf.close()


def _torn_rows(rows: torch.Tensor) -> int:
    return int((rows != rows[:, :1]).any(dim=1).sum())


def test_concurrent_writer_process_never_yields_torn_rows():
    # 64 slots of ~2 KB rows: the writer laps the ring every 4 adds, so sampled slots are
    # rewritten while they are gathered all the time.
    buf = ReplayBuffer(4, 16, obs_dim=128, action_dim=8, critic_dim=128)
    started, stop = SPAWN.Event(), SPAWN.Event()
    proc = SPAWN.Process(target=_writer, args=(buf, started, stop, 2**30), daemon=True)
    proc.start()
    try:
        assert started.wait(60), "writer process did not start"
        ptr0 = int(buf.ptr)
        batches, batch_size, torn, raw_torn = 0, 256, 0, 0
        gen = torch.Generator().manual_seed(0)
        # At least 400 batches, and on until the control has shown that tears do happen here.
        while batches < 400 or (raw_torn == 0 and batches < 4000):
            batches += 1
            rows = buf.sample_rows(batch_size, generator=gen)
            torn += _torn_rows(rows)
            # Control: the reference's unprotected gather, on the same live ring.
            raw = buf.storage[torch.randint(len(buf), (batch_size,), generator=gen)]
            raw_torn += _torn_rows(raw)
        concurrent_writes = (int(buf.ptr) - ptr0) // buf.num_envs
    finally:
        stop.set()
        proc.join(30)
    assert proc.exitcode == 0
    print(f"sampled {batches * batch_size} rows during {concurrent_writes} concurrent adds; "
          f"torn: {torn} (protected), {raw_torn} (unprotected control)")  # fmt: skip
    assert concurrent_writes > batches  # the writer really ran alongside the reads
    assert raw_torn > 0  # the test can see a torn row when there is one
    assert torn == 0
    buf.close()


# -- SharedWeightSync and SharedObsNormStats across a spawned process ---------------------------


def _actor() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))


def _reader(sync: SharedWeightSync, stats: SharedObsNormStats, results) -> None:
    """Collector stand-in: read the weights into a fresh actor and the latest obs stats."""
    actor = _actor()
    sd = actor.state_dict()
    version = sync.read_weights_into(sd)
    got = stats.get()
    results.put(({k: v.numpy().copy() for k, v in sd.items()}, version, got, stats.get()))
    sync.close()


def test_spawned_reader_gets_weights_version_and_stats_then_cleanup_unlinks():
    torch.manual_seed(0)
    actor = _actor()
    actor.train()(torch.randn(8, 3))  # moves BatchNorm buffers, num_batches_tracked -> 1
    sync = SharedWeightSync(actor.state_dict())
    assert sync.version == 0
    with torch.no_grad():
        actor[0].weight.add_(1.0)
    assert sync.write_weights(actor.state_dict()) == 1
    assert sync.write_weights(actor.state_dict()) == 2
    stats = SharedObsNormStats()
    stats.put(np.zeros(3), np.ones(3))
    stats.put(torch.full((3,), 5.0), torch.full((3,), 6.0))  # replaces the first
    results = SPAWN.Queue()
    proc = SPAWN.Process(target=_reader, args=(sync, stats, results), daemon=True)
    proc.start()
    try:
        values, version, got, got_again = results.get(timeout=60)
    finally:
        proc.join(30)
    assert proc.exitcode == 0 and version == 2
    for name, tensor in actor.state_dict().items():
        np.testing.assert_array_equal(values[name], tensor.numpy(), err_msg=name)
    assert values["1.num_batches_tracked"].dtype == np.int64
    assert got is not None and got_again is not None  # sticky after draining
    np.testing.assert_array_equal(got[0], np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(got_again[1], np.full(3, 6.0, np.float32))
    assert sync.name.lstrip("/") in shm_entries()
    sync.cleanup()
    sync.cleanup()  # idempotent
    assert sync.name.lstrip("/") not in shm_entries()
    stats.close()
    results.close()


def test_weight_sync_rejects_a_different_state_dict():
    sync = SharedWeightSync(_actor().state_dict())
    try:
        with pytest.raises(KeyError):
            sync.write_weights({"x": torch.zeros(1)})
        wrong = _actor().state_dict()
        wrong["0.weight"] = torch.zeros(2, 2)
        with pytest.raises(ValueError, match="0.weight"):
            sync.read_weights_into(wrong)
    finally:
        sync.cleanup()
    with pytest.raises(RuntimeError, match="closed"):
        _ = sync.version


def test_obs_stats_get_is_none_before_put_then_sticky_latest():
    stats = SharedObsNormStats()
    assert stats.get() is None
    for i in range(5):  # more puts than maxsize never block: put drains first
        stats.put(np.full(2, float(i)), np.ones(2))
    deadline = time.monotonic() + 5
    while ((got := stats.get()) is None or got[0][0] != 4.0) and time.monotonic() < deadline:
        time.sleep(0.01)  # the queue's feeder thread delivers asynchronously
    assert got is not None and got[0].tolist() == [4.0, 4.0]
    assert got[0].dtype == np.float32
    assert stats.get()[0].tolist() == [4.0, 4.0]  # nothing new queued: last value kept
    stats.close()


def test_replay_and_weight_sync_emit_reference_trace_names():
    from unilab.logging import TraceRecorder

    rec = TraceRecorder("offpolicy_learner", thread_time=True)
    buf = make_buffer()
    buf.recorder = rec
    buf.add(**transitions(3))
    buf.sample(4)
    sync = SharedWeightSync(_actor().state_dict(), recorder=rec)
    try:
        sync.write_weights(_actor().state_dict())
        sync.read_weights_into(_actor().state_dict())
    finally:
        sync.cleanup()
    names = [e["name"] for e in rec.events if e["ph"] in "XC"]
    assert names == [
        "replay/add", "replay/sample_indices", "replay/sample",
        "weight_sync/write_weights_d2h", "weight_sync/write_thread_cpu_us",
        "weight_sync/read_weights_into_cpu_actor", "weight_sync/read_thread_cpu_us",
    ]  # fmt: skip
    buf.close()


def _die_holding_the_lock(shared: SharedWeightSync | ReplayBuffer, started) -> None:
    shared._lock.acquire()
    started.set()
    os.kill(os.getpid(), signal.SIGKILL)  # a collector killed mid-read: the lock stays taken


def _leave_locked(shared: SharedWeightSync | ReplayBuffer) -> None:
    """A spawned process takes ``shared``'s lock and is SIGKILLed holding it."""
    started = SPAWN.Event()
    proc = SPAWN.Process(target=_die_holding_the_lock, args=(shared, started), daemon=True)
    proc.start()
    assert started.wait(60)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL


class _PeerGone:
    """A liveness check that finds the process on the other side dead; counts its calls."""

    calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise RuntimeError("the other process is gone")


def test_a_writer_is_not_blocked_forever_by_a_reader_killed_holding_the_lock():
    sync = SharedWeightSync(_actor().state_dict())
    try:
        _leave_locked(sync)
        gone = _PeerGone()
        with pytest.raises(RuntimeError, match="the other process is gone"):
            sync.write_weights(_actor().state_dict(), gone)
        assert gone.calls == 1  # asked after the first second, not never
    finally:
        sync.cleanup()


def test_a_reading_collector_is_not_blocked_forever_by_a_learner_killed_holding_the_lock():
    sync = SharedWeightSync(_actor().state_dict())
    try:
        _leave_locked(sync)  # a learner killed mid-write
        gone = _PeerGone()
        with pytest.raises(RuntimeError, match="the other process is gone"):
            sync.read_weights_into(_actor().state_dict(), gone)
        assert gone.calls == 1
    finally:
        sync.cleanup()


def test_a_sampling_learner_is_not_blocked_forever_by_a_writer_killed_holding_the_lock():
    buf = make_buffer()
    buf.add(**transitions(3))
    try:
        _leave_locked(buf)
        buf.while_waiting = gone = _PeerGone()
        with pytest.raises(RuntimeError, match="the other process is gone"):
            buf.sample(4)
        assert gone.calls == 1
    finally:
        buf.close()


def _spin_on(flag: StopFlag, started) -> None:
    started.set()
    while not flag.is_set():  # a collector polling its stop event, killed mid-poll
        pass
    os._exit(3)


def test_the_stop_flag_is_set_after_a_collector_killed_while_polling_it():
    """A `multiprocessing.Event` here hung the learner's `close()` for good (its lock died
    with the collector); the flag must be settable and seen by a fresh process."""
    flag = StopFlag(SPAWN)
    started = SPAWN.Event()
    proc = SPAWN.Process(target=_spin_on, args=(flag, started), daemon=True)
    proc.start()
    assert started.wait(60)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    setter = threading.Thread(target=flag.set, daemon=True)
    setter.start()
    setter.join(10)
    assert not setter.is_alive(), "set() blocked after the poller was killed"
    assert flag.is_set() and flag.wait(0)
    late = SPAWN.Process(target=_spin_on, args=(flag, started), daemon=True)
    late.start()
    late.join(60)
    assert late.exitcode == 3  # a process spawned with the flag sees it set
    flag.clear()
    assert not flag.wait(0.02)
