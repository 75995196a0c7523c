"""``unilab-jax train`` (``python -m unilab_jax.train``) and the other commands: documented options,
early clear errors, a real tiny run, resumed."""

import json
import os
import subprocess
import sys
import time

import pytest
from tiny import array_checksums  # tests/tiny.py

from unilab_jax.train import main


def run_cli(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "unilab_jax.train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _help(capsys, *argv: str) -> str:
    """``unilab-jax train ARGV --help`` in this process: the text it prints (it exits 0)."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_builds_while_a_finalizer_parses_python(monkeypatch, capsys):
    """CI's help test once failed so: a garbage collection during the help's ``ast.parse`` (of a
    config's source, for its fields' docstrings) ran a finalizer that logged a traceback
    (orbax's leftover asyncio task), whose caret anchors parse Python too; CPython 3.11 then
    raised "AST constructor recursion depth mismatch"."""
    import ast
    import gc
    import textwrap

    class ParsesWhenCollected:
        def __init__(self):
            self.cycle = self  # only the cyclic collector frees it

        def __del__(self):
            ast.parse("def f(x):\n    return [y for y in x if y]\n")

    dedent = textwrap.dedent
    threshold = gc.get_threshold()

    def dedent_then_leave_garbage(text):
        gc.set_threshold(1, 1, 1)  # collect at the next allocation: inside ast.parse
        ParsesWhenCollected()
        return dedent(text)

    monkeypatch.setattr(textwrap, "dedent", dedent_then_leave_garbage)
    try:
        text = _help(capsys)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert "Parallel environments, over all devices." in text


def test_help_documents_every_option(capsys):
    """Every option of the run, of ``TrainConfig`` and of each algorithm's config is in the
    help (an algorithm's with ``--algo NAME --help``), with its field's docstring on one line
    however many lines the docstring spans."""
    import dataclasses
    import typing

    from unilab_jax.algos.registry import ALGOS
    from unilab_jax.cli.options import documented
    from unilab_jax.cli.train import RunOptions
    from unilab_jax.config import TrainConfig

    for name, spec in ALGOS.items():
        text = " ".join(_help(capsys, "--algo", name).split())  # the text, unwrapped
        for cls in (RunOptions, TrainConfig, spec.config_cls):
            hints = typing.get_type_hints(documented(cls), include_extras=True)
            for field in dataclasses.fields(cls):
                assert f"--{field.name.replace('_', '-')}" in text, (name, field.name)
                if field.name == "env_overrides":  # the command line's own help (pairs)
                    assert "as NAME VALUE pairs" in text
                    continue
                (arg,) = [m for m in hints[field.name].__metadata__ if hasattr(m, "help")]
                assert len(arg.help) > 12 and "\n" not in arg.help, (cls, field.name)
                if field.name != "algo":  # the help lists the registry's algorithms instead
                    assert arg.help[:40] in text, (cls, field.name)
    # The commonly used ones, spelled as they always were.
    text = _help(capsys, "--algo", "td3")
    for flag in ("--env", "--algo", "--num-envs", "--max-iterations", "--log-dir", "--logger",
                 "--replay-buffer-n", "--batch-size", "--updates-per-step", "--policy-frequency",
                 "--save-interval", "--gamma", "--critic-hidden-dim", "--v-min", "--num-atoms",
                 "--policy-noise", "--noise-clip", "--use-cdq", "--no-use-cdq", "--resume-step",
                 "--obs-normalization", "--config", "--resume", "--preset", "--quiet"):  # fmt: skip
        assert flag in text, flag
    assert "tensorboard" in text and "wandb" in text and "sac (FastSAC)" in text


def test_help_shows_the_tasks_preset_as_the_defaults(capsys, monkeypatch):
    """The second stage parses over the preset: ``--env X --help`` shows the values a run of X
    uses; without ``--env``, those of the default task's preset, which a bare run uses."""
    from unilab_jax.cli.train import parse_args

    monkeypatch.setenv("UNILAB_JAX_PRESET", "cpu")
    batch = "--batch-size INT Global batch of one gradient update (split evenly over devices)."
    text = " ".join(_help(capsys, "--env", "playground/CartpoleBalance").split())
    assert f"{batch} (default: 512)" in text  # dm_control/cpu's
    text = " ".join(_help(capsys, "--env", "G1MotionTrackingSAC").split())
    assert f"{batch} (default: 1024)" in text and "--physics {mjx,mujoco} " in text
    assert "(default: mujoco)" in text  # tracking/cpu collects with C MuJoCo
    bare = " ".join(_help(capsys).split())
    _, config, algo, _ = parse_args([])
    assert (config.env, config.batch_size) == ("PendulumSwingup", 512)
    assert f"{batch} (default: {config.batch_size})" in bare
    assert f"(default: {algo['critic_hidden_dim']})" in bare.split("--critic-hidden-dim")[1][:400]


def test_choices_come_from_the_registries_and_a_wrong_one_exits_2_help_included(capsys):
    """``--env``, ``--algo``, ``--physics``, ``--collection`` and ``--matmul-precision`` show
    their choices; an unknown ``--env`` or ``--algo`` exits 2 naming the known ones, before the
    help (which would exit 0) and before any preset."""
    from unilab_jax.algos.registry import ALGOS
    from unilab_jax.envs.registry import registered_names

    text = " ".join(_help(capsys).split())
    envs = "{" + ",".join(registered_names()) + ",playground/NAME,brax/NAME}"
    assert f"--env {envs}".replace(" ", "") in text.replace(" ", "")
    assert "--algo {" + ",".join(ALGOS) + "}" in text
    assert "--collection {sync,overlap}" in text
    assert "--matmul-precision {highest,high,default}" in text
    for argv, named in (
        (["--env", "G1Walk", "--help"], "G1WalkFlat, G1WalkRough"),
        (["--algo", "ppo", "--help"], "sac, td3, flash_sac"),
        (["--env", "playground/Cheetah"], "playground/CheetahRun"),
    ):
        assert main(argv) == 2
        out = capsys.readouterr()
        assert named in out.err and "Traceback" not in out.err and out.out == ""
    with pytest.raises(SystemExit) as exited:
        main(["--physics", "bullet"])
    assert exited.value.code == 2
    assert "mjx" in capsys.readouterr().err


def test_version_and_the_library_train(capsys):
    """``unilab-jax --version``; ``from unilab_jax import train`` is the library's ``train``
    (here refusing a bad config with the trainer's own error, before anything compiles), the
    same object however ``unilab_jax.train`` was imported first."""
    import unilab_jax
    from unilab_jax.cli import main as unilab_jax_main
    from unilab_jax.config import ConfigError, TrainConfig

    assert unilab_jax_main(["--version"]) == 0
    assert capsys.readouterr().out == f"unilab-jax {unilab_jax.__version__}\n"
    from unilab_jax import train

    assert train is unilab_jax.train and callable(train)
    with pytest.raises(ConfigError, match="num_envs must be a positive integer"):
        train(TrainConfig(num_envs=0), log_dir=False, quiet=True)


@pytest.mark.parametrize("command", ["evaluate", "play", "export"])
def test_step_takes_an_iteration_or_best(command, capsys):
    """``--step`` of the commands that load a run's policy: an iteration or ``best``, said so
    in their help."""
    import importlib

    from unilab_jax.cli.options import STEP_HELP, documented, parse

    program = importlib.import_module(f"unilab_jax.cli.{command}")
    options = documented(getattr(program, command.capitalize()), step=STEP_HELP)
    extra = ["--format", "onnx", "--out", "x.onnx"] if command == "export" else []
    assert parse(options, ["RUN", *extra, "--step", "best"]).step == "best"
    assert parse(options, ["RUN", *extra, "--step", "500"]).step == 500
    assert parse(options, ["RUN", *extra]).step is None
    with pytest.raises(SystemExit) as exited:
        program.main(["--help"])
    assert exited.value.code == 0
    assert "best (the best-evaluated one)" in " ".join(capsys.readouterr().out.split())


def test_the_console_commands_start_in_a_subprocess():
    """``python -m unilab_jax.cli`` (the ``unilab-jax`` console script): each command's help,
    and a clear line and status 2 for an unknown command."""
    for command in ("train", "launch", "evaluate", "play", "export", "plot", "convert-motion"):
        proc = subprocess.run([sys.executable, "-m", "unilab_jax.cli", command, "--help"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0 and f"usage: unilab-jax {command}" in proc.stdout, command
    proc = subprocess.run([sys.executable, "-m", "unilab_jax.cli", "trian"], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "unknown command 'trian'" in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env", "Pendulumm"], "unknown --env 'Pendulumm'; choose one of CartpoleBalance"),
        (["--algo", "ppo"], "unknown algo 'ppo'; choose one of sac, td3"),
        (
            ["--num-envs", "8", "--replay-buffer-n", "4", "--batch-size", "64"],
            "batch_size 64 is larger than the replay buffer",
        ),
        (["--num-envs", "9", "--num-devices", "2"], "num_envs 9 is not divisible by num_devices 2"),
        (["--num-envs", "0"], "num_envs must be a positive integer"),
        (["--batch-size", "-1"], "batch_size must be a positive integer"),
        (["--algo", "td3", "--alpha-init", "0.1"], "--alpha-init do not apply to --algo td3"),
        (["--v-min", "10", "--v-max", "10"], "v_min is 10.0; it must be below v_max (10.0)"),
        (["--num-envs", "eight"], "--num-envs"),  # tyro's own: a value of the wrong type
    ],
)
def test_bad_input_fails_fast_with_a_clear_message(args, message, capsys, monkeypatch):
    """The program itself (``main``, what ``python -m unilab_jax.train`` runs; the tiny run
    below starts it as that), in this process: no interpreter and imports per case."""
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))  # main may set it
    start = time.perf_counter()
    try:
        code = main(args)
    except SystemExit as exited:  # tyro's parse errors
        code = exited.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert "Traceback" not in err
    assert "PendulumSwingup" in err or "Pendulumm" not in args
    assert time.perf_counter() - start < 60  # no compilation happened (imports included)


@pytest.fixture(scope="module")
def td3_run(tmp_path_factory):
    """A tiny TD3 run through the CLI (4 iterations, checkpoints 2 and 4), shared by the output
    test and the resume test (which damages its newest checkpoint at its very end)."""
    tmp_path = tmp_path_factory.mktemp("td3_run")
    proc = run_cli(
        "--env",
        "PendulumSwingup",
        "--algo",
        "td3",
        "--num-envs",
        "8",
        "--replay-buffer-n",
        "16",
        "--batch-size",
        "32",
        "--updates-per-step",
        "2",
        "--max-iterations",
        "4",
        "--log-interval",
        "2",
        "--save-interval",
        "2",
        "--actor-hidden-dim",
        "16",
        "--critic-hidden-dim",
        "32",
        "--num-atoms",
        "11",
        "--log-dir",
        str(tmp_path),
    )
    return tmp_path, proc


def test_tiny_cli_run_writes_summary_tensorboard_and_checkpoints(td3_run, tmp_path):
    run_dir, proc = td3_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    # stdout is a pipe, as in a cluster job's log file: plain lines, one per block.
    lines = proc.stdout.splitlines()
    assert "╭" not in proc.stdout and "\x1b[" not in proc.stdout  # no panel, no escape codes
    blocks = [line for line in lines if line.startswith("it ")]
    assert [b.split(" | ")[:2] for b in blocks] == [
        ["it 2/4", "env steps 16"],
        ["it 4/4", "env steps 32"],
    ]
    assert "steps/s" in blocks[-1] and "qf_loss" in blocks[-1] and "ETA" in blocks[-1]
    assert "eval return" in blocks[-1]  # the final evaluation
    assert f"saved {run_dir / 'checkpoints' / '4'}" in lines
    assert "Training completed: 4 iterations, 32 env steps" in lines
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["completed_iterations"] == 4
    assert summary["total_env_steps"] == 32
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["2", "4"]
    assert list(run_dir.glob("events.out.tfevents.*"))
    config = json.loads((run_dir / "run_config.json").read_text())
    assert config["algo"]["actor_hidden_dim"] == 16
    assert config["train"]["algo"] == "td3"
    # unilab-jax evaluate RUN: the deterministic return of its newest checkpoint.
    evaluated = subprocess.run(
        [sys.executable, "-m", "unilab_jax.cli", "evaluate", str(run_dir), "--episodes", "4",
         "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    report = json.loads(evaluated.stdout)
    assert (report["iteration"], report["episodes"], report["algo"]) == (4, 4, "td3")
    assert report["mean_length"] == 200.0 and report["checkpoint"].endswith("checkpoints/4")
    # --config reruns it; the options given with it win (booleans as --flag / --no-flag).
    again = run_cli("--config", str(run_dir / "run_config.json"), "--max-iterations", "2",
                    "--no-use-cdq", "--log-dir", str(tmp_path / "again"), "--quiet")  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads((tmp_path / "again" / "run_config.json").read_text())
    assert rerun["train"] == dict(config["train"], max_iterations=2)
    assert rerun["algo"] == dict(config["algo"], use_cdq=False)


def test_resume_continues_bit_exactly_over_every_array(td3_run, tmp_path):
    first_dir, first = td3_run
    common = (
        "--env", "PendulumSwingup", "--algo", "td3", "--num-envs", "8", "--replay-buffer-n",
        "16", "--batch-size", "32", "--updates-per-step", "2", "--log-interval", "2",
        "--save-interval", "2", "--actor-hidden-dim", "16", "--critic-hidden-dim", "32",
        "--num-atoms", "11", "--eval-envs", "0", "--quiet",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    # Checkpoint 2 trained on to 4 is the first run's checkpoint 4, every array of it (the
    # first run evaluated as it went; evaluation leaves the training state alone).
    second = run_cli(
        *common, "--max-iterations", "4", "--log-dir", str(tmp_path / "b"),
        "--resume", str(first_dir), "--resume-step", "2",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads((tmp_path / "b" / "run_summary.json").read_text())
    assert summary["completed_iterations"] == 4  # 2 restored + 2 more, not 4 more
    assert summary["last_checkpoint"] == str(tmp_path / "b" / "checkpoints" / "4")  # trained
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").iterdir()) == ["4"]
    resumed, uninterrupted = (
        array_checksums(d / "checkpoints" / "4") for d in (tmp_path / "b", first_dir)
    )
    assert len(resumed) > 40 and resumed == uninterrupted
    # --resume alone: the run's own recorded settings, writing on into it (its checkpoint 4
    # trained on to 6); no preset applies (PendulumSwingup's would be 512 per batch).
    alone = run_cli("--resume", str(tmp_path / "b"), "--max-iterations", "6", "--quiet")
    assert alone.returncode == 0, alone.stderr[-3000:]
    summary = json.loads((tmp_path / "b" / "run_summary.json").read_text())
    assert summary["completed_iterations"] == 6
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").iterdir()) == ["4", "6"]
    recorded = json.loads((tmp_path / "b" / "run_config.json").read_text())["train"]
    assert (recorded["batch_size"], recorded["num_envs"], recorded["max_iterations"]) == (32, 8, 6)
    wrong = run_cli(*common[:5], "16", *common[6:], "--max-iterations", "6",
                    "--resume", str(first_dir))  # fmt: skip
    assert wrong.returncode == 2
    assert "checkpoint 4 was written with other settings: num_envs: checkpoint 8, now 16" in (
        wrong.stderr
    )
    assert "Traceback" not in wrong.stderr and len(wrong.stderr.splitlines()) <= 3
    # Settings that keep every array's shape were accepted silently: refused alike, before
    # anything compiles (bad input: exit 2).
    start = time.perf_counter()
    same_shapes = run_cli(*common, "--batch-size", "16", "--gamma", "0.9", "--max-iterations",
                          "6", "--resume", str(first_dir))  # fmt: skip
    assert same_shapes.returncode == 2, same_shapes.stderr[-2000:]
    assert "batch_size: checkpoint 32, now 16" in same_shapes.stderr
    assert "gamma: checkpoint " in same_shapes.stderr and "now 0.9" in same_shapes.stderr
    assert time.perf_counter() - start < 60
    assert "Compiled" not in same_shapes.stdout
    # A damaged newest checkpoint is named as such, and the intact older one is offered. Every
    # data file is damaged, the merged b-tree under agent/d/ too: which of the per-process
    # files a restore reads varies from run to run (their middle bytes alone went unread).
    for path in (first_dir / "checkpoints" / "4" / "agent").rglob("*"):
        if path.is_file() and ("ocdbt.process" in str(path) or "/d/" in str(path)):
            raw = bytearray(path.read_bytes())
            raw[len(raw) // 2] ^= 0xFF
            path.write_bytes(bytes(raw))
    damaged = run_cli(*common, "--max-iterations", "6", "--resume", str(first_dir))
    assert damaged.returncode == 2
    assert "checkpoint 4 under " in damaged.stderr and " is damaged: agent" in damaged.stderr
    assert f"--resume {first_dir} --resume-step 2" in damaged.stderr
    assert "Traceback" not in damaged.stderr and len(damaged.stderr.splitlines()) <= 3


def test_the_default_log_dir_is_named_by_the_runs_physics():
    """A run collecting with C MuJoCo was named ``..._mjx``: the name now says its physics."""
    import datetime

    from unilab_jax.config import TrainConfig
    from unilab_jax.training.trainer import default_log_dir

    started = datetime.datetime(2026, 12, 5, 10, 0, 0)
    for physics in ("mjx", "mujoco"):
        path = default_log_dir(
            TrainConfig(env="Go1JoystickFlat", algo="td3", physics=physics), started
        )
        assert str(path) == f"logs/fast_td3/Go1JoystickFlat/2026-12-05_10-00-00_{physics}"


def test_env_overrides_are_given_as_pairs_typed_as_json_over_the_presets(monkeypatch):
    from unilab_jax.cli.train import parse_args

    monkeypatch.setenv("UNILAB_JAX_PRESET", "cpu")
    argv = ["--env", "G1WalkFlat", "--env-overrides", "noise_level", "0", "motion_x", "a.npz"]
    _, config, _, _ = parse_args([*argv, "--preset", "cpu"])
    # The preset's own overrides (G1's effective penalty curriculum) stay under the given ones.
    assert config.env_overrides["curriculum_max_scale"] == 0.25
    assert config.env_overrides["noise_level"] == 0 and config.env_overrides["motion_x"] == "a.npz"
    _, config, _, _ = parse_args(["--env", "G1MotionTrackingSAC", "--env-overrides",
                                  "motion_file", '["a.npz", "b.npz"]'])  # fmt: skip
    assert config.env_overrides == {"motion_file": ["a.npz", "b.npz"]}
