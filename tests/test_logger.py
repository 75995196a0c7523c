"""OffPolicyLogger: real TensorBoard event files, real Rich rendering, offline W&B."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from unilab_jax.training.logger import OffPolicyLogger, use_console
from unilab_jax.training.logger.common import format_duration, format_number

SHOW_CURSOR = "\x1b[?25h"
HIDE_CURSOR = "\x1b[?25l"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

MakeLogger = Callable[..., tuple[OffPolicyLogger, io.StringIO]]


def plain(raw: str) -> str:
    """Rendered terminal output without ANSI control sequences."""
    return _ANSI.sub("", raw)


@pytest.fixture
def make_logger(tmp_path: Path) -> Iterator[MakeLogger]:
    """Build a logger printing to an in-memory terminal console; close them all afterwards."""
    loggers: list[OffPolicyLogger] = []

    def make(**kwargs: Any) -> tuple[OffPolicyLogger, io.StringIO]:
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=True, width=140, color_system="truecolor")
        kwargs.setdefault("algo_name", "FastSAC")
        kwargs.setdefault("env_name", "Go1Joystick")
        kwargs.setdefault("max_iterations", 100)
        kwargs.setdefault("num_envs", 1024)
        kwargs.setdefault("log_dir", str(tmp_path / "run"))
        kwargs.setdefault("log_backend", "console")
        with use_console(console):
            logger = OffPolicyLogger(**kwargs)
        loggers.append(logger)
        return logger, buf

    yield make
    for logger in loggers:
        logger.close()


def read_scalars(log_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return acc


def last(acc: EventAccumulator, tag: str) -> tuple[int, float]:
    event = acc.Scalars(tag)[-1]
    return event.step, event.value


def log_throughput_example(logger: OffPolicyLogger, extra_info: dict | None) -> None:
    logger.log_step(
        1,
        metrics={"qf_loss": 0.5},
        train_time=0.75,
        wait_time=3.0,
        learner_incremental_h2d_time=0.02,
        weight_sync_time=0.05,
        extra_info=extra_info,
    )


# ---------------------------------------------------------------- throughput


def test_steps_per_sec_uses_pipeline_time_and_excludes_wait(make_logger, tmp_path):
    logger, buf = make_logger(log_backend="tensorboard")
    logger.start()
    log_throughput_example(logger, {"throughput_steps": 8})
    logger.close()

    acc = read_scalars(tmp_path / "run")
    assert last(acc, "perf/iter_ms")[1] == pytest.approx(820.0, rel=1e-5)
    assert last(acc, "perf/steps_per_sec")[1] == pytest.approx(8 / 0.82, rel=1e-5)
    # 8 / 0.82 = 9.76 -> "10" (the 3 s wait would give 2).
    assert "Steps/s 10 " in plain(buf.getvalue())


def test_no_steps_per_sec_without_extra_info(make_logger, tmp_path):
    logger, buf = make_logger(log_backend="tensorboard")
    logger.start()
    log_throughput_example(logger, None)
    logger.close()

    acc = read_scalars(tmp_path / "run")
    assert "perf/steps_per_sec" not in acc.Tags()["scalars"]
    assert last(acc, "perf/iter_ms")[1] == pytest.approx(820.0, rel=1e-5)
    assert "Steps/s" not in plain(buf.getvalue())


# ---------------------------------------------------------------- TensorBoard


def test_tensorboard_writes_documented_keys_at_collector_step(make_logger, tmp_path):
    logger, buf = make_logger(log_backend="TensorBoard")
    assert f"TensorBoard logging to: {tmp_path / 'run'}" in plain(buf.getvalue())
    logger.update_collector_timing({"env_step_ms": 1.25, "action_select_ms": 0.5})
    logger.update_done_rates(0.02, 0.001)
    logger.update_ep_length(250.0)
    for iteration in (1, 2, 3):
        logger.log_collector(total_steps=1000 * iteration, buffer_size=500)
        logger.log_step(
            iteration,
            metrics={"qf_loss": 0.1 * iteration, "alpha": 0.2, "policy/entropy": -3.0},
            reward=5.0 + iteration,
            reward_metrics={"mean_ep100": 4.5},
            reward_components={"reward/tracking_lin_vel": 0.75, "reward/torques": -0.01},
            train_time=0.004,
            wait_time=0.001,
            learner_incremental_h2d_time=0.0005,
            weight_sync_time=0.0002,
            extra_info={"throughput_steps": 1024},
        )
    logger.log_eval(3, mean_return=42.5, mean_length=200.0)
    logger.close()

    # Event files go directly into log_dir (no "tb" subdirectory for off-policy runs).
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    acc = read_scalars(tmp_path / "run")
    expected = {
        "train/qf_loss": 0.3,
        "train/alpha": 0.2,
        "policy/entropy": -3.0,  # already namespaced: kept as is
        "reward/mean": 8.0,
        "reward/mean_ep100": 4.5,
        "reward/tracking_lin_vel": 0.75,
        "reward/torques": -0.01,
        "episode/length": 250.0,
        "episode/timeout_rate": 0.02,
        "episode/terminated_rate": 0.001,
        "timing/learner_wait_ms": 1.0,
        "timing/learner_incremental_h2d_ms": 0.5,
        "timing/learner_train_ms": 4.0,
        "timing/learner_weight_sync_ms": 0.2,
        "timing/collector_env_step_ms": 1.25,
        "timing/collector_action_select_ms": 0.5,
        "axis/iteration": 3.0,
        "axis/env_steps_total": 3000.0,
        "perf/iter_ms": 4.7,
        "eval/mean_return": 42.5,
        "eval/mean_length": 200.0,
    }
    tags = set(acc.Tags()["scalars"])
    assert set(expected) <= tags
    assert "train/policy/entropy" not in tags
    for tag, value in expected.items():
        step, logged = last(acc, tag)
        assert step == 3000, tag
        assert logged == pytest.approx(value, rel=1e-5, abs=1e-6), tag
    assert [e.step for e in acc.Scalars("train/qf_loss")] == [1000, 2000, 3000]


def test_global_step_falls_back_to_iteration_before_collector_reports(make_logger, tmp_path):
    logger, _ = make_logger(log_backend="tensorboard")
    logger.log_step(7, metrics={"actor_loss": 1.0})
    logger.close()
    acc = read_scalars(tmp_path / "run")
    assert last(acc, "train/actor_loss") == (7, 1.0)
    assert "episode/length" not in acc.Tags()["scalars"]


def test_legacy_alias_dropped_when_canonical_key_present(make_logger, tmp_path):
    logger, _ = make_logger(log_backend="tensorboard")
    logger.log_step(1, metrics={"value_loss": 1.0, "loss/value_loss": 2.0, "entropy": 0.5})
    logger.close()
    tags = set(read_scalars(tmp_path / "run").Tags()["scalars"])
    assert "loss/value_loss" in tags
    assert "train/value_loss" not in tags
    assert "train/entropy" in tags  # its canonical key is absent, so it stays


# ---------------------------------------------------------------- dashboard


def test_dashboard_waits_for_data_before_first_step(make_logger):
    logger, buf = make_logger()
    logger.start()
    text = plain(buf.getvalue())
    assert "UniLab Off-Policy Training" in text
    assert "Waiting for data..." in text
    assert "Warming up..." in text
    assert "iter 0/100" in text


def test_dashboard_shows_header_metrics_rewards_and_timing(make_logger):
    logger, buf = make_logger()
    logger.set_collection_sync(True, env_steps_per_sync=2)
    logger.update_collector_timing({"env_step_ms": 1.5, "replay_ms": 0.25, "my_phase_ms": 3.0})
    logger.update_staging_pool(3, 4)
    logger.start()
    logger.log_collector(123_456, 100_000)
    logger.log_step(
        5,
        metrics={"qf_loss": 12.5, "alpha": 0.0123, "actor_loss": -3.2, "buffer_rows": 2_500_000},
        reward=1.5,
        reward_components={"reward/tracking": 0.5, "reward/torques": -0.0123},
        train_time=0.5,
        wait_time=0.002,
        extra_info={"throughput_steps": 4096},
    )
    logger.log_step(
        6, reward=2.5, train_time=0.5, wait_time=0.002, extra_info={"throughput_steps": 4096}
    )
    logger.log_eval(4, 7.25, 180.0)
    logger.log_eval(6, 6.5, 190.0)
    logger.close()
    # The last rendered frame is the one after close().
    text = plain(buf.getvalue()).split("UniLab Off-Policy Training")[-1]

    header = next(line for line in text.splitlines() if "iter 6/100" in line)
    for field in ("FastSAC", "Go1Joystick", "⏱", "ETA", "Steps/s 8,192", "Training"):
        assert field in header
    assert header.index("FastSAC") < header.index("Go1Joystick") < header.index("iter 6/100")

    # Losses first (sorted, title-cased), then the other metrics, indented.
    order = ["Actor Loss", "Qf Loss", "  Alpha", "  Buffer Rows"]
    positions = [text.index(label) for label in order]
    assert positions == sorted(positions)
    assert re.search(r"Qf Loss\s+12\.500", text)
    assert re.search(r"Alpha\s+0\.0123", text)
    assert re.search(r"Buffer Rows\s+2\.50e\+06", text)

    assert "Mean 2.000 / Peak 2.500" in text
    assert re.search(r"Eval return\s+6\.500 \(best 7\.250, len 190, it 6\)", text)
    assert re.search(r"tracking\s+\+0\.5000", text)
    assert re.search(r"torques\s+-0\.0123", text)
    assert "reward/tracking" not in text

    for label in ("Learner", "Collector", "System", "Env Step", "Replay", "My Phase"):
        assert label in text
    assert re.search(r"Wait\s+2\.0 ms", text)
    assert re.search(r"Train\s+500\.0 ms", text)
    assert re.search(r"Buffer\s+100,000", text)
    assert "✓ (2)" in text
    assert "Staging Pool" in text and "3/4" in text


def test_reward_mean_peak_and_trend_arrow(make_logger):
    logger, _ = make_logger()
    for value in range(60):
        logger.log_collector(0, 0, mean_reward=float(value + 1))
    assert logger._reward_mean() == pytest.approx(sum(range(11, 61)) / 50)  # last 50
    assert logger._reward_peak() == 60.0
    assert logger._reward_trend()[0] == "▲"
    for _ in range(20):
        logger.log_collector(0, 0, mean_reward=1.0)
    logger.log_step(1, reward=1.0)
    assert logger._reward_trend()[0] == "━"
    for _ in range(10):
        logger.log_step(1, reward=0.5)
    assert logger._reward_trend()[0] == "▼"
    logger.log_collector(0, 0, mean_reward=0.0)  # zero snapshots are not history
    assert len(logger._reward_history) == 91


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1_234_567.0, "1.23e+06"),
        (-2_000_000.0, "-2.00e+06"),
        (123.456, "123.5"),
        (1.23456, "1.235"),
        (-1.23456, "-1.235"),
        (0.0123456, "0.0123"),
        (0.001, "0.0010"),
        (0.000123, "1.23e-04"),
        (0.0, "0.0000"),
    ],
)
def test_format_number(value, text):
    assert format_number(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45.9, "45s"), (125, "2m05s"), (3725, "1h02m05s")]
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_log_status_forces_refresh_only_before_training_or_for_errors(make_logger):
    logger, buf = make_logger()
    logger.start()
    logger.log_status("Compiling train step")
    assert "Compiling train step" in plain(buf.getvalue())
    logger.log_buffer_fill(500, 1000)
    logger.log_step(1, metrics={"qf_loss": 1.0})
    size = len(buf.getvalue())
    logger.log_status("Evaluating")
    assert len(buf.getvalue()) == size
    logger.log_status("ERROR: Collector died")
    assert "ERROR: Collector died" in plain(buf.getvalue()[size:])


def test_buffer_fill_status(make_logger):
    logger, buf = make_logger()
    logger.start()
    logger.log_buffer_fill(500, 1000)
    logger.close()  # final render, independent of the refresh throttle
    assert "Buffer fill: 500/1,000 (50%)" in plain(buf.getvalue())


# ---------------------------------------------------------------- finish / close


def test_finish_prints_summary_once(make_logger):
    logger, buf = make_logger()
    logger.start()
    logger.log_collector(1_234_567, 1000)
    logger.log_step(42, metrics={"qf_loss": 1.0})
    logger.log_save("/runs/x/model_42.pt")
    logger.log_warning("value support too small: [v_max] 40")  # printed now, and in the summary
    logger._start_time -= 3725  # pretend the run took 1h02m05s
    logger.finish(extra_summary="Final eval: 1.0")
    logger.finish()
    logger.close()
    text = plain(buf.getvalue())
    assert text.count("Training Summary") == 1
    summary = text.split("Training Summary")[1]
    lines = [
        "Training complete",
        "Algo: FastSAC | Env: Go1Joystick",
        "Iterations: 42/100",
        "Total time: 1h02m05s",
        "Total env steps: 1,234,567",
        "Final eval: 1.0",
        "Last checkpoint: /runs/x/model_42.pt",
        "Warning: value support too small: [v_max] 40",
    ]
    positions = [summary.index(line) for line in lines]
    assert positions == sorted(positions)
    before = text.split("Training Summary")[0]
    assert "WARNING value support too small: [v_max] 40" in before  # markup-safe, at once


def test_no_print_writes_nothing(make_logger, tmp_path):
    logger, buf = make_logger(log_backend="no_print")
    logger.start()
    logger.log_status("ERROR: boom")
    logger.log_collector(100, 100, mean_reward=1.0)
    logger.log_step(1, metrics={"qf_loss": 1.0}, reward=1.0, extra_info={"throughput_steps": 1})
    logger.finish()
    logger.close()
    assert buf.getvalue() == ""
    assert not (tmp_path / "run").exists()


def _cursor_shown_at_end(raw: str) -> bool:
    return raw.rfind(SHOW_CURSOR) > raw.rfind(HIDE_CURSOR)


def test_close_after_start_shows_cursor_again(make_logger):
    logger, buf = make_logger()
    logger.start()
    logger.log_step(1, metrics={"qf_loss": 1.0})
    assert HIDE_CURSOR in buf.getvalue()
    logger.close()
    assert _cursor_shown_at_end(buf.getvalue())
    assert "Training Summary" not in buf.getvalue()
    logger.close()  # twice is fine
    assert buf.getvalue().endswith(SHOW_CURSOR)


def test_finish_shows_cursor_again(make_logger):
    logger, buf = make_logger()
    logger.start()
    logger.finish()
    assert HIDE_CURSOR in buf.getvalue()
    assert _cursor_shown_at_end(buf.getvalue())


def test_close_before_start_shows_cursor(make_logger):
    logger, buf = make_logger()
    logger.close()
    assert buf.getvalue().endswith(SHOW_CURSOR)


def test_close_restores_cursor_when_final_render_fails(make_logger):
    logger, buf = make_logger()
    logger.start()

    def broken_display():
        raise RuntimeError("render failed")

    logger._build_display = broken_display
    logger.close()  # must not raise on an error path
    assert _cursor_shown_at_end(buf.getvalue())


# ---------------------------------------------------------------- W&B


@pytest.fixture
def wandb_offline(monkeypatch, tmp_path):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    yield wandb
    if wandb.run is not None:
        wandb.run.finish()


def test_wandb_offline_run_gets_keys_and_is_finished(make_logger, wandb_offline, tmp_path):
    wandb = wandb_offline
    logger, buf = make_logger(
        algo_name="FastTD3",
        env_name="CartpoleBalance",
        obs_dim=5,
        action_dim=1,
        log_backend="WandB",
    )
    run = wandb.run
    assert run is not None
    assert run.name == "FastTD3_CartpoleBalance"
    assert run.config["algo"] == "FastTD3"
    assert run.config["obs_dim"] == 5 and run.config["max_iterations"] == 100
    assert "W&B logging to project: unilab" in plain(buf.getvalue())
    assert list((tmp_path / "run" / "wandb").glob("offline-run-*"))

    for iteration in (1, 2):
        logger.log_collector(total_steps=32 * iteration, buffer_size=64)
        logger.log_step(
            iteration,
            metrics={"qf_loss": 1.5},
            reward=3.0,
            reward_components={"reward/alive": 1.0},
            train_time=0.1,
            extra_info={"throughput_steps": 16},
        )
    # A row is committed when the next step arrives; step 32 is visible before finish.
    summary = dict(run.summary)
    assert summary["_step"] == 32
    assert summary["train/qf_loss"] == 1.5
    assert summary["reward/alive"] == 1.0
    assert summary["iteration"] == 1 and summary["axis/iteration"] == 1
    assert summary["perf/steps_per_sec"] == pytest.approx(160.0)

    logger.finish()
    assert wandb.run is None


def test_wandb_reuses_existing_run_without_finishing_it(make_logger, wandb_offline, tmp_path):
    wandb = wandb_offline
    run = wandb.init(project="tracker", name="outer", dir=str(tmp_path))
    logger, _ = make_logger(log_backend="wandb")
    logger.log_step(1, metrics={"qf_loss": 1.0})
    logger.finish()
    assert wandb.run is run


def test_missing_wandb_warns_and_falls_back_to_console(make_logger, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    logger, buf = make_logger(log_backend="wandb")
    text = " ".join(plain(buf.getvalue()).split())
    assert "wandb is not installed" in text
    assert "pip install 'unilab-jax[wandb]'" in text
    logger.log_step(1, metrics={"qf_loss": 1.0})
    logger.finish()
    assert "Training Summary" in plain(buf.getvalue())


# ---------------------------------------------------------------- imports


def test_logging_imports_neither_torch_nor_tensorflow(tmp_path):
    code = (
        "import sys\n"
        "from unilab_jax.training.logger import OffPolicyLogger\n"
        f"OffPolicyLogger(log_dir={str(tmp_path)!r}, log_backend='tensorboard').close()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'tensorflow', 'wandb')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


def test_train_wandb_sink_takes_the_run_options_full_config_and_writes_tensorboard_too(
    wandb_offline, tmp_path
):
    from unilab_jax.training.sinks import LoggerSink, RunInfo

    sink = LoggerSink("wandb", quiet=True, wandb={"project": "probe", "group": "sweep-1"})
    config = {"train": {"env": "PendulumSwingup", "num_envs": 8}, "algo": {"gamma": 0.99}}
    run = RunInfo("FastSAC", "PendulumSwingup", 8, 3, 1, 10, 1, 32, 1, str(tmp_path / "run"), 0,
                  config)  # fmt: skip
    sink.start(run)
    wandb_run = wandb_offline.run
    assert (wandb_run.project, wandb_run.group) == ("probe", "sweep-1")
    assert wandb_run.config["train/num_envs"] == 8 and wandb_run.config["algo/gamma"] == 0.99
    sink.log.log_eval(10, 5.0, 200.0)
    sink.close()
    assert wandb_offline.run is None
    acc = read_scalars(tmp_path / "run")  # TensorBoard files alongside the wandb run
    assert last(acc, "eval/mean_return") == (10, 5.0)
