"""Checkpoints are atomic, self-describing and checked: a flipped or truncated file is reported
as damage (naming the checkpoint), a state of other shapes as a mismatch; deletions and failed
saves never leave a half-written checkpoint behind."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from unilab_jax.training.checkpoint import (
    CheckpointDamagedError,
    CheckpointMismatchError,
    CheckpointSaveError,
    CheckpointWriter,
    list_steps,
    read_meta,
    restore_checkpoint,
)


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
    assert not [p for p in saved.iterdir() if p.name.startswith(".")]  # no tmp/deleting left
    _assert_same(restore_checkpoint(saved, _state()), _state(3))
    _assert_same(restore_checkpoint(saved, _state(), step=2), _state(2))
    meta = read_meta(saved, 3)
    assert meta["iteration"] == 3 and meta["config"] == {"train": {"num_envs": 16}}
    assert set(meta["items"]) == {"agent", "replay", "env", "run"}
    assert meta["items"]["agent"]["actor.kernel"]["shape"] == [8, 4]
    assert "jax" in meta["versions"]
    assert sorted(p.name for p in (saved / "3").iterdir()) == [
        "agent",
        "env",
        "meta.json",
        "replay",
        "run",
    ]


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
    """The per-array CRC-32 is reached and trips on its own: the files are intact (orbax reads
    them without complaint) but one array's recorded checksum is not what it holds, as when a
    file was rewritten with other contents and its file checksum updated with it. (Flipping
    bytes inside a data file never reached this check: orbax's reader failed first.)"""
    meta = json.loads((saved / "3" / "meta.json").read_text())
    name = next(iter(meta["items"]["replay"]))
    meta["items"]["replay"][name]["crc32"] ^= 1
    (saved / "3" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(
        CheckpointDamagedError, match=f"damaged: replay/{name} does not match its recorded checksum"
    ):
        restore_checkpoint(saved, _state())


@pytest.mark.parametrize("victim", ["agent/_METADATA", "meta.json", "env/manifest.ocdbt"])
def test_truncated_files_are_reported_as_damage_not_as_a_mismatch(saved, victim):
    path = saved / "3" / victim
    path.write_bytes(path.read_bytes()[: os.path.getsize(path) // 3])
    with pytest.raises(CheckpointDamagedError, match="checkpoint 3 under .* is damaged"):
        restore_checkpoint(saved, _state())


def test_other_shapes_are_a_mismatch_naming_the_arrays(saved):
    with pytest.raises(CheckpointMismatchError, match=r"agent/actor.kernel saved float32\[8, 4\]"):
        restore_checkpoint(saved, _state(width=16))


def test_missing_checkpoint_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError):
        restore_checkpoint(missing, _state())
    assert not missing.exists()


def test_interrupted_saves_and_deletions_are_swept_and_never_listed(saved):
    (saved / ".tmp-4").mkdir()  # a save killed half-way
    os.replace(saved / "2", saved / ".deleting-2")  # a deletion killed half-way
    assert list_steps(saved) == [3]
    CheckpointWriter(saved)  # the next run's writer sweeps both
    assert sorted(p.name for p in saved.iterdir()) == ["3"]


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


def test_a_save_failing_after_orbax_started_writing_leaves_the_previous_checkpoint(
    tmpfs, capfd, caplog, monkeypatch
):
    """Room for the pre-check (1.1 x the arrays + 64 KiB) but not for orbax's files (on a
    tmpfs every one of its ~45 small files takes a 4 KiB page: about 190 KiB in all): orbax
    itself fails midway, from its writer threads. Its leftover asyncio futures are collected
    by the failed save, not later with a "Future exception was never retrieved" traceback."""
    import gc
    import logging

    # orbax's thread errors are logged through absl: kept by pytest's log capture, their
    # records would hold those futures (through their tracebacks) past the save
    monkeypatch.setattr(logging.getLogger("absl"), "disabled", True)
    small_disk = tmpfs("size=1m")
    writer = CheckpointWriter(small_disk / "checkpoints")
    writer.save(1, _state(1))
    need = sum(x.nbytes for x in jax.tree.leaves(_state(2)))
    with open(small_disk / "ballast", "wb") as f:  # leave the pre-check's need + 24 KiB
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        f.write(b"\0" * (free - (int(need * 1.1) + (64 << 10) + (24 << 10))))
    capfd.readouterr()
    with pytest.raises(CheckpointSaveError) as err:
        writer.save(2, _state(2))
    under = small_disk / "checkpoints"
    assert str(err.value) == (
        f"could not write checkpoint 2 under {under}: No space left on device; "
        "checkpoint 1 is intact"
    )
    assert capfd.readouterr().err == ""  # orbax's writer threads' tracebacks held back
    caplog.clear()
    del err
    gc.collect()
    assert capfd.readouterr().err == ""
    assert [r.getMessage() for r in caplog.records] == []
    assert sorted(p.name for p in under.iterdir()) == ["1"]  # the partial save is removed
    _assert_same(restore_checkpoint(under, _state()), _state(1))
