"""HORA's observation helper for the collector: the actor's privileged values from an env's
outputs (the reference's ``split_hora_obs_with_priv_info``; its PPO / APPO TensorDict helpers
are not part of this project)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["split_hora_obs_with_priv_info"]


def split_hora_obs_with_priv_info(
    obs: Mapping[str, np.ndarray], info: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(actor obs, critic obs, privileged values)`` of an env's observation dict and info.

    The privileged values are ``info["critic_info"]`` when it is an array with one row per
    env, else the critic observation's columns beyond the actor's (2-D arrays of as many rows,
    the critic wider), else None. The critic observation is ``obs["critic"]``, or the actor's
    when there is none."""
    actor_obs = obs["obs"]
    critic_obs = obs.get("critic", actor_obs)
    if isinstance(info, Mapping):
        candidate = info.get("critic_info")
        if isinstance(candidate, np.ndarray) and candidate.shape[:1] == actor_obs.shape[:1]:
            return actor_obs, critic_obs, candidate
    if (
        critic_obs is not None
        and critic_obs.ndim == 2
        and actor_obs.ndim == 2
        and critic_obs.shape[0] == actor_obs.shape[0]
        and critic_obs.shape[1] > actor_obs.shape[1]
    ):
        return actor_obs, critic_obs, critic_obs[:, actor_obs.shape[1] :]
    return actor_obs, critic_obs, None
