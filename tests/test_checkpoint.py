"""Checkpoints are atomic, self-describing and checked: a flipped or truncated file is reported
as damage (naming the checkpoint), a state of other shapes as a mismatch; deletions and failed
saves never leave a half-written checkpoint behind; the newest and the best evaluated are kept."""

import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.training.checkpoint import (
    META_FILE,
    CheckpointDamagedError,
    CheckpointMismatchError,
    CheckpointSaveError,
    CheckpointWriter,
    best_step,
    checksum,
    list_steps,
    read_meta,
    restore_checkpoint,
    restore_item,
)

TMP = ".orbax-checkpoint-tmp"  # orbax's suffix of a checkpoint being written


def _state(seed: int = 0, width: int = 8):
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    return {
        "agent": {"actor": {"kernel": jax.random.normal(k[0], (width, 4))}, "count": jnp.int32(7)},
        "replay": {"obs": jax.random.normal(k[1], (16, 64, 3))},
        "env": {"qpos": jax.random.normal(k[2], (16, 5)), "empty": jnp.zeros((16, 0))},
        "key": k[2],
        "iteration": jnp.int32(seed),
    }


def _assert_same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture
def saved(tmp_path):
    writer = CheckpointWriter(tmp_path, max_to_keep=2, metadata={"train": {"num_envs": 16}})
    for step in (1, 2, 3):
        writer.save(step, _state(step))
    writer.close()
    return tmp_path


def test_round_trip_keeps_the_newest_and_describes_itself(saved):
    assert list_steps(saved) == [2, 3]  # max_to_keep 2
    assert sorted(p.name for p in saved.iterdir()) == ["2", "3"]  # no partial or deleted left
    _assert_same(restore_checkpoint(saved, _state()), _state(3))
    _assert_same(restore_checkpoint(saved, _state(), step=2), _state(2))
    _assert_same(restore_item(saved, "agent", _state()["agent"]), _state(3)["agent"])  # alone
    meta = read_meta(saved, 3)
    assert meta["iteration"] == 3 and meta["config"] == {"train": {"num_envs": 16}}
    assert set(meta["items"]) == {"agent", "replay", "env", "run"}
    assert meta["items"]["agent"]["actor.kernel"]["shape"] == [8, 4]
    assert meta["eval_return"] is None and "jax" in meta["versions"]
    assert {"agent", "env", "meta", "replay", "run"} <= {p.name for p in (saved / "3").iterdir()}


def test_flipped_bytes_in_data_files_are_reported_as_damage(saved):
    data_files = [p for p in (saved / "3" / "replay").rglob("*") if p.is_file()]
    data_files = [p for p in data_files if "ocdbt.process" in str(p) or "/d/" in str(p)]
    assert data_files
    for path in data_files:
        raw = bytearray(path.read_bytes())
        middle = len(raw) // 2
        raw[middle : middle + 16] = bytes(b ^ 0xFF for b in raw[middle : middle + 16])
        path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointDamagedError, match="checkpoint 3 under .* is damaged: replay"):
        restore_checkpoint(saved, _state())
    _assert_same(restore_checkpoint(saved, _state(), step=2), _state(2))  # the older is intact


def test_arrays_are_checked_too_when_their_files_look_intact(saved):
    """The per-array checksum is reached and trips on its own: checkpoint 3's replay item is
    replaced by checkpoint 2's, valid orbax files that orbax reads without complaint, but not
    the arrays checkpoint 3 recorded (as when a file was rewritten with other contents).
    (Flipping bytes inside a data file never reaches this check: orbax's reader fails first.)"""
    shutil.rmtree(saved / "3" / "replay")
    shutil.copytree(saved / "2" / "replay", saved / "3" / "replay")
    with pytest.raises(
        CheckpointDamagedError, match="is damaged: replay/obs does not match its recorded checksum"
    ):
        restore_checkpoint(saved, _state())


@pytest.mark.parametrize("victim", ["agent/_METADATA", META_FILE, "env/manifest.ocdbt"])
def test_truncated_files_are_reported_as_damage_not_as_a_mismatch(saved, victim):
    path = saved / "3" / victim
    path.write_bytes(path.read_bytes()[: os.path.getsize(path) // 3])
    with pytest.raises(CheckpointDamagedError, match="checkpoint 3 under .* is damaged"):
        restore_checkpoint(saved, _state())


def test_a_resume_names_a_damaged_or_older_meta_item_and_the_checkpoint_before_it(saved):
    """``--resume`` reads the newest checkpoint's ``meta`` before anything is built: a truncated
    one is damage naming the intact checkpoint before it, one of an older format says so (both
    ``ResumeError``s, the CLI's exit 2; they once escaped as other errors and a traceback)."""
    import json

    from unilab_jax.training.resume import ResumeError, restore_run

    meta = saved / "3" / META_FILE
    text = meta.read_text()
    meta.write_text(text[: len(text) // 2])
    with pytest.raises(ResumeError, match="checkpoint 3 under .* is damaged: meta") as err:
        restore_run(None, saved, None, {})
    assert err.value.older == 2
    meta.write_text(json.dumps({**json.loads(text), "format": "unilab_jax checkpoint 2"}))
    with pytest.raises(ResumeError, match="older unilab-jax format") as err:
        restore_run(None, saved, None, {})
    assert err.value.older is None


def test_other_shapes_are_a_mismatch_naming_the_arrays(saved):
    with pytest.raises(CheckpointMismatchError, match=r"agent/actor.kernel saved float32\[8, 4\]"):
        restore_checkpoint(saved, _state(width=16))


def test_missing_checkpoint_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError):
        restore_checkpoint(missing, _state())
    assert not missing.exists()


def test_interrupted_saves_and_deletions_are_swept_and_never_listed(saved):
    shutil.copytree(saved / "3", saved / f"4{TMP}")  # a save killed before orbax renamed it
    (saved / ".deleting").mkdir()  # a deletion killed half-way, after orbax's rename
    os.replace(saved / "2", saved / ".deleting" / "2")
    assert list_steps(saved) == [3]
    CheckpointWriter(saved).close()  # the next run's writer sweeps both
    assert sorted(p.name for p in saved.iterdir()) == ["3"]


def test_a_deletion_cut_short_leaves_no_half_deleted_checkpoint_listed(tmp_path, monkeypatch):
    """Old checkpoints are renamed out of the listing before they are deleted: a deletion cut
    short (the process killed while it removes files) leaves no listed, half-deleted one."""
    import contextlib
    from pathlib import Path

    from etils import epath

    writer = CheckpointWriter(tmp_path, max_to_keep=1)
    writer.save(1, _state(1))

    def cut_short(path, *args, **kwargs):  # removes one file, then the process "dies"
        next(p for p in Path(path).rglob("*") if p.is_file()).unlink()
        raise OSError("killed while deleting")

    monkeypatch.setattr(type(epath.Path(tmp_path)), "rmtree", cut_short)
    with contextlib.suppress(CheckpointSaveError):
        writer.save(2, _state(2))  # drops checkpoint 1 (max_to_keep 1)
    monkeypatch.undo()
    for step in list_steps(tmp_path):  # every listed checkpoint is complete
        restore_checkpoint(tmp_path, _state(), step=step)
    assert list_steps(tmp_path) == [2]


def test_disk_full_at_a_save_is_a_clear_error_and_the_previous_checkpoint_survives(tmpfs):
    small_disk = tmpfs("size=512k")
    writer = CheckpointWriter(small_disk / "checkpoints")
    writer.save(1, _state(1))
    ballast = small_disk / "ballast"
    with open(ballast, "wb") as f:  # fill the disk to about 8 KiB free
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        f.write(b"\0" * max(0, free - 8192))
    with pytest.raises(CheckpointSaveError, match="No space left on device") as err:
        writer.save(2, _state(2))
    assert "could not write checkpoint 2" in str(err.value)
    assert "checkpoint 1 is intact" in str(err.value)
    assert "MiB free, a checkpoint needs about" in str(err.value)  # the pre-check refused it
    assert sorted(p.name for p in (small_disk / "checkpoints").iterdir()) == ["1"]  # no tmp
    _assert_same(restore_checkpoint(small_disk / "checkpoints", _state()), _state(1))
    ballast.unlink()  # space again: the next save works
    writer.save(2, _state(2))
    assert list_steps(small_disk / "checkpoints") == [1, 2]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_save_failing_after_orbax_started_writing_leaves_the_previous_checkpoint(
    tmpfs, capfd, caplog
):
    """Room for the pre-check (1.1 x the arrays + 64 KiB) but not for orbax's files (on a
    tmpfs every one of its ~60 small files takes a 4 KiB page: about 250 KiB in all): orbax
    itself fails midway, from its writer threads. What they log and leave (their tracebacks,
    failed asyncio tasks, callbacks into closed event loops) ends with the failed save, and
    nothing prints after ``CheckpointSaveError``."""
    import gc

    small_disk = tmpfs("size=1m")
    writer = CheckpointWriter(small_disk / "checkpoints")
    writer.save(1, _state(1))
    need = sum(x.nbytes for x in jax.tree.leaves(_state(2)))
    with open(small_disk / "ballast", "wb") as f:  # leave the pre-check's need + 24 KiB
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        f.write(b"\0" * (free - (int(need * 1.1) + (64 << 10) + (24 << 10))))
    capfd.readouterr()
    caplog.clear()
    with pytest.raises(CheckpointSaveError) as err:
        writer.save(2, _state(2))
    under = small_disk / "checkpoints"
    assert str(err.value) == (
        f"could not write checkpoint 2 under {under}: No space left on device; "
        "checkpoint 1 is intact"
    )
    assert capfd.readouterr().err == ""  # orbax's writer threads' tracebacks held back
    del err
    gc.collect()
    assert capfd.readouterr().err == ""
    assert [r.getMessage() for r in caplog.records] == []
    assert sorted(p.name for p in under.iterdir()) == ["1"]  # the partial save is removed
    _assert_same(restore_checkpoint(under, _state()), _state(1))


def test_the_best_evaluated_checkpoint_is_kept_beside_the_newest(tmp_path):
    """Retention 2: the newest two and the best evaluated one (iteration 2, not among the
    newest) survive; ``best_step`` names it, and it restores."""
    writer = CheckpointWriter(tmp_path, max_to_keep=2)
    for step, score in [(1, 5.0), (2, 9.0), (3, None), (4, 3.0), (5, float("nan")), (6, None)]:
        writer.save(step, _state(step), eval_return=score)
    writer.close()
    assert list_steps(tmp_path) == [2, 5, 6]
    assert best_step(tmp_path) == 2 and read_meta(tmp_path, 2)["eval_return"] == 9.0
    _assert_same(restore_checkpoint(tmp_path, _state(), step=best_step(tmp_path)), _state(2))
    # A later writer (a resumed run) knows the best from the files: a better one replaces it.
    writer = CheckpointWriter(tmp_path, max_to_keep=2)
    writer.save(7, _state(7), eval_return=10.0)
    writer.save(8, _state(8))
    writer.close()
    assert list_steps(tmp_path) == [7, 8] and best_step(tmp_path) == 7


def test_a_run_without_evaluation_has_no_best_checkpoint(saved, tmp_path):
    assert best_step(saved) is None
    assert best_step(tmp_path / "nowhere") is None and not (tmp_path / "nowhere").exists()


def test_the_checksum_is_the_same_on_the_host_and_over_devices_and_sees_one_changed_word():
    """An array spread over processes is summed by one jitted reduction (on the devices), one a
    process holds on the host in chunks: the same figure for every dtype a state holds. A
    changed word or two swapped words change it."""
    from unilab_jax.training import checkpoint

    rng = np.random.default_rng(0)
    arrays = [
        rng.normal(size=(1 << 22) + 5).astype(np.float32),  # over one host chunk
        rng.normal(size=(3, 7)).astype(jnp.bfloat16),
        rng.integers(0, 255, size=(5, 3), dtype=np.uint8),
        rng.integers(-9, 9, size=(2, 2), dtype=np.int16),
        np.array([True, False, True]),
        np.array(3.5, np.float32),
        np.asarray(jax.random.PRNGKey(1)),
    ]
    on_devices = [int(s) for s in checkpoint._global_checksums([jnp.asarray(x) for x in arrays])]
    assert on_devices == [checksum(x) for x in arrays]
    x = arrays[0].copy()
    x[1000] = np.nextafter(x[1000], np.float32(np.inf))
    assert checksum(x) != checksum(arrays[0])
    x = arrays[0].copy()
    x[[7, 8]] = x[[8, 7]]
    assert checksum(x) != checksum(arrays[0])


def test_an_evaluated_run_keeps_its_best_checkpoint_and_step_best_finds_it(tmp_path):
    """The evaluation, then the checkpoint sink (their order in a run). Saves are due every 4
    iterations, evaluations every 2: the best evaluation (iteration 2) is off the schedule and
    is saved for being the best so far, a worse one (6) is not; with retention 1 the best is
    kept beside the newest (8); ``step="best"`` finds it, no step the newest."""
    from unilab_jax.policy.load import find_checkpoint
    from unilab_jax.training.sinks import CheckpointSink, EvalSink, RunInfo, SinkChain

    returns = iter([7.0, 1.0, 2.0, 3.0])  # the evaluations at iterations 2, 4, 6 and 8
    writer = CheckpointWriter(tmp_path / "checkpoints", max_to_keep=1)
    evaluate = EvalSink(lambda state: (next(returns), 5.0), interval=2, max_iterations=8)
    chain = SinkChain([evaluate, CheckpointSink(writer, save_interval=4, max_iterations=8)])
    chain.start(RunInfo("sac", "task", 16, 3, 4, 8, 1, 0, 1, str(tmp_path), 0))
    saved = []
    for iteration in (2, 4, 6, 8):
        record = chain.block({"iteration": iteration}, _state(iteration))
        if "checkpoint" in record:
            assert record["checkpoint"] == str(tmp_path / "checkpoints" / str(iteration))
            saved.append(iteration)
    chain.close()
    assert saved == [2, 4, 8]  # 2: the best so far; 4 and 8: the schedule; 6: neither
    assert list_steps(tmp_path / "checkpoints") == [2, 8]
    assert read_meta(tmp_path / "checkpoints", 2)["eval_return"] == 7.0
    assert find_checkpoint(tmp_path, "best") == (tmp_path / "checkpoints", 2)
    assert find_checkpoint(tmp_path) == (tmp_path / "checkpoints", 8)
    assert find_checkpoint(tmp_path / "checkpoints" / "8", "best")[1] == 2
    _assert_same(restore_checkpoint(tmp_path / "checkpoints", _state(), step=2), _state(2))


def test_step_best_of_a_run_without_evaluation_is_a_clear_error(saved):
    from unilab_jax.policy.load import find_checkpoint

    with pytest.raises(
        FileNotFoundError, match=r"no evaluated checkpoint under .* \(saved: 2, 3\)"
    ):
        find_checkpoint(saved, "best")


def test_resuming_one_checkpoint_folder_names_the_run_and_step_to_pass(tmp_path):
    from unilab_jax.errors import ConfigError
    from unilab_jax.training.resume import checkpoint_folder

    (tmp_path / "run" / "checkpoints" / "2").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"one checkpoint: pass --resume .*run --resume-step 2"):
        checkpoint_folder(tmp_path / "run" / "checkpoints" / "2", "--resume")
