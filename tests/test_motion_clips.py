"""Motion clips as data (``unilab_jax.envs.motion``): holosoma's clips converted by name into
the reference's format, equal to the reference's own remap tool; the loader that takes what fits
the model and refuses, in one line with the fix, what does not; ``unilab-jax convert-motion``."""

from __future__ import annotations

import hashlib

import mujoco
import numpy as np
import pytest

from unilab_jax.envs.motion import (
    DEFAULT_MOTION_FILE,
    MotionClipError,
    convert_motion,
    convert_motion_file,
    load_motion_clips,
    sources,
)
from unilab_jax.envs.motion.convert import name_index
from unilab_jax.envs.motion.layout import CLIP_KEYS, motion_body_names, motion_joint_names
from unilab_jax.envs.robots.assets import RobotAssetError

#: The reference tool's remap of holosoma's 51 bodies onto the G1's 31 (spec/reference_tasks.md).
REFERENCE_BODY_INDEX = [0, 1, 3, 4, 5, 6, 8, 9, 15, 16, 17, 18, 20, 21, 27, 28, 29, 31, 32, 33,
                        34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 47]  # fmt: skip
#: sha256 (first 16 hex digits) of each array the reference's remap tool writes for holosoma's
#: default clip: ``scripts/motion/remap_fullbody_npz.py --input .../sub3_largebox_003_mj.npz``,
#: UniLab @ 9aa57115 in its own venv, holosoma 0.0.3 (December 2026).
REFERENCE_TOOL_OUTPUT = {
    "fps": "85dd751867e3155c",
    "joint_pos": "cc9ded47192e5e5b",
    "joint_vel": "4ee52df2b020d6a1",
    "body_pos_w": "c7c2881914022c50",
    "body_quat_w": "3b9de1aae48dd27b",
    "body_lin_vel_w": "fe0d52845402d7c1",
    "body_ang_vel_w": "9e0ec772ad07967e",
}
HOLOSOMA_PIP = "pip install --no-deps holosoma==0.0.3"


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    from unilab_jax.envs.robots.g1_model import build_g1_model

    try:
        return build_g1_model()
    except RobotAssetError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def raw() -> dict[str, np.ndarray]:
    """Holosoma's default clip as the package has it (joint_pos [325, 36], 51 bodies)."""
    try:
        return sources.read_motion_arrays(DEFAULT_MOTION_FILE)
    except MotionClipError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def converted(raw, model) -> dict[str, np.ndarray]:
    return convert_motion(raw, model)


def _write(path, arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def test_holosoma_bodies_map_by_name_to_the_reference_tools_index(raw, model):
    assert motion_body_names(model)[0] == "world" and len(motion_body_names(model)) == 31
    index = name_index(raw["body_names"], motion_body_names(model), "body")
    assert index.tolist() == REFERENCE_BODY_INDEX
    # holosoma's 29 joints are the model's, in its order, after the root's 7 columns
    assert name_index(raw["joint_names"], motion_joint_names(model), "joint").tolist() == list(
        range(29)
    )


def test_conversion_equals_the_reference_tools_output(converted):
    digests = {
        key: hashlib.sha256(np.ascontiguousarray(converted[key]).tobytes()).hexdigest()[:16]
        for key in CLIP_KEYS
    }
    assert digests == REFERENCE_TOOL_OUTPUT


def test_converted_bodies_are_the_models_kinematics_with_wxyz_quaternions(raw, converted, model):
    """FK of the model from holosoma's qpos (root position, root quaternion wxyz, 29 joints)
    puts every body where the converted clip has it: the bodies are in MuJoCo order and the
    quaternions wxyz (holosoma's FK differs by up to 1 cm at the torso and arms); the velocity
    conventions of spec/reference_tasks.md hold."""
    data = mujoco.MjData(model)
    for frame in range(0, 325, 25):
        data.qpos[:] = raw["joint_pos"][frame]
        mujoco.mj_kinematics(model, data)
        pos, quat = converted["body_pos_w"][frame], converted["body_quat_w"][frame]
        assert np.abs(pos - data.xpos).max() < 0.012
        assert np.abs(np.sum(quat * data.xquat, axis=-1)).min() > 0.9995
    world = [converted[key][:, 0] for key in ("body_pos_w", "body_lin_vel_w", "body_ang_vel_w")]
    assert not np.any(world)  # the world's row is holosoma's world: at rest at the origin
    assert np.all(converted["body_quat_w"][:, 0] == [1.0, 0.0, 0.0, 0.0])
    assert np.array_equal(converted["joint_pos"], raw["joint_pos"][:, 7:].astype(np.float32))
    # joint velocities are the joint angles' time derivative (np.gradient), column for column
    slope = np.gradient(converted["joint_pos"].astype(np.float64), 1 / 50, axis=0)
    assert np.abs(slope - converted["joint_vel"]).max() < 1e-4
    # angular velocities are world-frame: the pelvis's is its rotation of the root's body-frame
    # one (holosoma's joint_vel[:, 3:6], dropped with the root's columns)
    world = np.zeros(3)
    for frame in range(0, 325, 25):
        mujoco.mju_rotVecQuat(world, raw["joint_vel"][frame, 3:6], raw["body_quat_w"][frame, 1])
        assert np.abs(converted["body_ang_vel_w"][frame, 1] - world).max() < 1e-5


def test_a_converted_file_loads_as_the_default_clip_does(converted, model, tmp_path):
    path = tmp_path / "box.npz"
    written = convert_motion_file(DEFAULT_MOTION_FILE, path, model)
    clips = load_motion_clips(str(path), model)
    default = load_motion_clips(DEFAULT_MOTION_FILE, model)
    assert clips.fps == default.fps == 50 and clips.files == (str(path),)
    assert default.files == (DEFAULT_MOTION_FILE,)
    for key in CLIP_KEYS[1:]:
        assert np.array_equal(getattr(clips, key), converted[key]), key
        assert np.array_equal(getattr(default, key), converted[key]), key
        assert getattr(clips, key).dtype == np.float32 and np.array_equal(
            written[key], converted[key]
        )
    assert clips.clip_lengths.tolist() == [325] and clips.clip_offsets.tolist() == [0]
    assert sorted(np.load(path).files) == sorted([*CLIP_KEYS, "joint_names", "body_names"])


def test_clips_concatenate_along_frames_with_their_offsets(converted, model, tmp_path):
    short = {**converted, **{key: converted[key][:100] for key in CLIP_KEYS[1:]}}
    files = [_write(tmp_path / "a.npz", converted), _write(tmp_path / "b.npz", short)]
    clips = load_motion_clips([*files, files[0]], model)
    assert clips.clip_lengths.tolist() == [325, 100, 325]
    assert clips.clip_offsets.tolist() == [0, 325, 425] and clips.num_clips == 3
    assert clips.clip_lengths.dtype == clips.clip_offsets.dtype == np.int32
    assert clips.num_frames == 750 and clips.files == (*files, files[0])
    for key in CLIP_KEYS[1:]:
        joined = getattr(clips, key)
        assert np.array_equal(joined[425:], converted[key]), key
        assert np.array_equal(joined[325:425], converted[key][:100]), key


def test_clips_of_another_fps_are_refused(converted, model, tmp_path):
    slow = _write(tmp_path / "slow.npz", {**converted, "fps": np.array([30], np.int32)})
    with pytest.raises(MotionClipError, match=r"has fps 30, the first .* 50: all clips must"):
        load_motion_clips([DEFAULT_MOTION_FILE, slow], model)


def test_a_raw_holosoma_clip_is_refused_with_the_convert_command(raw, model, tmp_path):
    path = _write(tmp_path / "raw.npz", raw)
    with pytest.raises(MotionClipError) as refused:
        load_motion_clips(path, model)
    message = str(refused.value)
    assert "joint_pos and joint_vel are [T, 36] and [T, 35], the model has 29 joints" in message
    assert "the body arrays hold 51 bodies, the model 31" in message
    assert message.endswith(
        f"convert it by name first: unilab-jax convert-motion {path} raw_g1.npz"
    )
    assert "\n" not in message


def test_a_clip_whose_bodies_are_not_the_models_is_refused(raw, converted, model, tmp_path):
    """29 joint columns but holosoma's 51 bodies (the joints sliced, the bodies not); 31 bodies
    in another order (their names say so)."""
    sliced = {**raw, "joint_pos": raw["joint_pos"][:, 7:], "joint_vel": raw["joint_vel"][:, 6:]}
    with pytest.raises(MotionClipError, match=r"hold 51 bodies, the model 31 .*convert-motion"):
        load_motion_clips(_write(tmp_path / "sliced.npz", sliced), model)
    order = np.r_[0, 2, 1, 3:31]
    swapped = {**converted, "body_names": converted["body_names"][order]}
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        swapped[key] = converted[key][:, order]
    match = r"body_names differ from the model's at index 1 \('left_hip_pitch_link' for 'pelvis'\)"
    with pytest.raises(MotionClipError, match=match):
        load_motion_clips(_write(tmp_path / "swapped.npz", swapped), model)


@pytest.mark.parametrize(
    "change",
    [
        "quaternions xyzw",
        "left and right legs' bodies swapped",
        "left and right legs' joints swapped",
        "torso 6 cm higher",
    ],
)
def test_a_clip_that_does_not_fit_the_models_kinematics_is_refused(
    converted, model, tmp_path, change
):
    """Without names in the file, the model's forward kinematics catches what they would."""
    clip = {key: converted[key] for key in CLIP_KEYS}
    if change == "quaternions xyzw":
        clip["body_quat_w"] = converted["body_quat_w"][..., [1, 2, 3, 0]]
    elif "bodies" in change:
        legs = np.r_[0, 1, 8:14, 2:8, 14:31]
        for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            clip[key] = converted[key][:, legs]
    elif change == "torso 6 cm higher":  # the tolerance is 5 cm (holosoma's clips: 1.1 cm)
        clip["body_pos_w"] = converted["body_pos_w"].copy()
        clip["body_pos_w"][:, 16, 2] += 0.06  # body 16: torso_link
    else:
        legs = np.r_[6:12, 0:6, 12:29]
        clip["joint_pos"], clip["joint_vel"] = (
            converted["joint_pos"][:, legs],
            converted["joint_vel"][:, legs],
        )
    with pytest.raises(
        MotionClipError, match=r"does not fit the model: at frame \d+, body '\w+' is [.\d]+ m"
    ):
        load_motion_clips(_write(tmp_path / "clip.npz", clip), model)
    unnamed = {key: converted[key] for key in CLIP_KEYS}  # the same file as converted loads
    assert load_motion_clips(_write(tmp_path / "unnamed.npz", unnamed), model).num_frames == 325


@pytest.mark.parametrize(
    "change, message",
    [
        ("rename body torso_link", r"body\(s\) torso_link \(it has 'torso'\) are not in its body"),
        ("drop body world", r"the model's body\(s\) world are not in its body_names \(50 names\)"),
        ("rename joint waist_yaw_joint", r"joint\(s\) waist_yaw_joint \(it has 'waist_yaw'\)"),
        ("drop joint left_knee_joint", r"the model's joint\(s\) left_knee_joint are not in its"),
        ("drop names", r"it lacks joint_names, body_names \(a clip in the reference's format"),
        ("drop column", r"joint_pos \[325, 35\] and joint_vel \[325, 35\] fit neither its 29"),
    ],
)
def test_the_converter_refuses_a_clip_without_the_models_joints_or_bodies(
    raw, model, change, message
):
    clip = dict(raw)
    what, kind, name = (change.split() + [""])[:3]
    if kind in ("body", "joint"):
        names = [str(n) for n in raw[f"{kind}_names"]]
        i = names.index(name)
        if what == "rename":
            names[i] = name.removesuffix("_link").removesuffix("_joint")
        else:
            del names[i]
            if kind == "body":
                for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
                    clip[key] = np.delete(raw[key], i, axis=1)
            else:
                clip["joint_pos"] = np.delete(raw["joint_pos"], 7 + i, axis=1)
                clip["joint_vel"] = np.delete(raw["joint_vel"], 6 + i, axis=1)
        clip[f"{kind}_names"] = np.asarray(names)
    elif change == "drop names":
        del clip["joint_names"], clip["body_names"]
    else:
        clip["joint_pos"] = raw["joint_pos"][:, :-1]
    with pytest.raises(MotionClipError, match=message):
        convert_motion(clip, model, origin="'x.npz'")


@pytest.mark.parametrize(
    "change, message",
    [
        ("no body_lin_vel_w", r"lacks body_lin_vel_w of the reference's format"),
        ("nan", r": body_pos_w holds non-finite values"),
        ("quaternions scaled", r"body_quat_w are not unit quaternions"),
        ("no frames", r"holds no frames"),
        ("fps 0", r"fps must be one positive integer, got \[0\]"),
    ],
)
def test_the_loader_refuses_a_broken_clip(converted, model, tmp_path, change, message):
    clip = dict(converted)
    if change == "no body_lin_vel_w":
        del clip["body_lin_vel_w"]
    elif change == "nan":
        clip["body_pos_w"] = converted["body_pos_w"].copy()
        clip["body_pos_w"][3, 4, 1] = np.nan
    elif change == "quaternions scaled":
        clip["body_quat_w"] = converted["body_quat_w"] * 1.01
    elif change == "no frames":
        clip = {key: value[:0] if key in CLIP_KEYS[1:] else value for key, value in clip.items()}
    else:
        clip["fps"] = np.array([0], np.int32)
    with pytest.raises(MotionClipError, match=message):
        load_motion_clips(_write(tmp_path / "broken.npz", clip), model)


def test_missing_files_and_packages_name_the_fix(monkeypatch, tmp_path):
    with pytest.raises(MotionClipError, match=r"motion file '.*nothing.npz' does not exist"):
        load_motion_clips(str(tmp_path / "nothing.npz"), mujoco.MjModel.from_xml_string(_TREE))
    with pytest.raises(MotionClipError, match=r"motion_file must name one clip or more"):
        load_motion_clips([], mujoco.MjModel.from_xml_string(_TREE))
    monkeypatch.setattr(sources, "package_dir", lambda module: None)
    with pytest.raises(MotionClipError) as refused:
        load_motion_clips(DEFAULT_MOTION_FILE, mujoco.MjModel.from_xml_string(_TREE))
    assert str(refused.value) == (
        "the holosoma: motion clips come from the 'holosoma' package (not installed); "
        f"install it without its dependencies: {HOLOSOMA_PIP}"
    )


def test_an_unknown_holosoma_name_lists_the_known_ones(raw):
    known = "motion_crawl_slope, sub3_largebox_003_mj, sub3_largebox_003_mj_w_obj"
    with pytest.raises(MotionClipError, match=rf"named 'dance'; .* knows {known}$"):
        sources.resolve_motion_source("holosoma:dance")


_TREE = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="base"><freejoint/><geom size="0.1"/>
      <body name="arm"><joint name="elbow"/><geom size="0.05"/></body>
    </body>
    <body name="wall" pos="0 1 0"><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>
"""


def test_the_layout_is_the_models_joints_and_bodies_up_to_its_last_moving_one():
    """A static body after the robot (the reference's wall scene) is not in the clips."""
    tree = mujoco.MjModel.from_xml_string(_TREE)
    assert motion_body_names(tree) == ("world", "base", "arm")
    assert motion_joint_names(tree) == ("elbow",)


def test_convert_motion_command(model, monkeypatch, tmp_path, capsys):
    from unilab_jax.cli import convert_motion, main

    monkeypatch.setattr(convert_motion, "build_g1_model", lambda: model)
    out = tmp_path / "clips" / "crawl.npz"
    assert main(["convert-motion", "holosoma:motion_crawl_slope", str(out)]) == 0
    assert (
        f"959 frames at 50 fps, 29 joints and 31 bodies by name; wrote {out}"
        in capsys.readouterr().out
    )
    assert load_motion_clips(str(out), model).num_frames == 959
    assert main(["convert-motion", str(tmp_path / "none.npz"), str(tmp_path / "x.npz")]) == 2
    assert (
        capsys.readouterr().err == f"error: motion file '{tmp_path / 'none.npz'}' does not exist\n"
    )
    assert not (tmp_path / "x.npz").exists()
    # named right, but its quaternions are xyzw: converted, then refused by the loader, not kept
    raw = sources.read_motion_arrays(DEFAULT_MOTION_FILE)
    xyzw = _write(
        tmp_path / "xyzw.npz", {**raw, "body_quat_w": raw["body_quat_w"][..., [1, 2, 3, 0]]}
    )
    assert main(["convert-motion", xyzw, str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert "does not fit the model: at frame 0, body 'world' is 0.000 m and 3.14 rad" in err
    assert (
        err.endswith(f"(converted from {xyzw}; not kept)\n") and not (tmp_path / "x.npz").exists()
    )


def test_names_that_repeat_are_refused():
    with pytest.raises(MotionClipError, match=r"its body_names repeat pelvis$"):
        name_index(["world", "pelvis", "pelvis"], ["world", "pelvis"], "body")
