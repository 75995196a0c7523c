"""1 vs 2 forced host devices: same parameters for the same global batch; the sharded loop runs.

Runs in a subprocess (the device count is fixed when JAX starts) under a timeout, because of
the batched-Cholesky deadlock of forced host devices (unilab_jax/envs/cpu_linalg.py); the
pendulum has one joint and 4 envs per device, far below the sizes that hang.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unilab_jax.distributed.processes import with_host_devices

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ)
    env["XLA_FLAGS"] = with_host_devices(env.get("XLA_FLAGS", ""), 2)
    proc = subprocess.run(
        [sys.executable, str(HERE / "multidevice_check.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.multidevice
@pytest.mark.parametrize("algo", ["sac", "td3", "flash_sac"])
def test_one_update_same_on_1_and_2_devices(report, algo):
    moved = report[f"{algo}_params_moved"]
    assert moved > 1e-4  # the update really changed the parameters (lr 3e-4 Adam steps)
    # Same parameters up to float32 reduction order: under 1% of the largest update.
    assert report[f"{algo}_param_abs_diff"] < 1e-2 * moved
    assert report[f"{algo}_metric_rel_diff"] < 1e-4


@pytest.mark.multidevice
def test_sharded_loop_runs_on_2_devices(report):
    assert report["loop_iterations"] == 4
    assert report["loop_buffer_rows"] == 4 * 8
    assert report["loop_qf_loss"] > 0


@pytest.mark.multidevice
def test_lapack_deadlock_fix_is_installed_and_works(report):
    assert report["cpu_linalg_installed"]
    assert report["cholesky_scan_ok"]


@pytest.mark.multidevice
def test_facade_mjx_backend_trains_over_two_devices(report):
    """`MultiGPUOffPolicyRunner(num_gpus=2, sim_backend="mjx")`: 2 JAX devices, and the trained
    weights land in the torch learner."""
    assert report["facade_iterations"] == 4
    assert report["facade_backend"] == "mjx"
    assert report["facade_actor_moved"] > 0
    assert report["facade_torch_finite"]
