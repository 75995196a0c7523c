"""``unilab-jax play``: a real offscreen render of a tiny run into a real mp4."""

import json
import os

import pytest
from tiny import TINY, TINY_SAC  # tests/tiny.py

from unilab_jax.cli import play as play_cli
from unilab_jax.policy import play
from unilab_jax.training.trainer import train

# tests/tiny.py's run with a checkpoint at iteration 4: its compiled programs come from the
# persistent compile cache.
TINY = TINY.replace(max_iterations=4, save_interval=4)


@pytest.fixture
def gl_backend(monkeypatch):
    """The GL backend play would use; skips, saying why, when none renders here."""
    imageio = pytest.importorskip("imageio.v2", reason=f"needs imageio: {play.VIDEO_EXTRA}")
    pytest.importorskip("imageio_ffmpeg", reason=f"needs imageio-ffmpeg: {play.VIDEO_EXTRA}")
    # play sets these for the backend it picks; restore them for the other tests.
    for name in ("MUJOCO_GL", "PYOPENGL_PLATFORM"):
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)
    backend, failures = play.choose_gl_backend()
    if backend is None:
        pytest.skip(play.no_backend_message(failures))
    return backend, imageio


# imageio-ffmpeg starts ffmpeg with subprocess (fork + exec), which JAX warns about.
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_play_renders_the_policy_into_an_mp4_and_logs_it_to_wandb(tmp_path, gl_backend, capsys):
    backend, imageio = gl_backend
    pytest.importorskip("wandb")  # offline (tests/conftest.py)
    train(TINY, TINY_SAC, log_dir=tmp_path / "run", logger="wandb", quiet=True)
    video = tmp_path / "out.mp4"
    argv = [str(tmp_path / "run"), "--video", str(video), "--steps", "5"]
    assert play_cli.main([*argv, "--width", "64", "--height", "48", "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    # Episodes are 5 steps long (the run's override): 2 episodes, 5 frames each.
    assert "episode 1 return" in out and "episode 2 return" in out
    assert f"video: {video} (10 frames, 64x48 at 20 fps" in out
    assert f"MUJOCO_GL={backend}" in out
    assert video.is_file() and video.stat().st_size > 0
    with imageio.get_reader(str(video), format="FFMPEG") as reader:
        frames = [frame for frame in reader]
        assert reader.get_meta_data()["fps"] == pytest.approx(20)
    assert len(frames) == 10
    assert all(frame.shape == (48, 64, 3) for frame in frames)
    assert max(frame.std() for frame in frames) > 1  # a picture, not a blank frame
    # pick: of the episodes played, only the one it picks is kept (and would be rendered).
    import numpy as np

    from unilab_jax.policy.load import load_policy

    policy = load_policy(tmp_path / "run")
    both = play.play_policy(policy, episodes=2, steps=5).result
    picked = play.play_policy(policy, episodes=2, steps=5, pick=lambda r: 1).result
    assert picked.qpos.shape == (both.qpos.shape[0], 1, both.qpos.shape[2])
    assert np.array_equal(picked.qpos[:, 0], both.qpos[:, 1])
    assert not np.array_equal(both.qpos[:, 0], both.qpos[:, 1])
    assert picked.returns.tolist() == both.returns[1:].tolist()
    # --wandb: the same kind of video lands in the training run's own (offline) wandb run.
    record = json.loads((tmp_path / "run" / "wandb_run.json").read_text())
    assert record["mode"] == "offline" and record["id"]
    argv = [str(tmp_path / "run" / "checkpoints" / "4"), "--wandb", "--steps", "5"]
    assert play_cli.main([*argv, "--width", "64", "--height", "48"]) == 0
    out = capsys.readouterr().out
    kept = tmp_path / "run" / "videos" / "iteration_4.mp4"
    assert f"video: {kept} (5 frames" in out and f"to run {record['id']}" in out
    runs = sorted((tmp_path / "run" / "wandb").glob(f"offline-run-*-{record['id']}"))
    assert len(runs) == 2  # the training run, resumed by play under the same id
    assert list((runs[-1] / "files" / "media" / "videos" / "video").glob("policy_*.mp4"))


def test_play_wandb_needs_a_run_that_logged_to_wandb(tmp_path, capsys):
    assert play_cli.main([str(tmp_path), "--wandb"]) == 2
    assert "no wandb_run.json" in capsys.readouterr().err


def test_play_rejects_bad_video_arguments(tmp_path, capsys):
    assert play_cli.main([str(tmp_path), "--video", str(tmp_path / "a.mp4"), "--width", "63"]) == 2
    assert "must be even" in capsys.readouterr().err
    assert play_cli.main([str(tmp_path), "--video", str(tmp_path / "a.gif")]) == 2
    assert "--video must end in .mp4" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("off", "MUJOCO_GL=off turns MuJoCo's rendering off"),
        ("bogus", "invalid value for environment variable MUJOCO_GL: bogus"),
    ],
)
def test_a_mujoco_gl_that_cannot_render_exits_2_saying_why(
    tmp_path, monkeypatch, capsys, value, reason
):
    pytest.importorskip("imageio_ffmpeg", reason=f"needs imageio-ffmpeg: {play.VIDEO_EXTRA}")
    monkeypatch.setenv("MUJOCO_GL", value)
    assert play_cli.main([str(tmp_path), "--video", str(tmp_path / "a.mp4")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"error: MuJoCo cannot render offscreen with MUJOCO_GL={value}"
    )
    assert reason in err and "unset MUJOCO_GL" in err and "libosmesa6" in err
    assert not (tmp_path / "a.mp4").exists()


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
@pytest.mark.parametrize("name", ["G1WalkFlat", "Go2JoystickFlat"])
def test_a_robot_built_for_physics_only_is_rendered_not_just_its_floor(name, tmp_path, gl_backend):
    """The reference's G1 and Go2 have only collision geoms (group 3, hidden by MuJoCo's
    default): a video of them showed an empty floor. The robot's geoms are drawn, opaque."""
    import numpy as np

    from unilab_jax.envs import load
    from unilab_jax.policy.video import resolve_camera, write_video

    _, imageio = gl_backend
    play.use_gl_backend(gl_backend[0])
    model = play.render_source(load(name)).model
    rgba = model.geom_rgba.copy()
    one = play.Rollout(np.zeros(1), np.ones(1), model.qpos0[None, None], np.zeros((1, 1, model.nv)),
                       np.ones((1, 1), bool))  # fmt: skip
    video = tmp_path / "robot.mp4"
    assert write_video(video, model, one, width=96, height=72,
                       camera=resolve_camera(model, None), fps=50) == 1  # fmt: skip
    frame = imageio.get_reader(str(video), format="FFMPEG").get_data(0).astype(int)
    # The floor is grey (r = g = b); the robot's geoms are coloured.
    coloured = np.abs(frame - frame.mean(axis=2, keepdims=True)).max(axis=2) > 30
    assert coloured.mean() > 0.01, coloured.mean()
    assert np.array_equal(model.geom_rgba, rgba)  # the task's model is left as it was


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_fixed_hand_and_its_object_fill_the_frame(tmp_path, gl_backend):
    """The Sharpa hand is fixed in place and its collision meshes sit in group 3 beside an
    object drawn in group 0: a video once showed the floor with the object a few pixels far
    off and no hand. The free camera now frames the hand's moving parts and the object, and
    the hand's geoms are drawn."""
    import numpy as np

    from unilab_jax.envs import load
    from unilab_jax.policy.video import resolve_camera, write_video

    _, imageio = gl_backend
    play.use_gl_backend(gl_backend[0])
    model = play.render_source(load("SharpaInhandRotation", physics="mujoco")).model
    one = play.Rollout(np.zeros(1), np.ones(1), model.qpos0[None, None],
                       np.zeros((1, 1, model.nv)), np.ones((1, 1), bool))  # fmt: skip
    video = tmp_path / "hand.mp4"
    assert write_video(video, model, one, width=160, height=120,
                       camera=resolve_camera(model, None), fps=20) == 1  # fmt: skip
    frame = imageio.get_reader(str(video), format="FFMPEG").get_data(0).astype(int)
    hand = (np.ptp(frame, axis=2) < 25) & (frame.min(axis=2) > 120)  # light grey meshes
    red = (frame[..., 0] - frame[..., 2] > 60) & (frame[..., 0] - frame[..., 1] > 60)  # object
    assert hand.mean() > 0.02 and red.mean() > 0.005, (hand.mean(), red.mean())


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_trackers_video_draws_the_clip_beside_the_robot(tmp_path, gl_backend):
    """A motion tracker's rollout carries the clip's pose per step (``Task.reference_qpos``);
    the video draws it as a translucent orange ghost beside the robot."""
    import jax
    import numpy as np

    from unilab_jax.envs import load
    from unilab_jax.policy.video import resolve_camera, write_video

    _, imageio = gl_backend
    play.use_gl_backend(gl_backend[0])
    env = load("G1MotionTrackingSAC")
    model = play.render_source(env).model
    task_state = env.task.init_task_state(jax.random.PRNGKey(0))
    reference = np.asarray(env.task.reference_qpos(task_state))
    assert reference.shape == (model.nq,)
    qpos = reference.copy()
    qpos[1] += 1.0  # the robot a metre to the side of the clip's pose

    def orange(with_ghost: bool) -> float:
        ghost = reference[None, None] if with_ghost else None
        one = play.Rollout(np.zeros(1), np.ones(1), qpos[None, None], np.zeros((1, 1, model.nv)),
                           np.ones((1, 1), bool), ghost)  # fmt: skip
        video = tmp_path / f"ghost{with_ghost}.mp4"
        assert write_video(video, model, one, width=160, height=120,
                           camera=resolve_camera(model, None), fps=50) == 1  # fmt: skip
        frame = imageio.get_reader(str(video), format="FFMPEG").get_data(0).astype(int)
        return float(
            np.mean((frame[..., 0] - frame[..., 2] > 60) & (frame[..., 0] > frame[..., 1]))
        )

    assert orange(True) > orange(False) + 0.005
