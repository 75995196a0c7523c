"""G1WBTObs: the reference UniLab's deployable whole-body tracking profile of the G1 tracker.

The reference UniLab (unilabsim/UniLab at 9aa57115) ``G1WBTObs`` as its SAC owner builds it
(``conf/offpolicy/task/sac/g1_wbt_obs/mujoco.yaml``; ``envs/motion_tracking/g1/
tracking_obs.py`` over ``G1MotionTrackingSAC``): the tracker of ``tracking.py`` with what a
policy on the real robot can see, and the randomisation it has to survive, held to it by a
golden rollout through resets (``tests/test_reference_tracking.py``). Everything not named here
is :class:`~unilab_jax.envs.motion.tracking.G1MotionTracking`'s; the tunable parameters are
:class:`WBTObsConfig`.

* **Physics and control**: the same model with a 0.005 s step, 4 per 0.02 s control step (the
  reference sets the step after compiling, as :meth:`G1WBTObs.build_model` does); one control
  step of latency: the step applies the previous action (0 after a reset). Sensing: the pelvis
  IMU (``pelvis_gyro``; the linear velocity was the pelvis's already) in both groups.
* **Observation** "obs" (514)::

      [  0: 58] the clip's joint angles and velocities at obs_frame
      [ 58: 64] the clip anchor's orientation in the robot anchor's frame (6D) + noise_anchor_ori
      [ 64: 79] gyro, 5 steps, oldest first                   + noise_gyro
      [ 79:224] joint angles - default pose, 5 steps          + noise_joint_angle + encoder bias
      [224:369] joint velocities, 5 steps                     + noise_joint_vel
      [369:514] the action chosen, 5 steps (0 after a reset)

  Noise ``U(-1, 1) * level * scale`` drawn afresh for each observation (the reference also
  draws the dropped linear velocity's, first; so does :attr:`G1WBTObs.noise_slots`). The
  history (``task_state["history"]``) holds what the actor saw: a reset fills all 5 steps with
  its first observation's values (:meth:`G1WBTObs.start_episode`), each step drops the oldest
  and appends its own (:meth:`G1WBTObs.update_task_state`). The encoder bias ``U(-0.01,
  0.01)`` per joint is drawn per episode. The anchor's position and the linear velocity are
  left out (no estimator on the robot). "critic" (289): G1MotionTrackingSAC's, clean.
* **Reward** (x 0.02): the six tracking terms at weight 1, action rate -0.1, joint limits -5,
  undesired contacts -0.1, and ``joint_acc_l2`` -2.5e-7: ``sum_j ((qd_j - qd_prev_j) /
  0.02)^2`` (``qd_prev``: the previous observation's joint velocities, the reset state's after
  a reset), ``joint_torque_l2`` -1e-5: ``sum_j (kp_j (2 a_prev_j + default_j - q_j) - kd_j
  qd_j)^2`` with the model's nominal gains and the action the step applied.
* **Termination**: the anchor's height off the clip's by more than 0.40 m (the rest as
  G1MotionTrackingSAC's).
* **Domain randomisation** per episode (``Task.model_fields``, with the constants
  ``mj_setConst`` derives for MJX: ``robots/common.setconst_weights``): pelvis mass + ``U(-1,
  1)`` kg, pelvis centre of mass + ``U(-0.05, 0.05)`` m on each axis, all 29 ``kp`` x one
  ``U(0.9, 1.1)``, all ``kd`` x one ``U(0.85, 1.15)``, the sliding friction of the 14 sole
  capsules ``(left|right)_foot[1-7]_collision`` (in our model as in the reference's; the 8
  contact spheres under the feet keep theirs) set to one ``U(0.3, 1.2)``. **Pushes**: on
  steps 0, 200, 400, ... of a step counter the batch shares, a world-frame force ``U(-1, 1) *
  (300, 300, 120)`` N on the pelvis, held over that control step.

Deviations from the reference (the golden test measures what they cost): random numbers are
JAX's (the same distributions); the randomised model fields are float32 (the reference's
masses and gains are float64 sums and products of the same numbers); the reference draws the
centre of mass's y and z offsets twice (its common rules, then the profile's again) and keeps
the second draw: one draw each here. Those of ``tracking.py`` hold too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from unilab_jax.envs.base import MODEL_PARAMS_KEY
from unilab_jax.envs.motion.tracking import NOISE_SLOTS, G1MotionTracking
from unilab_jax.envs.motion.tracking_config import TrackingConfig
from unilab_jax.envs.robots.common import (
    SETCONST_FIELDS,
    apply_obs_noise,
    body_force,
    interval_push,
    model_field,
    position_gains,
    setconst_weights,
    uniform,
    uniform_noise,
)
from unilab_jax.envs.robots.g1_model import build_g1_model

__all__ = ["HISTORY", "G1WBTObs", "WBTObsConfig"]

#: The history's terms, in the observation's order, with their sizes.
HISTORY = (("gyro", 3), ("joint_angle", 29), ("joint_vel", 29), ("action", 29))

_FOOT_GEOMS = r"^(left|right)_foot[1-7]_collision$"
Range = tuple[float, float]


@dataclass(frozen=True)
class WBTObsConfig(TrackingConfig):
    """Tunable parameters of G1WBTObs: :class:`TrackingConfig`'s, with the reference
    profile's values (``sac/g1_wbt_obs/mujoco.yaml``) where it sets them."""

    timestep: float = 0.005
    """Physics time step (s)."""
    n_frames: int = 4
    """Physics steps per control step (control at 50 Hz, one clip frame a step)."""
    action_latency: bool = True
    gyro_sensor: str = "pelvis_gyro"
    anchor_pos_z_threshold: float = 0.40
    noise_joint_vel: float = 0.5
    noise_anchor_ori: float = 0.05
    """Noise scale of the observed clip anchor orientation (6D)."""
    history_length: int = 5
    """Control steps of gyro, joint angles, joint velocities and actions the actor sees."""

    # --- domain randomisation, per episode
    added_mass_range: Range = (-1.0, 1.0)
    """Added to the pelvis's mass (kg)."""
    com_offset_range: tuple[Range, Range, Range] = ((-0.05, 0.05),) * 3
    """Added to the pelvis's centre of mass, x, y, z (m, body frame)."""
    kp_multiplier_range: Range = (0.9, 1.1)
    """One multiplier of every actuator's ``kp``."""
    kd_multiplier_range: Range = (0.85, 1.15)
    """One multiplier of every actuator's ``kd``."""
    friction_range: Range = (0.3, 1.2)
    """The sliding friction of the geoms ``friction_geoms`` matches (one value for all)."""
    friction_geoms: str = _FOOT_GEOMS
    """Regular expression of the geom names whose friction is drawn (the 14 sole capsules)."""
    encoder_bias_range: Range = (-0.01, 0.01)
    """Added to each observed joint angle, per episode (rad)."""
    push_interval: int = 200
    """A push on every ``push_interval``-th control step of the batch's counter, from step 0;
    0 disables pushes."""
    push_max_force: tuple[float, float, float] = (300.0, 300.0, 120.0)
    """A push is a world-frame force ``U(-1, 1) * push_max_force`` (N) held over one step."""
    push_body: str = "pelvis"
    """The body pushed and whose mass and centre of mass are drawn."""

    # --- reward weights (the tracking terms all 1)
    w_motion_global_root_ori: float = 1.0
    w_motion_body_pos: float = 1.0
    w_joint_limit: float = -5.0
    w_joint_acc_l2: float = -2.5e-7
    """``sum_j ((qd_j - previous qd_j) / control step)^2``."""
    w_joint_torque_l2: float = -1e-5
    """``sum_j (kp_j (previous action target_j - q_j) - kd_j qd_j)^2`` (nominal gains)."""

    def weights(self) -> dict[str, float]:
        extra = {t: getattr(self, f"w_{t}") for t in ("joint_acc_l2", "joint_torque_l2")}
        return {**super().weights(), **{t: w for t, w in extra.items() if w != 0}}


class G1WBTObs(G1MotionTracking):
    """The reference's deployable G1 whole-body tracking profile (module docstring)."""

    #: At most 0.12 (the six tracking terms, x 0.02); the golden rollout's random actions
    #: (scale 0.8-1.2, pushes) reach -0.38, mostly the torque and acceleration penalties.
    reward_bounds = (-1.0, 0.15)
    noise_slots = (*NOISE_SLOTS, ("anchor_ori", 6))
    #: The push schedule belongs to the batch, as the sampler's rates do.
    persistent_state = (*G1MotionTracking.persistent_state, "step_counter", "push_force")
    model_fields = (
        "actuator_gainprm",
        "actuator_biasprm",
        "body_mass",
        "body_ipos",
        "geom_friction",
        *SETCONST_FIELDS,
    )

    def __init__(self, config: WBTObsConfig | None = None) -> None:
        config = config or WBTObsConfig()
        super().__init__(config)
        model = self.model
        pattern = re.compile(config.friction_geoms)
        names = [model.geom(i).name for i in range(model.ngeom)]
        self.friction_geoms = np.asarray([i for i, n in enumerate(names) if pattern.match(n)])
        if self.friction_geoms.size == 0:
            raise ValueError(f"friction_geoms {config.friction_geoms!r} matches no geom")
        self.push_body = model.body(config.push_body).id
        self._nominal = {
            f: jnp.asarray(model_field(model, f), jnp.float32)
            for f in self.model_fields
            if f not in SETCONST_FIELDS
        }
        self.nominal_kp = self._nominal["actuator_gainprm"][:, 0]
        self.nominal_kd = -self._nominal["actuator_biasprm"][:, 2]
        self._noise_scales["anchor_ori"] = config.noise_anchor_ori

    @classmethod
    def build_model(cls, config: WBTObsConfig) -> mujoco.MjModel:
        """G1MotionTrackingSAC's model with the config's time step."""
        model = build_g1_model()
        model.opt.timestep = config.timestep
        return model

    # ----------------------------------------------------------------- episodes
    def draw_randomisation(self, key: jax.Array) -> dict[str, jax.Array]:
        """One episode's draws: ``encoder_bias`` [29], ``base_mass_delta``, ``com_offset``
        [3], ``kp_multiplier``, ``kd_multiplier``, ``foot_friction``."""
        c = self.config
        k = jax.random.split(key, 6)
        com_lo, com_hi = np.asarray(c.com_offset_range, np.float32).T
        return {
            "encoder_bias": uniform(k[0], (self.action_size,), *c.encoder_bias_range),
            "base_mass_delta": uniform(k[1], (), *c.added_mass_range),
            "com_offset": uniform(k[2], (3,), com_lo, com_hi),
            "kp_multiplier": uniform(k[3], (), *c.kp_multiplier_range),
            "kd_multiplier": uniform(k[4], (), *c.kd_multiplier_range),
            "foot_friction": uniform(k[5], (), *c.friction_range),
        }

    def episode_model(self, draws: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """The per-episode model fields (``Task.model_fields``) of :meth:`draw_randomisation`'s
        draws, with the inverse weights ``mj_setConst`` would derive from them (for MJX)."""
        nominal, body = self._nominal, self.push_body
        fields = {
            **position_gains(
                nominal["actuator_gainprm"],
                nominal["actuator_biasprm"],
                self.nominal_kp * draws["kp_multiplier"],
                self.nominal_kd * draws["kd_multiplier"],
            ),
            "body_mass": nominal["body_mass"].at[body].add(draws["base_mass_delta"]),
            "body_ipos": nominal["body_ipos"].at[body].add(draws["com_offset"]),
            "geom_friction": nominal["geom_friction"]
            .at[self.friction_geoms, 0]
            .set(draws["foot_friction"]),
        }
        return {**fields, **setconst_weights(self.model, fields)}

    def episode_state(self, draws: dict[str, jax.Array], qvel: jax.Array) -> dict[str, jax.Array]:
        """What this profile adds to a fresh episode's task state, from its draws and initial
        ``qvel``; the history is filled by :meth:`start_episode`."""
        return {
            "encoder_bias": jnp.asarray(draws["encoder_bias"], jnp.float32),
            MODEL_PARAMS_KEY: self.episode_model(draws),
            "prev_joint_vel": jnp.asarray(qvel[6:], jnp.float32),
            "history": {
                k: jnp.zeros((self.config.history_length, n), jnp.float32) for k, n in HISTORY
            },
        }

    def init_episode(
        self, key_physics: jax.Array, key_task: jax.Array, carried: dict[str, jax.Array] | None
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        k_noise, k_dr, k_push = jax.random.split(key_task, 3)
        qpos, qvel, task_state = super().init_episode(key_physics, k_noise, carried)
        if carried is None:  # the batch's first episode: its push schedule starts
            counter = jnp.zeros((), jnp.int32)
            pushes = {"step_counter": counter, "push_force": self.push_force(k_push, counter)}
        else:
            pushes = {k: carried[k] for k in ("step_counter", "push_force")}
        extra = self.episode_state(self.draw_randomisation(k_dr), qvel)
        return qpos, qvel, {**task_state, **extra, **pushes}

    def start_episode(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Every step of the history is the first observation's."""
        draws = uniform_noise(task_state["noise_key"], self.noise_slots)
        return self.fill_history(data, task_state, draws)

    def fill_history(
        self, data: Any, task_state: dict[str, jax.Array], draws: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """``task_state`` with every step of its history this observation's entry
        (:meth:`seen`, with the noise of ``draws``)."""
        seen = self.seen(data, task_state, draws)
        history = {
            k: jnp.broadcast_to(v, (self.config.history_length, v.shape[0]))
            for k, v in seen.items()
        }
        return {**task_state, "history": history}

    # ----------------------------------------------------------------- pushes
    def push_force(self, key: jax.Array, step_counter: jax.Array) -> jax.Array:
        """The world-frame force [3] on the pelvis during step ``step_counter`` (0 if none)."""
        c = self.config
        return interval_push(key, step_counter, c.push_interval, c.push_max_force)

    def xfrc_applied(self, task_state: dict[str, jax.Array]) -> jax.Array:
        return body_force(self.model.nbody, self.push_body, task_state["push_force"])

    # ----------------------------------------------------------------- step
    def seen(
        self, data: Any, task_state: dict[str, jax.Array], draws: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """This observation's entry of the history (:data:`HISTORY`): the gyro, joint angles
        (with the episode's encoder bias) and joint velocities with the noise of ``draws``,
        and the action just chosen."""
        clean = self.proprioception(data)
        noisy = apply_obs_noise(clean, draws, self.config.noise_level, self._noise_scales)
        return {
            "gyro": noisy["gyro"],
            "joint_angle": noisy["joint_angle"] + task_state["encoder_bias"],
            "joint_vel": noisy["joint_vel"],
            "action": task_state["last_action"],
        }

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        k_noise, k_push = jax.random.split(key)
        draws = uniform_noise(k_noise, self.noise_slots)
        task_state = self.advance(data, action, task_state, k_noise, draws)
        return {**task_state, "push_force": self.push_force(k_push, task_state["step_counter"])}

    def advance(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        noise_key: jax.Array,
        draws: dict[str, jax.Array],
    ) -> dict[str, jax.Array]:
        """The task state after a step but the next push: the tracker's, the history one step
        on (its newest entry with the noise of ``draws``, the observation's), the joint
        velocities for the next ``joint_acc_l2``, the step counter."""
        task_state = super().update_task_state(data, action, task_state, noise_key)
        seen = self.seen(data, task_state, draws)
        history = {
            k: jnp.concatenate([v[1:], seen[k][None]]) for k, v in task_state["history"].items()
        }
        return {
            **task_state,
            "history": history,
            "prev_joint_vel": jnp.asarray(data.qvel[6:], jnp.float32),
            "step_counter": task_state["step_counter"] + 1,
        }

    def observation(
        self, data: Any, task_state: dict[str, jax.Array], draws: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        """The groups with the anchor orientation's noise of ``draws``; the history is the
        task state's (module docstring)."""
        critic = self.critic_observation(data, task_state)
        anchor = apply_obs_noise(
            {"anchor_ori": critic[61:67]}, draws, self.config.noise_level, self._noise_scales
        )
        history = task_state["history"]
        obs = jnp.concatenate(
            [critic[:58], anchor["anchor_ori"], *(history[k].reshape(-1) for k, _ in HISTORY)]
        )
        return {"obs": obs, "critic": critic}

    def reward_terms(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        terms = super().reward_terms(data, action, task_state)
        q, qd = data.qpos[7:], data.qvel[6:]
        acc = (qd - task_state["prev_joint_vel"]) / jnp.float32(self.control_dt)
        target = task_state["last_action"] * self._action_scale + self.default_pose
        torque = self.nominal_kp * (target - q) - self.nominal_kd * qd
        return {
            **terms,
            "joint_acc_l2": jnp.sum(jnp.square(acc)),
            "joint_torque_l2": jnp.sum(jnp.square(torque)),
        }
