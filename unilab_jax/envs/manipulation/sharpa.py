"""SharpaInhandRotation: turn a cylinder about the vertical axis in a 22-DoF Sharpa Wave hand.

The reference UniLab's (unilabsim/UniLab at 9aa57115) in-hand rotation task as its SAC recipe
builds it (``conf/offpolicy/task/sac/sharpa_inhand/mujoco_hora.yaml`` over
``envs/manipulation/sharpa_inhand/rotation.py`` and ``base.py``), on C MuJoCo only. The tunable
numbers are :class:`~unilab_jax.envs.manipulation.sharpa_config.SharpaInhandConfig`'s, the model
``sharpa_model.py``'s, the draws ``sharpa_randomisation.py``'s, the sensing
``sharpa_observation.py``'s, the reward terms ``sharpa_reward.py``'s, the grasps
``grasp_cache.py``'s.

* **Physics and control**: the reference's scene (hand with gravity compensation, the object a
  free cylinder r 0.02 m, half-height 0.016 m, 0.05 kg, condim 6); 1/240 s x 12 = 0.05 s a
  control step, 400 steps (20 s) an episode. The action [22] in [-1, 1] moves the joint targets
  (the position actuators' ctrl): ``target = clip(target + action / 24, 0.9 * lower, 0.9 *
  upper)`` (both ctrl-range bounds times 0.9; a reset sets the targets to the grasp's joint
  positions). After a step's last substep C MuJoCo runs ``mj_forward`` (``Task.post_step_
  forward``; the reference's ``post_step_forward_sensor``), so the contact sensors describe the
  state after the step; the state is kept in float32 between steps and each step's solver
  starts cold, as in the reference's batched pool.
* **Observation** "obs" (147) = the last 3 of the reference's 80-frame history, oldest first,
  of the frame (49) ``[normalised joint positions (2 q - upper - lower) / (upper - lower) +
  U(-1, 1) * 0.02, joint targets, tactile (5)]`` clipped to +-5. Tactile: each elastomer
  sensor's force magnitude clipped to [0, 4] N, averaged with the last step's (0.5 each), kept
  at its last value with probability 0.005 per finger and step (latency); the binary mode's
  dropout noise (0.01) is configured but off in the recipe, as there. A reset's history is its
  first frame repeated, then a second frame (both from the grasp, with targets = joint positions,
  tactile 0, own joint noise). "critic" (156) = "obs" + 9 privileged values: the object's
  position minus the anchor (the scene's home object position), the friction multiplier, the
  object's mass, its centre-of-mass offset (3), its scale; clipped to +-5. Mass, offset and scale
  read 0 when not randomised (a one-entry ``scale_list``), as there.
* **Reward** (x 0.05), in this order: ``rotate`` 2.5 (angular velocity about z, clipped to
  +-0.5 rad/s), ``obj_linvel`` -0.3, ``pose_diff`` -0.4 (from the sharpa-rl-lab default pose),
  ``torque`` -0.1, ``work`` -0.5, ``object_pos`` 0.003 (``1 / (distance to the anchor +
  0.001)``); the PD torque uses the episode's randomised gains.
* **Termination**: the object's height leaves its initial height +-0.02 m.
* **Resets** from the grasp caches: a row (22 hand positions, object position, quaternion)
  drawn uniformly from the cache of the env's object scale; velocities zero.
* **Domain randomisation**: the object scale (the 8 of ``scale_list``: the geom's size, bounding
  volumes and the body's inertia, per env, kept through resets); per episode, every actuator's kp
  and kd times ``U(0.5, 1)`` or ``U(1, 2)`` (each with probability 1/2), one friction
  multiplier ``U(0.75, 1.25)`` on the object (2.0), the elastomers (2.0) and the hand's other
  collision geoms (1.0) (torsional and rolling coefficients keep their ratio), the object's mass
  ``U(0.01, 0.25)`` kg (its inertia stays the scale's), its centre of mass + ``U(-0.01,
  0.01)`` m per axis, gravity 9.81 in a uniformly random direction. Random object force: each
  control step, with probability 0.25 a new ``N(0, 1)^3 * mass * 2`` N, else the last one times
  ``0.9 ** (0.05 / 0.08)``; zero after a reset.

Deviations from the reference: random numbers are JAX's (the same distributions; a step's
tactile latency draws are made at the end of the step before, so that every piece of the step
sees the same signal); the model fields of an episode are float32 (a field's untouched entries
too: the floor's torsional friction 0.005 is 0.004999999888 there); an env's
scale is drawn uniformly at its first reset and kept (the reference gives the envs of a batch
the scales in equal blocks by env index, which the task API does not show a task); only the 3
observed frames of the 80-frame history are kept (the others are never read by this task); the
object's position and orientation are read from ``qpos`` (the reference reads them from frame
sensors after its post-step ``mj_forward``: the same numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from unilab_jax.envs.base import MODEL_PARAMS_KEY, Task
from unilab_jax.envs.manipulation import (
    sharpa_observation,
    sharpa_randomisation,
    sharpa_reward,
)
from unilab_jax.envs.manipulation.grasp_cache import GraspCaches, load_grasp_caches
from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig
from unilab_jax.envs.manipulation.sharpa_model import (
    DEFAULT_HAND_POSE_DEG,
    OBJECT_BODY,
    build_sharpa_model,
    friction_geoms,
    object_scale_fields,
    sensor_slices,
)
from unilab_jax.envs.robots.common import body_force, model_field, weighted_reward

__all__ = ["MJX_REFUSAL", "SharpaInhandConfig", "SharpaInhandRotation"]

#: Why MJX cannot run the task (``Task.mjx_unsupported``).
MJX_REFUSAL = "MJX refuses its contact sensors with net-force reduction"

NUM_HAND = 22
_SCALE_FIELDS = ("geom_size", "geom_rbound", "geom_aabb", "body_inertia")


class SharpaInhandRotation(Task):
    """The reference's Sharpa in-hand rotation task (module docstring)."""

    mjx_unsupported = MJX_REFUSAL
    post_step_forward = True
    reset_forward = True
    solver_warmstart = False
    float32_state = True
    model_fields = (
        "actuator_gainprm",
        "actuator_biasprm",
        "geom_friction",
        "body_mass",
        "body_ipos",
        *_SCALE_FIELDS,
        "opt.gravity",
    )
    #: An env keeps its object scale through resets (the reference's per-env model variant).
    persistent_state = ("scale_id",)

    def __init__(
        self, config: SharpaInhandConfig | None = None, *, grasps: GraspCaches | None = None
    ) -> None:
        cfg = config or SharpaInhandConfig()
        model = build_sharpa_model(cfg)
        super().__init__(cfg, model)
        # The grasps of every scale (the reference's cache files), unless given (tests, tools).
        self.grasps = grasps if grasps is not None else self.load_grasps(cfg)
        if self.grasps is not None:
            if len(self.grasps.counts) != len(cfg.scale_list):
                raise ValueError(
                    f"{len(self.grasps.counts)} grasp caches for {len(cfg.scale_list)} scales"
                )
            self._rows = jnp.asarray(self.grasps.rows)
            self._counts = jnp.asarray(self.grasps.counts)
        slices = sensor_slices(model)
        missing = [s for s in cfg.tactile_sensors if s not in slices]
        if missing:
            raise ValueError(f"tactile sensors {missing} are not in the model")
        self._tactile = np.array([np.arange(slices[s].start, slices[s].stop) for s in
                                  cfg.tactile_sensors], np.int32)  # fmt: skip
        self._object_body = model.body(OBJECT_BODY).id
        self._nominal = {
            f: jnp.asarray(model_field(model, f), jnp.float32)
            for f in self.model_fields
            if f not in _SCALE_FIELDS
        }
        scales = [object_scale_fields(model, s) for s in cfg.scale_list]
        self._scale_fields = {
            f: jnp.asarray(np.stack([s[f] for s in scales]), jnp.float32) for f in _SCALE_FIELDS
        }
        self._scales = jnp.asarray(cfg.scale_list, jnp.float32)
        self._friction = self._friction_rows(model, cfg)
        low, high = np.asarray(model.actuator_ctrlrange, np.float32).T
        self._ctrl_low, self._ctrl_high = jnp.asarray(low), jnp.asarray(high)
        limit = np.float32(cfg.dof_limits_scale)
        self._target_low, self._target_high = jnp.asarray(low * limit), jnp.asarray(high * limit)
        self._default_pose = jnp.asarray(np.deg2rad(DEFAULT_HAND_POSE_DEG), jnp.float32)
        self._anchor = jnp.asarray(cfg.object_pos_anchor, jnp.float32)
        axis = np.asarray(cfg.rot_axis, np.float32)
        self._rot_axis = jnp.asarray(axis / np.linalg.norm(axis))
        self._weights = dict(cfg.reward_weights)
        self._layout = sharpa_observation.privileged_layout(cfg)
        self._privileged_size = max(s.stop for s in self._layout.values())

    def privileged_values(self) -> dict[str, slice]:
        """The critic's 9 privileged values by name (``sharpa_observation.privileged_layout``)."""
        return dict(self._layout)

    def load_grasps(self, config: SharpaInhandConfig) -> GraspCaches | None:
        """The grasp caches episodes start from (``grasp_cache_path``, one per scale)."""
        return load_grasp_caches(config.grasp_cache_path, config.scale_list)

    @staticmethod
    def _friction_rows(model: mujoco.MjModel, cfg: SharpaInhandConfig) -> dict[str, jax.Array]:
        """Per geom, its material's friction row before the multiplier and whether it is drawn
        (:func:`~unilab_jax.envs.manipulation.sharpa_randomisation.episode_model`)."""
        rows = np.array(model.geom_friction, np.float64)
        drawn = np.zeros(model.ngeom, bool)
        groups = friction_geoms(model)
        bases = (cfg.object_base_friction, cfg.elastomer_base_friction, cfg.metal_base_friction)
        for ids, base in zip(groups, bases, strict=True):
            template = rows[ids[0]] / rows[ids[0], 0]  # the first geom's ratios, as there
            rows[ids] = template * base
            drawn[ids] = True
        return {"rows": jnp.asarray(rows, jnp.float32), "drawn": jnp.asarray(drawn)}

    # ----------------------------------------------------------------- sizes
    @property
    def action_size(self) -> int:
        return NUM_HAND

    @property
    def frame_size(self) -> int:
        """Values in one policy frame (49 with tactile)."""
        return 2 * NUM_HAND + (len(self.config.tactile_sensors) if self.config.enable_tactile
                               else 0)  # fmt: skip

    # ----------------------------------------------------------------- pieces
    def targets(self, action: jax.Array, task_state: Mapping[str, jax.Array]) -> jax.Array:
        """This step's joint targets: the last ones moved by ``action * action_scale``,
        clipped to the scaled ctrl range."""
        moved = task_state["targets"] + jnp.float32(self.config.action_scale) * action
        return jnp.clip(moved, self._target_low, self._target_high)

    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        return self.targets(action, task_state)

    def xfrc_applied(self, task_state: dict[str, jax.Array]) -> jax.Array:
        return body_force(self.model.nbody, self._object_body, task_state["object_force"])

    def frame(
        self, q: jax.Array, targets: jax.Array, tactile: jax.Array, key: jax.Array
    ) -> jax.Array:
        """One policy frame with its joint noise drawn from ``key``."""
        noise = jax.random.uniform(key, (NUM_HAND,), jnp.float32, -1.0, 1.0)
        return sharpa_observation.policy_frame(
            q, targets, tactile, noise, self._ctrl_low, self._ctrl_high, self.config
        )

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        qpos, qvel, _ = self.init_episode(key, key, None)
        return qpos, qvel

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        # What the C MuJoCo backend traces a step with (resets go through init_episode).
        return self.init_episode(key, key, None)[2]

    def init_episode(
        self,
        key_physics: jax.Array,
        key_task: jax.Array,
        carried: Mapping[str, jax.Array] | None,
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        cfg = self.config
        k_scale, k_grasp = jax.random.split(key_physics)
        if carried is None:
            scale_id = sharpa_randomisation.draw_scale_id(k_scale, len(cfg.scale_list))
        else:
            scale_id = jnp.asarray(carried["scale_id"], jnp.int32)
        grasp = sharpa_randomisation.draw_grasp(k_grasp, self._rows, self._counts, scale_id)
        qvel = jnp.zeros((self.model.nv,), jnp.float32)
        k_dr, k_episode = jax.random.split(key_task)
        draws = sharpa_randomisation.draw_randomisation(
            k_dr, cfg, NUM_HAND, float(self.model.body_mass[self._object_body])
        )
        return grasp, qvel, self.episode_state(grasp, scale_id, draws, k_episode)

    def episode_state(
        self,
        grasp: jax.Array,
        scale_id: jax.Array,
        draws: Mapping[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        """A fresh episode's task state from its grasp [29], scale and domain-randomisation
        draws (:data:`~unilab_jax.envs.manipulation.sharpa_randomisation.DR_DRAWS`); ``key``
        draws the two reset frames' joint noise, the first step's object force and tactile
        draws."""
        cfg = self.config
        k_noise0, k_noise1, k_force, k_tactile = jax.random.split(key, 4)
        hand, pos, quat = grasp[:NUM_HAND], grasp[NUM_HAND : NUM_HAND + 3], grasp[NUM_HAND + 3 :]
        scale_fields = {f: v[scale_id] for f, v in self._scale_fields.items()}
        fields, kp, kd = sharpa_randomisation.episode_model(
            draws,
            scale_fields,
            self._nominal,
            self._friction,
            self._object_body,
            cfg.randomize_friction,
        )
        tactile = jnp.zeros((len(cfg.tactile_sensors),), jnp.float32)
        first = self.frame(hand, hand, tactile, k_noise0)
        second = self.frame(hand, hand, tactile, k_noise1)
        frames = jnp.concatenate(
            [jnp.broadcast_to(first, (cfg.obs_lag_steps - 1, first.shape[0])), second[None]]
        )
        band = jnp.float32(cfg.height_band / 2.0)
        force = sharpa_randomisation.next_object_force(
            k_force, jnp.zeros((3,), jnp.float32), draws["mass"], cfg
        )
        return {
            "scale_id": scale_id,
            "targets": hand,
            "frames": frames,
            "tactile_force": tactile,
            "tactile_last": tactile,
            "tactile_u": self.draw_tactile_u(k_tactile),
            "prev_object_pos": pos,
            "prev_object_quat": quat,
            "height_band": jnp.stack([pos[2] - band, pos[2] + band]),
            "kp": kp,
            "kd": kd,
            "privileged": self.privileged_static(draws, scale_id),
            "object_force": force,
            MODEL_PARAMS_KEY: fields,
        }

    def privileged_static(self, draws: Mapping[str, jax.Array], scale_id: jax.Array) -> jax.Array:
        """The episode's privileged values, the object position change left 0 (``observe``
        fills it): a term not randomised reads 0 (the friction multiplier 1), as there."""
        cfg, layout = self.config, self._layout
        values = jnp.zeros((self._privileged_size,), jnp.float32)
        if "friction" in layout:
            values = values.at[layout["friction"]].set(draws["friction_scale"])
        if cfg.randomize_mass:
            values = values.at[layout["mass"]].set(draws["mass"])
        if cfg.randomize_com:
            values = values.at[layout["com"]].set(draws["com_offset"])
        if len(cfg.scale_list) > 1:  # the reference: more than one scale, or unequal ones
            values = values.at[layout["scale"]].set(self._scales[scale_id])
        return values

    # ----------------------------------------------------------------- physics reads
    def object_pose(self, data: Any) -> tuple[jax.Array, jax.Array]:
        """The object's position [3] and unit quaternion (wxyz) [4], from ``qpos``."""
        pos = data.qpos[NUM_HAND : NUM_HAND + 3]
        quat = data.qpos[NUM_HAND + 3 : NUM_HAND + 7]
        return pos, quat / jnp.linalg.norm(quat)

    def tactile_force(self, data: Any) -> jax.Array:
        """The tactile sensors' force magnitudes [5] (N)."""
        return jnp.linalg.norm(data.sensordata[self._tactile], axis=-1)

    def draw_tactile_u(self, key: jax.Array) -> jax.Array:
        """The coming step's tactile draws ``[2, 5]`` ``U(0, 1)``: latency, dropout noise (drawn
        a step ahead, so that every piece of the step sees the same signal)."""
        return jax.random.uniform(key, (2, len(self.config.tactile_sensors)), jnp.float32)

    def tactile(
        self, data: Any, task_state: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """This step's tactile ``(signal, force, last)`` (``sharpa_observation.tactile_step``)
        from the sensors after the step and the draws made for it."""
        u = task_state["tactile_u"]
        return sharpa_observation.tactile_step(
            self.tactile_force(data),
            task_state["tactile_force"],
            task_state["tactile_last"],
            u[0],
            u[1],
            self.config,
        )

    # ----------------------------------------------------------------- step pieces
    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        pos, _ = self.object_pose(data)
        delta = self._layout["object_pos_delta"]
        privileged = task_state["privileged"].at[delta].set(pos - self._anchor)
        return sharpa_observation.observation_groups(task_state["frames"], privileged, self.config)

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        pos, quat = self.object_pose(data)
        terms = sharpa_reward.reward_terms(
            pos=pos,
            quat=quat,
            prev_pos=task_state["prev_object_pos"],
            prev_quat=task_state["prev_object_quat"],
            q=data.qpos[:NUM_HAND],
            qdot=data.qvel[:NUM_HAND],
            targets=self.targets(action, task_state),
            kp=task_state["kp"],
            kd=task_state["kd"],
            default_pose=self._default_pose,
            anchor=self._anchor,
            rot_axis=self._rot_axis,
            angvel_clip=self.config.angvel_clip,
            dt=self.control_dt,
        )
        return weighted_reward(terms, self._weights, self.control_dt)

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        z = data.qpos[NUM_HAND + 2]
        low, high = task_state["height_band"][0], task_state["height_band"][1]
        return (z > high) | (z < low)

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        cfg = self.config
        k_tactile, k_frame, k_force = jax.random.split(key, 3)
        tactile, force, last = self.tactile(data, task_state)
        targets = self.targets(action, task_state)
        frame = self.frame(data.qpos[:NUM_HAND], targets, tactile, k_frame)
        frames = jnp.concatenate([task_state["frames"][1:], frame[None]])
        pos, quat = self.object_pose(data)
        mass = task_state[MODEL_PARAMS_KEY]["body_mass"][self._object_body]
        return {
            **task_state,
            "targets": targets,
            "frames": frames,
            "tactile_force": force,
            "tactile_last": last,
            "tactile_u": self.draw_tactile_u(k_tactile),
            "prev_object_pos": pos,
            "prev_object_quat": quat,
            "object_force": sharpa_randomisation.next_object_force(
                k_force, task_state["object_force"], mass, cfg
            ),
        }
