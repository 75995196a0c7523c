"""CartpoleBalance: keep a pole upright on a pushed cart.

Model (``xml/cartpole.xml``): a 1 kg cart on an unlimited horizontal slider and a 1 m, 0.1 kg
pole on a free hinge; the motor pushes the cart with up to ``max_force`` = 10 N. Physics step
0.01 s, ``n_frames`` = 2, so one control step is 0.02 s (the classic cart-pole rate).

* Angle convention: ``theta = 0`` upright; positive ``theta`` tips the pole towards +x.
* Initial state: ``x, theta, x_dot, theta_dot`` each ``~ U[-0.05, 0.05]``.
* Observation (5): ``[x, cos(theta), sin(theta), x_dot, theta_dot]``.
  Critic (6): the observation plus the raw angle ``theta`` (exercises the asymmetric group).
* Reward in [-0.01, 1] per step::

      alive   = 1
      control = -0.01 * mean(action^2)
      reward  = alive + control

  Components are logged as ``reward/alive`` and ``reward/control``. The step that terminates
  still earns its reward; the learner stops bootstrapping after it.
* Termination: ``|theta| > 0.4`` rad or ``|x| > 2.4`` m. Episode length 500 control steps (10 s).
* ``reward_bounds`` = (-0.03, 1.2): the per-step reward lies in [-0.01, 1], padded; the default
  value support is ``reward_bounds / (1 - gamma)``, (-1, 40) at gamma 0.97.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from unilab_jax.envs.task import PackagedTask

__all__ = ["CartpoleBalance", "CartpoleBalanceConfig"]


@dataclass(frozen=True)
class CartpoleBalanceConfig:
    """Tunable parameters of :class:`CartpoleBalance`."""

    episode_length: int = 500
    n_frames: int = 2
    timestep: float = 0.01
    max_force: float = 10.0
    init_noise: float = 0.05
    angle_limit: float = 0.4
    x_limit: float = 2.4
    control_cost: float = 0.01


class CartpoleBalance(PackagedTask):
    """Cart-pole balancing with termination on a fall (see module docstring)."""

    reward_bounds = (-0.03, 1.2)
    xml_file = "cartpole.xml"
    config_class = CartpoleBalanceConfig

    def __init__(self, config: CartpoleBalanceConfig | None = None) -> None:
        super().__init__(config)
        self.model.actuator_gear[0, 0] = self.config.max_force

    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_pos, k_vel = jax.random.split(key)
        s = self.config.init_noise
        qpos = jax.random.uniform(k_pos, (2,), minval=-s, maxval=s)
        qvel = jax.random.uniform(k_vel, (2,), minval=-s, maxval=s)
        return qpos, qvel

    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        x, theta = data.qpos[0], data.qpos[1]
        x_dot, theta_dot = data.qvel[0], data.qvel[1]
        obs = jnp.stack([x, jnp.cos(theta), jnp.sin(theta), x_dot, theta_dot])
        return {"obs": obs, "critic": jnp.concatenate([obs, theta[None]])}

    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        alive = jnp.ones((), jnp.float32)
        control = self.control_penalty(action)
        return alive + control, {"alive": alive, "control": control}

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        x, theta = data.qpos[0], data.qpos[1]
        return (jnp.abs(theta) > self.config.angle_limit) | (jnp.abs(x) > self.config.x_limit)
