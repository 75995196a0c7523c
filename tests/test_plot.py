"""``unilab-jax plot``: real event files from the project's logger, a real figure."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

pytest.importorskip("matplotlib", reason="needs the plot extra (matplotlib)")
import matplotlib.image  # noqa: E402

from unilab_jax.analysis.plot import load_curves, plot_runs, run_label  # noqa: E402
from unilab_jax.cli.plot import main  # noqa: E402
from unilab_jax.training.logger import OffPolicyLogger, use_console  # noqa: E402

STEPS_PER_ITER = 1024


def write_run(
    run_dir: Path,
    algo: str,
    env: str,
    returns: list[float],
    evals: dict[int, tuple[float, float]],
    seed: int | None = None,
) -> None:
    """A run dir as training writes it: ``run_config.json`` plus the logger's event files.

    ``returns[i]`` is the training return of iteration ``i + 1``; ``evals`` maps an iteration
    to its ``(mean_return, mean_length)``. Values are exact in float32 (TensorBoard's type).
    """
    run_dir.mkdir(parents=True)
    config = {"train": {"env": env, "algo": algo, "num_envs": STEPS_PER_ITER}, "algo": {}}
    if seed is not None:
        config["train"]["seed"] = seed
    (run_dir / "run_config.json").write_text(json.dumps(config))
    console = Console(file=io.StringIO(), force_terminal=False)
    with use_console(console):
        logger = OffPolicyLogger(
            algo_name=algo,
            env_name=env,
            max_iterations=len(returns),
            num_envs=STEPS_PER_ITER,
            log_dir=str(run_dir),
            log_backend="tensorboard",
        )
    try:
        logger.start()
        for iteration, reward in enumerate(returns, start=1):
            logger.log_collector(
                total_steps=iteration * STEPS_PER_ITER, buffer_size=iteration * STEPS_PER_ITER
            )
            logger.log_step(
                iteration,
                metrics={"qf_loss": 0.5},
                reward=reward,
                train_time=0.01,
                extra_info={"throughput_steps": STEPS_PER_ITER},
            )
            if iteration in evals:
                logger.log_eval(iteration, *evals[iteration])
    finally:
        logger.close()


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    sac = tmp_path / "logs" / "sac_run"
    td3 = tmp_path / "logs" / "td3_run"
    write_run(
        sac,
        "sac",
        "PendulumSwingup",
        [-300.0, -250.5, -180.25, -120.0],
        {2: (-200.5, 1000.0), 4: (-90.75, 1000.0)},
    )
    write_run(td3, "td3", "PendulumSwingup", [-310.0, -260.0, -240.5], {})
    return sac, td3


def test_load_curves_returns_the_logged_points(runs):
    sac, td3 = runs
    curves = load_curves(sac)
    assert set(curves) == {"train_return", "eval_return", "eval_length"}
    train, evals = curves["train_return"], curves["eval_return"]
    np.testing.assert_array_equal(train.steps, np.arange(1, 5) * STEPS_PER_ITER)
    np.testing.assert_array_equal(train.values, [-300.0, -250.5, -180.25, -120.0])
    np.testing.assert_array_equal(evals.steps, [2 * STEPS_PER_ITER, 4 * STEPS_PER_ITER])
    np.testing.assert_array_equal(evals.values, [-200.5, -90.75])
    np.testing.assert_array_equal(curves["eval_length"].values, [1000.0, 1000.0])
    assert train.steps.dtype == np.int64 and train.values.dtype == np.float64
    # Wall-clock: seconds since the run's first event, in logging order.
    for curve in curves.values():
        assert np.all(curve.seconds >= 0) and np.all(np.diff(curve.seconds) >= 0)
        assert curve.seconds.max() < 60

    no_eval = load_curves(td3)
    assert set(no_eval) == {"train_return"}
    np.testing.assert_array_equal(no_eval["train_return"].values, [-310.0, -260.0, -240.5])

    assert run_label(sac) == "FastSAC PendulumSwingup sac_run"
    assert run_label(td3) == "FastTD3 PendulumSwingup td3_run"


def test_cli_writes_png_overlaying_runs(runs, tmp_path, capsys):
    sac, td3 = runs
    out = tmp_path / "figs" / "curve.png"
    assert main([str(sac), str(td3), "--out", str(out), "--title", "SAC vs TD3"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed
    assert "FastSAC PendulumSwingup sac_run: 4 training points, 2 evaluations" in printed
    assert "note: FastTD3 PendulumSwingup td3_run has no eval data" in printed
    image = matplotlib.image.imread(out)
    assert image.shape == (800, 1200, 4)  # 12 x 8 inches at 100 dpi
    assert image[..., :3].std() > 0.05  # something was drawn, not a blank canvas


def test_plot_runs_labels_and_formats(runs, tmp_path):
    sac, td3 = runs
    result = plot_runs([sac, td3], tmp_path / "c.svg", labels=["A", "B"])
    assert [r["label"] for r in result["runs"]] == ["A", "B"]
    assert result["no_eval"] == ["B"]
    assert "<svg" in (tmp_path / "c.svg").read_text()
    plot_runs([sac], tmp_path / "c.pdf")
    assert (tmp_path / "c.pdf").read_bytes().startswith(b"%PDF")


def test_runs_that_differ_only_in_their_seed_are_one_mean_with_a_band(tmp_path, capsys):
    from unilab_jax.analysis.plot import _series

    logs = tmp_path / "logs"
    for seed, offset in ((0, 0.0), (1, 100.0), (2, 40.0)):
        write_run(logs / f"s{seed}", "sac", "PendulumSwingup",
                  [-300.0 + offset, -250.0 + offset, -180.0 + offset], {2: (-200.0 + offset, 5.0)},
                  seed=seed)  # fmt: skip
    write_run(logs / "other", "td3", "PendulumSwingup", [-310.0, -260.0, -240.0], {}, seed=0)
    dirs = [logs / n for n in ("s0", "s1", "s2", "other")]
    out = tmp_path / "seeds.png"
    assert main([*map(str, dirs), "--out", str(out)]) == 0
    assert "FastSAC PendulumSwingup (3 seeds): the mean of 3 runs" in capsys.readouterr().out
    runs = [(d, run_label(d), load_curves(d)) for d in dirs]
    series = _series(runs, per_seed=False)
    assert [s.label for s in series] == ["FastSAC PendulumSwingup (3 seeds)",
                                         "FastTD3 PendulumSwingup other"]  # fmt: skip
    mean = series[0].curves["train_return"]
    np.testing.assert_allclose(mean.values, [-300 + 140 / 3, -250 + 140 / 3, -180 + 140 / 3])
    np.testing.assert_array_equal(mean.steps, [1024, 2048, 3072])
    low, high = series[0].bands["train_return"]
    assert np.all(low < mean.values) and np.all(mean.values < high)
    assert np.all(low >= -300) and np.all(high <= -80)  # within the runs' own range
    assert series[0].curves["eval_return"].values.tolist() == [-200 + 140 / 3]
    assert len(_series(runs, per_seed=True)) == 4
    assert plot_runs(dirs, tmp_path / "each.png", per_seed=True)["groups"] == []


def test_clear_errors(runs, tmp_path, capsys):
    sac, _ = runs
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "x.png"
    assert main([str(sac), str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {empty}: no TensorBoard event files (events.out.tfevents.*) in it\n"
    assert not out.exists()

    # A parent of runs names the runs below it.
    assert main([str(sac.parent), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(sac) in err

    assert main([str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "missing: no such directory" in capsys.readouterr().err
    assert main([str(sac), "--labels", "a", "b", "--out", str(out)]) == 2
    assert "2 labels for 1 runs" in capsys.readouterr().err
    assert main([str(sac), "--out", str(tmp_path / "x.jpg")]) == 2
    assert ".png, .pdf or .svg" in capsys.readouterr().err


def test_missing_matplotlib_names_the_extra(runs, tmp_path):
    sac, _ = runs
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"  # makes `import matplotlib` fail
        "from unilab_jax.cli.plot import main\n"
        f"sys.exit(main([{str(sac)!r}, '--out', {str(tmp_path / 'x.png')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: matplotlib is not installed; install the plot extra: pip install 'unilab-jax[plot]'"
    ]


def test_resumed_run_reads_both_event_files(tmp_path):
    """A run resumed into its own dir: the second event file continues the first, and the
    points the first session logged after the checkpoint it resumed from are dropped (all
    curves, also the eval the second session did not redo), so every step appears once."""
    run = tmp_path / "resumed"
    write_run(run, "sac", "PendulumSwingup", [-300.0, -250.0, -200.0, -150.0], {4: (-140.0, 9.0)})
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    # Resumed from the checkpoint of iteration 2: iterations 3..5 again, new values.
    console = Console(file=io.StringIO(), force_terminal=False)
    with use_console(console):
        logger = OffPolicyLogger(
            algo_name="sac", env_name="PendulumSwingup", log_dir=str(run), log_backend="tensorboard"
        )
    try:
        for iteration, reward in ((3, -190.0), (4, -140.5), (5, -100.25)):
            logger.log_collector(iteration * STEPS_PER_ITER, iteration * STEPS_PER_ITER)
            logger.log_step(iteration, reward=reward)
        logger.log_eval(5, -90.0, 10.0)
    finally:
        logger.close()
    assert len(list(run.glob("events.out.tfevents.*"))) == 2

    curves = load_curves(run)
    train = curves["train_return"]
    np.testing.assert_array_equal(train.steps, np.arange(1, 6) * STEPS_PER_ITER)
    np.testing.assert_array_equal(train.values, [-300.0, -250.0, -190.0, -140.5, -100.25])
    np.testing.assert_array_equal(curves["eval_return"].steps, [5 * STEPS_PER_ITER])
    np.testing.assert_array_equal(curves["eval_return"].values, [-90.0])
    assert np.all(np.diff(train.seconds) >= 0)
