"""Symmetry augmentation of replay batches (reference §2.1, ``use_symmetry``).

A task with a left-right mirror map (``unilab_jax.envs.mirror.MirrorMap``: G1WalkFlat,
Go1JoystickFlat, Go2JoystickFlat) makes every transition worth two: the mirrored state, stepped
with the mirrored action, gives the mirrored next state and the same reward. The reference
augments each update's batch with its mirror: ``obs``, ``actions``, ``next_obs``, ``critic`` and
``next_critic`` mirrored and concatenated after the originals; ``rewards``, ``dones`` and
``truncated`` repeated (the actor update uses only ``obs`` and ``critic``).

Where the halving lives. The reference's runner sampled ``batch_size / 2`` rows and its learner
doubled them back, so a gradient step saw ``batch_size`` rows. Here the update itself takes the
``B`` rows it is given and trains on the first ``B / 2`` of them followed by their mirrors
(:func:`symmetric_batch`): a gradient step still sees ``batch_size`` rows, and ``batch_size``
keeps one meaning for the loop, the replay sampler, the device split and the facade's runners
on both paths (the rows of one gradient step). Replay rows are drawn independently, so the first
half is as random as any half; the other half is drawn and not used. Each device's share of the
batch must therefore be even: :func:`resolve_mirror` rejects an odd one before anything is
compiled, :func:`symmetric_batch` again when traced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from unilab_jax.algos.agent import Transition
from unilab_jax.errors import ConfigError

if TYPE_CHECKING:  # the maps are plain data; importing unilab_jax.envs would pull in MuJoCo
    from unilab_jax.envs.mirror import MirrorMap

__all__ = ["make_augment", "mirror_transition", "resolve_mirror", "symmetric_batch"]


def mirror_transition(mirror: MirrorMap, batch: Transition) -> Transition:
    """Every row of ``batch`` mirrored (rewards and flags are unchanged by the mirror)."""
    return batch.replace(
        obs=mirror.obs.apply(batch.obs),
        critic=mirror.critic.apply(batch.critic),
        actions=mirror.action.apply(batch.actions),
        next_obs=mirror.obs.apply(batch.next_obs),
        next_critic=mirror.critic.apply(batch.next_critic),
    )


def symmetric_batch(mirror: MirrorMap, batch: Transition) -> Transition:
    """``[first half of batch; its mirror]``: ``B`` rows in, ``B`` rows out (``B`` even)."""
    rows = batch.rewards.shape[0]
    if rows % 2:
        raise ConfigError(
            f"use_symmetry trains on half of each update's {rows} rows plus their mirrors, so "
            "the rows per update (per device) must be even; choose an even batch_size per device"
        )
    half = jax.tree.map(lambda x: x[: rows // 2], batch)
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), half, mirror_transition(mirror, half))


def make_augment(
    use_symmetry: bool,
    mirror: MirrorMap | None,
    obs_dim: int,
    critic_dim: int,
    action_dim: int,
) -> Callable[[Transition], Transition]:
    """What an agent applies to each raw batch before its update: the identity without
    ``use_symmetry``, else :func:`symmetric_batch` with ``mirror`` (sizes checked here).

    ``use_symmetry`` without a mirror builds an agent that acts (``load_policy`` of a run trained
    with symmetry needs no mirror) but whose updates raise when traced; the trainer and the
    facade pass the task's mirror (:func:`resolve_mirror`).
    """
    if not use_symmetry:
        return lambda batch: batch
    if mirror is None:

        def missing(batch: Transition) -> Transition:
            raise ConfigError(
                "use_symmetry=True needs the task's mirror map: build the agent with "
                "mirror=env.mirror (unilab_jax.algos.symmetry.resolve_mirror)"
            )

        return missing
    sizes = {
        "obs": (mirror.obs.size, obs_dim),
        "critic": (mirror.critic.size, critic_dim),
        "action": (mirror.action.size, action_dim),
    }
    wrong = {k: v for k, v in sizes.items() if v[0] != v[1]}
    if wrong:
        detail = ", ".join(f"{k} maps {m} entries for size {n}" for k, (m, n) in wrong.items())
        raise ValueError(f"the mirror map does not fit the agent's sizes: {detail}")
    return lambda batch: symmetric_batch(mirror, batch)


def resolve_mirror(
    use_symmetry: bool, env: Any, batch_size: int, num_devices: int = 1
) -> MirrorMap | None:
    """The mirror map an agent needs for a run: None without ``use_symmetry``, else
    ``env.mirror``, checked before anything is built or compiled.

    Raises ``ConfigError`` when the task declares no mirror (naming it and the tasks that do) or
    when a device's share of ``batch_size`` is odd (each update trains on half its rows plus
    their mirrors).
    """
    if not use_symmetry:
        return None
    mirror = getattr(env, "mirror", None)
    name = getattr(env, "name", type(env).__name__)
    if mirror is None:
        from unilab_jax.envs.registry import mirrored_names

        raise ConfigError(
            f"use_symmetry is True but {name} declares no mirror map; symmetry augmentation "
            f"works on the tasks that declare one: {', '.join(mirrored_names())}"
        )
    if batch_size % (2 * num_devices):
        per_device = f" per device ({batch_size} over {num_devices})" if num_devices > 1 else ""
        raise ConfigError(
            f"batch_size is {batch_size}; with use_symmetry each update trains on half its "
            f"rows plus their mirrors, so the batch{per_device} must be even: batch_size a "
            f"multiple of {2 * num_devices}"
        )
    return mirror
