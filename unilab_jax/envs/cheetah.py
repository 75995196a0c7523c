"""CheetahRun: make a planar two-legged runner go forward as fast as possible.

Model (``xml/cheetah.xml``, written for this project): a 1 m capsule torso with a head, on three
unactuated root joints (``rootx`` slide, ``rootz`` slide, ``rooty`` hinge), and a back and a front
leg with thigh / shin / foot hinges (6 motors, gears 110/85/55/110/60/30 N m, ctrlrange [-1, 1],
joint springs pulling towards the rest pose). About 20 kg in total. Only capsules and a plane,
no self-collision. Physics step 0.01 s with 1 Newton iteration / 12 line-search steps,
``n_frames`` = 5, so one control step is 0.05 s.

* qpos layout: ``[rootx, rootz, rooty, bthigh, bshin, bfoot, fthigh, fshin, ffoot]``, qvel alike.
* Initial state: rest pose with every non-``rootx`` coordinate ``+ U[-0.1, 0.1]``, and
  ``qvel ~ 0.1 * N(0, 1)``; the body starts slightly above the ground and settles.
* Observation (17): ``qpos[1:]`` (8, the forward position is dropped) then ``qvel`` (9).
  Critic (19): the observation plus ``[torso forward velocity, torso height]`` (world frame).
* Reward in [-0.1, 1] per step::

      run     = clip(forward_velocity / 10, 0, 1)   # 10 m/s saturates
      control = -0.1 * mean(action^2)
      reward  = run + control

  Components are logged as ``reward/run`` and ``reward/control``.
* Episode length 1000 control steps (50 s); no termination (flipping over is allowed).
* ``reward_bounds`` = (-0.15, 1.2): the per-step reward lies in [-0.1, 1], padded; the default
  value support is ``reward_bounds / (1 - gamma)``, (-5, 40) at gamma 0.97.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import mujoco

from unilab_jax.envs.task import PackagedTask

__all__ = ["CheetahRun", "CheetahRunConfig"]


@dataclass(frozen=True)
class CheetahRunConfig:
    """Tunable parameters of :class:`CheetahRun`."""

    episode_length: int = 1000
    n_frames: int = 5
    timestep: float = 0.01
    target_speed: float = 10.0
    control_cost: float = 0.1
    init_qpos_noise: float = 0.1
    init_qvel_noise: float = 0.1


class CheetahRun(PackagedTask):
    """Planar cheetah running forward (see module docstring)."""

    reward_bounds = (-0.15, 1.2)
    xml_file = "cheetah.xml"
    config_class = CheetahRunConfig

    def __init__(self, config: CheetahRunConfig | None = None) -> None:
        super().__init__(config)
        self._torso = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "torso")
        self._qpos0 = jnp.asarray(self.model.qpos0, jnp.float32)

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_pos, k_vel = jax.random.split(key)
        nq, nv = self.model.nq, self.model.nv
        s = self.config.init_qpos_noise
        noise = jax.random.uniform(k_pos, (nq,), minval=-s, maxval=s)
        # Keep rootx at 0: the forward position is irrelevant and never observed.
        qpos = self._qpos0 + noise.at[0].set(0.0)
        qvel = self.config.init_qvel_noise * jax.random.normal(k_vel, (nv,))
        return qpos, qvel

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        obs = jnp.concatenate([data.qpos[1:], data.qvel])
        privileged = jnp.stack([data.qvel[0], data.xpos[self._torso, 2]])
        return {"obs": obs, "critic": jnp.concatenate([obs, privileged])}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        # qvel[0] is the rootx slide velocity, i.e. the torso's forward speed in the world frame.
        run = jnp.clip(data.qvel[0] / self.config.target_speed, 0.0, 1.0)
        control = self.control_penalty(action)
        return run + control, {"run": run, "control": control}
