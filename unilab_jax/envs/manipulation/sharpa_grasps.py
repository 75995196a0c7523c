"""Grasp collection for SharpaInhandRotation: the stable-grasp rule and the collecting loop.

The reference UniLab (9aa57115) fills its grasp caches with a grasp-collection env
(``envs/manipulation/sharpa_inhand/grasp_gen.py``, ``SharpaInhandRotationGrasp``; owner config
``conf/ppo/task/sharpa_inhand_grasp/mujoco.yaml``, run per scale by
``scripts/sharpa_collect_grasps.sh``). Its rule, which :class:`SharpaGraspCollection` follows:

* **Episode**: 3 s (60 control steps), one object scale per run, zero actions (the targets stay
  the reset pose, clipped to 0.9 x the ctrl range as every step's targets are).
* **Reset**: the hand at the sharpa-rl-lab default pose + ``U(-0.15, 0.15)`` rad per joint
  (clipped to the ctrl range), the object at the scene's home pose, at rest; the object's mass
  ``U(0.05, 0.051)`` kg, nothing else randomised (gains, friction, centre of mass, gravity and
  object forces as the model has them); tactile forces clipped at 5 N (the rotation task: 4).
* **Held**: every step, all five fingertips (the distal phalanx bodies) within 0.1 m of the
  object, at least 3 tactile signals above 0.5, the object within 30 degrees of its home
  orientation and between 0.61406 and 0.62406 m high; the episode ends (terminates) as soon as
  one fails.
* **Saved**: the state at the end of an episode that reached its time limit (truncated, not
  terminated): the 22 joint positions, the object's position and quaternion (a cache row).

One difference, stricter: the reference staggers its envs' first episodes (random step counters
at start), so some of its grasps were held for less than 3 s; here every episode is a full one.

:func:`collect_grasps` runs the task on C MuJoCo until the cache of a scale holds ``target``
rows, printing progress; it appends to the cache file every ``save_every`` grasps (atomically),
so a stopped run resumes from the rows already written.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.manipulation import sharpa_randomisation
from unilab_jax.envs.manipulation.grasp_cache import GRASP_COLUMNS, GraspCaches, grasp_cache_file
from unilab_jax.envs.manipulation.sharpa import NUM_HAND, SharpaInhandRotation
from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig
from unilab_jax.envs.vec_env_mujoco import MujocoVecEnv

__all__ = [
    "GraspCollectionConfig",
    "SharpaGraspCollection",
    "collect_grasps",
]

#: The fingertip bodies the held-grasp rule measures from the object.
FINGERTIPS = tuple(f"right_{f}_DP" for f in ("thumb", "index", "middle", "ring", "pinky"))


@dataclass(frozen=True)
class GraspCollectionConfig(SharpaInhandConfig):
    """The reference's grasp-collection settings (module docstring), over the rotation task's."""

    episode_length: int = 60
    scale_list: tuple[float, ...] = (1.0,)
    reset_height_lower: float = 0.61406
    reset_height_upper: float = 0.62406
    tactile_force_clip_max: float = 5.0
    pose_noise: float = 0.15
    """Half-width of the uniform offset of each joint from the default pose at a reset (rad)."""
    max_angle: float = math.radians(30.0)
    """The object's largest rotation from its home orientation while held (rad)."""
    fingertip_distance: float = 0.1
    """Every fingertip's largest distance to the object while held (m)."""
    min_contacts: int = 3
    contact_level: float = 0.5
    """A finger is in contact while its tactile signal exceeds this."""
    randomize_gravity_direction: bool = False
    randomize_pd_gains: bool = False
    randomize_friction: bool = False
    randomize_com: bool = False
    mass: tuple[float, float] = (0.05, 0.051)
    force_scale: float = 0.0
    random_force_prob: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.scale_list) != 1:
            raise ValueError(f"grasps are collected for one scale at a time, got {self.scale_list}")


class SharpaGraspCollection(SharpaInhandRotation):
    """The reference's grasp-collection env (module docstring); ``"critic"`` is the cache row
    of the state (so an episode's last one, ``final_observation["critic"]``, is its grasp)."""

    persistent_state = ()

    def __init__(self, config: GraspCollectionConfig | None = None) -> None:
        super().__init__(config or GraspCollectionConfig())
        model = self.model
        self._tips = np.array([model.body(b).id for b in FINGERTIPS])
        low, high = np.asarray(model.actuator_ctrlrange, np.float32).T
        self._joint_low, self._joint_high = jnp.asarray(low), jnp.asarray(high)
        key_qpos = np.asarray(model.key_qpos[model.key("home").id], np.float32)
        self._home_object = jnp.asarray(key_qpos[NUM_HAND:])

    def load_grasps(self, config: SharpaInhandConfig) -> GraspCaches | None:
        return None  # it makes them

    def init_episode(
        self,
        key_physics: jax.Array,
        key_task: jax.Array,
        carried: Mapping[str, jax.Array] | None,
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        del carried
        noise = jax.random.uniform(key_physics, (NUM_HAND,), jnp.float32, -1.0, 1.0)
        hand = jnp.clip(
            self._default_pose + self.config.pose_noise * noise, self._joint_low, self._joint_high
        )
        qpos = jnp.concatenate([hand, self._home_object])
        k_dr, k_episode = jax.random.split(key_task)
        draws = sharpa_randomisation.draw_randomisation(
            k_dr, self.config, NUM_HAND, float(self.model.body_mass[self._object_body])
        )
        scale_id = jnp.zeros((), jnp.int32)
        state = self.episode_state(qpos, scale_id, draws, k_episode)
        # The reference's band is absolute here (its home height +-0.005 m).
        band = jnp.array([self.config.reset_height_lower, self.config.reset_height_upper])
        state["height_band"] = band.astype(jnp.float32)
        return qpos, jnp.zeros((self.model.nv,), jnp.float32), state

    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        return super().ctrl_from_action(jnp.zeros_like(action), task_state)

    def update_task_state(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array], key: jax.Array
    ) -> dict[str, jax.Array]:
        return super().update_task_state(data, jnp.zeros_like(action), task_state, key)

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        del data, action, task_state
        return jnp.zeros((), jnp.float32), {}

    def held(self, data: Any, task_state: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The held-grasp conditions after this step: ``near`` (fingertips), ``contacts``
        (tactile signals), ``upright`` (orientation)."""
        cfg = self.config
        pos, quat = self.object_pose(data)
        tips = data.xpos[self._tips]
        signal = self.tactile(data, task_state)[0]
        w = jnp.abs(quat[0])  # rotation from the home orientation (the identity)
        angle = 2.0 * jnp.arctan2(jnp.linalg.norm(quat[1:]), jnp.clip(w, -1.0, 1.0))
        return {
            "near": jnp.all(jnp.linalg.norm(tips - pos, axis=-1) < cfg.fingertip_distance),
            "contacts": jnp.sum(signal > cfg.contact_level) >= cfg.min_contacts,
            "upright": angle < cfg.max_angle,
        }

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        held = self.held(data, task_state)
        return super().terminated(data, task_state) | ~(
            held["near"] & held["contacts"] & held["upright"]
        )

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        groups = super().observe(data, task_state)
        pos, quat = self.object_pose(data)
        row = jnp.concatenate([data.qpos[:NUM_HAND], pos, quat])
        return {"obs": groups["obs"], "critic": row}


def collect_grasps(
    scale: float,
    target: int,
    cache_path: str | os.PathLike[str],
    *,
    num_envs: int = 64,
    nthread: int | None = None,
    seed: int = 0,
    save_every: int = 256,
    config: GraspCollectionConfig | None = None,
    progress: Callable[[str], None] | None = print,
) -> Path:
    """Collect ``target`` stable grasps of the object at ``scale`` into its cache file under
    ``cache_path`` (the reference's format and name, ``grasp_cache.grasp_cache_file``); rows
    already in that file count (a stopped run resumes). Returns the file."""
    path = grasp_cache_file(cache_path, scale)
    rows = _existing_rows(path)
    if len(rows) >= target:
        if progress:
            progress(f"{path}: {len(rows)} grasps already (target {target})")
        return path
    cfg = dataclasses.replace(config or GraspCollectionConfig(), scale_list=(float(scale),))
    task = SharpaGraspCollection(cfg)
    env = MujocoVecEnv(task, "SharpaGraspCollection", num_envs, seed + len(rows), nthread=nthread)
    found, unsaved, episodes, steps = list(rows), 0, 0, 0
    start = time.monotonic()
    try:
        env.init_state(stagger=False)
        zeros = np.zeros((num_envs, NUM_HAND), np.float32)
        while len(found) < target:
            state = env.step(zeros)
            steps += 1
            ended = state.terminated | state.truncated
            episodes += int(ended.sum())
            good = state.truncated & ~state.terminated
            for row in np.asarray(state.final_observation["critic"])[good]:
                found.append(row)
                unsaved += 1
            if unsaved >= save_every or len(found) >= target:
                _save_rows(path, np.asarray(found[:target], np.float32))
                unsaved = 0
                if progress:
                    rate = (len(found) - len(rows)) / max(time.monotonic() - start, 1e-9)
                    left = (target - min(len(found), target)) / max(rate, 1e-9)
                    progress(
                        f"scale {scale:g}: {min(len(found), target)}/{target} grasps, "
                        f"{rate:.2f}/s, {steps} steps of {num_envs} envs, {episodes} episodes "
                        f"ended, about {left / 60:.0f} min left"
                    )
    finally:
        env.close()
    return path


def _existing_rows(path: Path) -> list[np.ndarray]:
    if not path.is_file():
        return []
    rows = np.load(path)
    if rows.ndim != 2 or rows.shape[1] < GRASP_COLUMNS:
        raise ValueError(f"{path}: not a grasp cache ({rows.shape}); move it away to start over")
    return list(np.asarray(rows[:, :GRASP_COLUMNS], np.float32))


def _save_rows(path: Path, rows: np.ndarray) -> None:
    """Write ``rows`` to ``path`` atomically (a stopped run never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, rows)
    os.replace(tmp, path)
