"""G1MotionTrackingSAC: the reference UniLab's whole-body motion tracker for the Unitree G1.

This is the reference UniLab (unilabsim/UniLab at 9aa57115) ``G1MotionTrackingSAC`` as its SAC
owner builds it (``conf/offpolicy/task/sac/g1_motion_tracking/mujoco.yaml``, "aligned with
holosoma g1-29dof-wbt-fast-sac"), a BeyondMimic-style tracker, held to it by golden files
(``tests/test_reference_tracking.py``). The tunable parameters are :class:`TrackingConfig`
(``tracking_config.py``); the clips come from ``clips.py`` (``motion_file``); where an episode
starts, ``sampler.py``; the anchor-frame kinematics, ``anchor.py``.

* **Model and control**: G1WalkFlat's model (``robots/g1_model.py``: the reference's
  ``scene_flat.xml``), 1/150 s x 3 = 0.02 s, cold solver each step, float32 state between
  control steps; ``ctrl = default_pose + action_scale * a`` (the ``stand`` keyframe's angles;
  ``action_scale`` 2.0), optionally the previous step's action (``action_latency``).
* **The clip**: one clip frame per control step. The task state holds ``frame``, the frame the
  coming step's reward and termination compare against, and ``obs_frame``, the frame the
  observation shows; a step evaluates ``frame``, then ``obs_frame = frame`` and ``frame + 1``:
  as in the reference, the observation after a step shows the frame that step was rewarded on
  (after a reset both are the drawn frame). With ``truncate_on_clip_end`` the episode is
  truncated when ``frame`` passes its clip's last frame (unless it terminated).
* **Tracked bodies** (14, :data:`~unilab_jax.envs.motion.tracking_config.BODY_NAMES`): body
  frame positions and orientations (``xpos``, ``xquat``) and world velocities of the body
  frames, read from the physics state of the last physics step's start, where the reference's
  ``framepos`` / ``framequat`` / ``framelinvel`` / ``frameangvel`` sensors read them. The clip's
  bodies are *aligned* to the robot (``anchor.aligned_reference``) for the body position,
  orientation and end-effector terms; the velocity terms and the anchor terms compare world
  values.
* **Observation** "obs" (160; noise ``U(-1, 1) * level * scale`` on the four sensor groups)::

      [  0: 58] the clip's joint angles and velocities at obs_frame
      [ 58: 61] the clip anchor's position in the robot anchor's frame
      [ 61: 67] the clip anchor's orientation in it (6D: two rotation columns, row by row)
      [ 67: 70] pelvis IMU linear velocity (local)     + noise_linvel
      [ 70: 73] gyro (gyro_sensor: the torso's)        + noise_gyro
      [ 73:102] joint angles - default pose            + noise_joint_angle
      [102:131] joint velocities                       + noise_joint_vel
      [131:160] the action just applied (0 after a reset)

  "critic" (289): the same 160 without noise, the 14 bodies' positions (42) and 6D
  orientations (84) in the robot anchor's frame, then the pelvis linear velocity again.
* **Reward** = 0.02 x (sum of ``weight * term``, the non-zero weights in
  :data:`~unilab_jax.envs.motion.tracking_config.REWARD_TERMS` order); components logged as
  ``reward/<name>`` = ``0.02 * weight * term``, and ``reward/error_body_pos`` (not a term): the
  mean distance (m) between the robot's tracked bodies and the aligned clip's.
* **Termination**: the anchor's height off the clip's by more than 0.5 m, the z component of
  gravity in the anchor frame off the clip's by more than 0.8, or an end effector's height off
  the aligned clip's by more than 0.5 m. **Truncation** at 500 control steps (10 s) or the
  clip's end.
* **Reset** at a frame the sampler draws (``sampler.py``; adaptive: by failure rates per
  second of clip): the clip's pelvis pose moved by ``U(pose_range)`` (x, y, z, then turned by
  roll, pitch, yaw), its velocity plus ``U(velocity_range)``, joints at the clip's angles plus
  ``U(joint_position_range)`` clipped to their ranges, joint velocities the clip's.

Deviations from the reference (the golden tests measure what they cost): random numbers are
JAX's (the same distributions); the adaptive sampler's rates are updated after the same step's
reset draws, not before (``sampler.py``); our envs clip actions to [-1, 1]; the reference
replaces a non-finite reward by 0, here it stops training (``base.py``). Not reproduced: with
``truncate_on_clip_end`` off the reference moves the robot to a new frame mid-episode (refused
here, with that message).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from unilab_jax.envs.base import Task
from unilab_jax.envs.motion.anchor import (
    aligned_reference,
    gravity_z,
    in_frame,
    quat_from_euler_xyz,
    quat_mul,
    rotate_inverse,
    rotation_angle_sq,
    xbody_velocity,
)
from unilab_jax.envs.motion.clips import MotionClips, load_motion_clips
from unilab_jax.envs.motion.sampler import MODES, default_bins, draw_frame, update_failures
from unilab_jax.envs.motion.tracking_config import TrackingConfig
from unilab_jax.envs.robots.common import apply_obs_noise, uniform_noise, weighted_reward
from unilab_jax.envs.robots.g1_model import build_g1_model, sensor_slices

__all__ = ["NOISE_SLOTS", "G1MotionTracking", "TrackingConfig"]

#: Noisy observation inputs, in the reference's draw order, with their sizes.
NOISE_SLOTS = (("linvel", 3), ("gyro", 3), ("joint_angle", 29), ("joint_vel", 29))


class G1MotionTracking(Task):
    """The reference's G1 motion tracker (module docstring)."""

    reward_bounds = (-0.5, 0.15)
    #: The observation noise draws, in the reference's order (a profile may add slots).
    noise_slots: tuple[tuple[str, int], ...] = NOISE_SLOTS
    reset_forward = True  # the reset observation reads sensors and body frames
    #: The sampler's failure rates (the batch's) and the frame each env tracked on the last
    #: step, which the rates are updated with after that env's reset.
    persistent_state = ("sampler_failures", "tracked_frame")
    solver_warmstart = False
    float32_state = True

    def __init__(self, config: TrackingConfig | None = None) -> None:
        config = config or TrackingConfig()
        if isinstance(config.motion_file, list):  # several clips, as JSON or the facade give them
            config = dataclasses.replace(config, motion_file=tuple(config.motion_file))
        _check(config)
        super().__init__(config, self.build_model(config))
        model = self.model
        c = self.config
        self.clips: MotionClips = load_motion_clips(c.motion_file, model)
        names = [model.body(i).name for i in range(model.nbody)]
        missing = [b for b in (*c.body_names, c.anchor_body) if b not in names]
        if missing:
            raise ValueError(f"tracked bodies {missing} are not bodies of the G1 model")
        self.body_ids = np.asarray([names.index(b) for b in c.body_names], np.int32)
        self._root_ids = jnp.asarray(model.body_rootid[self.body_ids])
        self.anchor = c.body_names.index(c.anchor_body)
        self._ee = np.asarray([c.body_names.index(b) for b in c.ee_body_names], np.int32)
        self._non_ee = np.asarray(
            [i for i, b in enumerate(c.body_names) if b not in c.ee_body_names], np.int32
        )
        clips = self.clips
        ids = self.body_ids
        self._motion = {
            "joint_pos": jnp.asarray(clips.joint_pos, jnp.float32),
            "joint_vel": jnp.asarray(clips.joint_vel, jnp.float32),
            "body_pos": jnp.asarray(clips.body_pos_w[:, ids], jnp.float32),
            "body_quat": jnp.asarray(clips.body_quat_w[:, ids], jnp.float32),
            "body_lin_vel": jnp.asarray(clips.body_lin_vel_w[:, ids], jnp.float32),
            "body_ang_vel": jnp.asarray(clips.body_ang_vel_w[:, ids], jnp.float32),
        }
        self.num_frames = int(clips.joint_pos.shape[0])
        ends = clips.clip_offsets + clips.clip_lengths - 1
        self._clip_end = jnp.asarray(np.repeat(ends, clips.clip_lengths), jnp.int32)
        self._clip_offsets = jnp.asarray(clips.clip_offsets, jnp.int32)
        self.bins = default_bins(self.num_frames, int(clips.fps))
        self._sensor = sensor_slices(model)
        self._default_pose = jnp.asarray(model.key_qpos[0, 7:], jnp.float32)
        self._key_qpos = jnp.asarray(model.key_qpos[0], jnp.float32)
        self._joint_range = jnp.asarray(model.jnt_range[1:], jnp.float32)
        self._action_scale = jnp.asarray(c.action_scale, jnp.float32)
        self._weights = c.weights()
        self._noise_scales = {
            "linvel": c.noise_linvel,
            "gyro": c.noise_gyro,
            "joint_angle": c.noise_joint_angle,
            "joint_vel": c.noise_joint_vel,
        }

    @classmethod
    def build_model(cls, config: TrackingConfig) -> mujoco.MjModel:
        """The task's MuJoCo model: G1WalkFlat's (the reference's ``scene_flat.xml``); a
        profile on another scene or time step overrides this."""
        del config
        return build_g1_model()

    def data_description(self) -> dict[str, Any]:
        """The clips the policy tracks (an exported policy's metadata names them): the
        ``motion_file`` entries, their frames and fps, the tracked bodies and the anchor, and a
        SHA-256 of the clips' joint and body arrays as loaded."""
        clips = self.clips
        digest = hashlib.sha256()
        for array in (clips.joint_pos, clips.joint_vel, clips.body_pos_w, clips.body_quat_w):
            digest.update(np.ascontiguousarray(array, np.float32).tobytes())
        return {
            "motion_files": list(clips.files),
            "clip_frames": [int(n) for n in clips.clip_lengths],
            "fps": int(clips.fps),
            "anchor_body": self.config.anchor_body,
            "body_names": list(self.config.body_names),
            "sha256": digest.hexdigest(),
        }

    @property
    def default_pose(self) -> jax.Array:
        """The ``stand`` keyframe's joint angles, which ``ctrl`` is centred on."""
        return self._default_pose

    def motion_at(self, frame: jax.Array) -> dict[str, jax.Array]:
        """The clip at global ``frame``: joints ``[29]``, tracked bodies ``[14, 3 / 4]``."""
        return {k: v[frame] for k, v in self._motion.items()}

    def sensor(self, data: Any, name: str) -> jax.Array:
        """One sensor's value from ``data.sensordata``."""
        return data.sensordata[self._sensor[name]]

    def bodies(self, data: Any) -> dict[str, jax.Array]:
        """The tracked bodies' frames: world ``pos`` ``[14, 3]``, ``quat`` ``[14, 4]``,
        ``lin_vel`` and ``ang_vel`` ``[14, 3]``."""
        pos = data.xpos[self.body_ids]
        lin, ang = xbody_velocity(data.cvel[self.body_ids], pos, data.subtree_com, self._root_ids)
        return {"pos": pos, "quat": data.xquat[self.body_ids], "lin_vel": lin, "ang_vel": ang}

    # ----------------------------------------------------------------- reset
    def reference_state(
        self, frame: jax.Array, pose: jax.Array, velocity: jax.Array, joint_noise: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """``(qpos, qvel)`` at the clip's ``frame`` with the reset noise: ``pose`` [6] (x, y,
        z offsets, roll, pitch, yaw), ``velocity`` [6] (linear, angular, world frame),
        ``joint_noise`` [29]."""
        m = self.motion_at(frame)
        root_pos = m["body_pos"][0] + pose[:3]
        turn = quat_from_euler_xyz(pose[3], pose[4], pose[5])
        root_quat = quat_mul(turn, m["body_quat"][0])
        lin = m["body_lin_vel"][0] + velocity[:3]
        ang = m["body_ang_vel"][0] + velocity[3:]
        lo, hi = self._joint_range[:, 0], self._joint_range[:, 1]
        joints = jnp.clip(m["joint_pos"] + joint_noise, lo, hi)
        qpos = jnp.concatenate([root_pos, root_quat, joints])
        qvel = jnp.concatenate([lin, rotate_inverse(root_quat, ang), m["joint_vel"]])
        return qpos, qvel

    def init_episode(
        self, key_physics: jax.Array, key_task: jax.Array, carried: dict[str, jax.Array] | None
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        c = self.config
        failures = (
            jnp.zeros((self.bins,), jnp.float32) if carried is None else carried["sampler_failures"]
        )
        k_frame, k_pose, k_vel, k_joint = jax.random.split(key_physics, 4)
        frame = draw_frame(
            k_frame,
            c.sampling_mode,
            failures,
            num_frames=self.num_frames,
            clip_offsets=self._clip_offsets,
            start_ratio=c.sampling_start_ratio,
            uniform_ratio=c.adaptive_uniform_ratio,
        )
        pose_lo, pose_hi = np.asarray(c.pose_range, np.float32).T
        vel_lo, vel_hi = np.asarray(c.velocity_range, np.float32).T
        pose = jax.random.uniform(k_pose, (6,), minval=pose_lo, maxval=pose_hi)
        velocity = jax.random.uniform(k_vel, (6,), minval=vel_lo, maxval=vel_hi)
        lo, hi = c.joint_position_range
        joint_noise = jax.random.uniform(k_joint, (29,), minval=lo, maxval=hi)
        qpos, qvel = self.reference_state(frame, pose, velocity, joint_noise)
        zeros = jnp.zeros((self.action_size,), jnp.float32)
        task_state = {
            "frame": frame,
            "obs_frame": frame,
            "clip_end": self._clip_end[frame],
            "last_action": zeros,
            "noise_key": key_task,
            "sampler_failures": failures,
            "tracked_frame": frame,
        }
        return qpos, qvel, task_state

    def reference_qpos(self, task_state: dict[str, jax.Array]) -> jax.Array:
        """The clip's pose at ``frame`` (the one the coming step is rewarded on), in the clip's
        own world coordinates: its pelvis pose and joint angles."""
        m = self.motion_at(task_state["frame"])
        return jnp.concatenate([m["body_pos"][0], m["body_quat"][0], m["joint_pos"]])

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        qpos, qvel, _ = self.init_episode(key, key, None)
        return qpos, qvel

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        return self.init_episode(key, key, None)[2]

    # ----------------------------------------------------------------- step
    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        applied = task_state["last_action"] if self.config.action_latency else action
        return applied * self._action_scale + self._default_pose

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return self.observation(
            data, task_state, uniform_noise(task_state["noise_key"], self.noise_slots)
        )

    def proprioception(self, data: Any) -> dict[str, jax.Array]:
        """The robot's own sensing, clean, by :data:`NOISE_SLOTS` name: pelvis IMU linear
        velocity (local), the config's gyro, joint angles - default pose, joint velocities."""
        return {
            "linvel": self.sensor(data, "pelvis_local_linvel"),
            "gyro": self.sensor(data, self.config.gyro_sensor),
            "joint_angle": data.qpos[7:] - self._default_pose,
            "joint_vel": data.qvel[6:],
        }

    def critic_observation(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        """The critic group [289] (module docstring): the observation's terms clean, the
        tracked bodies in the robot anchor's frame, the pelvis linear velocity."""
        m = self.motion_at(task_state["obs_frame"])
        body = self.bodies(data)
        a = self.anchor
        anchor_pos, anchor_ori = in_frame(
            body["pos"][a], body["quat"][a], m["body_pos"][a], m["body_quat"][a]
        )
        clean = self.proprioception(data)
        body_pos, body_ori = in_frame(body["pos"][a], body["quat"][a], body["pos"], body["quat"])
        return jnp.concatenate(
            [
                m["joint_pos"],
                m["joint_vel"],
                anchor_pos,
                anchor_ori,
                *(clean[k] for k, _ in NOISE_SLOTS),
                task_state["last_action"],
                body_pos.reshape(-1),
                body_ori.reshape(-1),
                clean["linvel"],
            ]
        )

    def observation(
        self, data: Any, task_state: dict[str, jax.Array], draws: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The observation groups with the noise of ``draws`` (``U(-1, 1)`` per
        :attr:`noise_slots` slot); :meth:`observe` draws them from the task state's key."""
        critic = self.critic_observation(data, task_state)
        level = self.config.noise_level
        if level <= 0.0:
            return {"obs": critic[:160], "critic": critic}
        noisy = apply_obs_noise(self.proprioception(data), draws, level, self._noise_scales)
        # [command 58, anchor pos 3, anchor ori 6] and the action are the critic's.
        obs = jnp.concatenate(
            [critic[:67], *(noisy[k] for k, _ in NOISE_SLOTS), task_state["last_action"]]
        )
        return {"obs": obs, "critic": critic}

    def _tracking(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, Any]:
        """The robot's tracked bodies beside the clip at ``frame``, aligned to the robot."""
        m = self.motion_at(task_state["frame"])
        body = self.bodies(data)
        a = self.anchor
        ref_pos, ref_quat = aligned_reference(
            m["body_pos"], m["body_quat"], a, body["pos"][a], body["quat"][a]
        )
        return {"motion": m, "body": body, "ref_pos": ref_pos, "ref_quat": ref_quat}

    def reward_terms(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The unweighted terms (:data:`REWARD_TERMS`) of this step; ``task_state`` is the one
        in force when ``action`` was chosen."""
        c = self.config
        t = self._tracking(data, task_state)
        m, body, a = t["motion"], t["body"], self.anchor

        def kernel(error: jax.Array, std: float) -> jax.Array:
            return jnp.exp(error / jnp.float32(-(std**2)))

        def mean_sq(x: jax.Array, y: jax.Array) -> jax.Array:
            # Summed axis by axis over the bodies, then averaged: the reference's order.
            sq = jnp.square(x - y)
            return (jnp.sum(sq[..., 0]) + jnp.sum(sq[..., 1]) + jnp.sum(sq[..., 2])) / x.shape[0]

        def mean(x: jax.Array) -> jax.Array:
            return jnp.sum(x) / x.shape[0]

        q = data.qpos[7:]
        lo, hi = self._joint_range[:, 0], self._joint_range[:, 1]
        ee_dz = t["ref_pos"][self._ee, 2] - body["pos"][self._ee, 2]
        low = body["pos"][self._non_ee, 2] < c.undesired_contact_z
        return {
            "motion_global_root_pos": kernel(
                jnp.sum(jnp.square(m["body_pos"][a] - body["pos"][a])), c.std_root_pos
            ),
            "motion_global_root_ori": kernel(
                rotation_angle_sq(m["body_quat"][a], body["quat"][a]), c.std_root_ori
            ),
            "motion_body_pos": kernel(mean_sq(t["ref_pos"], body["pos"]), c.std_body_pos),
            "motion_body_ori": kernel(
                mean(rotation_angle_sq(t["ref_quat"], body["quat"])), c.std_body_ori
            ),
            "motion_body_lin_vel": kernel(
                mean_sq(m["body_lin_vel"], body["lin_vel"]), c.std_body_lin_vel
            ),
            "motion_body_ang_vel": kernel(
                mean_sq(m["body_ang_vel"], body["ang_vel"]), c.std_body_ang_vel
            ),
            "motion_ee_body_pos_z": kernel(mean(jnp.square(ee_dz)), c.std_body_pos),
            "motion_joint_pos": kernel(mean(jnp.square(m["joint_pos"] - q)), c.std_joint_pos),
            "motion_joint_vel": kernel(
                mean(jnp.square(m["joint_vel"] - data.qvel[6:])), c.std_joint_vel
            ),
            "action_rate_l2": jnp.sum(jnp.square(action - task_state["last_action"])),
            "joint_limit": jnp.sum(jnp.square(jnp.maximum(lo - q, 0.0) + jnp.maximum(q - hi, 0.0))),
            "undesired_contacts": jnp.sum(low).astype(jnp.float32),
        }

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        terms = self.reward_terms(data, action, task_state)
        total, components = weighted_reward(terms, self._weights, self.control_dt)
        t = self._tracking(data, task_state)
        distance = jnp.linalg.norm(t["ref_pos"] - t["body"]["pos"], axis=-1)
        components["error_body_pos"] = jnp.mean(distance)
        return total, components

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        c = self.config
        t = self._tracking(data, task_state)
        m, body, a = t["motion"], t["body"], self.anchor
        out = jnp.abs(m["body_pos"][a, 2] - body["pos"][a, 2]) > c.anchor_pos_z_threshold
        if c.anchor_ori_threshold < 2.0:
            tilt = jnp.abs(gravity_z(m["body_quat"][a]) - gravity_z(body["quat"][a]))
            out = out | (tilt > c.anchor_ori_threshold)
        if self._ee.size:
            ee_dz = jnp.abs(t["ref_pos"][self._ee, 2] - body["pos"][self._ee, 2])
            out = out | jnp.any(ee_dz > c.ee_body_pos_z_threshold)
        if c.terminate_on_undesired_contacts and self._non_ee.size:
            out = out | jnp.any(body["pos"][self._non_ee, 2] < c.undesired_contact_z)
        return out

    def ends_episode(self, task_state: dict[str, jax.Array]) -> jax.Array:
        """The clip ended: ``frame`` (already advanced) is past its clip's last frame."""
        return task_state["frame"] > task_state["clip_end"]

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        del data
        frame = task_state["frame"]
        return {
            **task_state,
            "frame": frame + 1,
            "obs_frame": frame,
            "tracked_frame": frame,
            "last_action": jnp.asarray(action, jnp.float32),
            "noise_key": key,
        }

    def update_batch(
        self,
        task_state: dict[str, jax.Array],
        terminated: jax.Array,
        truncated: jax.Array,
        episode_length: jax.Array,
    ) -> dict[str, jax.Array]:
        """The adaptive sampler's failure rates (``sampler.py``) over the batch's terminated
        episodes; one vector for the batch, broadcast to every env."""
        del truncated, episode_length
        if self.config.sampling_mode != "adaptive":
            return task_state
        failures = update_failures(
            task_state["sampler_failures"][0],
            task_state["tracked_frame"],
            terminated,
            self.config.adaptive_alpha,
            self.num_frames,
        )
        n = terminated.shape[0]
        return {**task_state, "sampler_failures": jnp.broadcast_to(failures, (n, self.bins))}


def _check(config: TrackingConfig) -> None:
    """Refuse, before anything is built, what the task cannot do."""
    if config.sampling_mode not in MODES:
        raise ValueError(f"sampling_mode={config.sampling_mode!r} is not one of {', '.join(MODES)}")
    if not config.truncate_on_clip_end:
        raise ValueError(
            "truncate_on_clip_end=False (moving the robot to a new frame mid-episode at the "
            "clip's end) is not reproduced; keep it True: an episode then ends with its clip"
        )
    if config.anchor_body not in config.body_names:
        raise ValueError(f"anchor_body {config.anchor_body!r} is not one of body_names")
    stray = [b for b in config.ee_body_names if b not in config.body_names]
    if stray:
        raise ValueError(f"ee_body_names {stray} are not in body_names")
