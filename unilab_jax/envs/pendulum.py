"""PendulumSwingup: swing a torque-limited pole up and balance it.

Model (``xml/pendulum.xml``): a 1 kg bob on a massless 1 m pole, gravity 9.81, one hinge about
``y`` with light damping (0.05 N m s). The motor gives at most ``max_torque`` = 2 N m, well below
``m g l`` = 9.81 N m, so the pole cannot be lifted directly: the policy must pump energy.
Physics step 0.01 s, ``n_frames`` = 5, so one control step is 0.05 s.

* Angle convention: ``theta = 0`` upright, ``theta = +-pi`` hanging down.
* Initial state: ``theta ~ U[-pi, pi]``, ``theta_dot ~ U[-0.2, 0.2]`` rad/s.
* Observation (3, critic = obs): ``[cos(theta), sin(theta), theta_dot]``.
* Reward in [-0.1, 1] per step::

      upright  = (1 + cos(theta)) / 2                 # 1 upright, 0 hanging
      velocity = -0.05 * min((theta_dot / 6)^2, 1)     # discourages spinning through the top
      control  = -0.05 * mean(action^2)
      reward   = upright + velocity + control

  Components are logged as ``reward/upright``, ``reward/velocity``, ``reward/control``.
* Episode length 200 control steps (10 s); no termination, truncation only.
* Approximate undiscounted returns over one episode (200 steps, mean of 64 episodes): a
  uniform-random policy scores about 45 (0 to 120 depending on the random start, whose energy the
  lightly damped pole keeps), a hand-written energy-pumping + PD controller about 165 (100 to 200;
  it needs a few seconds to swing up, then earns ~0.99 per step).
* ``reward_bounds`` = (-0.15, 1.2): the per-step reward lies in [-0.1, 1], padded; the default
  value support is ``reward_bounds / (1 - gamma)``, (-5, 40) at gamma 0.97.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.task import PackagedTask

__all__ = ["PendulumSwingup", "PendulumSwingupConfig"]


@dataclass(frozen=True)
class PendulumSwingupConfig:
    """Tunable parameters of :class:`PendulumSwingup`."""

    episode_length: int = 200
    n_frames: int = 5
    timestep: float = 0.01
    max_torque: float = 2.0
    init_velocity: float = 0.2
    velocity_cost: float = 0.05
    control_cost: float = 0.05


class PendulumSwingup(PackagedTask):
    """Torque-limited pendulum swing-up (see module docstring)."""

    reward_bounds = (-0.15, 1.2)
    xml_file = "pendulum.xml"
    config_class = PendulumSwingupConfig

    def __init__(self, config: PendulumSwingupConfig | None = None) -> None:
        super().__init__(config)
        self.model.actuator_gear[0, 0] = self.config.max_torque

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_pos, k_vel = jax.random.split(key)
        qpos = jax.random.uniform(k_pos, (1,), minval=-jnp.pi, maxval=jnp.pi)
        v = self.config.init_velocity
        qvel = jax.random.uniform(k_vel, (1,), minval=-v, maxval=v)
        return qpos, qvel

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        theta, theta_dot = data.qpos[0], data.qvel[0]
        return {"obs": jnp.stack([jnp.cos(theta), jnp.sin(theta), theta_dot])}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        theta, theta_dot = data.qpos[0], data.qvel[0]
        upright = 0.5 * (1.0 + jnp.cos(theta))
        # Saturating penalty so the reward stays >= -0.1 however fast the pole spins.
        velocity = -self.config.velocity_cost * jnp.minimum((theta_dot / 6.0) ** 2, 1.0)
        control = self.control_penalty(action)
        components = {"upright": upright, "velocity": velocity, "control": control}
        return upright + velocity + control, components
