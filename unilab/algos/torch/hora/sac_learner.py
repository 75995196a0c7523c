"""HORA-SAC in PyTorch: FastSAC whose actor also reads the privileged values, matched to the
JAX core's ``unilab_jax.algos.sac.make_hora_sac``.

The privileged values are the critic observation's columns beyond the actor's (``P =
critic_obs_dim - obs_dim``; the reference's ``derive_priv_info_from_critic_obs``). The actor is
the torch ``PrivilegedSACActor`` on ``[obs | priv]``; in the losses its rows are the batch's
normalised observation followed by the last ``P`` columns of the normalised critic observation
(``next_obs`` with ``next_critic`` for the next action), exactly as the core's
``prepare_batch`` builds them. Critic, temperature, targets, optimisers, checkpoint keys and
every formula are FastSAC's (``unilab.algos.torch.fast_sac.learner``); ``config`` is a
``HoraSACConfig``, and the converters of ``unilab.algos.torch.convert`` move the state to and
from the core's agent (the actor's rows include the encoder's: ``actor.jax_rows``).

The constructor is the reference's (keyword-only: ``obs_dim, critic_obs_dim, priv_info_dim,
action_dim, ..., priv_info_embed_dim=9, priv_mlp_hidden_dims=(256, 128, 9)``) with FastSAC's
remaining arguments spelled out. ``use_symmetry`` / ``symmetry_augmentation`` and a
non-positive ``priv_info_dim`` raise ``ValueError`` as the reference does. Ours:
``priv_info_dim`` may be left out (it is ``critic_obs_dim - obs_dim``) and must equal that
(the reference sliced ``critic[..., obs_dim:]`` whatever it was told); the actor's input is
normalised (``obs_normalization``: the observation's columns with the actor's statistics, the
privileged ones with the critic's statistics of those columns), the reference's had no
normaliser. A reference checkpoint loads as it is (``load_state_dict``; its actor's module
names differ, ``reference_names``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.hora.reference_names import (
    is_reference_checkpoint,
    learner_state_from_reference,
)
from unilab_jax.algos.hyperparams import HoraSACConfig
from unilab_jax.torch.actors import PrivilegedSACActor

__all__ = ["HoraSACLearner", "derive_priv_info_from_critic_obs"]


def derive_priv_info_from_critic_obs(
    actor_obs: torch.Tensor, critic_obs: torch.Tensor, *, context: str
) -> torch.Tensor:
    """The privileged values of a critic observation: its columns beyond the actor's
    (``ValueError`` naming ``context`` when it has none)."""
    actor_dim, critic_dim = int(actor_obs.shape[-1]), int(critic_obs.shape[-1])
    if critic_dim <= actor_dim:
        raise ValueError(
            f"HORA-SAC {context} requires critic observations to include privileged tail "
            f"features; got actor_dim={actor_dim}, critic_dim={critic_dim}."
        )
    return critic_obs[..., actor_dim:]


class HoraSACLearner(FastSACLearner):
    """FastSAC learner whose actor reads ``[obs | privileged values]`` (``actor``: a
    ``PrivilegedSACActor``); ``priv_info_dim``: the privileged values' width."""

    config_cls = HoraSACConfig

    def __init__(
        self,
        *,
        obs_dim: int,
        critic_obs_dim: int,
        priv_info_dim: int | None = None,
        action_dim: int,
        device: torch.device | str = "cpu",
        actor_hidden_dim: int = 512,
        priv_info_embed_dim: int = 9,
        priv_mlp_hidden_dims: Sequence[int] = (256, 128, 9),
        log_std_max: float = 0.0,
        log_std_min: float = -5.0,
        use_tanh: bool = True,
        use_layer_norm: bool = True,
        actor_lr: float = 3e-4,
        weight_decay: float = 0.001,
        use_symmetry: bool = False,
        symmetry_augmentation: Any = None,
        gamma: float = 0.97,
        tau: float = 0.125,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        alpha_init: float = 0.001,
        target_entropy_ratio: float = 0.0,
        critic_hidden_dim: int = 768,
        num_atoms: int = 101,
        v_min: float = -20.0,
        v_max: float = 20.0,
        num_q_networks: int = 2,
        max_grad_norm: float = 0.0,
        use_autotune: bool = True,
        use_amp: bool = False,
        amp_dtype: str = "auto",
        use_compile: bool = False,
        world_size: int = 1,
        obs_normalization: bool = False,
        noise_correlation: float = 0.0,
    ) -> None:
        if use_symmetry or symmetry_augmentation is not None:
            raise ValueError("HORA-SAC does not support symmetry augmentation.")
        tail = int(critic_obs_dim) - int(obs_dim)
        priv_info_dim = tail if priv_info_dim is None else priv_info_dim
        if int(priv_info_dim) <= 0:
            raise ValueError(f"HORA-SAC requires positive priv_info_dim, got {priv_info_dim}.")
        if int(priv_info_dim) != tail:
            raise ValueError(
                f"HORA-SAC's privileged values are the critic observation's columns beyond the "
                f"actor's: priv_info_dim must be critic_obs_dim - obs_dim = {tail}, got "
                f"{priv_info_dim}"
            )
        #: The privileged values' width (the critic observation's columns beyond the actor's).
        self.priv_info_dim = int(priv_info_dim)
        self._priv_settings = {
            "priv_embed_dim": int(priv_info_embed_dim),
            "priv_hidden_dims": tuple(int(width) for width in priv_mlp_hidden_dims),
        }
        super().__init__(
            obs_dim=obs_dim, action_dim=action_dim, critic_obs_dim=critic_obs_dim,
            device=device, gamma=gamma, tau=tau, actor_lr=actor_lr, critic_lr=critic_lr,
            alpha_lr=alpha_lr, alpha_init=alpha_init, target_entropy_ratio=target_entropy_ratio,
            actor_hidden_dim=actor_hidden_dim, critic_hidden_dim=critic_hidden_dim,
            num_atoms=num_atoms, v_min=v_min, v_max=v_max, num_q_networks=num_q_networks,
            use_layer_norm=use_layer_norm, use_tanh=use_tanh, log_std_max=log_std_max,
            log_std_min=log_std_min, weight_decay=weight_decay, max_grad_norm=max_grad_norm,
            use_autotune=use_autotune, use_symmetry=False, use_amp=use_amp,
            amp_dtype=amp_dtype, use_compile=use_compile, symmetry_augmentation=None,
            world_size=world_size, obs_normalization=obs_normalization,
            noise_correlation=noise_correlation,
        )  # fmt: skip

    def _more_config(self) -> dict[str, Any]:
        return dict(self._priv_settings)

    def _build_actor(self) -> nn.Module:
        return PrivilegedSACActor.from_config(
            self.config, self.obs_dim, self.action_dim, self.device, priv_dim=self.priv_info_dim
        )

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore ``get_state_dict()``, or a reference UniLab HORA-SAC checkpoint
        (``reference_names.learner_state_from_reference``: its actor's names and the actor
        optimiser's parameter order converted)."""
        if is_reference_checkpoint(state_dict):
            state_dict = learner_state_from_reference(state_dict, self)
        super().load_state_dict(state_dict)

    def _actor_input(self, b: Mapping[str, torch.Tensor], next: bool = False) -> torch.Tensor:
        """``[obs | critic[..., -P:]]`` of the normalised batch (``next``: of ``next_obs`` and
        ``next_critic``), the core's ``prepare_batch`` rows."""
        obs, critic = (b["next_obs"], b["next_critic"]) if next else (b["obs"], b["critic"])
        priv = derive_priv_info_from_critic_obs(obs, critic, context="update")
        return torch.cat([obs, priv], dim=-1)

    def actor_input(self, obs: torch.Tensor, critic: torch.Tensor | None = None) -> torch.Tensor:
        """``[obs | priv]`` normalised, for raw ``obs [M, obs_dim]`` and ``critic [M,
        critic_obs_dim]`` (the privileged values are its last ``priv_info_dim`` columns)."""
        if critic is None:
            raise ValueError("HORA-SAC's actor reads the critic observation's privileged tail")
        with torch.no_grad():
            priv = self.critic_normalizer(critic)[..., -self.priv_info_dim :]
            return torch.cat([self.obs_normalizer(obs), priv], dim=-1)

    def actor_input_statistics(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(mean, std)`` of ``[obs | priv]``: the actor's statistics, then the critic's of its
        last ``priv_info_dim`` columns; None without ``obs_normalization``."""
        if not isinstance(self.obs_normalizer, EmpiricalNormalization):
            return None
        p = self.priv_info_dim
        own, critic = self.obs_normalizer, self.critic_normalizer
        mean = torch.cat([own.mean, critic.mean[-p:]])
        return mean, torch.cat([own.std, critic.std[-p:]])
