"""Several processes on JAX's distributed runtime (``unilab_jax.distributed.processes``,
``.launch``).

All runs start together in one module fixture, each under a timeout (compiling dominates, and
on CPU the persistent compile cache serves only process 0: jaxlib 0.10.2 keys CPU programs by
a per-process topology fingerprint, and only process 0 writes entries):

- ``A``: the tiny run, 1 process x 2 devices, through the CLI (checkpoints 2, 4, 6);
- ``H``: tests/multiprocess_check.py as 2 processes x 1 device: the same run from scratch, a
  resume of A's checkpoint 4, a settings mismatch and a damaged checkpoint;
- ``K``: the launcher on the tiny run, one child SIGKILLed once the run is up;
- ``T1`` / ``TL``: the launcher on the tiny run collected with C MuJoCo, SIGTERM sent to
  process 1 alone / to the launcher once process 0 reports its first block;
- ``U``: a process whose coordinator never answers.
"""

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from unilab_jax.config import ConfigError, TrainConfig

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from tiny import TINY, TINY_SAC  # noqa: E402

TIMEOUT = 420


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(devices: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    return env


def _start(args, devices: int, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], env={**_env(devices), **(env or {})}, text=True,
        stdout=subprocess.PIPE, **kw,
    )  # fmt: skip


def _launch(tmp: Path, config_file: Path, name: str, extra: list[str], when, act):
    """The launcher on the tiny run into ``tmp/name`` (``extra``: more train options); once
    process 1's pid is known, ``act(pid of process 1, pid of the launcher)`` runs at the first
    output line ``when(line)`` accepts. Returns ``(exit code, output, seconds from the act to
    the launcher's end or None)``."""
    launcher = _start(
        ["-m", "unilab_jax.cli", "launch", "--nproc", "2", "--", "--config", str(config_file),
         "--max-iterations", "100000", *extra, "--log-dir", str(tmp / name), "--logger", "none"],
        devices=1, stderr=subprocess.STDOUT, env={"TMPDIR": str(tmp)},  # its logs of process 1
    )  # fmt: skip
    guard = threading.Timer(TIMEOUT, launcher.kill)  # never hang the suite
    guard.start()
    lines: list[str] = []
    child = acted_at = None
    for line in launcher.stdout:
        lines.append(line)
        if child is None and (found := re.search(r"1: pid (\d+)", line)):
            child = int(found.group(1))
        if child and acted_at is None and when(line):
            act(child, launcher.pid)
            acted_at = time.monotonic()
    launcher.wait()
    ended = time.monotonic()
    guard.cancel()
    return launcher.returncode, "".join(lines), None if acted_at is None else ended - acted_at


def _kill_run(tmp: Path, config_file: Path) -> dict:
    """SIGKILL process 1 once the run is up (both processes connected, settings compared),
    before compiling."""
    rc, output, after = _launch(
        tmp, config_file, "K", [], lambda line: line.startswith("FastSAC on "),
        lambda child, launcher: os.kill(child, signal.SIGKILL),
    )  # fmt: skip
    return {"rc": rc, "after_kill_sec": after, "output": output}


def _sigterm_run(tmp: Path, config_file: Path, name: str) -> tuple[int, str, str]:
    """Checkpoints only when stopped; SIGTERM once process 0 has reported a block: to process
    1 alone (``T1``, a scheduler signalling one task) or to the launcher (``TL``, which
    forwards it). Collected with C MuJoCo: stopping is the host loop's, whatever the physics,
    and the four processes then compile the learner's step without MJX's physics."""
    rc, output, _ = _launch(
        tmp, config_file, name, ["--save-interval", "100000", "--physics", "mujoco"],
        lambda line: line.startswith("it "),
        lambda child, launcher: os.kill(child if name == "T1" else launcher, signal.SIGTERM),
    )  # fmt: skip
    return rc, output, ""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multiprocess")
    config_file = tmp / "tiny.json"
    train = {**dataclasses.asdict(TINY), "save_interval": 2}
    config_file.write_text(json.dumps({"train": train, "algo": TINY_SAC}))
    start = time.perf_counter()
    timings = {}
    one = _start(
        ["-m", "unilab_jax.train", "--config", str(config_file), "--num-devices", "2",
         "--log-dir", str(tmp / "A"), "--quiet"],
        devices=2, stderr=subprocess.PIPE,
    )  # fmt: skip
    port = _port()
    helpers = [
        _start(
            [str(HERE / "multiprocess_check.py"), str(i), str(port), str(tmp), str(tmp / "A")],
            devices=1,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for i in range(2)
    ]
    unreachable = _start(
        ["-c", "from unilab_jax.config import TrainConfig\n"
               "from unilab_jax.distributed.processes import ensure_initialized\n"
               f"ensure_initialized(TrainConfig(num_devices=2, num_processes=2, process_id=1, "
               f"coordinator_address='127.0.0.1:{_port()}', coordinator_timeout=3))"],
        devices=1, stderr=subprocess.PIPE,
    )  # fmt: skip
    killed: dict = {}
    killer = threading.Thread(target=lambda: killed.update(_kill_run(tmp, config_file)))
    killer.start()
    results = {}
    signalled = [
        threading.Thread(target=lambda n=n: results.update({n: _sigterm_run(tmp, config_file, n)}))
        for n in ("T1", "TL")
    ]
    for thread in signalled:
        thread.start()
    for name, proc in [("A", one), ("H0", helpers[0]), ("H1", helpers[1]), ("U", unreachable)]:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for p in (one, *helpers, unreachable):
                p.kill()
            raise
        results[name] = (proc.returncode, out, err)
        timings[name] = time.perf_counter() - start
    killer.join(TIMEOUT)
    timings["K"] = time.perf_counter() - start
    for thread in signalled:
        thread.join(TIMEOUT)
    timings["T"] = time.perf_counter() - start
    print("launcher ended", killed.get("after_kill_sec"), "s after its process 1 was killed")
    print("multiprocess run timings (s):", {k: round(v, 1) for k, v in timings.items()})
    for name in ("H0", "H1"):
        print(name, results[name][1].strip().splitlines()[-1:] or results[name][2][-2000:])
    return tmp, results, killed


def _meta(run: Path, step: int) -> dict:
    from unilab_jax.training.checkpoint import read_meta

    return read_meta(run / "checkpoints", step)


def _read(run: Path, step: int, item: str) -> dict:
    """An item of a checkpoint, restored and checksum-checked in this 1-device process."""
    import jax.numpy as jnp

    from unilab_jax.training.checkpoint import restore_item

    saved = _meta(run, step)["items"][item]
    like = {name: jnp.zeros(info["shape"], info["dtype"]) for name, info in saved.items()}
    return restore_item(run / "checkpoints", item, like, step=step)


def _ok(results, name):
    rc, out, err = results[name]
    assert rc == 0, f"{name} failed ({rc}):\n{err[-4000:]}"
    return out


@pytest.mark.multidevice
def test_two_processes_train_the_same_parameters_as_one_process_of_two_devices(runs):
    tmp, results, _ = runs
    _ok(results, "A")
    report = json.loads(_ok(results, "H0").strip().splitlines()[-1])
    assert (report["devices"], report["local"], report["b_iterations"]) == (2, 1, 6)
    for step in (2, 4, 6):
        one, two = _meta(tmp / "A", step), _meta(tmp / "B", step)
        # The same arrays: shapes, dtypes and checksums of the whole global arrays (the 2-process
        # ones combined from each process's shards). On jax 0.10.2 CPU they are bitwise equal.
        assert two["items"] == one["items"], step
    a, b = _read(tmp / "A", 6, "agent"), _read(tmp / "B", 6, "agent")
    early = _read(tmp / "A", 2, "agent")
    diff = max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)
    params = [k for k in a if k.startswith(("actor_params", "critic_params"))]
    moved = max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(early[k])))) for k in params)
    print(f"parameters: max |1 process - 2 processes| = {diff}, moved since iteration 2: {moved}")
    assert moved > 1e-4  # the updates really changed them
    assert diff <= 1e-5 * max(1.0, moved)  # float32 tolerance (bitwise equal on jax 0.10.2)


@pytest.mark.multidevice
def test_checkpoints_restore_across_process_counts(runs):
    tmp, results, _ = runs
    report = json.loads(_ok(results, "H0").strip().splitlines()[-1])
    _ok(results, "H1")
    # 2 processes resumed the 1-process run's checkpoint 4 and trained on to 6: the same
    # state as the 1-process run's own checkpoint 6.
    assert (report["restored_iteration"], report["c_iterations"]) == (4, 6)
    assert _meta(tmp / "C", 6)["items"] == _meta(tmp / "A", 6)["items"]
    assert report["own_restore_equal"]
    # 1 process reads (and checks) the 2-process checkpoint's sharded items.
    assert _read(tmp / "B", 6, "env")
    # Process 0 alone wrote the run's files.
    assert (tmp / "B" / "run_config.json").exists()


@pytest.mark.multidevice
def test_other_settings_and_damaged_checkpoints_fail_on_every_process(runs):
    _, results, _ = runs
    for name in ("H0", "H1"):
        report = json.loads(_ok(results, name).strip().splitlines()[-1])
        assert (
            "process 1 was started with other settings than process 0" in report["mismatch_error"]
        )
        assert "seed: process 0 0, process 1 1" in report["mismatch_error"]
        assert "checkpoint 2" in report["damaged_error"] and "damaged" in report["damaged_error"]


@pytest.mark.multidevice
def test_a_killed_process_ends_the_launch_at_once(runs):
    _, _, killed = runs
    assert killed["after_kill_sec"] is not None, killed["output"][-3000:]
    assert killed["rc"] == 128 + signal.SIGKILL, killed["output"][-3000:]
    assert "error: process 1 of 2 was killed by SIGKILL" in killed["output"]
    assert "killed the other 1 process(es)" in killed["output"]
    assert killed["after_kill_sec"] < 10


@pytest.mark.multidevice
@pytest.mark.parametrize("name", ["T1", "TL"])
def test_sigterm_to_one_process_or_the_launcher_stops_all_after_the_same_block(runs, name):
    """Every process stops after the same block and they save one checkpoint together (a
    2-process save needs both: one process a block ahead would hang or fail it)."""
    tmp, results, _ = runs
    rc, output, _ = results[name]
    assert rc == 128 + signal.SIGTERM, output[-3000:]
    stops = re.findall(r"SIGTERM: stopped after iteration (\d+); saved checkpoint (\S+)", output)
    assert len(stops) == 1, output[-3000:]
    iteration = int(stops[0][0])
    assert iteration > 0 and iteration % TINY.log_interval == 0
    assert stops[0][1].rstrip(".") == str(tmp / name / "checkpoints" / str(iteration))
    assert sorted(p.name for p in (tmp / name / "checkpoints").iterdir()) == [str(iteration)]
    assert _meta(tmp / name, iteration)["iteration"] == iteration
    summary = json.loads((tmp / name / "run_summary.json").read_text())
    assert summary["status"] == "interrupted (SIGTERM)"
    assert summary["completed_iterations"] == iteration
    assert "Traceback" not in output and "error:" not in output


@pytest.mark.multidevice
def test_unreachable_coordinator_is_one_clear_line(runs):
    _, results, _ = runs
    rc, _, err = results["U"]
    assert rc == 2, err[-2000:]
    assert "error: process 1 of 2: nothing answers at the coordinator address 127.0.0.1:" in err


def test_sizes_not_divisible_by_the_global_device_count_fail_before_jax_starts():
    config = TINY.replace(
        num_envs=6, num_devices=4, num_processes=2, process_id=0, coordinator_address="h:1234"
    )
    with pytest.raises(ConfigError, match=r"num_envs 6 is not divisible by num_devices 4 \(the "
                       r"devices of all 2 processes\); use a multiple of 4"):  # fmt: skip
        config.validate()
    with pytest.raises(ConfigError, match="process_id 2 is out of range for num_processes 2"):
        TINY.replace(num_processes=2, process_id=2, coordinator_address="h:1").validate()
    with pytest.raises(ConfigError, match="needs --process-id and --coordinator-address"):
        TINY.replace(num_processes=2).validate()
    with pytest.raises(ConfigError, match="not divisible by the 2 processes"):
        TINY.replace(num_devices=3, num_processes=2, process_id=0,
                     coordinator_address="h:1").validate()  # fmt: skip
    TrainConfig(num_processes=1).validate()  # one process needs no coordinator


def test_launcher_documents_its_options_and_refuses_the_ones_it_sets(capsys):
    from unilab_jax.cli import launch

    with pytest.raises(SystemExit):
        launch.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--nproc", "--devices-per-process", "--platform", "--port", "--exit-grace"):
        assert flag in text
    assert "--num-processes, --process-id and --coordinator-address" in text
    assert launch.main(["--nproc", "2", "--", "--process-id", "1"]) == 2
    assert "--process-id: set by the launcher" in capsys.readouterr().err
