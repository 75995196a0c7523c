"""TraceRecorder: Chrome Trace Event fields and units, nesting, thread-time counters, merging a
spawned collector's events, and a valid file from a run that raised."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time

import pytest

from unilab.logging import GPU_STREAM_TID, TraceRecorder, maybe_span

SPAWN = mp.get_context("spawn")


@pytest.fixture(autouse=True)
def no_leftovers():
    """No test may leave a live child process or a new /dev/shm entry."""
    before = set(os.listdir("/dev/shm"))
    yield
    children = mp.active_children()
    for child in children:
        child.terminate()
        child.join(5)
    assert not children, f"children left alive: {children}"
    deadline = time.monotonic() + 2.0
    while (new := set(os.listdir("/dev/shm")) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not new, f"/dev/shm entries left behind: {sorted(new)}"


def of_phase(events, ph):
    return [e for e in events if e["ph"] == ph]


def by_name(events, name):
    (event,) = [e for e in events if e["name"] == name and e["ph"] in "XC"]
    return event


def test_metadata_names_the_process_the_main_thread_and_gpu_stream_0():
    rec = TraceRecorder("offpolicy_learner")
    meta = {(e["name"], e["tid"]): e["args"]["name"] for e in of_phase(rec.events, "M")}
    assert meta[("process_name", 0)] == "offpolicy_learner"
    assert meta[("thread_name", threading.get_native_id())] == "main"
    assert meta[("thread_name", GPU_STREAM_TID)] == "gpu_stream_0"
    assert all(e["pid"] == os.getpid() for e in rec.events)


def test_span_is_a_complete_event_with_microsecond_ts_and_dur():
    rec = TraceRecorder("p")
    t0_us = time.perf_counter_ns() / 1000
    with rec.span("replay/sample", cat="replay", batch_size=8) as args:
        time.sleep(0.02)
        args["rows"] = 3  # the body can attach results
    t1_us = time.perf_counter_ns() / 1000
    event = by_name(rec.events, "replay/sample")
    assert event["ph"] == "X" and event["cat"] == "replay"
    assert event["pid"] == os.getpid() and event["tid"] == threading.get_native_id()
    assert event["args"] == {"batch_size": 8, "rows": 3}
    assert t0_us <= event["ts"] and event["ts"] + event["dur"] <= t1_us
    assert 19_000 <= event["dur"] <= 1_000_000  # 20 ms sleep, in µs


def test_nested_spans_lie_inside_their_parent():
    rec = TraceRecorder("p")
    with rec.span("learner/training_e2e"):
        with rec.span("learner/update_critic", update_idx=0):
            time.sleep(0.002)
        with rec.span("learner/update_actor", update_idx=0):
            time.sleep(0.002)
    outer = by_name(rec.events, "learner/training_e2e")
    critic = by_name(rec.events, "learner/update_critic")
    actor = by_name(rec.events, "learner/update_actor")
    for inner in (critic, actor):
        assert outer["ts"] <= inner["ts"]
        assert inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert critic["ts"] + critic["dur"] <= actor["ts"]  # siblings in order, no overlap


def test_counter_event_carries_value():
    rec = TraceRecorder("p")
    before = time.perf_counter_ns() / 1000
    rec.counter("replay_size", 4096, cat="learner")
    event = by_name(rec.events, "replay_size")
    assert event["ph"] == "C" and event["args"] == {"value": 4096} and event["ts"] >= before


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_thread_time_counter_only_when_enabled_and_asked_for():
    on, off = TraceRecorder("p", thread_time=True), TraceRecorder("p")
    for rec in (on, off):
        with rec.span("weight_sync/write_weights_d2h",
                      thread_time_counter="weight_sync/write_thread_cpu_us"):  # fmt: skip
            _burn(0.01)
        with rec.span("replay/add"):  # did not ask
            pass
    assert of_phase(off.events, "C") == []
    (counter,) = of_phase(on.events, "C")
    assert counter["name"] == "weight_sync/write_thread_cpu_us"
    span = by_name(on.events, "weight_sync/write_weights_d2h")
    assert 0 < counter["args"]["value"] <= span["dur"] + 1000  # CPU µs within the wall span


def test_drain_returns_and_clears_and_extend_merges():
    rec = TraceRecorder("p")
    with rec.span("a"):
        pass
    drained = rec.drain()
    assert [e["ph"] for e in drained].count("M") == 3 and drained[-1]["name"] == "a"
    assert rec.drain() == []
    other = TraceRecorder("q")
    other.extend(drained)
    assert other.events[-1] is drained[-1]


def test_trace_written_in_finally_after_an_error_is_valid_json(tmp_path):
    rec = TraceRecorder("offpolicy_learner", output_path=tmp_path / "out" / "trace.json")
    with pytest.raises(RuntimeError, match="collector died"):
        try:
            with rec.span("learner/training_e2e"), rec.span("learner/wait_for_data", iteration=0):
                raise RuntimeError("collector died")
        finally:
            path = rec.write()
    trace = json.loads(path.read_text())
    assert set(trace) == {"traceEvents"}
    spans = {e["name"]: e for e in of_phase(trace["traceEvents"], "X")}
    assert spans["learner/training_e2e"]["args"] == {"error": "RuntimeError"}
    assert spans["learner/wait_for_data"]["args"] == {"iteration": 0, "error": "RuntimeError"}
    assert os.listdir(path.parent) == ["trace.json"]  # no temporary file left
    with rec.span("later"):
        pass
    rec.write()  # rewritable: periodic flushes and the final write share one path
    assert len(json.loads(path.read_text())["traceEvents"]) == len(trace["traceEvents"]) + 1


def test_write_without_any_path_raises_and_maybe_span_tolerates_none():
    with pytest.raises(ValueError, match="no path"):
        TraceRecorder("p").write()
    with maybe_span(None, "replay/add") as args:
        assert args == {}


def _collector(events_queue) -> None:
    """Collector stand-in: record in its own process, ship the drained events."""
    rec = TraceRecorder("offpolicy_collector")
    with rec.span("collector/env_step", cat="collector"):
        time.sleep(0.001)
    rec.counter("collector/steps", 1)
    events_queue.put(rec.drain())


def test_spawned_collector_events_merge_into_one_file_with_both_pids(tmp_path):
    learner = TraceRecorder("offpolicy_learner")
    events_queue = SPAWN.Queue()
    start_us = time.perf_counter_ns() / 1000
    proc = SPAWN.Process(target=_collector, args=(events_queue,), daemon=True)
    with learner.span("learner/wait_for_data", cat="learner", iteration=0):
        proc.start()
        collector_events = events_queue.get(timeout=60)
        proc.join(30)
    end_us = time.perf_counter_ns() / 1000
    assert proc.exitcode == 0
    learner.extend(collector_events)
    events_queue.close()
    trace = json.loads(learner.write(tmp_path / "perfetto_offpolicy_timeline.json").read_text())
    events = trace["traceEvents"]
    assert {e["pid"] for e in events} == {os.getpid(), proc.pid}
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {os.getpid(): "offpolicy_learner", proc.pid: "offpolicy_collector"}
    step = by_name(events, "collector/env_step")
    assert step["pid"] == proc.pid and step["dur"] >= 1000
    # One monotonic clock for both processes: the child's span lies inside the parent's window.
    assert start_us <= step["ts"] and step["ts"] + step["dur"] <= end_us
    wait = by_name(events, "learner/wait_for_data")
    assert wait["ts"] <= step["ts"] and step["ts"] + step["dur"] <= wait["ts"] + wait["dur"]
