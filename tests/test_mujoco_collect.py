"""C MuJoCo collection for the JAX learner (``physics="mujoco"``): a robot task trained with
both schedules, a resume that is bit-exact over every leaf (the C MuJoCo integration state
included), evaluation on C MuJoCo, multi-device learners, and the errors before anything
compiles."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from tiny import array_checksums  # tests/tiny.py

from unilab_jax.config import ConfigError, TrainConfig
from unilab_jax.training.checkpoint import read_meta, restore_checkpoint
from unilab_jax.training.trainer import Trainer, train

# Go1 on C MuJoCo, 8 envs, 20-step episodes (so episodes end, reset and are counted), TD3 (its
# per-env exploration noise scales are part of the state a resume must restore).
GO1 = TrainConfig(
    env="Go1JoystickFlat",
    algo="td3",
    num_envs=8,
    replay_buffer_n=16,
    batch_size=32,
    updates_per_step=2,
    learning_starts=2,
    max_iterations=6,
    log_interval=2,
    save_interval=2,
    eval_envs=4,
    eval_interval=0,
    env_overrides={"episode_length": 20},
    physics="mujoco",
)
WIDTHS = {"actor_hidden_dim": 16, "critic_hidden_dim": 32, "num_atoms": 11}


@pytest.fixture(scope="module")
def trainer():
    built = Trainer(GO1, WIDTHS)
    yield built
    built.close()


@pytest.fixture(scope="module")
def run(trainer, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("go1_mujoco")
    return log_dir, train(GO1, trainer=trainer, log_dir=log_dir, logger="none", quiet=True)


def _leaves(state):
    return jax.tree_util.tree_flatten_with_path(jax.device_get(state))[0]


def test_c_mujoco_collection_learns_counts_episodes_and_evaluates_on_c_mujoco(run, trainer):
    _, result = run
    history = result.history
    assert [h["iteration"] for h in history] == [2, 4, 6]
    assert history[-1]["env_steps"] == 6 * 8
    # Learning starts once max(batch 32, 2 x 8 envs) rows are stored: after iteration 4.
    assert [h["learning"] for h in history] == [False, True, True]
    assert history[-1]["learner"]["qf_loss"] > 0
    assert history[-1]["buffer_rows"] == 6 * 8
    # Staggered 20-step time limits end some episodes in 48 env steps; a standing robot under
    # exploration noise may also fall.
    assert sum(h["episodes"] for h in history) > 0
    assert {h["policy_lag"] for h in history} == {0}  # sync: the actor of the last iteration
    assert {"reward/tracking_lin_vel", "reward/alive"} <= set(history[-1]["components"])
    eval_return = result.summary["eval_mean_return"]
    assert eval_return is not None and np.isfinite(eval_return)
    # The C MuJoCo evaluation of the returned state, with the same keys, gives the same figure.
    again, length = trainer.evaluate_episodes(result.state, GO1.eval_envs, GO1.seed + 1)
    assert again == eval_return
    assert 1 <= length <= 20
    # The state carries the C MuJoCo integration state, as float64 bits.
    words = np.asarray(result.state.env["physics"])
    assert words.dtype == np.uint32 and words.shape == (8, 2 * trainer.collection.vec.batch.nstate)
    np.testing.assert_array_equal(words.view(np.float64), trainer.collection.vec.batch.state)


def test_resume_is_bit_exact_over_every_leaf_including_c_mujoco_state(run, trainer):
    log_dir, result = run
    checkpoints = log_dir / "checkpoints"
    meta = read_meta(checkpoints, 2)
    assert "physics" in meta["items"]["env"]
    restored = restore_checkpoint(checkpoints, trainer.init_state(), step=2)
    assert int(restored.iteration) == 2
    resumed = train(GO1, trainer=trainer, initial_state=restored, logger="none", quiet=True)
    assert [h["iteration"] for h in resumed.history] == [4, 6]
    expected, got = _leaves(result.state), _leaves(resumed.state)
    assert [p for p, _ in expected] == [p for p, _ in got]
    for (path, a), (_, b) in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
    # The same records, too.
    strip = lambda h: {k: v for k, v in h.items() if "sec" not in k and k != "checkpoint"}  # noqa: E731
    assert [strip(h) for h in resumed.history] == [strip(h) for h in result.history[1:]]


def test_a_loaded_policy_evaluates_on_c_mujoco_as_the_trainer_did(run, trainer):
    """``unilab_jax.policy.evaluate`` follows the run's physics: the checkpoint's policy on C MuJoCo
    gives the trainer's own final evaluation, plus time-limit and per-step reward figures."""
    import unilab_jax

    log_dir, result = run
    policy = unilab_jax.load_policy(log_dir)
    episodes = unilab_jax.evaluate(policy, episodes=GO1.eval_envs, seed=GO1.seed + 1)
    assert episodes.mean_return == pytest.approx(result.summary["eval_mean_return"], abs=1e-4)
    report = episodes.as_dict()
    assert 0.0 <= report["time_limit_rate"] <= 1.0
    # 20-step episodes: those that reached the limit ran all 20 steps.
    assert np.all(episodes.lengths[episodes.time_limit] == 20)
    tracking = episodes.components["reward/tracking_lin_vel"]
    assert tracking.shape == (GO1.eval_envs,) and np.all((tracking > 0) & (tracking <= 1))
    assert report["reward/tracking_lin_vel_per_step"] == pytest.approx(float(np.mean(tracking)))
    # play's rollout follows the run's physics too: the same episodes, frame by frame.
    from unilab_jax.envs import load
    from unilab_jax.policy.play import rollout_mujoco

    env = load(GO1.env, config_override=GO1.env_overrides)
    played = rollout_mujoco(policy, env, GO1.eval_envs, 20, GO1.seed + 1)
    np.testing.assert_allclose(played.returns, episodes.returns, rtol=1e-6)
    np.testing.assert_array_equal(played.lengths, episodes.lengths)
    assert played.qpos.shape == (20, GO1.eval_envs, env.task.model.nq)


def _without_device_count() -> str:
    """This process's ``XLA_FLAGS`` (the suite's, ``conftest.py``) less any host device count."""
    flags = os.environ.get("XLA_FLAGS", "")
    return re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags).strip()


def _cli(args, log_dir):
    env = {**os.environ, "UNILAB_JAX_PRESET": "none"}
    env["XLA_FLAGS"] = _without_device_count()  # the CLI forces the host devices it needs
    cmd = [sys.executable, "-m", "unilab_jax.train", "--env", "PendulumSwingup", "--algo", "sac",
           "--physics", "mujoco", "--num-envs", "8", "--replay-buffer-n", "16", "--batch-size",
           "32", "--updates-per-step", "2", "--learning-starts", "1", "--log-interval", "2",
           "--save-interval", "2", "--eval-envs", "0", "--actor-hidden-dim", "16",
           "--critic-hidden-dim", "32", "--num-atoms", "11", "--logger", "none", "--quiet",
           "--log-dir", str(log_dir), *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((log_dir / "run_summary.json").read_text())


def test_overlapped_collection_on_two_learner_devices_from_the_cli_resumes_exactly(tmp_path):
    """``--collection overlap --num-devices 2``: the CLI forces 3 host devices (2 learners, 1
    collector); a run resumed from its checkpoint 2 ends with the same arrays as the run that
    went on (every array's checksum)."""
    options = ["--collection", "overlap", "--num-devices", "2", "--env-steps-per-sync", "2"]
    summary = _cli([*options, "--max-iterations", "6"], tmp_path / "a")
    assert summary["completed_iterations"] == 6 and summary["total_env_steps"] == 6 * 8 * 2
    _cli([*options, "--max-iterations", "6", "--resume", str(tmp_path / "a"), "--resume-step",
          "2"], tmp_path / "b")  # fmt: skip
    a, b = (array_checksums(tmp_path / f"{run}/checkpoints/6") for run in ("a", "b"))
    assert a == b
    assert ("env", "physics") in a
    # It went on from checkpoint 2 (a run that ignored --resume would also end with these
    # arrays, the seed being the same, but would have saved checkpoint 2 again).
    assert sorted(p.name for p in (tmp_path / "b/checkpoints").iterdir()) == ["4", "6"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"env": "playground/CartpoleBalance"}, "runs on MJX only"),
        ({"collection": "overlap"}, "needs physics 'mujoco'"),
        ({"physics": "bullet"}, "physics 'bullet' is not one of mjx, mujoco"),
        ({"physics": "mujoco", "collection": "async"}, "collection 'async' is not one of"),
        ({"physics": "mujoco", "physics_threads": 0}, "physics_threads must be a positive"),
        (
            {
                "physics": "mujoco",
                "collection": "overlap",
                "num_processes": 2,
                "process_id": 0,
                "coordinator_address": "127.0.0.1:1234",
            },
            "collection 'overlap' runs in one process",
        ),  # fmt: skip
    ],
)
def test_physics_settings_that_cannot_work_fail_before_anything_is_built(changes, message):
    config = dataclasses.replace(GO1, **{"physics": "mujoco", **changes})
    if changes.get("collection") == "overlap" and "physics" not in changes:
        config = dataclasses.replace(config, physics="mjx")
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_overlap_without_a_spare_cpu_device_names_the_flag():
    if len(jax.devices("cpu")) > 1:
        pytest.skip("this process has a spare CPU device")
    with pytest.raises(ConfigError, match="xla_force_host_platform_device_count=2"):
        Trainer(dataclasses.replace(GO1, collection="overlap"), WIDTHS)


def _start_cli(module_args: list[str], devices: int | None) -> subprocess.Popen:
    env = {**os.environ, "UNILAB_JAX_PRESET": "none", "PYTHONUNBUFFERED": "1"}
    env["XLA_FLAGS"] = _without_device_count()
    if devices:
        env["XLA_FLAGS"] += f" --xla_force_host_platform_device_count={devices}"
    return subprocess.Popen([sys.executable, "-m", *module_args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _finish(proc: subprocess.Popen, what: str) -> str:
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{out[-4000:]}"
    return out


def test_a_process_of_two_shards_acts_and_steps_shard_by_shard(trainer):
    """A collector holding 2 mesh shards runs its acting program and its envs' JAX programs
    once per shard, on that shard's 4 rows: the programs a process of 1 shard runs. Kernels
    pick their blocking by a call's rows and the CPU's ISA (YNNPACK's dots on AVX2 give a row
    other bits in a call of 8 rows than in one of 4), so this is what makes 1 process x 2
    devices collect bitwise what 2 processes x 1 device collect on every CPU."""
    from unilab_jax.collection.collector import Collector

    task, agent, device = trainer.env.task, trainer.agent, trainer.collection.device
    policy = jax.device_put(trainer.init_state().agent, device)
    key = jax.random.PRNGKey(7)
    both = Collector(GO1, task, agent, device, shards=(0, 2), rows=(0, 8), threads=1)
    halves = [Collector(GO1, task, agent, device, shards=(i, 1), rows=(4 * i, 4), threads=1)
              for i in range(2)]  # fmt: skip
    rows_seen, explore = [], both._explore
    both._explore = lambda *a: (rows_seen.append(a[2].shape[0]), explore(*a))[1]
    try:
        # 10 steps: with YNNPACK held to AVX2 kernels, one acting program over the 8 rows
        # gave a step 2 of its 96 actions with other bits within them.
        chunks = []
        for c in (both, *halves):
            c.reset(GO1.seed, key)
            chunks.append([c.collect(policy, i)[0] for i in range(10)])
        assert rows_seen and set(rows_seen) == {4}
        for whole, *parts in zip(*chunks, strict=True):
            for field in dataclasses.fields(whole):
                got = np.concatenate([getattr(p, field.name) for p in parts], axis=1)
                np.testing.assert_array_equal(getattr(whole, field.name), got, field.name)
        physics = np.concatenate([h.vec.snapshot()["physics"] for h in halves])
        np.testing.assert_array_equal(both.vec.snapshot()["physics"], physics)
    finally:
        for c in (both, *halves):
            c.close()


@pytest.mark.multidevice
def test_two_processes_collect_and_train_what_one_process_of_two_devices_does(tmp_path):
    """C MuJoCo collection over 2 processes x 1 device (the launcher): each process steps its
    own 4 of the 8 envs, and every checkpoint holds bitwise the arrays of the same run as 1
    process x 2 devices (every array's checksum: agent, replay, C MuJoCo state, noise scales);
    the 2-process run resumes the 1-process run's checkpoint 2 to the same end; the final
    evaluation, split over the processes, gives the same figure."""
    config = tmp_path / "go1.json"
    config.write_text(json.dumps({"train": dataclasses.asdict(GO1), "algo": WIDTHS}))
    common = ["--config", str(config), "--num-devices", "2", "--logger", "none", "--quiet"]
    one = _start_cli(["unilab_jax.train", *common, "--log-dir", str(tmp_path / "one")], 2)
    two = _start_cli(["unilab_jax.cli", "launch", "--nproc", "2", "--", *common,
                      "--log-dir", str(tmp_path / "two")], None)  # fmt: skip
    _finish(one, "1 process x 2 devices")
    _finish(two, "2 processes x 1 device")
    for step in (2, 4, 6):
        a = array_checksums(tmp_path / "one/checkpoints" / str(step))
        assert array_checksums(tmp_path / "two/checkpoints" / str(step)) == a, step
    assert ("env", "physics") in a and ("run", "explore.noise_scales") in a
    summaries = [json.loads((tmp_path / d / "run_summary.json").read_text())
                 for d in ("one", "two")]  # fmt: skip
    assert summaries[1]["eval_mean_return"] == pytest.approx(summaries[0]["eval_mean_return"],
                                                             rel=1e-5)  # fmt: skip
    resumed = _start_cli(["unilab_jax.cli", "launch", "--nproc", "2", "--", *common, "--log-dir",
                          str(tmp_path / "resumed"), "--resume", str(tmp_path / "one"),
                          "--resume-step", "2"], None)  # fmt: skip
    _finish(resumed, "2-process resume")
    assert array_checksums(tmp_path / "resumed/checkpoints/6") == a
    # It went on from checkpoint 2: a run that ignored --resume would have saved 2 again.
    assert sorted(p.name for p in (tmp_path / "resumed/checkpoints").iterdir()) == ["4", "6"]
