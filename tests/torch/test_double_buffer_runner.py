"""B path: `DoubleBufferOffPolicyRunner` and its double-buffer pipeline.

Pipeline unit tests drive `DoubleBufferPipeline` with thread queues and a fake collector
thread (no process). Only two tests spawn a collector (`learn`), on PendulumSwingup."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path

import pytest
import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.offpolicy.double_buffer_runner import (
    DoubleBufferOffPolicyRunner,
    DoubleBufferPipeline,
)
from unilab.algos.torch.offpolicy.runner import OffPolicyRunner

pytestmark = pytest.mark.timeout(300)

torch.set_num_threads(1)  # 2 shared cores: keep the parent from competing with the child

ENV = "PendulumSwingup"  # obs 3, action 1
NUM_ENVS = 16
RUNNER_KWARGS = dict(
    num_envs=NUM_ENVS, replay_buffer_n=64, batch_size=32, updates_per_step=2,
    policy_frequency=2, actor_hidden_dim=32, seed=0,
)  # fmt: skip
H2D_THREAD = "replay_collector_h2d"


def h2d_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == H2D_THREAD and t.is_alive()]


@pytest.fixture(autouse=True)
def no_h2d_thread_left():
    """Besides the shared leftovers check (conftest): no H2D thread may outlive a test."""
    yield
    assert not h2d_threads(), "replay_collector_h2d thread left running"


def sac_learner() -> FastSACLearner:
    return FastSACLearner(3, 1, 3, actor_hidden_dim=32, critic_hidden_dim=32, v_min=-5, v_max=40)


def learn_kwargs(tmp_path: Path) -> dict:
    return dict(max_iterations=20, save_interval=10, log_dir=str(tmp_path), logger_type="no_print")


class RecordingRunner(DoubleBufferOffPolicyRunner):
    """Checks that every update batch is a view of the pipeline's hot device slot."""

    def _sample_batch(self, iteration, rec):
        batch = super()._sample_batch(iteration, rec)
        pipeline = self.replay_pipeline
        hot = pipeline.device_slots[pipeline.hot]
        for column in batch.values():
            assert column.untyped_storage().data_ptr() == hot.untyped_storage().data_ptr()
        self.sampled_ticks = [*getattr(self, "sampled_ticks", []), iteration]
        return batch


class FailingRunner(DoubleBufferOffPolicyRunner):
    """Raises in the middle of training, with a batch for the next tick in flight."""

    def _train(self, iteration, rec):
        if iteration == 3:
            raise KeyboardInterrupt  # like Ctrl+C
        return super()._train(iteration, rec)


# -- end to end (spawns a collector) ------------------------------------------------------------


def test_learn_trains_on_prefetched_batches_with_the_newest_chunk(tmp_path):
    learner = sac_learner()
    before = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    runner = RecordingRunner(learner, ENV, "sac", trace_enabled=True, **RUNNER_KWARGS)
    assert isinstance(runner, OffPolicyRunner)
    assert runner._algo_name() == "FastSAC"
    runner.learn(**learn_kwargs(tmp_path))

    summary = runner.last_run_summary
    assert summary["status"] == "completed"
    assert summary["completed_iterations"] == 20
    assert (tmp_path / "model_10.pt").exists() and (tmp_path / "model_20.pt").exists()
    after = learner.actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "actor did not train"
    assert runner.sampled_ticks == list(range(1, 21))

    # Every batch holds data newer than anything the learner had seen when it asked for it:
    # tick t + 1 is requested at iteration t with min_snapshot_ptr = ptr + one chunk, and the
    # collector packs it only once that newer chunk is in the ring. (The A path lets the
    # collector lead the learner's ready tokens by one chunk, so a batch may miss at most that
    # lead chunk, never more.)
    chunk = NUM_ENVS * runner.env_steps_per_sync
    log = list(runner.replay_batch_log)
    assert [r["tick_id"] for r in log] == list(range(1, 21))
    assert log[0]["min_snapshot_ptr"] == 0
    assert log[0]["snapshot_ptr"] >= log[0]["data_ptr"]
    for prev, cur in zip(log, log[1:], strict=False):
        assert cur["min_snapshot_ptr"] >= prev["data_ptr"] + chunk, (prev, cur)
        assert cur["snapshot_ptr"] >= prev["snapshot_ptr"] + chunk, (prev, cur)
        # The learner's own view of the ring (data_ptr, read as it asks) advances a chunk per
        # iteration, except where the collector's one-chunk lead was already in it: then two
        # consecutive ticks see the same ptr (measured once in CI: 96, 96), never less.
        assert cur["data_ptr"] >= prev["data_ptr"], (prev, cur)
    assert log[-1]["data_ptr"] - log[0]["data_ptr"] >= (len(log) - 2) * chunk, log
    for record in log:
        assert record["snapshot_ptr"] >= record["min_snapshot_ptr"], record
        assert record["snapshot_ptr"] >= record["data_ptr"] - chunk, record
        assert record["pack_ms"] >= 0

    assert runner.replay_statuses[:2] == [
        "Replay pipeline: cpu_pinned_double_buffer",
        "Replay prefetch: one_tick",
    ]
    assert any("torch_copy" in s for s in runner.replay_statuses)

    names = {e.get("name") for e in json.loads(Path(summary["trace_path"]).read_text())[
        "traceEvents"
    ]}  # fmt: skip
    assert "learner/wait_for_replay_batch" in names
    assert "collector/cpu_pack_sample_batch" in names
    assert "learner/replay_sample" not in names  # the A path's learner-side sampling

    pipeline = runner.replay_pipeline
    assert not pipeline._thread.is_alive()
    pipeline.close()  # idempotent
    runner.close()


def test_interrupt_mid_run_closes_pipeline_and_collector(tmp_path):
    learner = FastTD3Learner(3, 1, 3, actor_hidden_dim=32, critic_hidden_dim=32, v_min=-5, v_max=40)
    runner = FailingRunner(learner, ENV, "td3", **RUNNER_KWARGS)
    assert runner._algo_name() == "FastTD3"
    with pytest.raises(KeyboardInterrupt):
        runner.learn(**learn_kwargs(tmp_path))
    assert runner.last_run_summary["status"] == "failed"
    assert runner.last_run_summary["completed_iterations"] == 2
    assert not runner.replay_pipeline._thread.is_alive()
    # the no_leftovers fixture checks the collector, /dev/shm and the thread


# -- constructor ----------------------------------------------------------------------------------


def test_bad_prefetch_mode_raises_value_error():
    with pytest.raises(ValueError, match="one_tick"):
        DoubleBufferOffPolicyRunner(
            sac_learner(), ENV, "sac", replay_prefetch_mode="two_tick", **RUNNER_KWARGS
        )


# -- pipeline unit tests (threads only) -----------------------------------------------------------

ROWS, WIDTH = 4, 3


class FakeCollector:
    """Serves pack requests like `worker._serve_pack_request`: slot filled with tick id."""

    def __init__(self, requests, ready, slots, tick_offset=0):
        self.requests, self.ready, self.slots = requests, ready, slots
        self.tick_offset = tick_offset
        self.seen: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                request = self.requests.get(timeout=0.02)
            except queue.Empty:
                continue
            self.seen.append(request)
            self.slots[request["shared_slot"]].fill_(float(request["tick_id"]))
            now = time.perf_counter_ns()
            self.ready.put(
                {
                    "tick_id": request["tick_id"] + self.tick_offset,
                    "shared_slot": request["shared_slot"],
                    "snapshot_ptr": request["min_snapshot_ptr"] + 1,
                    "pack_begin_ns": now,
                    "pack_end_ns": now,
                }
            )

    def close(self):
        self.stop.set()
        self.thread.join(2)


@pytest.fixture
def pipe():
    slots = torch.zeros(2, ROWS, WIDTH).share_memory_()
    requests, ready = queue.Queue(1), queue.Queue(1)
    pipeline = DoubleBufferPipeline(slots, requests, ready, "cpu", base_seed=7)
    yield pipeline, requests, ready, slots
    pipeline.close()


def test_pipeline_double_buffers_and_follows_the_request_protocol(pipe):
    pipeline, requests, ready, slots = pipe
    collector = FakeCollector(requests, ready, slots)
    try:
        assert pipeline.state == "idle"
        assert pipeline.transfer_backend == "torch_copy"
        taken = []
        for tick in (1, 2, 3):
            pipeline.start_prepare(tick, min_snapshot_ptr=10 * tick)
            pipeline.wait_until_ready(tick, check=lambda: None)
            assert pipeline.batch_ready(tick) and pipeline.state == "ready"
            batch = pipeline.take(tick)
            assert pipeline.state == "idle"
            assert torch.equal(batch, torch.full((ROWS, WIDTH), float(tick)))
            assert pipeline.last_meta["snapshot_ptr"] == 10 * tick + 1
            taken.append(batch)
        # hot/cold alternate: ticks 1 and 3 share a device slot, tick 2 has the other one
        assert taken[0].data_ptr() == taken[2].data_ptr() != taken[1].data_ptr()
        assert [r["shared_slot"] for r in collector.seen] == [0, 1, 0]
        assert [r["sample_seed"] for r in collector.seen] == [8, 9, 10]
        assert all(r["sample_count"] == ROWS for r in collector.seen)
        assert [r["min_snapshot_ptr"] for r in collector.seen] == [10, 20, 30]
    finally:
        collector.close()
    assert pipeline._thread.name == "replay_collector_h2d" and pipeline._thread.daemon


def test_start_prepare_twice_without_take_raises(pipe):
    pipeline, *_ = pipe
    pipeline.start_prepare(1, min_snapshot_ptr=0)
    with pytest.raises(RuntimeError, match="not consumed"):
        pipeline.start_prepare(2, min_snapshot_ptr=0)
    with pytest.raises(RuntimeError, match="not ready"):
        pipeline.take(1)


def test_wait_checks_the_collector_and_does_not_hang(pipe):
    pipeline, *_ = pipe  # nobody serves the request: like a dead collector
    pipeline.start_prepare(1, min_snapshot_ptr=0)
    calls = []

    def check():
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise ConnectionError("collector died")

    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="collector died"):
        pipeline.wait_until_ready(1, check=check)
    assert time.monotonic() - t0 < 2.0  # woke every 0.5 s


def test_h2d_thread_error_is_reraised(pipe):
    pipeline, requests, ready, slots = pipe
    collector = FakeCollector(requests, ready, slots, tick_offset=5)  # replies for a wrong tick
    try:
        pipeline.start_prepare(1, min_snapshot_ptr=0)
        with pytest.raises(RuntimeError, match="replay_collector_h2d thread failed"):
            pipeline.wait_until_ready(1, check=lambda: None)
    finally:
        collector.close()
    pipeline._thread.join(1)
    assert not pipeline._thread.is_alive()


def test_close_is_idempotent_and_stops_the_thread(pipe):
    pipeline, *_ = pipe
    pipeline.close()
    pipeline.close()
    assert not pipeline._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        pipeline.start_prepare(1, min_snapshot_ptr=0)
