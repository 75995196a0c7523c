"""One of 2 processes of a multi-process run (tests/test_multiprocess.py starts both).

``python multiprocess_check.py PROCESS_ID PORT OUT_DIR ONE_PROCESS_RUN_DIR``

With one compile, through the Python API on ``jax.distributed``:

1. trains the tiny run from scratch over 2 processes x 1 device, checkpoints 2, 4, 6 in
   ``OUT_DIR/B`` (compared by the test with the 1-process x 2-device run's);
2. restores the 1-process run's checkpoint 4 (written by a concurrent process; waited for) and
   trains it on to 6 in ``OUT_DIR/C``: a resume across process counts;
3. restores its own checkpoint 6 and checks it equals the state it trained;
4. builds a Trainer with a different seed on each process: must fail naming the setting;
5. damages the array data files of checkpoint 2's agent (process 0) and restores it: must
   fail on both processes.

Prints one JSON line.
"""

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from tiny import TINY, TINY_SAC  # noqa: E402


def main() -> int:
    pid, port, out, one = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    t0 = time.perf_counter()
    config = TINY.replace(
        num_devices=2,
        save_interval=2,
        num_processes=2,
        process_id=pid,
        coordinator_address=f"127.0.0.1:{port}",
        coordinator_timeout=120,
    )
    from unilab_jax.training.trainer import Trainer, train

    trainer = Trainer(config, TINY_SAC)  # starts jax.distributed

    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    from unilab_jax.config import ConfigError
    from unilab_jax.training.checkpoint import CheckpointDamagedError, restore_checkpoint

    report: dict = {"process": pid, "devices": len(jax.devices())}
    report["local"] = len(jax.local_devices())
    report["startup_sec"] = time.perf_counter() - t0
    result = train(config, log_dir=out / "B", quiet=True, trainer=trainer)
    report["b_iterations"] = result.summary["completed_iterations"]
    report["b_compile_sec"] = result.summary["compile_time_sec"]
    report["b_sec"] = time.perf_counter() - t0

    ready = one / "checkpoints" / "6"  # orbax renames it into place once complete
    deadline = time.monotonic() + 400
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    multihost_utils.sync_global_devices("one-process run done")
    state = restore_checkpoint(one / "checkpoints", trainer.init_state(), step=4)
    report["restored_iteration"] = int(state.iteration)
    resumed = train(config, log_dir=out / "C", quiet=True, trainer=trainer, initial_state=state)
    report["c_iterations"] = resumed.summary["completed_iterations"]

    own = restore_checkpoint(out / "B" / "checkpoints", trainer.init_state(), step=6)

    def equal(a, b):
        pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        return jnp.all(jnp.stack([jnp.array_equal(x, y) for x, y in pairs]))

    same = jax.jit(equal)(own, result.state)
    report["own_restore_equal"] = bool(same)

    try:
        Trainer(config.replace(seed=pid), TINY_SAC)
        report["mismatch_error"] = None
    except ConfigError as err:
        report["mismatch_error"] = str(err)

    folder = out / "B" / "checkpoints" / "2" / "agent"
    if pid == 0:  # 16 bytes flipped in the middle of each of the item's array data files
        data_files = [p for p in folder.rglob("*") if p.is_file() and "/d/" in str(p)]
        assert data_files, sorted(map(str, folder.rglob("*")))
        for victim in data_files:
            data = bytearray(victim.read_bytes())
            middle = len(data) // 2
            data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
            victim.write_bytes(bytes(data))
    multihost_utils.sync_global_devices("damaged")
    try:
        restore_checkpoint(out / "B" / "checkpoints", trainer.init_state(), step=2)
        report["damaged_error"] = None
    except CheckpointDamagedError as err:
        report["damaged_error"] = str(err)
    report["total_sec"] = time.perf_counter() - t0
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
