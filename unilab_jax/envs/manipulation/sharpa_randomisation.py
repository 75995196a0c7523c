"""SharpaInhandRotation's random draws and what each becomes (the reference's rules).

An env's object scale (:func:`draw_scale_id`), an episode's grasp (:func:`draw_grasp`), its
domain randomisation (:func:`draw_randomisation` -> :func:`episode_model`: the per-episode model
fields) and the random force on the object (:func:`next_object_force`). The task
(:class:`~unilab_jax.envs.manipulation.sharpa.SharpaInhandRotation`, whose docstring gives the
distributions) draws with JAX and calls them; a golden replay can feed them the reference's
recorded draws instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp

from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig
from unilab_jax.envs.robots.common import position_gains, uniform

__all__ = [
    "DR_DRAWS",
    "draw_grasp",
    "draw_randomisation",
    "draw_scale_id",
    "episode_model",
    "force_decay",
    "gravity_from_uniforms",
    "next_object_force",
    "object_force_from_draws",
    "split_scale",
]

#: One episode's domain-randomisation draws (:func:`draw_randomisation`).
DR_DRAWS = ("friction_scale", "mass", "com_offset", "gravity", "kp_scale", "kd_scale")


def draw_scale_id(key: jax.Array, num_scales: int) -> jax.Array:
    """An env's object scale, an index into ``scale_list``, uniform (int32)."""
    return jax.random.randint(key, (), 0, num_scales, jnp.int32)


def draw_grasp(
    key: jax.Array, rows: jax.Array, counts: jax.Array, scale_id: jax.Array
) -> jax.Array:
    """A grasp ``[29]`` drawn uniformly from the cache of ``scale_id`` (``rows`` ``[n_scales,
    max_rows, 29]``, ``counts`` ``[n_scales]``: :class:`~unilab_jax.envs.manipulation.
    grasp_cache.GraspCaches`)."""
    row = jax.random.randint(key, (), 0, counts[scale_id], jnp.int32)
    return rows[scale_id, row]


def split_scale(key: jax.Array, shape: tuple[int, ...], low: float, high: float) -> jax.Array:
    """The reference's gain multipliers: ``U(low, 1)`` or ``U(1, high)``, each with probability
    1/2 (``_sample_pd_scales``)."""
    k_small, k_large, k_pick = jax.random.split(key, 3)
    small = uniform(k_small, shape, low, 1.0)
    large = uniform(k_large, shape, 1.0, high)
    return jnp.where(jax.random.uniform(k_pick, shape) > 0.5, small, large)


def gravity_from_uniforms(u: jax.Array, magnitude: float) -> jax.Array:
    """Gravity ``magnitude`` in a uniformly random direction, from three ``U(0, 1)`` ``u``:
    ``(0, 0, -magnitude)`` turned by the uniform random quaternion of ``u`` (Shoemake's
    construction, as the reference's ``sample_random_quaternion``)."""
    u1, u2, u3 = u[0], u[1] * 2.0 * math.pi, u[2] * 2.0 * math.pi
    x = jnp.sqrt(1.0 - u1) * jnp.sin(u2)
    y = jnp.sqrt(1.0 - u1) * jnp.cos(u2)
    z = jnp.sqrt(u1) * jnp.sin(u3)
    w = jnp.sqrt(u1) * jnp.cos(u3)
    # R(q) @ (0, 0, -g): minus the third column of the rotation matrix.
    column = jnp.stack([2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)])
    return -magnitude * column


def draw_randomisation(
    key: jax.Array, config: SharpaInhandConfig, nu: int, nominal_mass: float
) -> dict[str, jax.Array]:
    """One episode's draws (:data:`DR_DRAWS`); a disabled term gives its nominal value
    (multiplier 1, ``nominal_mass``, no offset, gravity straight down)."""
    keys = jax.random.split(key, 6)
    one = jnp.ones((), jnp.float32)
    draws = {
        "friction_scale": uniform(keys[0], (), *config.friction_scale)
        if config.randomize_friction
        else one,
        "mass": uniform(keys[1], (), *config.mass)
        if config.randomize_mass
        else jnp.float32(nominal_mass),
        "com_offset": uniform(keys[2], (3,), *config.com_offset)
        if config.randomize_com
        else jnp.zeros((3,), jnp.float32),
    }
    if config.randomize_gravity_direction:
        u = jax.random.uniform(keys[3], (3,), jnp.float32)
        draws["gravity"] = gravity_from_uniforms(u, config.gravity_magnitude)
    else:
        draws["gravity"] = jnp.array([0.0, 0.0, -config.gravity_magnitude], jnp.float32)
    if config.randomize_pd_gains:
        draws["kp_scale"] = split_scale(keys[4], (nu,), *config.p_gain_scale)
        draws["kd_scale"] = split_scale(keys[5], (nu,), *config.d_gain_scale)
    else:
        draws["kp_scale"] = draws["kd_scale"] = jnp.ones((nu,), jnp.float32)
    return draws


def episode_model(
    draws: Mapping[str, jax.Array],
    scale_fields: Mapping[str, jax.Array],
    nominal: Mapping[str, jax.Array],
    friction: Mapping[str, jax.Array],
    object_body: int,
    randomise_friction: bool = True,
) -> tuple[dict[str, jax.Array], jax.Array, jax.Array]:
    """The per-episode model fields (``Task.model_fields``) of one episode's ``draws`` on the
    env's object scale (``scale_fields``: :func:`~unilab_jax.envs.manipulation.sharpa_model.
    object_scale_fields` of its scale), with the episode's gains ``(kp [nu], kd [nu])``.

    ``nominal``: the compiled model's fields; ``friction``: per geom, the friction row of its
    material before the multiplier (``[ngeom, 3]``) and whether it is drawn (``[ngeom]``).
    C MuJoCo recomputes the constants derived from them (``mj_setConst``) per reset."""
    kp = nominal["actuator_gainprm"][:, 0] * draws["kp_scale"]
    kd = -nominal["actuator_biasprm"][:, 2] * draws["kd_scale"]
    gains = position_gains(nominal["actuator_gainprm"], nominal["actuator_biasprm"], kp, kd)
    geom_friction = jnp.where(
        friction["drawn"][:, None],
        friction["rows"] * draws["friction_scale"],
        nominal["geom_friction"],
    )
    if not randomise_friction:  # the model's own (the reference sends no friction then)
        geom_friction = nominal["geom_friction"]
    fields = {
        **gains,
        **scale_fields,
        "geom_friction": geom_friction,
        "body_mass": nominal["body_mass"].at[object_body].set(draws["mass"]),
        "body_ipos": nominal["body_ipos"].at[object_body].add(draws["com_offset"]),
        "opt.gravity": jnp.asarray(draws["gravity"], jnp.float32),
    }
    return fields, kp, kd


def force_decay(config: SharpaInhandConfig) -> float:
    """The random force's decay per control step: ``force_decay ** (dt / interval)``."""
    return float(config.force_decay ** (config.control_dt / max(config.force_decay_interval, 1e-8)))


def next_object_force(
    key: jax.Array, force: jax.Array, mass: jax.Array, config: SharpaInhandConfig
) -> jax.Array:
    """The world-frame force [3] on the object over the coming control step, from the last
    step's ``force``: with probability ``random_force_prob`` a new ``N(0, 1)^3 * mass *
    force_scale``, else ``force`` decayed (:func:`force_decay`); zero when ``force_scale`` is 0
    (the reference's ``build_interval_randomization_plan``). The draws are ``key``'s; the rule
    is :func:`object_force_from_draws`."""
    if config.force_scale <= 0.0:
        return jnp.zeros((3,), jnp.float32)
    k_pick, k_force = jax.random.split(key)
    normal = jax.random.normal(k_force, (3,), jnp.float32)
    fresh = jax.random.uniform(k_pick, ()) < config.random_force_prob
    return object_force_from_draws(force, mass, fresh, normal, config)


def object_force_from_draws(
    force: jax.Array,
    mass: jax.Array,
    fresh: jax.Array,
    normal: jax.Array,
    config: SharpaInhandConfig,
) -> jax.Array:
    """:func:`next_object_force` from its draws: ``fresh`` (bool, a new force) and ``normal``
    (``N(0, 1)^3``), e.g. the reference's recorded ones."""
    if config.force_scale <= 0.0:
        return jnp.zeros((3,), jnp.float32)
    new = jnp.asarray(normal, jnp.float32) * mass * config.force_scale
    return jnp.where(fresh, new, force * force_decay(config))
