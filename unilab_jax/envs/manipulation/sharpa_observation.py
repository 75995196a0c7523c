"""SharpaInhandRotation's sensing: the tactile pipeline, the policy frame, the observation groups.

* :func:`tactile_step`: one control step of the five tactile signals from the contact sensors'
  force magnitudes (clip, smoothing with the last force, dropped channels, latency; in binary
  mode thresholding and dropout noise), the reference's ``_compute_tactile_observation``.
* :func:`policy_frame`: one frame of what the actor sees, ``[normalised joint positions + joint
  noise (22), joint targets (22), tactile (5)]`` clipped to +-``clip_obs`` (49 values).
* :func:`observation_groups`: ``"obs"``, the last ``obs_lag_steps`` frames oldest first (147),
  and ``"critic"``, the same followed by the privileged values (:data:`PRIVILEGED`, 9), both
  clipped to +-``clip_obs``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from unilab_jax.envs.manipulation.sharpa_config import SharpaInhandConfig

__all__ = [
    "PRIVILEGED",
    "normalise_joints",
    "observation_groups",
    "policy_frame",
    "privileged_layout",
    "tactile_step",
]

#: The critic's privileged values after the actor's frames, with their sizes (``friction`` only
#: with ``include_friction_scale``).
PRIVILEGED = (("object_pos_delta", 3), ("friction", 1), ("mass", 1), ("com", 3), ("scale", 1))


def privileged_layout(config: SharpaInhandConfig) -> dict[str, slice]:
    """Where each privileged value sits in the privileged tail (the reference's
    ``_critic_info_layout``)."""
    layout, start = {}, 0
    for name, size in PRIVILEGED:
        if name == "friction" and not config.include_friction_scale:
            continue
        layout[name] = slice(start, start + size)
        start += size
    return layout


def normalise_joints(q: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """Joint positions mapped to [-1, 1] over the actuators' ctrl ranges."""
    return (2.0 * q - upper - lower) / (upper - lower + 1e-8)


def policy_frame(
    q: jax.Array,
    targets: jax.Array,
    tactile: jax.Array,
    noise_u: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    config: SharpaInhandConfig,
) -> jax.Array:
    """One frame (module docstring); ``noise_u``: ``U(-1, 1)`` per joint, times
    ``joint_noise_scale``."""
    dof = normalise_joints(q, lower, upper) + noise_u * config.joint_noise_scale
    parts = [dof, targets]
    if config.enable_tactile:
        parts.append(tactile)
    return _clip(jnp.concatenate(parts).astype(jnp.float32), config.clip_obs)


def tactile_step(
    force: jax.Array,
    prev_force: jax.Array,
    last: jax.Array,
    latency_u: jax.Array,
    noise_u: jax.Array,
    config: SharpaInhandConfig,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(signal, prev_force, last)`` after one step: ``force`` [5] the sensors' force
    magnitudes now, ``prev_force`` the last step's (clipped), ``last`` the last signal before
    noise; ``latency_u`` / ``noise_u`` [5] ``U(0, 1)``: a channel keeps ``last`` where
    ``latency_u < contact_latency``; in binary mode a contact reads 0 where ``noise_u <
    contact_sensor_noise``."""
    if not config.enable_tactile:
        zeros = jnp.zeros_like(force)
        return zeros, zeros, zeros
    if config.tactile_force_clip_max > 0:
        force = jnp.clip(force, 0.0, config.tactile_force_clip_max)
    smooth = force * config.contact_smooth + prev_force * (1.0 - config.contact_smooth)
    for channel in config.disable_tactile_ids:
        if 0 <= channel < smooth.shape[0]:
            smooth = smooth.at[channel].set(0.0)
    latency = jnp.where(latency_u < config.contact_latency, 1.0, 0.0)
    if config.binary_contact:
        contact = (smooth > config.contact_threshold).astype(jnp.float32)
        last = last * latency + contact * (1.0 - latency)
        keep = (noise_u >= config.contact_sensor_noise).astype(jnp.float32)
        signal = jnp.where(last > 0.1, keep * last, last)
        return signal, force, last
    last = last * latency + smooth * (1.0 - latency)
    return last, force, last


def observation_groups(
    frames: jax.Array, privileged: jax.Array, config: SharpaInhandConfig
) -> dict[str, jax.Array]:
    """``{"obs", "critic"}`` from the kept frames ``[obs_lag_steps, 49]`` (oldest first) and
    the privileged values (:func:`privileged_layout`)."""
    obs = frames.reshape(-1)
    critic = jnp.concatenate([obs, privileged])
    return {"obs": _clip(obs, config.clip_obs), "critic": _clip(critic, config.clip_obs)}


def _clip(x: jax.Array, limit: float) -> jax.Array:
    return jnp.clip(x, -limit, limit) if limit > 0 else x
